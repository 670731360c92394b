"""How fast does an agent map over rows, and does the notebook stay responsive meanwhile?

    python benchmarks/bench_map.py                 # 1,000 rows, 100 ms a call, about 60 s
    python benchmarks/bench_map.py --rows 200 --latency 0.05

The fake LLM server runs in a process of its own and answers every call after
``--latency`` seconds (one final answer per row: a row is one subagent run of one call).

1. **Throughput** (``Harness.map`` in this process): ``--rows`` rows at concurrency 8 and
   32, against the ideal rate ``concurrency / latency`` rows a second — what a map would
   reach if the client cost nothing and the server never queued (``efficiency`` is the
   measured rate over it) — and against the bare httpx loop of ``common.py`` running the
   same one-call conversations at the same concurrency in the same run (``ratio_to_bare``:
   what the harness costs over the HTTP client itself).
2. **Responsiveness** (a real ipykernel, driven as a frontend by ``KernelDriver``): the
   latency of a trivial cell (``1 + 1``, execute request to reply) on the idle kernel,
   then while ``%agent map --bg`` runs the same rows at concurrency 8 in the background,
   its progress bar moving (a foreground map keeps its cell busy, and the kernel runs one
   cell at a time: there is nothing to measure then).

Figures go to ``benchmarks/results/bench_map.json``. Nothing is asserted: read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_kernel import TRIVIAL_CELL, percentile, sample_latency  # noqa: E402
from common import API_KEY, FINAL_STEP, MODEL, RESULTS, bare_client, bare_conversation, fake_server  # noqa: E402

from harness_nb import Harness  # noqa: E402
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


async def map_running(k: KernelDriver) -> bool:
    cell = await k.run("print(__import__('harness_nb.notebook').notebook.current_harness().tracker.get('bg-1').done)")
    return KernelDriver.text(cell).strip() == "False"


async def responsiveness(url: str, rows: int, samples: int) -> dict[str, Any]:
    env = {"HARNESS_NB_MODEL": "", "OPENAI_BASE_URL": url, "OPENAI_API_KEY": API_KEY}
    with tempfile.TemporaryDirectory(prefix="bench-map-kernel-") as tmp:
        async with KernelDriver(cwd=tmp, env=env) as k:
            await k.run(f"%load_ext harness_nb\n%config HarnessNB.model = 'openai-compatible/{MODEL}'\nrows = list(range({rows}))")
            await sample_latency(k, 5, 0.05)  # warm-up
            idle = await sample_latency(k, samples, 0.1)
            started = time.perf_counter()
            await k.run(f'%agent map --bg --over rows --concurrency 8 "{TEMPLATE}"')
            await asyncio.sleep(1.0)  # past the first rows
            busy = await sample_latency(k, samples, 0.1)
            still_running = await map_running(k)
            waited = await k.run("%task wait bg-1 --timeout 600", timeout=660)
            seconds = time.perf_counter() - started
            if "0 failed" not in k.text(waited):
                raise RuntimeError(f"the map did not end well: {k.text(waited)}")

    def stats(values: list[float]) -> dict[str, float]:
        return {"median_ms": round(statistics.median(values) * 1000, 2), "p95_ms": round(percentile(values, 95) * 1000, 2)}

    idle_stats, busy_stats = stats(idle), stats(busy)
    return {
        "rows": rows,
        "map_seconds": round(seconds, 2),
        "sampled_while_the_map_ran": still_running,
        "idle": idle_stats,
        "mapping": busy_stats,
        "ratio_median": round(busy_stats["median_ms"] / idle_stats["median_ms"], 2),
        "ratio_p95": round(busy_stats["p95_ms"] / idle_stats["p95_ms"], 2),
    }


async def main(rows: int, latency: float, samples: int) -> dict[str, Any]:
    with fake_server([FINAL_STEP], latency=latency) as url:
        runs = [await throughput(url, rows, c, latency) for c in (8, 32)]
        kernel = await responsiveness(url, rows, samples)
    return {
        "benchmark": "bench_map",
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "latency_s": latency,
        "throughput": runs,
        "kernel": kernel,
    }


def report(r: dict[str, Any]) -> str:
    lines = [f"{r['throughput'][0]['rows']:,} rows, {r['latency_s'] * 1000:.0f} ms per call"]
    for t in r["throughput"]:
        lines.append(
            f"  concurrency {t['concurrency']:>3}: {t['rows_per_second']:>7.1f} rows/s of an ideal "
            f"{t['ideal_rows_per_second']:.1f} (efficiency {t['efficiency']:.2f}); bare httpx loop "
            f"{t['bare_rows_per_second']:.1f} rows/s (harness / bare {t['ratio_to_bare']:.2f}) · {t['failed']} failed"
        )
    k = r["kernel"]
    lines += [
        f"trivial cell ({TRIVIAL_CELL!r}) while %agent map --bg runs {k['rows']:,} rows (took {k['map_seconds']} s; "
        f"sampled while running: {k['sampled_while_the_map_ran']})",
        f"  idle     median {k['idle']['median_ms']:.2f} ms · p95 {k['idle']['p95_ms']:.2f} ms",
        f"  mapping  median {k['mapping']['median_ms']:.2f} ms · p95 {k['mapping']['p95_ms']:.2f} ms",
        f"  ratio    median {k['ratio_median']:.2f}x · p95 {k['ratio_p95']:.2f}x",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    figures = asyncio.run(main(args.rows, args.latency, args.samples))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_map.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(report(figures))
