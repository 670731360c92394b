"""How fast does an agent map over rows, in the kernel and on Ray, and does the notebook stay
responsive meanwhile?

    python benchmarks/bench_map.py                 # 1,000 rows, 100 ms a call, a few minutes
    python benchmarks/bench_map.py --rows 200 --latency 0.05 --only kernel --repeat 5

The fake LLM server runs in a process of its own and answers every call after
``--latency`` seconds (one final answer per row: a row is one subagent run of one call).

1. **Throughput** (``Harness.map`` in this process): ``--rows`` rows at concurrency 8 and
   32, against the ideal rate ``concurrency / latency`` rows a second — what a map would
   reach if the client cost nothing and the server never queued (``efficiency`` is the
   measured rate over it) — and against the bare httpx loop of ``common.py`` running the
   same one-call conversations at the same concurrency in the same run (``ratio_to_bare``:
   what the harness costs over the HTTP client itself).
2. **Ray** (``backend="ray"``, with ``ray`` installed): the same rows at concurrency 32 on a
   local Ray instance with one worker per CPU, against the kernel's rate at 32 in the same
   run. Both are given as the whole map's rate and as the steady rate (from the first row
   finished to the last: a Ray map first starts its workers, some seconds).
3. **Responsiveness** (a real ipykernel, driven as a frontend by ``KernelDriver``): the
   latency of a trivial cell (``1 + 1``, execute request to reply) on the idle kernel,
   then while ``%agent map --bg`` runs the same rows at ``--kernel-concurrency`` (32) in
   the background, its progress bar moving (a foreground map keeps its cell busy, and the
   kernel runs one cell at a time: there is nothing to measure then). ``--repeat`` rounds,
   each idle then busy; the medians of the rounds' figures are reported.

Figures go to ``benchmarks/results/bench_map.json``. Nothing is asserted: read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_kernel import TRIVIAL_CELL, percentile, sample_latency  # noqa: E402
from common import API_KEY, FINAL_STEP, MODEL, RESULTS, ROOT, bare_client, bare_conversation, fake_server  # noqa: E402

from harness_nb import Harness  # noqa: E402
from harness_nb.subagents.map_result import MapProgress  # noqa: E402
from harness_nb.testing import KernelDriver  # noqa: E402

TEMPLATE = "Classify review number {value} as positive or negative."


async def bare_map(url: str, rows: int, concurrency: int) -> float:
    """Seconds for the bare httpx loop (``common.py``) to run ``rows`` one-call conversations,
    ``concurrency`` at a time: the baseline with no harness at all."""
    gate = asyncio.Semaphore(concurrency)

    async def one(client: Any) -> None:
        async with gate:
            await bare_conversation(client, stream=True)

    async with bare_client(url) as client:
        await asyncio.gather(*(one(client) for _ in range(concurrency)))  # warm-up
        started = time.perf_counter()
        await asyncio.gather(*(one(client) for _ in range(rows)))
        return time.perf_counter() - started


async def throughput(url: str, rows: int, concurrency: int, latency: float) -> dict[str, Any]:
    bare_seconds = await bare_map(url, rows, concurrency)
    with tempfile.TemporaryDirectory(prefix="bench-map-") as tmp:
        async with Harness(
            f"openai-compatible/{MODEL}", workdir=tmp, base_url=url, api_key=API_KEY, sandbox="off", include_user_agents=False
        ) as h:
            await h.map("general-purpose", TEMPLATE, range(concurrency), concurrency=concurrency)  # warm-up
            started = time.perf_counter()
            result = await h.map("general-purpose", TEMPLATE, range(rows), concurrency=concurrency)
            seconds = time.perf_counter() - started
    rate = rows / seconds
    ideal = concurrency / latency
    return {
        "concurrency": concurrency,
        "rows": rows,
        "failed": result.failed,
        "seconds": round(seconds, 2),
        "rows_per_second": round(rate, 1),
        "ideal_rows_per_second": round(ideal, 1),
        "efficiency": round(rate / ideal, 3),
        "bare_rows_per_second": round(rows / bare_seconds, 1),
        "ratio_to_bare": round(rate / (rows / bare_seconds), 3),
    }


async def map_running(k: KernelDriver, task: str) -> bool:
    cell = await k.run(f"print(__import__('harness_nb.notebook').notebook.current_harness().tracker.get('{task}').done)")
    return KernelDriver.text(cell).strip() == "False"


def latency_stats(values: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(values) * 1000, 2), "p95_ms": round(percentile(values, 95) * 1000, 2)}


async def responsiveness(url: str, rows: int, samples: int, concurrency: int, repeat: int) -> dict[str, Any]:
    """``repeat`` rounds in one kernel: trivial cells idle, then while a background map runs."""
    env = {"HARNESS_NB_MODEL": "", "OPENAI_BASE_URL": url, "OPENAI_API_KEY": API_KEY}
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-map-kernel-") as tmp:
        async with KernelDriver(cwd=tmp, env=env) as k:
            await k.run(f"%load_ext harness_nb\n%config HarnessNB.model = 'openai-compatible/{MODEL}'\nrows = list(range({rows}))")
            await sample_latency(k, 5, 0.05)  # warm-up
            for n in range(1, repeat + 1):
                idle = await sample_latency(k, samples, 0.1)
                started = time.perf_counter()
                await k.run(f'%agent map --bg --over rows --concurrency {concurrency} "{TEMPLATE}"')
                await asyncio.sleep(1.0)  # past the first rows
                busy = await sample_latency(k, samples, 0.1)
                still_running = await map_running(k, f"bg-{n}")
                waited = await k.run(f"%task wait bg-{n} --timeout 600", timeout=660)
                seconds = time.perf_counter() - started
                if "0 failed" not in k.text(waited):
                    raise RuntimeError(f"the map did not end well: {k.text(waited)}")
                idle_stats, busy_stats = latency_stats(idle), latency_stats(busy)
                rounds.append({
                    "map_seconds": round(seconds, 2),
                    "sampled_while_the_map_ran": still_running,
                    "idle": idle_stats,
                    "mapping": busy_stats,
                    "ratio_median": round(busy_stats["median_ms"] / idle_stats["median_ms"], 2),
                    "ratio_p95": round(busy_stats["p95_ms"] / idle_stats["p95_ms"], 2),
                })

    def middle(path: tuple[str, ...]) -> float:
        values = []
        for r in rounds:
            value: Any = r
            for key in path:
                value = value[key]
            values.append(value)
        return round(statistics.median(values), 2)

    return {
        "rows": rows,
        "concurrency": concurrency,
        "rounds": rounds,
        "map_seconds": middle(("map_seconds",)),
        "sampled_while_the_map_ran": all(r["sampled_while_the_map_ran"] for r in rounds),
        "idle": {"median_ms": middle(("idle", "median_ms")), "p95_ms": middle(("idle", "p95_ms"))},
        "mapping": {"median_ms": middle(("mapping", "median_ms")), "p95_ms": middle(("mapping", "p95_ms"))},
        "ratio_median": middle(("ratio_median",)),
        "ratio_p95": middle(("ratio_p95",)),
    }


async def timed_map(h: Harness, rows: int, concurrency: int, **options: Any) -> dict[str, Any]:
    """One map of ``rows`` rows: its whole rate and its steady rate (first row done to last)."""
    firsts: list[tuple[float, int]] = []

    def seen(p: MapProgress) -> None:
        if p.finished and not firsts:
            firsts.append((time.perf_counter(), p.finished))

    started = time.perf_counter()
    result = await h.map("general-purpose", TEMPLATE, range(rows), concurrency=concurrency, on_progress=seen, **options)
    ended = time.perf_counter()
    (first_at, first_count), = firsts
    return {
        "rows": rows,
        "failed": result.failed,
        "seconds": round(ended - started, 2),
        "rows_per_second": round(rows / (ended - started), 1),
        "steady_rows_per_second": round((rows - first_count) / (ended - first_at), 1),
    }


async def on_ray(url: str, rows: int, concurrency: int) -> dict[str, Any] | None:
    """The kernel's and Ray's rates at ``concurrency`` in one run (``None``: no ``ray``)."""
    try:
        import ray
    except ImportError:
        return None
    cpus = os.cpu_count() or 1
    # Ray's processes import jsonschema, which builds a grammar for rfc3987_syntax when it is
    # installed (the Jupyter stack brings it): seconds of CPU each on a loaded machine, where
    # the raylet then gives up waiting for its agents (tests/ray_support explains).
    stubs = str(ROOT / "tests" / "ray_support")
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [stubs, saved]))
    try:
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        with tempfile.TemporaryDirectory(prefix="bench-map-ray-") as tmp:
            async with Harness(
                f"openai-compatible/{MODEL}", workdir=tmp, base_url=url, api_key=API_KEY, sandbox="off",
                include_user_agents=False,
            ) as h:
                await h.map("general-purpose", TEMPLATE, range(concurrency), concurrency=concurrency)  # warm-up
                kernel = await timed_map(h, rows, concurrency)
                on_cluster = await timed_map(h, rows, concurrency, backend="ray")
    finally:
        ray.shutdown()
    return {
        "concurrency": concurrency,
        "workers": cpus,
        "kernel": kernel,
        "ray": on_cluster,
        "ratio_steady": round(on_cluster["steady_rows_per_second"] / kernel["steady_rows_per_second"], 2),
        "ratio_whole": round(on_cluster["rows_per_second"] / kernel["rows_per_second"], 2),
    }


async def main(rows: int, latency: float, samples: int, only: str | None, concurrency: int, repeat: int) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "benchmark": "bench_map",
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "latency_s": latency,
    }
    with fake_server([FINAL_STEP], latency=latency) as url:
        if only in (None, "throughput"):
            figures["throughput"] = [await throughput(url, rows, c, latency) for c in (8, 32)]
        if only in (None, "ray"):
            figures["ray"] = await on_ray(url, rows, 32)
        if only in (None, "kernel"):
            figures["kernel"] = await responsiveness(url, rows, samples, concurrency, repeat)
    return figures


def report(r: dict[str, Any]) -> str:
    lines = [f"{r['latency_s'] * 1000:.0f} ms per call; load average {r['load_average_1m']} on {r['cpus']} CPUs"]
    for t in r.get("throughput", []):
        lines.append(
            f"  {t['rows']:,} rows at concurrency {t['concurrency']:>3}: {t['rows_per_second']:>7.1f} rows/s of an ideal "
            f"{t['ideal_rows_per_second']:.1f} (efficiency {t['efficiency']:.2f}); bare httpx loop "
            f"{t['bare_rows_per_second']:.1f} rows/s (harness / bare {t['ratio_to_bare']:.2f}) · {t['failed']} failed"
        )
    if "ray" in r:
        y = r["ray"]
        if y is None:
            lines.append("Ray: not installed (pip install 'harness_nb[ray]')")
        else:
            for name in ("kernel", "ray"):
                m = y[name]
                lines.append(
                    f"  {name:<6} {m['rows']:,} rows at concurrency {y['concurrency']}: {m['rows_per_second']:.1f} rows/s "
                    f"whole map ({m['seconds']} s), {m['steady_rows_per_second']:.1f} rows/s steady · {m['failed']} failed"
                )
            lines.append(f"  ray / kernel: steady {y['ratio_steady']:.2f}x, whole map {y['ratio_whole']:.2f}x ({y['workers']} workers)")
    if "kernel" in r:
        k = r["kernel"]
        lines += [
            f"trivial cell ({TRIVIAL_CELL!r}) while %agent map --bg runs {k['rows']:,} rows at concurrency "
            f"{k['concurrency']} (took {k['map_seconds']} s; sampled while running: {k['sampled_while_the_map_ran']}); "
            f"median of {len(k['rounds'])} rounds",
            f"  idle     median {k['idle']['median_ms']:.2f} ms · p95 {k['idle']['p95_ms']:.2f} ms",
            f"  mapping  median {k['mapping']['median_ms']:.2f} ms · p95 {k['mapping']['p95_ms']:.2f} ms",
            f"  ratio    median {k['ratio_median']:.2f}x · p95 {k['ratio_p95']:.2f}x "
            f"(rounds: {', '.join(str(x['ratio_p95']) for x in k['rounds'])})",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--kernel-concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the kernel's idle/busy measurement")
    parser.add_argument("--only", choices=("throughput", "ray", "kernel"), default=None)
    args = parser.parse_args()
    figures = asyncio.run(main(args.rows, args.latency, args.samples, args.only, args.kernel_concurrency, args.repeat))
    RESULTS.mkdir(exist_ok=True)
    name = "bench_map.json" if args.only is None else f"bench_map_{args.only}.json"
    (RESULTS / name).write_text(json.dumps(figures, indent=2) + "\n")
    print(report(figures))
