"""What does batch mode cost the kernel? ``h.map(..., mode="batch")`` over ``--rows`` rows
against the fake of both vendors' batch APIs (``harness_nb.testing.FakeBatchServer``),
which runs in a process of its own and ends each batch at its first poll.

    python benchmarks/bench_map_batch.py              # 10,000 rows a vendor, about 20 s
    python benchmarks/bench_map_batch.py --rows 2000

For each vendor: the client's seconds a row over the whole map (encoding every request,
the upload, the poll, reading the results and storing each row: all the kernel does for a
row, the vendor's hours aside), and the event loop's lag meanwhile (a 5 ms sleep's overrun,
p50 / p99 / max), beside the same lag on the idle loop: a kernel's cells wait that long.
Figures go to ``benchmarks/results/bench_map_batch.json``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness_nb import Harness  # noqa: E402
from harness_nb.subagents import SubAgentDefinition  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}
SERVER = """
import asyncio
from harness_nb.testing import FakeBatchServer

async def serve():
    answer = lambda api, body: {"text": "positive", "usage": {"input_tokens": 120, "output_tokens": 2}}
    async with FakeBatchServer(answer=answer, polls=0, record=False) as srv:
        print(srv.url, flush=True)
        await asyncio.Event().wait()

asyncio.run(serve())
"""


async def lag_while(work: Any) -> tuple[Any, list[float]]:
    """``work``'s result, and the overruns of a 5 ms sleep on the loop meanwhile."""
    lags: list[float] = []
    done = False

    async def tick() -> None:
        while not done:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - start - 0.005)

    ticker = asyncio.create_task(tick())
    try:
        return await work, lags
    finally:
        done = True
        await ticker


def spread(lags: list[float]) -> dict[str, float]:
    lags = sorted(lags) or [0.0]
    return {q: round(lags[min(int(len(lags) * f), len(lags) - 1)] * 1000, 1) for q, f in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))}


async def one(vendor: str, url: str, rows: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        base = url + ("/v1" if vendor == "openai" else "")
        h = Harness(MODELS[vendor], workdir=folder, base_url=base, api_key="sk-bench", include_user_agents=False, sandbox="off")
        h.registry.register(SubAgentDefinition(name="labeler", description="Labels a review.", tools=[]))
        texts = [f"Review {i}: " + "the food was fine, the service slow. " * 5 for i in range(rows)]
        start = time.perf_counter()
        result, lags = await lag_while(h.map("labeler", "Label: {value}", texts, mode="batch"))
        seconds = time.perf_counter() - start
        await h.aclose()
    return {"vendor": vendor, "rows": rows, "failed": result.failed, "seconds": round(seconds, 2),
            "us_per_row": round(seconds / rows * 1e6), "loop_lag_ms": spread(lags)}


async def main(rows: int, url: str) -> dict[str, Any]:
    _, idle = await lag_while(asyncio.sleep(3))
    return {"idle_loop_lag_ms": spread(idle), "maps": [await one(vendor, url, rows) for vendor in MODELS]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        figures = asyncio.run(main(args.rows, (server.stdout.readline() if server.stdout else "").strip()))
    finally:
        server.terminate()
        server.wait()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_map_batch.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
