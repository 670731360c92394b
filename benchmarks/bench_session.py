"""What a long notebook session costs, in money and in client CPU, with and without prompt
caching.

    python benchmarks/bench_session.py             # 5 interleaved rounds, about 2.5 minutes
    python benchmarks/bench_session.py --rounds 9

A session is one conversation of cells: each cell is a ``Harness.run`` of five LLM calls —
four ``read_file`` calls of a 1.2 KB file (its contents stay in the history, as a notebook's
tool results do) and an answer. Sessions of 30 and 300 calls (6 and 60 cells) run against
the fake LLM server, which reports prompt caching the way each API does (its prompt cache,
``harness_nb/testing/fake_cache.py``), three ways:

* ``anthropic/claude-sonnet-4-5`` with ``prompt_caching`` off: the **baseline**, every call
  pays its whole prompt at the input price;
* ``anthropic/claude-sonnet-4-5`` with prompt caching (the default): each call reads the
  history from the cache at 0.1x and writes only what was added, at 1.25x;
* ``openai/gpt-4.1``, whose caching is automatic (prefixes of 1,024+ tokens, read at 0.25x).

The harness is a full ``Harness`` (built-in tools, hooks, transcript) on the provider's
real HTTP client, streamed. Each measurement is a fresh process with a fresh fake server
(its own process, so its CPU is not counted and no cache survives from another
measurement); one untimed cell on another harness warms imports and the connection.
Reported per LLM call: cost in USD (from the harness's own accounting, i.e. the price
table), what the same tokens would cost with nothing cached, the share of prompt tokens
read from the cache, and client CPU (``time.process_time``). Ratios are taken within each
round against the baseline of the same length — for OpenAI's cost, whose cache cannot be
turned off, against its own tokens priced uncached — and their medians reported.
Compaction (DESIGN.md §2.2) is not on main yet, so no row measures it.
Figures go to ``benchmarks/results/bench_session.json``.
"""

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

LENGTHS = (30, 300)
CALLS_PER_CELL = 5
MODES = {
    "anthropic, no cache (baseline)": ("anthropic/claude-sonnet-4-5", {"prompt_caching": False}),
    "anthropic, cached": ("anthropic/claude-sonnet-4-5", {}),
    "openai, automatic cache": ("openai/gpt-4.1", {}),
}
BASELINE = "anthropic, no cache (baseline)"
FILE_TEXT = "".join(f"row {n:03d}: the quick brown fox jumps over the lazy dog, again and again\n" for n in range(16))
READ = {"text": "Reading the data file.", "tool_calls": [{"name": "read_file", "arguments": {"path": "data.txt"}}]}
ANSWER = {"text": "The file holds sixteen rows about a fox and a dog."}
SCRIPT = [READ] * (CALLS_PER_CELL - 1) + [ANSWER]
COST_TARGET = 0.2  # cached cost per call over the baseline's, at 300 calls


# -- one measurement, in its own process -----------------------------------------------------


async def measure(url: str, mode: str, calls: int) -> dict[str, Any]:
    from harness_nb import Harness
    from harness_nb.core import PRICES, Usage
    from harness_nb.tools import Sandbox
    from harness_nb.tools.builtin import builtin_tools

    model, options = MODES[mode]
    base_url = url.removesuffix("/v1") if model.startswith("anthropic/") else url
    with tempfile.TemporaryDirectory(prefix="bench-session-") as tmp:
        workdir = Path(tmp) / "project"
        workdir.mkdir()
        (workdir / "data.txt").write_text(FILE_TEXT)
        settings = dict(
            base_url=base_url, api_key=common.API_KEY, provider_options=options, include_user_agents=False, sandbox="off"
        )
        # warm-up on the same code paths (imports, the provider's client, schemas); its tool
        # list starts with echo, so it shares no cached prefix with the measured session
        warm_tools = [common.echo_tool(), *builtin_tools(sandbox=Sandbox.create("off"))]
        async with Harness(model, workdir=Path(tmp), tools=warm_tools, **settings) as warm:
            await warm.run(common.PROMPT)
        async with Harness(model, workdir=workdir, **settings) as h:
            h.engine  # the provider and its client are made here, not in the timed part
            cpu, wall = time.process_time(), time.perf_counter()
            for cell in range(calls // CALLS_PER_CELL):
                result = await h.run(f"Cell {cell}: read data.txt four times, then summarise it.")
                if result.stop_reason != "end_turn" or result.turns != CALLS_PER_CELL:
                    raise RuntimeError(f"cell {cell}: {result.turns} calls, stop {result.stop_reason}")
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            usage: Usage = h.usage
    if usage.turns != calls or usage.cost is None:
        raise RuntimeError(f"expected {calls} priced calls, got {usage.turns} (cost {usage.cost})")
    price = PRICES[model.split("/", 1)[1]]
    uncached = (usage.prompt_tokens * price.input + usage.output_tokens * price.output) / 1_000_000
    return {
        "calls": calls,
        "cpu_us": cpu / calls * 1e6,
        "wall_us": wall / calls * 1e6,
        "cost_usd": usage.cost / calls,
        "uncached_cost_usd": uncached / calls,
        "prompt_tokens": usage.prompt_tokens / calls,
        "cache_read_share": usage.cache_read_tokens / usage.prompt_tokens,
        "cache_write_share": usage.cache_write_tokens / usage.prompt_tokens,
        "session_cost_usd": usage.cost,
    }


def worker(url: str, mode: str, calls: int) -> None:
    print(json.dumps(asyncio.run(measure(url, mode, calls))))


# -- the driver --------------------------------------------------------------------------------


def run_worker(mode: str, calls: int) -> dict[str, Any]:
    with common.fake_server(SCRIPT) as url:  # a fresh server: no cache from another measurement
        command = [sys.executable, __file__, "--worker", mode, "--url", url, "--calls", str(calls)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=common.child_env())
    if done.returncode != 0:
        raise RuntimeError(f"{mode} worker failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def drive(rounds: int) -> dict[str, Any]:
    raw: dict[str, list[dict[str, Any]]] = {}
    modes = list(MODES)
    for n in range(rounds):
        for calls in LENGTHS:
            # interleaved: the modes of one length run back to back, in a rotating order
            for mode in modes[n % len(modes) :] + modes[: n % len(modes)]:
                raw.setdefault(key(mode, calls), []).append(run_worker(mode, calls))
        print(f"round {n + 1}/{rounds} done", file=sys.stderr, flush=True)
    return summarise(raw, rounds)


def key(mode: str, calls: int) -> str:
    return f"{mode}/{calls}"


def summarise(raw: dict[str, list[dict[str, Any]]], rounds: int) -> dict[str, Any]:
    rows = []
    for calls in LENGTHS:
        baseline = raw[key(BASELINE, calls)]
        for mode in MODES:
            runs = raw[key(mode, calls)]
            anthropic = MODES[mode][0] == MODES[BASELINE][0]
            # the cost baseline: the uncached Anthropic run of the same round; OpenAI's cache
            # cannot be turned off, so its baseline is the same tokens priced uncached
            cost_ratios = [
                r["cost_usd"] / (b["cost_usd"] if anthropic else r["uncached_cost_usd"])
                for r, b in zip(runs, baseline, strict=True)
            ]
            rows.append(
                {
                    "mode": mode,
                    "calls": calls,
                    "model": MODES[mode][0],
                    **{f: common.median([r[f] for r in runs]) for f in runs[0] if f != "calls"},
                    "cost_baseline": "the no-cache run" if anthropic else "the same tokens, uncached",
                    "cost_ratio": common.median(cost_ratios),
                    "cpu_ratio": common.median([r["cpu_us"] / b["cpu_us"] for r, b in zip(runs, baseline, strict=True)]),
                }
            )
    return {
        "rounds": rounds,
        "environment": common.environment(),
        "calls_per_cell": CALLS_PER_CELL,
        "file_chars": len(FILE_TEXT),
        "compaction": "not measured: the context engineer's compaction is not on main yet",
        "rows": rows,
        "targets": {"cached_cost_ratio_at_300_max": COST_TARGET},
        "raw": raw,
    }


def report(data: dict[str, Any]) -> None:
    print(f"\nbench_session: medians of {data['rounds']} rounds, per LLM call")
    print("(cost 'vs base': the no-cache Anthropic run; for OpenAI, its own tokens priced uncached)\n")
    head = (
        f"{'calls':>5} {'mode':<32} | {'prompt tok':>10} {'cache read':>10} | {'cost $':>9} {'uncached $':>10} "
        f"{'vs base':>7} | {'cpu µs':>7} {'vs base':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in data["rows"]:
        print(
            f"{r['calls']:>5} {r['mode']:<32} | {r['prompt_tokens']:>10,.0f} {r['cache_read_share']:>9.0%} | "
            f"{r['cost_usd']:>9.5f} {r['uncached_cost_usd']:>10.5f} {r['cost_ratio']:>6.2f}x | "
            f"{r['cpu_us']:>7.0f} {r['cpu_ratio']:>6.2f}x"
        )
    cached = next(r for r in data["rows"] if r["mode"] == "anthropic, cached" and r["calls"] == 300)
    ok = cached["cost_ratio"] <= COST_TARGET
    print(
        f"\n{common.verdict(ok)}  cached Anthropic cost per call at 300 calls: {cached['cost_ratio']:.2f}x the "
        f"uncached baseline (target <= {COST_TARGET}x)"
    )
    print(f"      {data['compaction']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (at least 3)")
    parser.add_argument("--worker", choices=list(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.url, args.worker, args.calls)
        return
    if args.rounds < 3:
        parser.error("--rounds must be at least 3 (medians of fewer are too noisy)")
    started = time.perf_counter()
    data = drive(args.rounds)
    data["elapsed_s"] = time.perf_counter() - started
    report(data)
    path = common.write_json("bench_session.json", data)
    print(f"\nwrote {path.relative_to(common.ROOT)} ({data['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
