"""Does delegating to subagents in parallel really run them in parallel?

    python benchmarks/bench_fanout.py             # 5 rounds, about 2 minutes
    python benchmarks/bench_fanout.py --rounds 3

Eight conversations, each of five ``echo`` tool turns and a final answer (six LLM calls),
against the fake LLM server with 100 ms of latency on every call, run these ways:

* bare, parallel / sequential: by hand with httpx (``common.bare_conversation``), under
  ``asyncio.gather`` or one after another;
* engine, parallel: eight ``AgentEngine`` runs under ``asyncio.gather``, the provider and the
  engines built inside the clock;
* harness, parallel: one call of the ``task`` tool in parallel mode (``tasks=[8 items]``,
  ``max_concurrency=8``) on a ``Harness`` built inside the clock, as a notebook builds it
  (built-in tools, hooks, checkpoints, secrets) on a small notebook project;
* harness, sequential: eight single ``task`` delegations, one after another;
* harnesses, parallel: eight ``Harness`` objects, each built inside the clock on a notebook
  project of its own, each running one conversation, under ``asyncio.gather``.

The ``task`` tool is invoked the way the engine invokes it when the model asks for it
(``harness_nb.tools.invoke`` with the main agent as the parent), so no main-model call
is timed on either side. Every measurement runs in a fresh process (with a HOME of its
own), streamed (the providers' default), with what the process holds before its clock
frozen out of the garbage collector's way (``common.freeze_heap``, as ``bench_engine``
does); the fake server runs in its own process.
Reported: wall time of each; its share of the latency-bound ideal (six latencies for a
parallel run, 48 for a sequential one), which not even the bare loop reaches (eight
streams parsed on one client thread, served by one single-threaded fake server); its
share of the ideal this machine allows, the bare loop's wall time for the same work in
the same round over its own; and the speedups (sequential / parallel). Target (printed,
never enforced; issue 19): the fan-out of 8 reaches at least 90 % of the bare loop's
figure, for the ``task`` fan-out and for the eight harnesses, built inside the clock.
Figures go to ``benchmarks/results/bench_fanout.json``.
"""

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

SUBAGENTS = 8
TOOL_TURNS = 5
LATENCY = 0.1
CALLS_PER_SUBAGENT = TOOL_TURNS + 1
TARGET = 0.90  # the bare loop's wall time over the fan-out's, same round
MEASUREMENTS = (
    "bare/sequential",
    "bare/parallel",
    "engine/parallel",
    "harness/sequential",
    "harness/parallel",
    "harnesses/parallel",
)
TARGETED = ("harness/parallel", "harnesses/parallel")


# -- one measurement, in its own process -----------------------------------------------------


def import_harness_nb() -> None:
    """Import, before the clock, what the harness_nb sides import on first use, as the bare
    side has httpx and its transport (httpcore, anyio, h11) imported before its clock: the
    parts a ``Harness`` wires (``from harness_nb import Harness`` loads none of them), the
    provider and PyYAML. Only imports: every object is still built inside the clock."""
    import anyio._backends._asyncio  # noqa: F401
    import h11  # noqa: F401
    import httpcore  # noqa: F401
    import yaml  # noqa: F401

    import harness_nb.assembly
    import harness_nb.providers.openai  # noqa: F401


async def measure_bare(url: str, parallel: bool) -> float:
    async with common.bare_client(url) as client:
        common.freeze_heap()
        start = time.perf_counter()
        if parallel:
            calls = await asyncio.gather(*(common.bare_conversation(client, stream=True) for _ in range(SUBAGENTS)))
        else:
            calls = [await common.bare_conversation(client, stream=True) for _ in range(SUBAGENTS)]
        wall = time.perf_counter() - start
    if calls != [CALLS_PER_SUBAGENT] * SUBAGENTS:
        raise RuntimeError(f"bare conversations made {calls} calls")
    return wall


async def measure_engine(url: str, parallel: bool) -> float:
    import_harness_nb()
    from harness_nb.engine import AgentEngine, Limits, PromptBuilder
    from harness_nb.providers.factory import create_provider
    from harness_nb.tools import ToolRegistry

    workdir = Path.cwd()
    common.freeze_heap()
    start = time.perf_counter()
    provider = create_provider(f"openai-compatible/{common.MODEL}", base_url=url, api_key=common.API_KEY)
    tools = ToolRegistry([common.echo_tool()])

    async def conversation() -> int:
        engine = AgentEngine(
            provider,
            tools,
            prompt_builder=PromptBuilder(common.SYSTEM, workdir=workdir, environment=False),
            limits=Limits(max_turns=CALLS_PER_SUBAGENT, max_repeated_calls=None),  # common.py's model repeats one call
        )
        return (await engine.run(common.PROMPT)).tool_calls

    try:
        turns = await asyncio.gather(*(conversation() for _ in range(SUBAGENTS)))
        wall = time.perf_counter() - start
    finally:
        await provider.aclose()
    if turns != [TOOL_TURNS] * SUBAGENTS:
        raise RuntimeError(f"the engines made {turns} tool calls")
    return wall


def build_harness(url: str, workdir: Path) -> Any:
    """A ``Harness`` as a notebook builds one (everything on), with the ``echo`` tool (the
    package imported before the clock starts, as the engine's side is)."""
    from harness_nb import Harness

    return Harness(
        f"openai-compatible/{common.MODEL}",
        workdir=workdir,
        base_url=url,
        api_key=common.API_KEY,
        extra_tools=[common.echo_tool()],
        max_concurrency=SUBAGENTS,
        max_repeated_calls=0,  # common.py's model repeats one call on purpose: not a loop to stop
    )


async def measure_harness(url: str, parallel: bool) -> float:
    import_harness_nb()
    from harness_nb.core import ToolCall
    from harness_nb.tools import ToolContext, invoke

    jobs = [{"subagent_type": "general-purpose", "prompt": f"Job {n}: {common.PROMPT}"} for n in range(SUBAGENTS)]
    calls = [ToolCall(id="fanout", name="task", arguments=json.dumps({"tasks": jobs}))] if parallel else [
        ToolCall(id=f"single-{n}", name="task", arguments=json.dumps(job)) for n, job in enumerate(jobs)
    ]
    with common.notebook_project() as workdir:
        common.freeze_heap()
        start = time.perf_counter()
        harness = build_harness(url, workdir)
        try:
            parent = harness.lead_context()
            outcomes = []
            for call in calls:
                ctx = ToolContext(workdir=harness.workdir, call=call, tool=harness._parts.task_tool, parent=parent)
                outcomes.append(await invoke(harness._parts.task_tool, call, ctx))
            wall = time.perf_counter() - start
            _check(outcomes, harness.tracker.list())
        finally:
            await harness.aclose()
    return wall


async def measure_harnesses(url: str, parallel: bool) -> float:
    """Eight harnesses, each on its own copy of the project, built and run inside the clock."""
    import_harness_nb()

    with common.notebook_project() as first:
        workdirs = [first]
        for n in range(1, SUBAGENTS):
            workdirs.append(first.with_name(f"project-{n}"))
            shutil.copytree(first, workdirs[-1])
        await asyncio.sleep(common.SETTLE_S)  # the copies settled too
        common.freeze_heap()
        start = time.perf_counter()
        harnesses = [build_harness(url, workdir) for workdir in workdirs]
        try:
            results = await asyncio.gather(*(h.run(common.PROMPT) for h in harnesses))
            wall = time.perf_counter() - start
        finally:
            await asyncio.gather(*(h.aclose() for h in harnesses))
    if [r.tool_calls for r in results] != [TOOL_TURNS] * SUBAGENTS:
        raise RuntimeError(f"the harnesses made {[r.tool_calls for r in results]} tool calls")
    return wall


MEASURE = {"bare": measure_bare, "engine": measure_engine, "harness": measure_harness, "harnesses": measure_harnesses}


def _check(outcomes: list[Any], entries: list[Any]) -> None:
    text = "\n".join(o.content for o in outcomes)
    completed = len(re.findall(r'state="completed"', text))
    turns = sorted(e.usage.tool_calls for e in entries)
    if any(o.is_error for o in outcomes) or completed != SUBAGENTS or turns != [TOOL_TURNS] * SUBAGENTS:
        raise RuntimeError(f"the delegations did not all finish as scripted: {turns} tool calls\n{text[:2000]}")


def worker(measurement: str, url: str) -> None:
    impl, mode = measurement.split("/")
    print(json.dumps({"wall_s": asyncio.run(MEASURE[impl](url, mode == "parallel"))}))


# -- the driver --------------------------------------------------------------------------------


def run_worker(measurement: str, url: str) -> float:
    command = [sys.executable, __file__, "--worker", measurement, "--url", url]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, env=common.child_env())
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
    ideal_parallel = CALLS_PER_SUBAGENT * LATENCY
    ideal = {m: ideal_parallel * (SUBAGENTS if m.endswith("sequential") else 1) for m in MEASUREMENTS}
    return {
        "rounds": rounds,
        "environment": common.environment(),
        "subagents": SUBAGENTS,
        "tool_turns": TOOL_TURNS,
        "latency_s": LATENCY,
        "ideal": {"sequential_s": SUBAGENTS * ideal_parallel, "parallel_s": ideal_parallel, "speedup": SUBAGENTS},
        "wall_s": {m: common.median(v) for m, v in raw.items()},
        # the share of the ideal reached: ideal wall time / measured wall time, per round
        "of_ideal": {m: common.median([ideal[m] / w for w in v]) for m, v in raw.items()},
        # ... and of the bare loop's figure for the same work in the same round
        "of_bare": {
            m: common.median([b / w for b, w in zip(raw[f"bare/{m.split('/')[1]}"], v, strict=True)])
            for m, v in raw.items()
        },
        "speedup": {impl: common.median(v) for impl, v in speedups.items()},
        "target_min_of_bare": TARGET,
        "raw_wall_s": raw,
    }


def report(data: dict[str, Any]) -> None:
    print(
        f"\nbench_fanout: {data['subagents']} conversations x {data['tool_turns']} tool turns, "
        f"{data['latency_s'] * 1000:.0f} ms per LLM call; medians of {data['rounds']} rounds\n"
    )
    print(f"{'':20} {'wall':>7} {'of ideal':>9} {'of bare':>8}")
    for m in MEASUREMENTS:
        print(f"{m:20} {data['wall_s'][m]:>6.2f}s {data['of_ideal'][m] * 100:>8.0f}% {data['of_bare'][m] * 100:>7.0f}%")
    ideal = data["ideal"]
    print(f"{'ideal':20} {ideal['parallel_s']:>6.2f}s (parallel), {ideal['sequential_s']:.2f}s (sequential)")
    print(f"speedups: bare {data['speedup']['bare']:.2f}x, harness {data['speedup']['harness']:.2f}x (ideal 8x)\n")
    for m in TARGETED:
        share = data["of_bare"][m]
        print(
            f"{common.verdict(share >= TARGET)}  {m}: {share * 100:.0f} % of the bare loop's figure "
            f"(target >= {TARGET * 100:.0f} %); {data['of_ideal'][m] * 100:.0f} % of the latency-bound ideal"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds (at least 3)")
    parser.add_argument("--worker", choices=MEASUREMENTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.url)
        return
    if args.rounds < 3:
        parser.error("--rounds must be at least 3 (medians of fewer are too noisy)")
    started = time.perf_counter()
    data = drive(args.rounds)
    data["elapsed_s"] = time.perf_counter() - started
    report(data)
    path = common.write_json("bench_fanout.json", data)
    print(f"\nwrote {path.relative_to(common.ROOT)} ({data['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
