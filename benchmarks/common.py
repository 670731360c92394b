"""What both benchmarks share: the fake server in a process of its own, the script it
plays, the bare httpx agent loop that the harness is compared with, and small statistics.

The bare loop does the work any agent must do and nothing else: POST the growing history
with the tool list, parse the answer (JSON, or the SSE stream through httpx-sse), append
the assistant message and one tool result per call, repeat until an answer has no tool
calls. It deliberately has no framework, no validation, no events and no retries.
"""

import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
MODEL = "bench-model"
API_KEY = "bench-key"
SYSTEM = "You are a benchmark agent. Call the echo tool when asked to, then report."
PROMPT = "Call echo once per step until the script says you are done."
ECHO_DESCRIPTION = "Return the text unchanged."
ECHO_TOOL = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": ECHO_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
    },
}
# About the size of a real small tool call: one sentence of text and a short argument.
ECHO_STEP = {
    "text": "Let me check that with the echo tool.",
    "tool_calls": [{"name": "echo", "arguments": {"text": "the quick brown fox jumps over the lazy dog " * 2}}],
}
FINAL_STEP = {"text": "Done: every step has been echoed."}
SETTLE_S = 1.2  # past sandbox.snapshot.RACY_NS (1 s): the project's files count as settled


def freeze_heap() -> None:
    """Collect, then freeze what the process holds out of the garbage collector's way, on
    every side alike, just before the clock starts. CPython runs a full collection when the
    objects promoted since the last one reach a quarter of those already old, and each full
    collection walks every object alive: without this, a side that imported more (the
    harness's modules against httpx alone) pays more and longer collections inside the
    clock, and the figure moves with what was imported rather than with the work measured
    (a notebook kernel holds far more than any side here: pandas, IPython, the user's data)."""
    gc.collect()
    gc.freeze()


def script(tool_turns: int) -> list[dict[str, Any]]:
    """``tool_turns`` answers that call ``echo``, then one final answer."""
    return [ECHO_STEP] * tool_turns + [FINAL_STEP]


@contextlib.contextmanager
def fake_server(steps: Sequence[dict[str, Any]], *, latency: float = 0.0) -> Iterator[str]:
    """Run the fake LLM server in its own process (so its CPU is not the client's), one
    step per conversation turn; yield its ``/v1`` base URL. Stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="bench-script-") as tmp:
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(list(steps)))
        command = [
            sys.executable, "-m", "harness_nb.testing.fake_server", "--host", "127.0.0.1", "--port", "0",
            "--latency", str(latency), "--script", str(path), "--loop", "--per-conversation",
        ]
        with server_process(command) as url:
            yield url


@contextlib.contextmanager
def server_process(command: Sequence[str]) -> Iterator[str]:
    """Run a fake server ``command`` (it prints its URL as its first line) in a process of
    its own; yield its ``/v1`` base URL. Stopped on exit."""
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, text=True, cwd=ROOT, env=child_env())
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fake server did not start (said {url!r})")
        yield url + "/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def child_env() -> dict[str, str]:
    """The environment for child processes: the repo importable, no real keys or URLs, and
    bytecode written and read as for an installed package (with PYTHONDONTWRITEBYTECODE,
    which this machine sets, every process compiled each module it imported from source,
    those imported inside a clock too)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def echo(text: str) -> str:
    """The bare loop's tool."""
    return text


def echo_tool(*, read_only: bool = True) -> Any:
    """The harness's tool: the same function as a harness_nb tool (imported only here, so
    that the bare loop's processes never import harness_nb). Not ``read_only``, it is a tool
    that could change files, as most of a notebook's are: the permission hook judges it and
    the workdir is checkpointed around each call."""
    from harness_nb.tools import ToolContext, tool

    async def echo_(ctx: ToolContext, text: str) -> str:
        return echo(text)

    echo_.__doc__ = ECHO_DESCRIPTION
    return tool(echo_, name="echo", read_only=read_only)


@contextlib.contextmanager
def notebook_project() -> Iterator[Path]:
    """A notebook project (``notebook_workdir``) in a temporary folder, with a HOME of its
    own beside it (the checkpoint store, the user's agent and skill folders): the figures do
    not depend on what this machine's home holds, and nothing is left in it.

    Yielded once its files are older than a checkpoint's racy window, as a project's files
    are when an agent starts on it: a file changed within a second of a snapshot is read
    again by the next one (``sandbox/snapshot.py``), so a project made a moment ago would
    have every file read on every call."""
    with tempfile.TemporaryDirectory(prefix="bench-project-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        old = os.environ.get("HOME")
        os.environ["HOME"] = str(home)
        try:
            workdir = notebook_workdir(Path(tmp))
            time.sleep(SETTLE_S)
            yield workdir
        finally:
            if old is not None:
                os.environ["HOME"] = old


def notebook_workdir(root: Path, name: str = "project") -> Path:
    """A small notebook project under ``root``, as a full ``Harness`` meets one: a notebook,
    data, code, a ``.env`` with a key, AGENTS.md and a project skill (40-odd files)."""
    workdir = root / name
    (workdir / "data").mkdir(parents=True)
    (workdir / "src").mkdir()
    (workdir / "AGENTS.md").write_text("# Project notes\n\nThe data is monthly sales; keep notebooks small.\n")
    (workdir / ".env").write_text("OPENAI_API_KEY=sk-bench-0123456789abcdefghijklmnopqrstuvwxyz\n")
    (workdir / "analysis.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    for n in range(12):
        rows = "\n".join(f"2024-{m:02d},{n},{m * 100 + n}" for m in range(1, 13))
        (workdir / "data" / f"sales_{n}.csv").write_text(f"month,region,amount\n{rows}\n")
    for n in range(24):
        (workdir / "src" / f"module_{n}.py").write_text(f'"""Module {n}."""\n\n\ndef f_{n}(x):\n    return x * {n}\n' * 8)
    skill = workdir / ".claude" / "skills" / "summarise"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: summarise\ndescription: Summarise a CSV file's columns and ranges.\n---\n\nRead the file, then report.\n"
    )
    return workdir


def bare_client(base_url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=httpx.Timeout(60.0)
    )


async def bare_conversation(
    client: httpx.AsyncClient, *, stream: bool, system: str = SYSTEM, tools: Sequence[dict[str, Any]] = (ECHO_TOOL,)
) -> int:
    """One agent conversation by hand; returns the number of LLM calls it made. ``system``
    and ``tools`` are what it sends (the full harness's, to compare with a ``Harness``)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": PROMPT}]
    calls = 0
    while True:
        body: dict[str, Any] = {"model": MODEL, "messages": messages, "tools": list(tools)}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
            message = await _streamed_message(client, body)
        else:
            response = await client.post("/chat/completions", json=body)
            response.raise_for_status()
            message = response.json()["choices"][0]["message"]
        calls += 1
        tool_calls = message.get("tool_calls") or []
        assistant: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if tool_calls:
            assistant["tool_calls"] = tool_calls
        messages.append(assistant)
        if not tool_calls:
            return calls
        for call in tool_calls:
            arguments = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": echo(**arguments)})


async def _streamed_message(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async with aconnect_sse(client, "POST", "/chat/completions", json=body) as source:
        source.response.raise_for_status()
        async for sse in source.aiter_sse():
            if sse.data == "[DONE]":
                # Read on to the end of the body rather than break: a response closed
                # early closes its connection, and the next call would pay for a new one.
                continue
            chunk = json.loads(sse.data)
            for choice in chunk["choices"]:
                delta = choice["delta"]
                if delta.get("content"):
                    text.append(delta["content"])
                for fragment in delta.get("tool_calls") or []:
                    call = calls.setdefault(
                        fragment["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                    call["id"] = call["id"] or fragment.get("id", "")
                    function = fragment.get("function") or {}
                    call["function"]["name"] += function.get("name") or ""
                    call["function"]["arguments"] += function.get("arguments") or ""
    return {"content": "".join(text), "tool_calls": [calls[i] for i in sorted(calls)]}


def environment() -> dict[str, Any]:
    """What the figures depend on, for the results file."""
    import importlib.metadata
    import importlib.util
    import platform

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        # Other work on the machine skews every figure; ratios suffer least.
        "load_average_1m": round(os.getloadavg()[0], 2),
        "httpx": importlib.metadata.version("httpx"),
        "httpcore": importlib.metadata.version("httpcore"),
        "pydantic": importlib.metadata.version("pydantic"),
        # httpcore tries ``import sniffio`` on every request; when it is missing the failed
        # import searches sys.path each time, which costs both loops alike (see README).
        "sniffio_installed": importlib.util.find_spec("sniffio") is not None,
    }


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def write_json(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"
