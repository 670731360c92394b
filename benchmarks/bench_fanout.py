"""Does delegating to subagents in parallel really run them in parallel?

    python benchmarks/bench_fanout.py             # 5 rounds, about a minute
    python benchmarks/bench_fanout.py --rounds 7

Eight subagents, each a conversation of five ``echo`` tool turns and a final answer (six
LLM calls), against the fake LLM server with 100 ms of latency on every call, run two ways:

* harness, parallel: one call of the ``task`` tool in parallel mode (``tasks=[8 items]``,
  ``max_concurrency=8``) on a ``Harness`` with the ``openai-compatible`` provider;
* harness, sequential: eight single ``task`` delegations, one after another;
* bare, parallel / sequential: the same eight conversations by hand with httpx
  (``common.bare_conversation``), under ``asyncio.gather`` or one after another.

The ``task`` tool is invoked the way the engine invokes it when the model asks for it
(``harness_nb.tools.invoke`` with the main engine in the context), so no main-model call
is timed on either side. Every measurement runs in a fresh process, streamed (the
providers' default); the fake server runs in its own process. Reported: wall time of
each, the speedup (sequential / parallel) per round and its median over rounds. Target
(printed, never enforced): the harness's speedup at least 95 % of the bare loop's.
Figures go to ``benchmarks/results/bench_fanout.json``.
"""

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

SUBAGENTS = 8
TOOL_TURNS = 5
LATENCY = 0.1
CALLS_PER_SUBAGENT = TOOL_TURNS + 1
TARGET = 0.95  # harness speedup / bare speedup
MEASUREMENTS = ("bare/sequential", "bare/parallel", "harness/sequential", "harness/parallel")


# -- one measurement, in its own process -----------------------------------------------------


async def measure_bare(url: str, parallel: bool) -> float:
    async with common.bare_client(url) as client:
        start = time.perf_counter()
        if parallel:
            calls = await asyncio.gather(*(common.bare_conversation(client, stream=True) for _ in range(SUBAGENTS)))
        else:
            calls = [await common.bare_conversation(client, stream=True) for _ in range(SUBAGENTS)]
        wall = time.perf_counter() - start
    if calls != [CALLS_PER_SUBAGENT] * SUBAGENTS:
        raise RuntimeError(f"bare conversations made {calls} calls")
    return wall


async def measure_harness(url: str, parallel: bool) -> float:
    from harness_nb import Harness
    from harness_nb.core import ToolCall
    from harness_nb.tools import ToolContext, invoke

    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as workdir:
        harness = Harness(
            model=f"openai-compatible/{common.MODEL}",
            base_url=url,
            api_key=common.API_KEY,
            workdir=workdir,
            tools=[common.echo_tool()],
            max_concurrency=SUBAGENTS,
            include_user_agents=False,
        )
        engine = harness._conversation.engine()
        jobs = [{"subagent_type": "general-purpose", "prompt": f"Job {n}: {common.PROMPT}"} for n in range(SUBAGENTS)]
        calls = [ToolCall(id="fanout", name="task", arguments=json.dumps({"tasks": jobs}))] if parallel else [
            ToolCall(id=f"single-{n}", name="task", arguments=json.dumps(job)) for n, job in enumerate(jobs)
        ]
        try:
            start = time.perf_counter()
            outcomes = []
            for call in calls:
                ctx = ToolContext(workdir=harness.workdir, call=call, engine=engine)
                outcomes.append(await invoke(harness._parts.task_tool, call, ctx))
            wall = time.perf_counter() - start
            _check(outcomes, harness.tracker.list())
        finally:
            await harness.aclose()
    return wall


def _check(outcomes: list[Any], entries: list[Any]) -> None:
    text = "\n".join(o.content for o in outcomes)
    completed = len(re.findall(r'state="completed"', text))
    turns = sorted(e.usage.tool_calls for e in entries)
    if any(o.is_error for o in outcomes) or completed != SUBAGENTS or turns != [TOOL_TURNS] * SUBAGENTS:
        raise RuntimeError(f"the delegations did not all finish as scripted: {turns} tool calls\n{text[:2000]}")


def worker(measurement: str, url: str) -> None:
    impl, mode = measurement.split("/")
    measure = measure_bare if impl == "bare" else measure_harness
    print(json.dumps({"wall_s": asyncio.run(measure(url, mode == "parallel"))}))


# -- the driver --------------------------------------------------------------------------------


def run_worker(measurement: str, url: str) -> float:
    command = [sys.executable, __file__, "--worker", measurement, "--url", url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=common.child_env())
    if done.returncode != 0:
        raise RuntimeError(f"{measurement} worker failed:\n{done.stderr}")
    return float(json.loads(done.stdout.splitlines()[-1])["wall_s"])


def drive(rounds: int) -> dict[str, Any]:
    raw: dict[str, list[float]] = {m: [] for m in MEASUREMENTS}
    with common.fake_server(common.script(TOOL_TURNS), latency=LATENCY) as url:
        for n in range(rounds):
            order = MEASUREMENTS if n % 2 == 0 else MEASUREMENTS[::-1]
            for measurement in order:
                raw[measurement].append(run_worker(measurement, url))
            print(f"round {n + 1}/{rounds} done", file=sys.stderr, flush=True)
    speedups = {
        impl: [s / p for s, p in zip(raw[f"{impl}/sequential"], raw[f"{impl}/parallel"], strict=True)]
        for impl in ("bare", "harness")
    }
    relative = [h / b for h, b in zip(speedups["harness"], speedups["bare"], strict=True)]
    ideal_parallel = CALLS_PER_SUBAGENT * LATENCY
    return {
        "rounds": rounds,
        "environment": common.environment(),
        "subagents": SUBAGENTS,
        "tool_turns": TOOL_TURNS,
        "latency_s": LATENCY,
        "ideal": {"sequential_s": SUBAGENTS * ideal_parallel, "parallel_s": ideal_parallel, "speedup": SUBAGENTS},
        "wall_s": {m: common.median(v) for m, v in raw.items()},
        "speedup": {impl: common.median(v) for impl, v in speedups.items()},
        "harness_over_bare": common.median(relative),
        "target_min": TARGET,
        "raw_wall_s": raw,
    }


def report(data: dict[str, Any]) -> None:
    ideal = data["ideal"]
    print(
        f"\nbench_fanout: {data['subagents']} subagents x {data['tool_turns']} tool turns, "
        f"{data['latency_s'] * 1000:.0f} ms per LLM call; medians of {data['rounds']} rounds\n"
    )
    print(f"{'':8} {'sequential':>11} {'parallel':>9} {'speedup':>8}")
    for impl in ("bare", "harness"):
        wall = data["wall_s"]
        print(
            f"{impl:8} {wall[impl + '/sequential']:>10.2f}s {wall[impl + '/parallel']:>8.2f}s "
            f"{data['speedup'][impl]:>7.2f}x"
        )
    print(f"{'ideal':8} {ideal['sequential_s']:>10.2f}s {ideal['parallel_s']:>8.2f}s {ideal['speedup']:>7.2f}x\n")
    ratio = data["harness_over_bare"]
    print(
        f"{common.verdict(ratio >= TARGET)}  harness speedup / bare speedup: {ratio:.3f} "
        f"(target >= {TARGET}, i.e. within 5 %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds (at least 5)")
    parser.add_argument("--worker", choices=MEASUREMENTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.url)
        return
    if args.rounds < 5:
        parser.error("--rounds must be at least 5 (medians of fewer are too noisy)")
    started = time.perf_counter()
    data = drive(args.rounds)
    data["elapsed_s"] = time.perf_counter() - started
    report(data)
    path = common.write_json("bench_fanout.json", data)
    print(f"\nwrote {path.relative_to(common.ROOT)} ({data['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
