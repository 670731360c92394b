"""What a long notebook session costs, in money and in client CPU, with and without prompt
caching and compaction.

    python benchmarks/bench_session.py             # 5 interleaved rounds, about 4 minutes
    python benchmarks/bench_session.py --rounds 9

A session is one conversation of cells: each cell is a ``Harness.run`` of five LLM calls —
four ``read_file`` calls of a 1.2 KB file (its contents stay in the history, as a notebook's
tool results do) and an answer. Sessions of 30 and 300 calls (6 and 60 cells) run against
the fake LLM server, which reports prompt caching the way each API does (its prompt cache,
``harness_nb/testing/fake_cache.py``) and answers from the request itself
(``session_step``), so a compacted history does not change the script. Five ways:

* ``anthropic/claude-sonnet-4-5`` with ``prompt_caching`` off: the **baseline**, every call
  pays its whole prompt at the input price;
* ``anthropic/claude-sonnet-4-5`` with prompt caching (the default): each call reads the
  history from the cache at 0.1x and writes only what was added, at 1.25x;
* ``openai/gpt-4.1``, whose caching is automatic (prefixes of 1,024+ tokens, read at 0.25x);
* both Anthropic ways again with a 12k-token context window, so that the conversation is
  compacted (``engine/compaction/keeper.py``: old tool results become stubs, then old
  turns a summary the model writes, billed like any call) whenever it passes 80% of it.

The harness is a full ``Harness`` (built-in tools, hooks, transcript) on the provider's
real HTTP client, streamed. Each measurement is a fresh process with a fresh fake server
(its own process, so its CPU is not counted and no cache survives from another
measurement); one untimed cell on another harness warms imports and the connection.
Reported per LLM call of the cells (a compaction's summary calls are extra calls, whose
cost and tokens are counted in): cost in USD (from the harness's own accounting, i.e. the
price table), what the same tokens would cost with nothing cached, the share of prompt
tokens read from the cache, the compactions, and client CPU (``time.process_time``). Ratios are taken within each
round against the baseline of the same length — for OpenAI's cost, whose cache cannot be
turned off, against its own tokens priced uncached — and their medians reported.
Figures go to ``benchmarks/results/bench_session.json``.
"""

import argparse
import asyncio
import contextlib
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
WINDOW = 12_000
# mode: (model, provider options, context window: None for the model's own)
MODES: dict[str, tuple[str, dict[str, Any], int | None]] = {
    "anthropic, no cache (baseline)": ("anthropic/claude-sonnet-4-5", {"prompt_caching": False}, None),
    "anthropic, cached": ("anthropic/claude-sonnet-4-5", {}, None),
    "openai, automatic cache": ("openai/gpt-4.1", {}, None),
    "anthropic, no cache, 12k window": ("anthropic/claude-sonnet-4-5", {"prompt_caching": False}, WINDOW),
    "anthropic, cached, 12k window": ("anthropic/claude-sonnet-4-5", {}, WINDOW),
}
BASELINE = "anthropic, no cache (baseline)"
FILE_TEXT = "".join(f"row {n:03d}: the quick brown fox jumps over the lazy dog, again and again\n" for n in range(16))
READ = {"text": "Reading the data file.", "tool_calls": [{"name": "read_file", "arguments": {"path": "data.txt"}}]}
ANSWER = {"text": "The file holds sixteen rows about a fox and a dog."}
CELL = "Cell "


def session_step(body: dict[str, Any]) -> dict[str, Any]:
    """The fake model: read the file until the latest cell's prompt has four results, then
    answer. Counted from the request itself, not from the turn number, because compaction
    rewrites the history; a request with no cell prompt (a summary, the warm-up) gets text."""
    results = 0
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if message.get("role") == "tool":
            results += 1
        results += sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result")
        if message.get("role") == "user" and any(
            isinstance(b, dict) and str(b.get("text") or "").startswith(CELL) for b in blocks
        ):
            return READ if results < CALLS_PER_CELL - 1 else ANSWER
    return ANSWER
COST_TARGET = 0.2  # cached cost per call over the baseline's, at 300 calls


# -- one measurement, in its own process -----------------------------------------------------


async def measure(url: str, mode: str, calls: int) -> dict[str, Any]:
    from harness_nb import Harness
    from harness_nb.core import PRICES, Compacted, Usage
    from harness_nb.tools import Sandbox
    from harness_nb.tools.builtin import builtin_tools

    model, options, window = MODES[mode]
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
        compactions = []

        def count(event: Any) -> None:
            if isinstance(event, Compacted) and (event.cleared or event.summarised):
                compactions.append(event)

        async with Harness(model, workdir=workdir, context_window=window, **settings) as h:
            _ = h.provider  # the provider and its client are made here, not in the timed part
            cpu, wall = time.process_time(), time.perf_counter()
            for cell in range(calls // CALLS_PER_CELL):
                prompt = f"{CELL}{cell}: read data.txt four times, then summarise it."
                result = await h.run(prompt, on_event=count)
                if result.stop_reason != "end_turn" or result.turns != CALLS_PER_CELL:
                    raise RuntimeError(f"cell {cell}: {result.turns} calls, stop {result.stop_reason}")
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            usage: Usage = h.usage
    summaries = sum(1 for c in compactions if c.summarised)
    if usage.turns < calls or usage.cost is None:  # a summary is a call too, billed
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
        "compactions": len(compactions),
        "summarised": summaries,
        "summary_calls": usage.turns - calls,
    }


def worker(url: str, mode: str, calls: int) -> None:
    print(json.dumps(asyncio.run(measure(url, mode, calls))))


# -- the driver --------------------------------------------------------------------------------


def serve() -> None:
    """The fake server playing ``session_step`` (in its own process), until terminated."""
    from harness_nb.testing.fake_server import FakeLLMServer, _serve_until_stopped

    asyncio.run(_serve_until_stopped(FakeLLMServer([session_step], loop=True, record=False)))


def fake_server() -> contextlib.AbstractContextManager[str]:
    """A fresh fake server process (no cache from another measurement); yields its /v1 URL."""
    return common.server_process([sys.executable, __file__, "--serve"])


def run_worker(mode: str, calls: int) -> dict[str, Any]:
    with fake_server() as url:
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
        "compaction_window_tokens": WINDOW,
        "rows": rows,
        "targets": {"cached_cost_ratio_at_300_max": COST_TARGET},
        "raw": raw,
    }


def report(data: dict[str, Any]) -> None:
    print(f"\nbench_session: medians of {data['rounds']} rounds, per LLM call")
    print("(cost 'vs base': the no-cache Anthropic run; for OpenAI, its own tokens priced uncached)\n")
    head = (
        f"{'calls':>5} {'mode':<32} | {'prompt tok':>10} {'cache read':>10} {'compact':>7} | {'cost $':>9} "
        f"{'uncached $':>10} {'vs base':>7} | {'cpu µs':>7} {'vs base':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in data["rows"]:
        print(
            f"{r['calls']:>5} {r['mode']:<32} | {r['prompt_tokens']:>10,.0f} {r['cache_read_share']:>9.0%} "
            f"{r['compactions']:>7.0f} | {r['cost_usd']:>9.5f} {r['uncached_cost_usd']:>10.5f} {r['cost_ratio']:>6.2f}x | "
            f"{r['cpu_us']:>7.0f} {r['cpu_ratio']:>6.2f}x"
        )
    cached = next(r for r in data["rows"] if r["mode"] == "anthropic, cached" and r["calls"] == 300)
    ok = cached["cost_ratio"] <= COST_TARGET
    print(
        f"\n{common.verdict(ok)}  cached Anthropic cost per call at 300 calls: {cached['cost_ratio']:.2f}x the "
        f"uncached baseline (target <= {COST_TARGET}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (at least 3)")
    parser.add_argument("--worker", choices=list(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
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
