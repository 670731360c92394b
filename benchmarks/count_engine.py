"""Instructions per LLM call of the engine, of the full harness and of their bare loops, counted by valgrind.

    python benchmarks/count_engine.py            # bare and engine, plain and streamed (~3 min)
    python benchmarks/count_engine.py --side engine --mode plain
    python benchmarks/count_engine.py --side bare-full --side harness   # the full Harness (~5 min)

On a machine shared with other work, timing moves by more than a change of a few %: the
bare loop's own CPU per call moved between 880 and 1,900 µs from one ``bench_engine`` run to
the next. The instructions a process executes do not move with the load. Each side here
runs in a process of its own, with no sockets: its provider (or its httpx client) gets an
``httpx.MockTransport`` replaying answers recorded once from the fake server, so the HTTP
stack they share is skipped and what is left is each side's own work. ``cachegrind
--cache-sim=no`` counts a run of 2 and a run of 10 conversations of 20 tool turns (after one
untimed each, hash seed fixed); the difference over the 168 calls between them is the
figure, the same to a few instructions from run to run. ``harness`` is the full ``Harness`` on
a notebook project, as in ``bench_engine.py``, and ``bare-full`` its bare loop sending the same
system prompt and tools (captured from the harness's first request). It counts work, not time: cache
misses and system calls are not in it, so it tells whether a change removed work, and
``bench_engine.py`` still says what a call costs.
"""

import argparse
import asyncio
import contextlib
import json
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import httpx  # noqa: E402

TURNS = 20
FEW, MANY = 2, 10  # conversations counted; the figure is the difference per call
SIDES = ("bare", "engine", "bare-full", "harness")
PAIRS = {"engine": "bare", "harness": "bare-full"}  # a harness side -> the bare loop it is compared with
MODELS = {"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "fake"}]}
Recorded = list[tuple[int, list[tuple[str, str]], bytes]]


async def record(url: str, stream: bool) -> Recorded:
    """The answers of one bare conversation with the fake server, as status, headers, body."""
    answers: Recorded = []
    inner = httpx.AsyncHTTPTransport()

    class Recording(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await inner.handle_async_request(request)
            body = await response.aread()
            kept = [(k, v) for k, v in response.headers.items() if k.lower() not in ("content-length", "transfer-encoding")]
            answers.append((response.status_code, kept, body))
            return httpx.Response(response.status_code, headers=response.headers, content=body)

    async with httpx.AsyncClient(base_url=url, transport=Recording()) as client:
        await common.bare_conversation(client, stream=stream)
    return answers


def replay(answers: Recorded) -> httpx.MockTransport:
    """A transport answering each POST with the next recorded answer (in a loop), and the
    provider's question for its context window with a model list that names none."""
    sent = 0

    def answer(request: httpx.Request) -> httpx.Response:
        nonlocal sent
        if request.method == "GET":
            return httpx.Response(200, json=MODELS) if request.url.path.endswith("/models") else httpx.Response(404)
        status, headers, body = answers[sent % len(answers)]
        sent += 1
        return httpx.Response(status, headers=headers, content=body)

    return httpx.MockTransport(answer)


def conversation(
    side: str, answers: Recorded, stream: bool, wire: dict[str, Any] | None = None, workdir: Path | None = None
) -> Callable[[], Awaitable[int]]:
    """One conversation of ``side`` (``bare``, ``engine``, ``bare-full`` or ``harness``, as in
    ``bench_engine.py``; ``bare-full`` sends the harness's ``wire``, ``harness`` works in ``workdir``)."""
    if side in ("bare", "bare-full"):
        client = httpx.AsyncClient(base_url="http://fake/v1", transport=replay(answers), timeout=httpx.Timeout(60.0))
        request = {"system": wire["system"], "tools": wire["tools"]} if side == "bare-full" and wire else {}
        return lambda: common.bare_conversation(client, stream=stream, **request)
    from harness_nb.engine import AgentEngine, Limits, PromptBuilder
    from harness_nb.providers.factory import create_provider
    from harness_nb.tools import ToolRegistry

    provider = create_provider(
        f"openai-compatible/{common.MODEL}", base_url="http://fake/v1", api_key=common.API_KEY,
        streaming=stream, transport=replay(answers),
    )  # fmt: skip
    if side == "harness":
        assert workdir is not None
        return harness_conversation(provider, workdir)
    tools = ToolRegistry([common.echo_tool()])

    async def run() -> int:
        prompt = PromptBuilder(common.SYSTEM, workdir=Path.cwd(), environment=False)
        engine = AgentEngine(provider, tools, prompt_builder=prompt, limits=Limits(max_turns=TURNS + 1, max_repeated_calls=None))
        result = await engine.run(common.PROMPT)
        if result.tool_calls != TURNS:
            raise RuntimeError(f"unexpected run: {result.tool_calls} tool calls")
        return result.turns

    return run


def harness_conversation(provider: Any, workdir: Path) -> Callable[[], Awaitable[int]]:
    """A conversation of the full ``Harness`` as ``bench_engine.py`` builds it, on ``provider``."""
    from harness_nb import Harness

    harness = Harness(
        provider, workdir=workdir, extra_tools=[common.echo_tool()], max_turns=TURNS + 1, max_repeated_calls=0
    )

    async def run() -> int:
        harness.new_conversation()
        result = await harness.run(common.PROMPT)
        if result.tool_calls != TURNS:
            raise RuntimeError(f"unexpected run: {result.tool_calls} tool calls")
        return result.turns

    return run


async def counted(side: str, answers_file: Path, stream: bool, conversations: int) -> None:
    """What runs under valgrind: one untimed conversation, then ``conversations``."""
    recorded = pickle.loads(answers_file.read_bytes())
    wire = json.loads(answers_file.with_suffix(".wire").read_text()) if side == "bare-full" else None
    with common.notebook_project() if side == "harness" else contextlib.nullcontext() as workdir:
        run = conversation(side, recorded, stream, wire, workdir)
        await run()
        common.freeze_heap()
        for _ in range(conversations):
            await run()


def instructions(side: str, answers_file: Path, stream: bool, conversations: int) -> int:
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
        sys.executable, __file__, "--counted", side, "--answers", str(answers_file), "--conversations", str(conversations),
    ]  # fmt: skip
    if stream:
        command.append("--stream")
    env = {**common.child_env(), "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env, timeout=600)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", choices=SIDES, action="append", help="default: bare and engine")
    parser.add_argument("--mode", choices=("plain", "stream"), action="append", help="default: both")
    parser.add_argument("--counted", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--answers", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--conversations", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.counted:
        asyncio.run(counted(args.counted, args.answers, args.stream, args.conversations))
        return
    if shutil.which("valgrind") is None:
        parser.error("valgrind is needed (apt-get install valgrind)")
    sides, modes = args.side or ["bare", "engine"], args.mode or ["plain", "stream"]
    figures: dict[str, Any] = {}
    # bytecode first: a module compiled inside the smaller run would lower the figure by its cost
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(common.ROOT / "harness_nb")], check=True)
    with tempfile.TemporaryDirectory(prefix="count-engine-") as tmp:
        with common.fake_server(common.script(TURNS)) as url:
            for mode in modes:
                (Path(tmp) / mode).write_bytes(pickle.dumps(asyncio.run(record(url, mode == "stream"))))
        if "bare-full" in sides:
            from bench_engine import capture_wire

            for mode in modes:
                (Path(tmp) / mode).with_suffix(".wire").write_text(json.dumps(asyncio.run(capture_wire(TURNS))))
        calls = (MANY - FEW) * (TURNS + 1)
        for mode in modes:
            for side in sides:
                few, many = (instructions(side, Path(tmp) / mode, mode == "stream", n) for n in (FEW, MANY))
                figures[f"{side}/{mode}"] = per_call = (many - few) // calls
                print(f"{side:<7} {mode:<6} {per_call:>12,} instructions per LLM call", flush=True)
    for mode in modes:
        for side, bare in PAIRS.items():
            if {side, bare} <= set(sides):
                ratio = figures[f"{side}/{mode}"] / figures[f"{bare}/{mode}"]
                print(f"{side} / {bare}, {mode}: {ratio:.3f}x")
    data = {"turns": TURNS, "instructions_per_call": figures, "python": sys.version.split()[0]}
    path = common.write_json("count_engine.json", data)
    print(f"wrote {path.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
