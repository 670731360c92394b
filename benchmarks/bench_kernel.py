"""Does a notebook stay responsive while background agents stream?

    python benchmarks/bench_kernel.py                  # 8 agents, 30 samples, about 40 s
    python benchmarks/bench_kernel.py --agents 4 --samples 50

A real ipykernel (started by ``harness_nb.testing.KernelDriver``, which acts as the
frontend) loads harness_nb with a scripted model. First the latency of a trivial cell
(``1 + 1``: from sending the execute request to receiving its reply, as a frontend sees it)
is sampled on the idle kernel (half before the agents, half after they end); then ``--agents`` background runs (``%%agent --bg``) are
started, each streaming a long answer word by word (``chunk_delay`` in the script, so they
stream for the whole measurement), and the same trivial cell is sampled again. Every
sample is taken while all agents are still streaming (checked, and reported).

Widget traffic: every ``comm_msg`` update the kernel sends is attributed to the run view
(a ``RunView`` and all the widgets inside it) it belongs to, and divided by the time that
view was active; the peak over any one-second window is reported too, against the number
of text chunks per second that view received. The view coalesces updates to at most
``HarnessNB.updates_per_second`` refreshes (8 by default), each touching a few widgets.

Figures go to ``benchmarks/results/bench_kernel.json``. Nothing is asserted: read the
ratios (DESIGN: report ratios, never assert wall-clock times in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness_nb.testing import KernelDriver

RESULTS = Path(__file__).resolve().parent / "results"

WORDS_PER_ANSWER = 600  # at 50 words a second: 12 s of streaming per agent
TRIVIAL_CELL = "1 + 1"


def script(agents: int, chunk_delay: float) -> dict[str, Any]:
    """One long streamed answer per background agent (they share one list of steps)."""
    answer = " ".join(f"word{i % 97}" for i in range(WORDS_PER_ANSWER))
    step = {"text": answer, "usage": {"input_tokens": 500, "output_tokens": WORDS_PER_ANSWER}}
    return {"model": "bench", "chunk_delay": chunk_delay, "agents": {"general-purpose": [step] * agents}}


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between closest ranks."""
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


async def sample_latency(k: KernelDriver, samples: int, gap: float) -> list[float]:
    """Seconds from execute request to execute reply, for ``samples`` trivial cells."""
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        cell = k.execute(TRIVIAL_CELL)
        await k.wait_for(lambda: cell.reply is not None, 60, "the trivial cell's reply")  # noqa: B023 - awaited here
        out.append(time.perf_counter() - t0)
        if cell.status != "ok":
            raise RuntimeError(f"the trivial cell failed: {k.error(cell)}")
        await asyncio.sleep(gap)
    return out


async def task_states(k: KernelDriver) -> list[str]:
    cell = await k.run(
        "print(*[e.status for e in __import__('harness_nb.notebook').notebook.current_harness().tracker.list()], sep=',')"
    )
    return KernelDriver.text(cell).strip().split(",")


def run_views(k: KernelDriver) -> list[str]:
    """Comm ids of the run views: a VBox of header HTML, stream Output, activity VBox,
    approvals VBox and completions Output."""
    shape = ["HTMLModel", "OutputModel", "VBoxModel", "VBoxModel", "OutputModel"]
    views = []
    for cid, state in k.models.items():
        children = [c.removeprefix("IPY_MODEL_") for c in state.get("children", ())]
        kinds = [k.models.get(c, {}).get("_model_name") for c in children]
        if state.get("_model_name") == "VBoxModel" and kinds == shape:
            views.append(cid)
    return views


def descendants(k: KernelDriver, root: str) -> set[str]:
    found, todo = set(), [root]
    while todo:
        cid = todo.pop()
        if cid in found:
            continue
        found.add(cid)
        state = k.models.get(cid, {})
        todo.extend(c.removeprefix("IPY_MODEL_") for c in state.get("children", ()))
        for name in ("layout", "style"):  # layout/style models never change here; kept for completeness
            ref = state.get(name)
            if isinstance(ref, str) and ref.startswith("IPY_MODEL_"):
                todo.append(ref.removeprefix("IPY_MODEL_"))
    return found


def widget_traffic(k: KernelDriver, views: list[str], chunks_per_second: float) -> dict[str, Any]:
    """Updates per second per run view, over each view's active time and at its peak."""
    owner: dict[str, str] = {}
    for view in views:
        for cid in descendants(k, view):
            owner[cid] = view
    times: dict[str, list[float]] = {v: [] for v in views}
    for t, msg in k.iopub:
        if msg["header"]["msg_type"] != "comm_msg":
            continue
        content = msg["content"]
        if content.get("data", {}).get("method") != "update":
            continue
        owning = owner.get(content["comm_id"])
        if owning is not None:
            times[owning].append(t)
    per_view = []
    for ts in times.values():
        if len(ts) < 2:
            continue
        span = ts[-1] - ts[0]
        peak = max(bisect.bisect_left(ts, t + 1.0) - i for i, t in enumerate(ts))
        per_view.append({"messages": len(ts), "seconds": round(span, 2), "per_second": round(len(ts) / span, 1), "peak_1s": peak})
    rates = [v["per_second"] for v in per_view]
    return {
        "views": len(per_view),
        "text_chunks_per_second_per_view": round(chunks_per_second, 1),
        "messages_per_second_per_view_mean": round(statistics.mean(rates), 1) if rates else None,
        "messages_per_second_per_view_max": max(rates) if rates else None,
        "peak_messages_in_1s_window": max(v["peak_1s"] for v in per_view) if per_view else None,
        "per_view": per_view,
    }


async def main(agents: int, samples: int, gap: float, chunk_delay: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-kernel-") as tmp:
        (Path(tmp) / "bench.json").write_text(json.dumps(script(agents, chunk_delay)))
        # the scripted model set below, whatever $HARNESS_NB_MODEL says
        async with KernelDriver(cwd=tmp, env={"HARNESS_NB_MODEL": ""}) as k:
            await k.run('%load_ext harness_nb\n%config HarnessNB.model = "scripted/bench.json"')
            await sample_latency(k, 5, gap)  # warm-up: imports, first display
            idle = await sample_latency(k, samples, gap)

            for n in range(agents):
                await k.run(f"%%agent --bg\nWrite a long essay, part {n + 1}.")
            await asyncio.sleep(1.0)  # every agent past its first chunks
            states_before = await task_states(k)
            streaming_started = time.perf_counter()
            busy = await sample_latency(k, samples, gap)
            streaming_seconds = time.perf_counter() - streaming_started
            states_after = await task_states(k)

            for n in range(agents):
                await k.run(f"%task wait bg-{n + 1}", timeout=120)
            await asyncio.sleep(0.5)  # the last flushes
            traffic = widget_traffic(k, run_views(k), 1.0 / chunk_delay)
            idle += await sample_latency(k, samples, gap)  # idle again: before and after, against drift

    all_running = all(s == "running" for s in [*states_before, *states_after])

    def stats(values: list[float]) -> dict[str, float]:
        return {"median_ms": round(statistics.median(values) * 1000, 2), "p95_ms": round(percentile(values, 95) * 1000, 2)}

    idle_stats, busy_stats = stats(idle), stats(busy)
    return {
        "benchmark": "bench_kernel",
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "agents": agents,
        "samples": samples,
        "idle_samples": len(idle),
        "gap_between_samples_s": gap,
        "chunk_delay_s": chunk_delay,
        "trivial_cell": TRIVIAL_CELL,
        "idle": idle_stats,
        "streaming": busy_stats,
        "ratio_median": round(busy_stats["median_ms"] / idle_stats["median_ms"], 2),
        "ratio_p95": round(busy_stats["p95_ms"] / idle_stats["p95_ms"], 2),
        "agents_streaming_throughout": all_running,
        "measured_while_streaming_s": round(streaming_seconds, 2),
        "widgets": traffic,
        "samples_ms": {"idle": [round(v * 1000, 2) for v in idle], "streaming": [round(v * 1000, 2) for v in busy]},
    }


def report(r: dict[str, Any]) -> str:
    w = r["widgets"]
    lines = [
        f"trivial cell latency ({r['trivial_cell']!r}: execute request -> reply), "
        f"{r['idle_samples']} idle samples (before and after), {r['samples']} while streaming",
        f"{'':34}{'median':>10}{'p95':>10}",
        f"{'idle kernel':34}{r['idle']['median_ms']:>8.2f}ms{r['idle']['p95_ms']:>8.2f}ms",
        f"{str(r['agents']) + ' background agents streaming':34}{r['streaming']['median_ms']:>8.2f}ms{r['streaming']['p95_ms']:>8.2f}ms",
        f"{'ratio (streaming / idle)':34}{r['ratio_median']:>9.2f}x{r['ratio_p95']:>9.2f}x",
        f"all agents streaming during every sample: {r['agents_streaming_throughout']}",
        "",
        f"widget updates per run view ({w['views']} views, {w['text_chunks_per_second_per_view']:g} text chunks/s each):",
        f"  mean {w['messages_per_second_per_view_mean']} msg/s, max {w['messages_per_second_per_view_max']} msg/s, "
        f"peak {w['peak_messages_in_1s_window']} messages in any 1 s window",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--chunk-delay", type=float, default=0.02, help="seconds between streamed words")
    args = parser.parse_args()
    result = asyncio.run(main(args.agents, args.samples, args.gap, args.chunk_delay))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "bench_kernel.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(report(result))
    print(f"\nwritten to {path}")
