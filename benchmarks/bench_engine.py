"""Per-call overhead of the agent loop, against a bare httpx loop doing the same work.

    python benchmarks/bench_engine.py            # 9 interleaved rounds, about 80 s
    python benchmarks/bench_engine.py --rounds 5
    python benchmarks/bench_engine.py --profile 60 [--stream]   # cProfile of one harness run

Conversations of 5, 20 and 60 tool-calling turns (each ends with one more call that
answers without tools) run against the fake LLM server at zero latency, streamed and
not. Every measurement is a fresh Python process; the fake servers run in processes of
their own, so their CPU is not counted. Each process first runs one untimed conversation
(connections, lazy imports, schema building), then enough timed conversations for about
120 LLM calls, and reports client CPU (``time.process_time``) and wall time per call.

The harness side is ``AgentEngine`` with the ``openai-compatible`` provider and one
``echo`` tool, no hooks and no transcript; the bare side is ``common.bare_conversation``.
Both send the same system prompt, tool and history. Ratios are taken per round between
the two processes run back to back, then the median over rounds is reported.

Targets (printed, never enforced): CPU per call <= 2.0x the bare loop; the harness's CPU
per call at 60 turns <= 1.2x its CPU per call at 5 turns; ``import harness_nb`` < 0.3 s.
Figures go to ``benchmarks/results/bench_engine.json``.
"""

import argparse
import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

TURNS = (5, 20, 60)
CALLS_PER_MEASUREMENT = 120
IMPLS = ("bare", "harness")
CPU_RATIO_TARGET = 2.0
SCALING_TARGET = 1.2
IMPORT_TARGET = 0.3


# -- one measurement, in its own process -----------------------------------------------------


def conversations_for(turns: int) -> int:
    return max(1, round(CALLS_PER_MEASUREMENT / (turns + 1)))


async def measure_bare(url: str, turns: int, stream: bool, profiler: Any = None) -> dict[str, float]:
    async with common.bare_client(url) as client:
        await common.bare_conversation(client, stream=stream)
        with _timed(profiler) as clock:
            for _ in range(conversations_for(turns)):
                clock.calls += await common.bare_conversation(client, stream=stream)
        return clock.figures(turns)


async def measure_harness(url: str, turns: int, stream: bool, profiler: Any = None) -> dict[str, float]:
    from harness_nb.engine import AgentEngine, Limits, PromptBuilder
    from harness_nb.providers.factory import create_provider
    from harness_nb.tools import ToolRegistry

    provider = create_provider(
        f"openai-compatible/{common.MODEL}", base_url=url, api_key=common.API_KEY, streaming=stream
    )
    tools = ToolRegistry([common.echo_tool()])
    workdir = Path.cwd()

    async def conversation() -> int:
        engine = AgentEngine(
            provider,
            tools,
            prompt_builder=PromptBuilder(common.SYSTEM, workdir=workdir, environment=False),
            limits=Limits(max_turns=turns + 1),
        )
        result = await engine.run(common.PROMPT)
        if result.tool_calls != turns or result.stop_reason != "end_turn":
            raise RuntimeError(f"unexpected run: {result.tool_calls} tool calls, stop {result.stop_reason}")
        return result.turns

    try:
        await conversation()
        with _timed(profiler) as clock:
            for _ in range(conversations_for(turns)):
                clock.calls += await conversation()
        return clock.figures(turns)
    finally:
        await provider.aclose()


class _Clock:
    def __init__(self) -> None:
        self.calls = 0
        self.cpu = self.wall = 0.0

    def figures(self, turns: int) -> dict[str, float]:
        if self.calls != conversations_for(turns) * (turns + 1):
            raise RuntimeError(f"expected {turns + 1} calls per conversation, counted {self.calls} in all")
        return {"calls": self.calls, "cpu_us": self.cpu / self.calls * 1e6, "wall_us": self.wall / self.calls * 1e6}


@contextlib.contextmanager
def _timed(profiler: Any) -> Iterator[_Clock]:
    """Time the block (client CPU and wall); profile it too when given a profiler."""
    clock = _Clock()
    if profiler is not None:
        profiler.enable()
    cpu, wall = time.process_time(), time.perf_counter()
    yield clock
    clock.cpu, clock.wall = time.process_time() - cpu, time.perf_counter() - wall
    if profiler is not None:
        profiler.disable()


def worker(impl: str, url: str, turns: int, stream: bool) -> None:
    measure = measure_bare if impl == "bare" else measure_harness
    print(json.dumps(asyncio.run(measure(url, turns, stream))))


# -- the driver --------------------------------------------------------------------------------


def run_worker(impl: str, url: str, turns: int, stream: bool) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", impl, "--url", url, "--turns", str(turns)]
    if stream:
        command.append("--stream")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=common.child_env())
    if done.returncode != 0:
        raise RuntimeError(f"{impl} worker failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def import_times(statement: str, repeat: int = 5) -> list[float]:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=common.child_env()
        )
        out.append(float(done.stdout))
    return out


def drive(rounds: int) -> dict[str, Any]:
    configs = [(turns, stream) for turns in TURNS for stream in (False, True)]
    raw: dict[str, list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        # One fake server process per conversation length, each playing its own script.
        urls = {turns: stack.enter_context(common.fake_server(common.script(turns))) for turns in TURNS}
        for n in range(rounds):
            for turns, stream in configs:
                # Interleaved: the two sides run back to back, alternating who goes first.
                for impl in IMPLS if n % 2 == 0 else IMPLS[::-1]:
                    raw.setdefault(key(impl, turns, stream), []).append(run_worker(impl, urls[turns], turns, stream))
            print(f"round {n + 1}/{rounds} done", file=sys.stderr, flush=True)
    return summarise(raw, rounds)


def key(impl: str, turns: int, stream: bool) -> str:
    return f"{impl}/{turns}/{'stream' if stream else 'plain'}"


def summarise(raw: dict[str, list[dict[str, float]]], rounds: int) -> dict[str, Any]:
    rows = []
    for turns, stream in itertools.product(TURNS, (False, True)):
        bare, harness = raw[key("bare", turns, stream)], raw[key("harness", turns, stream)]
        rows.append(
            {
                "turns": turns,
                "stream": stream,
                "calls_per_measurement": int(bare[0]["calls"]),
                "bare_cpu_us": common.median([r["cpu_us"] for r in bare]),
                "harness_cpu_us": common.median([r["cpu_us"] for r in harness]),
                "bare_wall_us": common.median([r["wall_us"] for r in bare]),
                "harness_wall_us": common.median([r["wall_us"] for r in harness]),
                "cpu_ratio": common.median([h["cpu_us"] / b["cpu_us"] for b, h in zip(bare, harness, strict=True)]),
                "wall_ratio": common.median([h["wall_us"] / b["wall_us"] for b, h in zip(bare, harness, strict=True)]),
            }
        )
    # Per round, like the ratios: the 5- and 60-turn runs of one round ran close together.
    scaling = {
        "stream" if stream else "plain": {
            f"{impl}_cpu_60_over_5": common.median(
                [
                    long["cpu_us"] / short["cpu_us"]
                    for short, long in zip(raw[key(impl, 5, stream)], raw[key(impl, 60, stream)], strict=True)
                ]
            )
            for impl in IMPLS
        }
        for stream in (False, True)
    }
    imports = import_times("import harness_nb")
    harness_import = import_times("from harness_nb import Harness")
    return {
        "rounds": rounds,
        "environment": common.environment(),
        "rows": rows,
        "scaling": scaling,
        "import_harness_nb_s": common.median(imports),
        "import_harness_nb_runs_s": imports,
        "from_harness_nb_import_Harness_s": common.median(harness_import),
        "targets": {
            "cpu_ratio_max": CPU_RATIO_TARGET,
            "scaling_max": SCALING_TARGET,
            "import_s_max": IMPORT_TARGET,
        },
        "raw": raw,
    }


def report(data: dict[str, Any]) -> None:
    print(f"\nbench_engine: medians of {data['rounds']} interleaved rounds, per LLM call (µs)\n")
    head = f"{'turns':>5} {'mode':<6} | {'bare cpu':>9} {'harness cpu':>11} {'ratio':>6} | "
    head += f"{'bare wall':>9} {'harness wall':>12} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for r in data["rows"]:
        mode = "stream" if r["stream"] else "plain"
        print(
            f"{r['turns']:>5} {mode:<6} | {r['bare_cpu_us']:>9.0f} {r['harness_cpu_us']:>11.0f} {r['cpu_ratio']:>5.2f}x | "
            f"{r['bare_wall_us']:>9.0f} {r['harness_wall_us']:>12.0f} {r['wall_ratio']:>5.2f}x"
        )
    print()
    worst = max(r["cpu_ratio"] for r in data["rows"])
    print(f"{common.verdict(worst <= CPU_RATIO_TARGET)}  CPU per call vs bare loop: worst {worst:.2f}x (target <= {CPU_RATIO_TARGET}x)")
    for mode, s in data["scaling"].items():
        ratio = s["harness_cpu_60_over_5"]
        print(
            f"{common.verdict(ratio <= SCALING_TARGET)}  harness CPU per call, 60 vs 5 turns ({mode}): {ratio:.2f}x "
            f"(target <= {SCALING_TARGET}x; bare loop {s['bare_cpu_60_over_5']:.2f}x)"
        )
    seconds = data["import_harness_nb_s"]
    print(f"{common.verdict(seconds < IMPORT_TARGET)}  import harness_nb: {seconds * 1000:.1f} ms (target < {IMPORT_TARGET * 1000:.0f} ms)")
    print(f"      (for reference: from harness_nb import Harness: {data['from_harness_nb_import_Harness_s'] * 1000:.0f} ms)")


def profile(turns: int, stream: bool, impl: str) -> None:
    """cProfile of the timed part of one measurement (after its warm-up conversation)."""
    import cProfile
    import pstats

    measure = measure_bare if impl == "bare" else measure_harness
    profiler = cProfile.Profile()
    with common.fake_server(common.script(turns)) as url:
        figures = asyncio.run(measure(url, turns, stream, profiler))
    print(json.dumps(figures))
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (at least 5)")
    parser.add_argument("--profile", type=int, metavar="TURNS", help="profile one measurement instead")
    parser.add_argument("--impl", choices=IMPLS, default="harness", help="with --profile: which side")
    parser.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=IMPLS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.url, args.turns, args.stream)
        return
    if args.profile:
        profile(args.profile, args.stream, args.impl)
        return
    if args.rounds < 5:
        parser.error("--rounds must be at least 5 (medians of fewer are too noisy)")
    started = time.perf_counter()
    data = drive(args.rounds)
    data["elapsed_s"] = time.perf_counter() - started
    report(data)
    path = common.write_json("bench_engine.json", data)
    print(f"\nwrote {path.relative_to(common.ROOT)} ({data['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
