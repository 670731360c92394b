"""What tracing costs per LLM call: off (the default), on, and on with content, against the
harness as it was before tracing existed.

    python benchmarks/bench_tracing.py              # 5 interleaved rounds, about 4 minutes
    python benchmarks/bench_tracing.py --rounds 3
    python benchmarks/bench_tracing.py --baseline <git revision>

Four sides, each the full ``Harness`` as a notebook builds it (``bench_engine.py``'s
``harness``: built-in tools, delegation, coordination, skills, the permission hook,
checkpoints, secrets, offloading, the transcript) on a small notebook project, in 20-turn
conversations that call the read-only ``echo`` each turn, with an event sink that counts
what it is given (a notebook's run view always listens), JSON and streamed, against the
fake LLM server at zero latency:

* ``baseline``: the package as it was before tracing was added (by default the first parent
  of the commit that brought ``harness_nb/tracing/`` to this branch; ``--baseline REV`` picks
  another), from
  ``git archive`` into a temporary folder, first on ``PYTHONPATH``.
* ``off``: this tree, ``tracing="off"``: its engine also reports each model call
  (``ModelCallFinished``) to the sink; nothing of OpenTelemetry is imported.
* ``on``: ``tracing="otel"``: every run, model call and tool call a span, exported by the
  SDK's ``SimpleSpanProcessor`` to its ``InMemorySpanExporter`` (emptied after each
  conversation), behind the process's tracer provider.
* ``on-content``: the same with ``tracing_content=True``: each model call's span also
  records the conversation sent (which grows with every turn), the answer, the system
  prompt and the tools' names, and each tool call's arguments and result, all scrubbed.

Every measurement is a fresh process (with a HOME of its own); one untimed conversation,
then about 250 timed calls; client CPU (``time.process_time``) and wall time per call, and
the Python function calls made per LLM call in one more conversation (``python_calls``: a
count, unmoved by other work on the machine, which moves the timings by ±20% here). The
sides of a round run back to back in a rotating order; ratios are taken within a round,
then the median over rounds is reported. Targets (printed, never enforced; issue 23), on the
Python calls, which a busy machine does not move: ``off`` <= 1.02x ``baseline`` (free when
off: a run that listens builds one more event per model call), ``on`` <= 1.25x ``off`` (at
zero model latency the spans' cost is all there is; against a real model's seconds it
vanishes); the CPU ratios, and how far their rounds spread, are printed beside them.
Figures go to ``benchmarks/results/bench_tracing.json``.
"""

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

TURNS = 20
CALLS_PER_MEASUREMENT = 250
SIDES = ("baseline", "off", "on", "on-content")
OFF_TARGET = 1.02
ON_TARGET = 1.25


# -- one measurement, in its own process -------------------------------------------------------


class Counter:
    """The sink a run view stands for: it is given every event."""

    def __init__(self) -> None:
        self.events = 0

    def __call__(self, event: Any) -> None:
        self.events += 1


def catch_spans() -> Any:
    """The SDK's in-memory exporter behind this process's tracer provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


async def measure(side: str, url: str, stream: bool) -> dict[str, float]:
    from harness_nb import Harness
    from harness_nb.settings import SETTINGS

    # the script repeats one echo call: a package that stops a run repeating itself is told not to
    settings: dict[str, Any] = {"max_repeated_calls": 0} if "max_repeated_calls" in SETTINGS else {}
    exporter = None
    if side in ("on", "on-content"):
        exporter = catch_spans()
        settings |= {"tracing": "otel", "tracing_content": side == "on-content"}
    sink = Counter()
    with common.notebook_project() as workdir:
        harness = Harness(
            f"openai-compatible/{common.MODEL}",
            workdir=workdir,
            base_url=url,
            api_key=common.API_KEY,
            provider_options={"streaming": stream},
            extra_tools=[common.echo_tool()],
            max_turns=TURNS + 1,
            **settings,
        )

        async def conversation() -> int:
            harness.new_conversation()
            result = await harness.run(common.PROMPT, on_event=sink)
            if result.tool_calls != TURNS or result.stop_reason != "end_turn":
                raise RuntimeError(f"unexpected run: {result.tool_calls} tool calls, stop {result.stop_reason}")
            if exporter is not None:
                spans = len(exporter.get_finished_spans())
                if spans != 2 * TURNS + 2:  # the run, its calls and its tool calls
                    raise RuntimeError(f"expected {2 * TURNS + 2} spans, got {spans}")
                exporter.clear()
            return result.turns

        try:
            common.freeze_heap()
            await conversation()
            calls, cpu, wall = 0, time.process_time(), time.perf_counter()
            for _ in range(max(1, round(CALLS_PER_MEASUREMENT / (TURNS + 1)))):
                calls += await conversation()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            counted = await python_calls(conversation)
        finally:
            await harness.aclose()
    import harness_nb

    loaded = any(name.startswith("opentelemetry") for name in sys.modules)
    figures = {
        "calls": calls,
        "cpu_us": cpu / calls * 1e6,
        "wall_us": wall / calls * 1e6,
        "python_calls": counted,
        "otel_loaded": loaded,
    }
    return {**figures, "package": str(Path(harness_nb.__file__).parent)}


async def python_calls(conversation: Any) -> float:
    """Python and C function calls per LLM call on the event loop's thread, counted over one
    more conversation: the same on every run, so a difference of a few per cent shows where
    timings on a shared machine cannot (work handed to worker threads is not counted)."""
    count = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(hook)
    try:
        llm_calls = await conversation()
    finally:
        sys.setprofile(None)
    return count / llm_calls


def worker(side: str, url: str, stream: bool) -> None:
    print(json.dumps(asyncio.run(measure(side, url, stream))))


# -- the driver --------------------------------------------------------------------------------


def baseline_revision(given: str | None) -> str:
    """``given``, else the first parent of the commit that brought ``harness_nb/tracing/`` to
    this branch (on main, its merge): the package as it was just before."""
    if given:
        return given
    added = subprocess.run(
        ["git", "log", "--first-parent", "--diff-filter=A", "--format=%H", "--", "harness_nb/tracing/__init__.py"],
        cwd=common.ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    if not added:
        raise SystemExit("no commit adds harness_nb/tracing/ in this clone's history: pass --baseline REV")
    return f"{added[-1]}^"


@contextlib.contextmanager
def baseline_tree(revision: str) -> Iterator[Path]:
    """The package at ``revision``, unpacked into a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        archive = subprocess.run(
            ["git", "archive", revision, "harness_nb"], cwd=common.ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def run_worker(side: str, url: str, stream: bool, baseline: Path) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", side, "--url", url]
    if stream:
        command.append("--stream")
    env = common.child_env()
    if side == "baseline":  # its package first on the path: it is the one imported
        env["PYTHONPATH"] = f"{baseline}:{env['PYTHONPATH']}"
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{side} worker failed:\n{done.stderr}")
    figures = json.loads(done.stdout.splitlines()[-1])
    if Path(figures.pop("package")).is_relative_to(baseline) != (side == "baseline"):
        raise RuntimeError(f"the {side} worker imported the wrong harness_nb")
    return figures


def drive(rounds: int, revision: str) -> dict[str, Any]:
    raw: dict[str, list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        baseline = stack.enter_context(baseline_tree(revision))
        url = stack.enter_context(common.fake_server(common.script(TURNS)))
        for n in range(rounds):
            order = SIDES[n % len(SIDES) :] + SIDES[: n % len(SIDES)]  # each side goes first in turn
            for stream in (False, True):
                for side in order:
                    raw.setdefault(key(side, stream), []).append(run_worker(side, url, stream, baseline))
            print(f"round {n + 1}/{rounds} done", file=sys.stderr, flush=True)
    return summarise(raw, rounds, revision)


def key(side: str, stream: bool) -> str:
    return f"{side}/{'stream' if stream else 'plain'}"


def _ratio(raw: dict[str, list[dict[str, float]]], side: str, over: str, stream: bool, what: str) -> float:
    pairs = zip(raw[key(side, stream)], raw[key(over, stream)], strict=True)
    return common.median([a[what] / b[what] for a, b in pairs])


def summarise(raw: dict[str, list[dict[str, float]]], rounds: int, revision: str) -> dict[str, Any]:
    rows = []
    for stream in (False, True):
        row: dict[str, Any] = {"stream": stream, "turns": TURNS}
        for side in SIDES:
            row[f"{side}_cpu_us"] = common.median([r["cpu_us"] for r in raw[key(side, stream)]])
            row[f"{side}_wall_us"] = common.median([r["wall_us"] for r in raw[key(side, stream)]])
        for side, over in (("off", "baseline"), ("on", "baseline"), ("on", "off"), ("on-content", "off")):
            row[f"{side}_over_{over}_cpu"] = _ratio(raw, side, over, stream, "cpu_us")
            row[f"{side}_over_{over}_wall"] = _ratio(raw, side, over, stream, "wall_us")
            # how far apart the rounds were: a machine shared with other work moves every figure
            spread = [a["cpu_us"] / b["cpu_us"] for a, b in zip(raw[key(side, stream)], raw[key(over, stream)], strict=True)]
            row[f"{side}_over_{over}_cpu_range"] = [min(spread), max(spread)]
        for side in SIDES:
            row[f"{side}_python_calls"] = common.median([r["python_calls"] for r in raw[key(side, stream)]])
        row["otel_loaded_when_off"] = any(r["otel_loaded"] for r in raw[key("off", stream)])
        rows.append(row)
    return {
        "rounds": rounds,
        "baseline": revision,
        "environment": common.environment(),
        "rows": rows,
        "targets": {"off_over_baseline_python_calls_max": OFF_TARGET, "on_over_off_python_calls_max": ON_TARGET},
        "raw": raw,
    }


def report(data: dict[str, Any]) -> None:
    print(f"\nbench_tracing: medians of {data['rounds']} interleaved rounds, per LLM call (µs), {TURNS}-turn runs")
    print(f"baseline: {data['baseline']}\n")
    head = f"{'mode':<6} | " + " ".join(f"{side + ' cpu':>15}" for side in SIDES) + " | off/base  on/base  on/off  content/off"
    print(head)
    print("-" * len(head))
    for r in data["rows"]:
        mode = "stream" if r["stream"] else "plain"
        cpus = " ".join(f"{r[f'{side}_cpu_us']:>15.0f}" for side in SIDES)
        ratios = (
            f"{r['off_over_baseline_cpu']:>7.3f}x {r['on_over_baseline_cpu']:>7.3f}x "
            f"{r['on_over_off_cpu']:>6.3f}x {r['on-content_over_off_cpu']:>10.3f}x"
        )
        print(f"{mode:<6} | {cpus} | {ratios}")
    print()
    for r in data["rows"]:
        mode = "streamed" if r["stream"] else "JSON"
        base_calls, off_calls, on_calls = (r[f"{side}_python_calls"] for side in ("baseline", "off", "on"))
        off, on = off_calls / base_calls, on_calls / off_calls
        print(
            f"{common.verdict(off <= OFF_TARGET)}  off vs baseline, Python calls per LLM call, {mode}: {off_calls:,.0f} vs "
            f"{base_calls:,.0f}, {off:.3f}x (target <= {OFF_TARGET}x)"
        )
        print(
            f"{common.verdict(on <= ON_TARGET)}  on vs off, Python calls per LLM call, {mode}: {on_calls:,.0f}, {on:.3f}x "
            f"(target <= {ON_TARGET}x; with content {r['on-content_python_calls']:,.0f})"
        )
        for side, over in (("off", "baseline"), ("on", "off")):
            low, high = r[f"{side}_over_{over}_cpu_range"]
            added = r[f"{side}_cpu_us"] - r[f"{over}_cpu_us"]
            print(
                f"      {side} vs {over}, CPU per call, {mode}: {r[f'{side}_over_{over}_cpu']:.3f}x ({added:+.0f} µs; "
                f"rounds {low:.2f}-{high:.2f}x)"
            )
        loaded = r["otel_loaded_when_off"]
        print(f"{common.verdict(not loaded)}  off imports nothing of OpenTelemetry ({mode}): {'it did' if loaded else 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="the git revision to compare with (default: before tracing was added)")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.url, args.stream)
        return
    data = drive(args.rounds, baseline_revision(args.baseline))
    path = common.write_json("bench_tracing.json", data)
    report(data)
    print(f"\nfigures: {path.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
