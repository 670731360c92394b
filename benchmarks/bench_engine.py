"""Per-call overhead of the agent loop, against a bare httpx loop doing the same work.

    python benchmarks/bench_engine.py            # 9 interleaved rounds, about 3 minutes
    python benchmarks/bench_engine.py --rounds 3
    python benchmarks/bench_engine.py --profile 20 [--stream] [--impl engine]   # cProfile of one run

Two pairs, each a harness side and the bare loop sending the same request:

* ``engine`` / ``bare``: ``AgentEngine`` with the ``openai-compatible`` provider and one
  ``echo`` tool, no hooks and no transcript, in conversations of 5, 20 and 60
  tool-calling turns (each ends with one more call that answers without tools).
* ``harness`` / ``bare-full``: the full ``Harness`` as a notebook builds it (the built-in
  tools, the delegation, coordination and team tools, the skill tool and catalog, the
  permission hook, checkpoints, secrets with a ``.env`` in the workdir, offloading, the
  transcript) on a small notebook project, in 20-turn conversations that call the
  read-only ``echo`` each turn, as an agent reading files does; a new conversation each
  time (``new_conversation``). Its bare loop sends the same system prompt and tool list,
  captured from the harness's first request.
* ``harness-fx``: the same with an ``echo`` that could change files, allowed by a rule:
  the workdir is checkpointed around every call (a snapshot after it, and one before when
  inotify saw a change), as around ``bash`` or ``write_file``.

Both run streamed and not, against the fake LLM server at zero latency. Every measurement
is a fresh Python process (with a HOME of its own); the fake servers run in processes of
their own, so their CPU is not counted. Each process first runs one untimed conversation
(connections, lazy imports, schema building, the first checkpoint), then enough timed
conversations for about 120 LLM calls, and reports client CPU (``time.process_time``) and
wall time per call. Ratios are taken per round between the two processes of a pair run
back to back, then the median over rounds is reported.

Targets (printed, never enforced; issue 19): full ``Harness`` <= 1.25x its bare loop's
CPU per call at 20 turns, JSON and streamed; ``AgentEngine`` <= 1.10x at 20 turns; the
engine's CPU per call at 60 turns <= 1.2x its CPU at 5 turns; ``from harness_nb import
Harness`` <= 150 ms in a fresh process (best of 7). Figures go to
``benchmarks/results/bench_engine.json``.
"""

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

TURNS = (5, 20, 60)
FULL_TURNS = (20,)
CALLS_PER_MEASUREMENT = 120
PAIRS = {"engine": "bare", "harness": "bare-full", "harness-fx": "bare-full"}  # harness side -> its bare loop
IMPLS = ("bare", "engine", "bare-full", "harness", "harness-fx")
HARNESS_RATIO_TARGET = 1.25
ENGINE_RATIO_TARGET = 1.10
TARGET_TURNS = 20
SCALING_TARGET = 1.2
IMPORT_TARGET = 0.150
IMPORT_REPEAT = 7
_PROFILING = False  # inside the timed part of a profiled measurement


# -- one measurement, in its own process -----------------------------------------------------


def conversations_for(turns: int) -> int:
    return max(1, round(CALLS_PER_MEASUREMENT / (turns + 1)))


async def measure_bare(
    url: str, turns: int, stream: bool, profiler: Any = None, wire: dict[str, Any] | None = None
) -> dict[str, float]:
    request = {"system": wire["system"], "tools": wire["tools"]} if wire else {}
    async with common.bare_client(url) as client:
        return await _measured(lambda: common.bare_conversation(client, stream=stream, **request), turns, profiler)


async def measure_engine(url: str, turns: int, stream: bool, profiler: Any = None) -> dict[str, float]:
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
            limits=Limits(max_turns=turns + 1, max_repeated_calls=None),  # common.py's model repeats one call
        )
        result = await engine.run(common.PROMPT)
        _check_run(result, turns)
        return result.turns

    try:
        return await _measured(conversation, turns, profiler)
    finally:
        await provider.aclose()


def build_harness(url: str, workdir: Path, turns: int, stream: bool, *, effectful: bool = False) -> Any:
    """The full ``Harness`` as a notebook builds it, with ``echo`` (``effectful``: one that
    could change files, allowed by a rule)."""
    from harness_nb import Harness

    return Harness(
        f"openai-compatible/{common.MODEL}",
        workdir=workdir,
        base_url=url,
        api_key=common.API_KEY,
        provider_options={"streaming": stream},
        extra_tools=[common.echo_tool(read_only=not effectful)],
        allow=["echo"] if effectful else [],
        max_turns=turns + 1,
        max_repeated_calls=0,  # common.py's model repeats one call on purpose: not a loop to stop
    )


async def measure_harness(
    url: str, turns: int, stream: bool, profiler: Any = None, *, effectful: bool = False
) -> dict[str, float]:
    with common.notebook_project() as workdir:
        harness = build_harness(url, workdir, turns, stream, effectful=effectful)

        async def conversation() -> int:
            harness.new_conversation()
            result = await harness.run(common.PROMPT)
            _check_run(result, turns)
            return result.turns

        try:
            return await _measured(conversation, turns, profiler)
        finally:
            await harness.aclose()


async def capture_wire(turns: int) -> dict[str, Any]:
    """The system prompt and tool list of the full harness's first request, for its bare
    loop to send (captured from an in-process fake server, so that it is what is sent)."""
    from harness_nb.testing import FakeLLMServer

    with common.notebook_project() as workdir:
        async with FakeLLMServer(common.script(1)) as server:
            harness = build_harness(server.url + "/v1", workdir, turns, False)
            try:
                await harness.run(common.PROMPT)
            finally:
                await harness.aclose()
        body = server.requests[0].body
    system = "\n\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    return {"system": system, "tools": body["tools"]}


def _check_run(result: Any, turns: int) -> None:
    if result.tool_calls != turns or result.stop_reason != "end_turn":
        raise RuntimeError(f"unexpected run: {result.tool_calls} tool calls, stop {result.stop_reason}")


async def _measured(conversation: Callable[[], Awaitable[int]], turns: int, profiler: Any) -> dict[str, float]:
    """One untimed ``conversation`` (it returns its number of calls), then the timed ones,
    with what the process holds by then frozen out of the collector's way
    (``common.freeze_heap``)."""
    common.freeze_heap()
    await conversation()
    with _timed(profiler) as clock:
        for _ in range(conversations_for(turns)):
            clock.calls += await conversation()
    return clock.figures(turns)


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
    global _PROFILING
    clock = _Clock()
    if profiler is not None:
        profiler.enable()
        _PROFILING = True
    cpu, wall = time.process_time(), time.perf_counter()
    yield clock
    clock.cpu, clock.wall = time.process_time() - cpu, time.perf_counter() - wall
    if profiler is not None:
        profiler.disable()
        _PROFILING = False


def measurement(impl: str, url: str, turns: int, stream: bool, profiler: Any = None, wire: Path | None = None) -> Any:
    """The coroutine measuring ``impl``."""
    if impl == "engine":
        return measure_engine(url, turns, stream, profiler)
    if impl in ("harness", "harness-fx"):
        return measure_harness(url, turns, stream, profiler, effectful=impl == "harness-fx")
    return measure_bare(url, turns, stream, profiler, json.loads(wire.read_text()) if wire else None)


def worker(impl: str, url: str, turns: int, stream: bool, wire: Path | None) -> None:
    print(json.dumps(asyncio.run(measurement(impl, url, turns, stream, wire=wire))))


# -- the driver --------------------------------------------------------------------------------


def run_worker(impl: str, url: str, turns: int, stream: bool, wire: Path) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", impl, "--url", url, "--turns", str(turns)]
    if stream:
        command.append("--stream")
    if impl == "bare-full":
        command += ["--wire", str(wire)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=common.child_env())
    if done.returncode != 0:
        raise RuntimeError(f"{impl} worker failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def import_times(statement: str, repeat: int = IMPORT_REPEAT) -> list[float]:
    """Seconds ``statement`` takes in fresh processes, with the bytecode of every module
    cached as an installed package has it (``common.child_env``; a first, untimed, run
    writes what is missing)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = []
    for _ in range(repeat + 1):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=common.child_env()
        )
        out.append(float(done.stdout))
    return out[1:]


def configs() -> list[tuple[str, int, bool]]:
    """(harness side, turns, streamed) of every pair measured in a round."""
    pairs = [("engine", turns) for turns in TURNS]
    pairs += [(impl, turns) for impl in ("harness", "harness-fx") for turns in FULL_TURNS]
    return [(impl, turns, stream) for impl, turns in pairs for stream in (False, True)]


def drive(rounds: int) -> dict[str, Any]:
    raw: dict[str, list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        wire = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-wire-"))) / "wire.json"
        command = [sys.executable, __file__, "--capture", str(wire), "--turns", str(FULL_TURNS[0])]
        subprocess.run(command, check=True, timeout=120, env=common.child_env())
        # One fake server process per conversation length, each playing its own script.
        lengths = sorted({*TURNS, *FULL_TURNS})
        urls = {turns: stack.enter_context(common.fake_server(common.script(turns))) for turns in lengths}
        for n in range(rounds):
            for impl, turns, stream in configs():
                pair = (PAIRS[impl], impl)
                if impl == "harness-fx":  # its bare loop's figures are those measured for ``harness``
                    pair = (impl,)
                # Interleaved: the two sides run back to back, alternating who goes first.
                for side in pair if n % 2 == 0 else pair[::-1]:
                    figures = run_worker(side, urls[turns], turns, stream, wire)
                    raw.setdefault(key(side, turns, stream), []).append(figures)
            print(f"round {n + 1}/{rounds} done", file=sys.stderr, flush=True)
    return summarise(raw, rounds)


def key(impl: str, turns: int, stream: bool) -> str:
    return f"{impl}/{turns}/{'stream' if stream else 'plain'}"


def summarise(raw: dict[str, list[dict[str, float]]], rounds: int) -> dict[str, Any]:
    rows = []
    for impl, turns, stream in configs():
        bare, harness = raw[key(PAIRS[impl], turns, stream)], raw[key(impl, turns, stream)]
        rows.append(
            {
                "impl": impl,
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
            for impl in ("bare", "engine")
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
        "import_harness_nb_s": min(imports),
        "import_harness_nb_runs_s": imports,
        "from_harness_nb_import_Harness_s": min(harness_import),
        "from_harness_nb_import_Harness_runs_s": harness_import,
        "targets": {
            "harness_cpu_ratio_max": HARNESS_RATIO_TARGET,
            "engine_cpu_ratio_max": ENGINE_RATIO_TARGET,
            "at_turns": TARGET_TURNS,
            "scaling_max": SCALING_TARGET,
            "import_Harness_s_max": IMPORT_TARGET,
        },
        "raw": raw,
    }


def report(data: dict[str, Any]) -> None:
    print(f"\nbench_engine: medians of {data['rounds']} interleaved rounds, per LLM call (µs)\n")
    head = f"{'side':<10} {'turns':>5} {'mode':<6} | {'bare cpu':>9} {'side cpu':>9} {'ratio':>6} | "
    head += f"{'bare wall':>9} {'side wall':>9} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for r in data["rows"]:
        mode = "stream" if r["stream"] else "plain"
        print(
            f"{r['impl']:<10} {r['turns']:>5} {mode:<6} | {r['bare_cpu_us']:>9.0f} {r['harness_cpu_us']:>9.0f} "
            f"{r['cpu_ratio']:>5.2f}x | {r['bare_wall_us']:>9.0f} {r['harness_wall_us']:>9.0f} {r['wall_ratio']:>5.2f}x"
        )
    print()
    for impl, target in (("harness", HARNESS_RATIO_TARGET), ("engine", ENGINE_RATIO_TARGET)):
        for r in data["rows"]:
            if r["impl"] == impl and r["turns"] == TARGET_TURNS:
                mode = "streamed" if r["stream"] else "JSON"
                ok = r["cpu_ratio"] <= target
                print(
                    f"{common.verdict(ok)}  {impl} CPU per call vs its bare loop, {TARGET_TURNS} turns, {mode}: "
                    f"{r['cpu_ratio']:.2f}x (target <= {target}x)"
                )
    for mode, s in data["scaling"].items():
        ratio = s["engine_cpu_60_over_5"]
        print(
            f"{common.verdict(ratio <= SCALING_TARGET)}  engine CPU per call, 60 vs 5 turns ({mode}): {ratio:.2f}x "
            f"(target <= {SCALING_TARGET}x; bare loop {s['bare_cpu_60_over_5']:.2f}x)"
        )
    seconds = data["from_harness_nb_import_Harness_s"]
    print(
        f"{common.verdict(seconds <= IMPORT_TARGET)}  from harness_nb import Harness: {seconds * 1000:.0f} ms, "
        f"best of {IMPORT_REPEAT} (target <= {IMPORT_TARGET * 1000:.0f} ms)"
    )
    print(f"      (import harness_nb alone: {data['import_harness_nb_s'] * 1000:.1f} ms)")


def profile(turns: int, stream: bool, impl: str, top: int) -> None:
    """cProfile of the timed part of one measurement (after its warm-up conversation): the
    event loop's thread, then the work it hands to harness_nb's worker threads
    (``run_blocking``: checkpoints, permission decisions, secret scans), which a profile of
    one thread does not see although ``process_time`` counts it."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    threads = _profile_worker_threads()
    with contextlib.ExitStack() as stack:
        wire = None
        if impl == "bare-full":
            wire = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-wire-"))) / "wire.json"
            wire.write_text(json.dumps(asyncio.run(capture_wire(turns))))
        url = stack.enter_context(common.fake_server(common.script(turns)))
        figures = asyncio.run(measurement(impl, url, turns, stream, profiler, wire))
    print(json.dumps(figures))
    for title, profiles in (("the event loop's thread", [profiler]), ("harness_nb's worker threads", threads)):
        if profiles:
            print(f"\n==== {title} ====")
            stats = pstats.Stats(*profiles)
            stats.sort_stats("tottime").print_stats(top)
            stats.sort_stats("cumulative").print_stats(top)


def _profile_worker_threads() -> list[Any]:
    """Profile each ``run_blocking`` call made in the timed part (a profiler
    per call, on its worker thread); returns the list they are gathered in."""
    import cProfile

    from harness_nb.core import blocking

    gathered: list[Any] = []
    tracked = blocking._tracked

    def profiled(number: int, fn: Callable[[], Any]) -> Any:
        if not _PROFILING:
            return tracked(number, fn)
        mine = cProfile.Profile()
        gathered.append(mine)
        mine.enable()
        try:
            return tracked(number, fn)
        finally:
            mine.disable()

    blocking._tracked = profiled
    return gathered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (at least 3)")
    parser.add_argument("--profile", type=int, metavar="TURNS", help="profile one measurement instead")
    parser.add_argument("--impl", choices=IMPLS, default="harness", help="with --profile: which side")
    parser.add_argument("--top", type=int, default=40, help="with --profile: how many entries")
    parser.add_argument("--stream", action="store_true", help="with --profile: streamed")
    parser.add_argument("--worker", choices=IMPLS, help=argparse.SUPPRESS)
    parser.add_argument("--capture", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--wire", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.capture:
        args.capture.write_text(json.dumps(asyncio.run(capture_wire(args.turns))))
        return
    if args.worker:
        worker(args.worker, args.url, args.turns, args.stream, args.wire)
        return
    if args.profile:
        profile(args.profile, args.stream, args.impl, args.top)
        return
    if args.rounds < 3:
        parser.error("--rounds must be at least 3 (medians of fewer are too noisy)")
    started = time.perf_counter()
    data = drive(args.rounds)
    data["elapsed_s"] = time.perf_counter() - started
    report(data)
    path = common.write_json("bench_engine.json", data)
    print(f"\nwrote {path.relative_to(common.ROOT)} ({data['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
