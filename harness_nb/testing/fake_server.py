"""A fake LLM server on loopback HTTP, speaking OpenAI Chat Completions and Anthropic
Messages, streamed or not. For tests and benchmarks of the real HTTP providers.

It answers ``POST /v1/chat/completions`` and ``POST /v1/messages`` (also without
``/v1``) from a script of steps, one step per request, in order::

    {"text": "Looking.",                                    # the answer text
     "tool_calls": [{"name": "grep", "arguments": {"pattern": "x"}, "id": "call_1"}],
     "usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_tokens": 0,
               "cache_write_tokens": 0},   # optional: else estimated, with prompt caching
     "stop_reason": "end_turn",   # optional: end_turn | tool_use | max_tokens | refusal
     "omit_usage": True,          # optional: send no usage at all (as many local servers)
     "delay": 0.2,                # optional: seconds before answering
     "chunk_delay": 0.05}         # optional: seconds between a stream's events

    {"fault": "rate_limit", "retry_after": 0.1}   # 429, with Retry-After when given
    {"fault": "server_error"}                     # 500
    {"fault": "overloaded"}                       # 529 overloaded_error (503 on OpenAI paths)
    {"fault": "drop_mid_stream"}                  # part of a tool call, then the socket closes
    {"fault": "end_early", "text": "Hel"}         # a stream that ends cleanly, but without
                                                  # finish_reason / [DONE] / message_stop
    {"fault": "malformed_json"}                   # 200 whose body (or an SSE event) is not JSON
    {"fault": "unauthorized", "echo_key": True}   # 401, echoing the key the client sent
    {"raw": "<body>", "status": 200, "content_type": "text/event-stream"}   # sent verbatim

A step may also be a callable ``(request body) -> step``, for scripts that compute their
answer (a long session that answers every prompt with a tool call, say).

Without a scripted ``usage``, a prompt's tokens are its characters / 4, and prompt caching
is reported the way each API does (``fake_cache.py``): Anthropic reads and writes the
prefixes a request marks with ``cache_control``, OpenAI caches every prompt of 1,024
tokens or more by itself (``cache_min_tokens`` changes that minimum for both).

Streams fragment text and tool-call arguments over several events like the real APIs and
end with the usage chunk / ``message_stop``. Every model request is kept in ``requests``,
and every ``GET`` (``/v1/models``, ``/props``, ``/slots``) in ``info_requests`` (unless
``record=False``, as on the command line, where nobody could read them).

With ``context_window=N`` the server enforces a context window of N tokens, counted the
one deterministic way ``count_tokens`` does (a quarter of the characters of the request's
system prompt, messages and tools, as JSON — the same count its usage reports), and
answers a longer request as the real API does, without using a step: OpenAI's 400
``context_length_exceeded``, Anthropic's 400 ``prompt is too long: N tokens > M maximum``,
or, with ``server="llamacpp"``, llama.cpp's 400 ``exceed_context_size_error`` (with
``n_ctx``) and with ``server="vllm"`` vLLM's 400 naming the maximum. ``server`` also says
what ``GET /v1/models`` reports: vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx_train``
plus ``/props`` and ``/slots`` with ``n_ctx``; OpenAI's lists the model without a window.
``report_window=False`` makes those endpoints answer 404, so that a client only learns the
window from the error; ``info_failures=N`` makes the first N of them answer 500 (a server
that did not answer, rather than one that says nothing).

With ``strict=True`` the server is as particular as llama.cpp's: an assistant message with
``"content": null`` is answered with HTTP 500, and tools offered without ``tool_choice``
are ignored (the step's tool calls are not made; its text, or the calls written out as
text, is the answer), as llama-cpp-python does.

By default the script is one queue shared by every request. A step with ``"match": "text"``
is only taken by a request with that text in one of its user messages (once any step has a
``match``, each request takes the first unused step it matches). With ``per_conversation=True``
each request instead gets the step at its own conversation's position (the number of
assistant messages in its history), so several conversations at once each walk the script
from the start, however their requests interleave.

    async with FakeLLMServer(steps) as srv: ...            # on the running loop
    with FakeLLMServer(steps).in_thread() as srv: ...      # own thread, for sync code
    python -m harness_nb.testing.fake_server --port 0 --latency 0.1 --script s.json --loop \
        --per-conversation --cache-min-tokens 1024
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from .fake_answers import AnswerWriter, count_tokens, error_body, too_long_error, window_info
from .fake_cache import DEFAULT_MIN_TOKENS, PromptCache
from .fake_quirks import StreamTools, quirk_step

__all__ = ["FakeLLMServer", "ReceivedRequest", "count_tokens"]

_ROUTES = {"openai": "/chat/completions", "anthropic": "/messages"}
# fault: (status on OpenAI paths, status on Anthropic paths, error type, message)
_HTTP_FAULTS = {
    "rate_limit": (429, 429, "rate_limit_error", "Rate limit reached"),
    "server_error": (500, 500, "api_error", "Internal server error"),
    "overloaded": (503, 529, "overloaded_error", "Overloaded"),
    "unauthorized": (401, 401, "authentication_error", "Incorrect API key provided: {key}."),
}
_DROP_CALL = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello world"}}
_STREAM_HEADERS = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}


@dataclass
class ReceivedRequest:
    """A request the server received: ``body`` is the parsed JSON (or the text if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = None

    @property
    def api_key(self) -> str:
        """The key the client sent (``Authorization: Bearer`` or ``x-api-key``)."""
        bearer = self.headers.get("authorization", "").removeprefix("Bearer ")
        return self.headers.get("x-api-key") or bearer


@dataclass
class FakeLLMServer:
    """A loopback HTTP/1.1 server answering LLM API calls from ``steps`` (see module doc).

    ``latency`` delays every answer (a step's ``delay`` overrides it); ``loop`` cycles the
    script forever; ``per_conversation`` picks steps by the conversation's own turn count;
    ``strict`` rejects what llama.cpp rejects; ``context_window``, ``server`` and
    ``report_window`` enforce and report a context window (see the module doc);
    ``cache_min_tokens`` is the shortest prompt prefix its prompt cache keeps; ``tls`` (a
    server-side ``ssl.SSLContext``) serves HTTPS; ``stream_tools`` and ``system_blocks``
    reproduce what llama.cpp and LiteLLM do (``fake_quirks.py``). When the script runs out the server
    answers 400 saying so."""

    steps: Sequence[Mapping[str, Any] | Callable[[Any], Mapping[str, Any]]] = ()
    latency: float = 0.0
    loop: bool = False
    host: str = "127.0.0.1"
    port: int = 0
    per_conversation: bool = False
    strict: bool = False
    record: bool = True
    context_window: int | None = None
    server: Literal["openai", "vllm", "llamacpp"] = "openai"
    report_window: bool = True
    info_failures: int = 0
    cache_min_tokens: int = DEFAULT_MIN_TOKENS
    tls: ssl.SSLContext | None = None
    stream_tools: StreamTools = "ok"
    system_blocks: bool = True
    requests: list[ReceivedRequest] = field(default_factory=list)
    info_requests: list[ReceivedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script = list(self.steps)
        self._cursor = 0
        self._used: set[int] = set()  # steps taken, when steps have `match`
        self._writer = AnswerWriter(PromptCache(self.cache_min_tokens))
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https://`` with ``tls``)."""
        return f"{'https' if self.tls is not None else 'http'}://{self.host}:{self.port}"

    def add(self, *steps: Mapping[str, Any] | Callable[[Any], Mapping[str, Any]]) -> None:
        """Append steps to the script."""
        self._script.extend(steps)

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        return len(self._script) - self._cursor

    # -- lifetime ------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on ``host:port`` (port 0 picks a free one)."""
        self._server = await asyncio.start_server(self._connection, self.host, self.port, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        """Stop listening and end every open connection."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @contextlib.contextmanager
    def in_thread(self) -> Iterator[Self]:
        """Run the server on its own event loop in a thread, for sync code and benchmarks."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="fake-llm-server", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result()
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self.aclose(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    # -- HTTP ------------------------------------------------------------------------------

    def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Our own task (not asyncio's) so that aclose() can cancel and await it cleanly.
        task = asyncio.create_task(self._serve(reader, writer), name="fake-llm-connection")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read_request(reader)) is not None:
                if self.record:
                    (self.requests if request.method == "POST" else self.info_requests).append(request)
                if not await self._answer(request, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # the client went away or sent something that is not HTTP
        finally:
            writer.close()

    def _next_step(self, body: Any) -> Mapping[str, Any] | None:
        step = self._scripted_step(body)
        return step(body) if callable(step) else step

    def _scripted_step(self, body: Any) -> Any:
        if self.per_conversation:
            return self._conversation_step(body)
        if any(isinstance(step, Mapping) and "match" in step for step in self._script):
            return self._matching_step(body)
        if self._cursor >= len(self._script):
            if not (self.loop and self._script):
                return None
            self._cursor = 0
        step = self._script[self._cursor]
        self._cursor += 1
        return step

    def _matching_step(self, body: Any) -> Any:
        """The first unused step whose ``match`` (if any) is in one of the request's user
        messages: several conversations at once (a run and its subagents) each take their
        own steps, however their requests interleave."""
        messages = body.get("messages") if isinstance(body, dict) else None
        said = [m["content"] for m in messages or () if isinstance(m, dict) and m.get("role") == "user"]
        text = "\n".join(_texts(said))
        for index, step in enumerate(self._script):
            if index in self._used:
                continue
            if not isinstance(step, Mapping) or "match" not in step or str(step["match"]) in text:
                self._used.add(index)
                self._cursor = len(self._used)
                return step
        return None

    def _conversation_step(self, body: Any) -> Any:
        messages = body.get("messages") if isinstance(body, dict) else None
        turn = sum(
            1 for m in messages or () if isinstance(m, dict) and m.get("role") == "assistant"
        )
        if self.loop and self._script:
            turn %= len(self._script)
        if turn >= len(self._script):
            return None
        self._cursor = max(self._cursor, turn + 1)  # ``remaining``: steps no request reached
        return self._script[turn]

    async def _answer(self, request: ReceivedRequest, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; ``False`` when the connection must close."""
        path = request.path.split("?")[0].rstrip("/")
        api = next((a for a, suffix in _ROUTES.items() if path.endswith(suffix)), "")
        if request.method == "GET":
            info = window_info(path, self.server, self.context_window if self.report_window else None)
            if self.info_failures > 0:
                self.info_failures -= 1
                await _send_json(writer, 500, error_body("openai", "api_error", "loading the model"))
            elif info is None:
                await _send_json(writer, 404, error_body("openai", "not_found_error", f"no route {path}"))
            else:
                await _send_json(writer, 200, info)
            return True
        if not api or request.method != "POST":
            await _send_json(writer, 404, error_body(api, "not_found_error", f"no route {path}"))
            return True
        if self.context_window is not None and isinstance(request.body, dict):
            tokens = count_tokens(request.body)
            if tokens > self.context_window:
                flavour = api if api == "anthropic" else self.server
                await _send_json(writer, 400, too_long_error(flavour, tokens, self.context_window))
                return True
        body = request.body if isinstance(request.body, dict) else {}
        quirk = quirk_step(api, body, stream_tools=self.stream_tools, system_blocks=self.system_blocks)
        step = quirk if quirk is not None else self._next_step(request.body)
        if step is None:
            message = f"fake server: script exhausted after {len(self._script)} steps"
            await _send_json(writer, 400, error_body(api, "invalid_request_error", message))
            return True
        await asyncio.sleep(step.get("delay", self.latency))
        if self.strict and api == "openai":
            if _null_content(body):
                await _send_json(writer, 500, error_body(api, "server_error", _NULL_CONTENT))
                return True
            if body.get("tools") and "tool_choice" not in body:
                step = _without_tool_calls(step)
        fault = step.get("fault")
        if "raw" in step:
            await _send_raw(writer, step)
        elif fault in _HTTP_FAULTS:
            openai_status, anthropic_status, kind, message = _HTTP_FAULTS[fault]
            shown = request.api_key if step.get("echo_key", True) else "***"
            headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else {}
            status = anthropic_status if api == "anthropic" else openai_status
            await _send_json(writer, status, error_body(api, kind, message.format(key=shown)), headers)
        elif fault == "malformed_json" and body.get("stream"):
            name = "event: content_block_delta\n" if api == "anthropic" else ""
            await _send_events(writer, [name + 'data: {"delta": oops\n\n'])
        elif fault == "malformed_json":
            await _send_bytes(writer, 200, "application/json", b'{"id": "broken", "choices": [')
        elif fault == "drop_mid_stream":
            events = self._writer.events(api, {"tool_calls": step.get("tool_calls") or [_DROP_CALL]}, {})
            # The start of the message and of the tool call, up to its first argument piece;
            # then the connection closes without the chunked body's end.
            writer.write(_head(200, _STREAM_HEADERS))
            for event in events[: 3 if api == "openai" else 4]:
                writer.write(_chunk(event))
            await writer.drain()
            return False
        elif fault == "end_early":
            await _send_events(writer, self._writer.events(api, step, body, finished=False))
        elif fault is not None:
            raise ValueError(f"fake server: unknown fault {fault!r}")
        elif body.get("stream"):
            await _send_events(writer, self._writer.events(api, step, body), gap=step.get("chunk_delay", 0.0))
        else:
            await _send_json(writer, 200, self._writer.body(api, step, body))
        return True


def _texts(contents: Sequence[Any]) -> Iterator[str]:
    """The text of user messages: a string, or (Anthropic) the text blocks of a list."""
    for content in contents:
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            yield from (b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))


# What llama.cpp's server says (with HTTP 500) to an assistant message whose content is null.
_NULL_CONTENT = "Expected 'content' to be a string or an array"


def _null_content(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages") or []
    return any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("content", "") is None
        for m in messages
    )


def _without_tool_calls(step: Mapping[str, Any]) -> dict[str, Any]:
    """The answer a server that ignores ``tools`` gives: the model writes about the calls."""
    calls = step.get("tool_calls") or []
    text = step.get("text") or (json.dumps(calls) if calls else "")
    return {**step, "text": text, "tool_calls": [], "stop_reason": "end_turn"}


def _chunk(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _read_request(reader: asyncio.StreamReader) -> ReceivedRequest | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    data = await reader.readexactly(int(headers.get("content-length", "0")))
    try:
        body: Any = json.loads(data) if data else None
    except ValueError:
        body = data.decode("utf-8", "replace")
    return ReceivedRequest(method, target, headers, body)


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    reason = "Overloaded" if status == 529 else HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _send_bytes(
    writer: asyncio.StreamWriter, status: int, content_type: str, data: bytes,
    headers: Mapping[str, str] | None = None,
) -> None:
    fields = {"Content-Type": content_type, "Content-Length": str(len(data)), **(headers or {})}
    writer.write(_head(status, fields) + data)
    await writer.drain()


async def _send_json(
    writer: asyncio.StreamWriter, status: int, body: Any, headers: Mapping[str, str] | None = None
) -> None:
    await _send_bytes(writer, status, "application/json", json.dumps(body).encode(), headers)


async def _send_events(writer: asyncio.StreamWriter, events: Sequence[str | bytes], *, gap: float = 0.0) -> None:
    writer.write(_head(200, _STREAM_HEADERS))
    for number, event in enumerate(events):
        if gap and number:
            await asyncio.sleep(gap)
        writer.write(_chunk(event))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _send_raw(writer: asyncio.StreamWriter, step: Mapping[str, Any]) -> None:
    raw = step["raw"]
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    status = int(step.get("status", 200))
    content_type = str(step.get("content_type", "text/event-stream"))
    if content_type.startswith("text/event-stream") and status == 200:
        # Odd-sized pieces so that events and UTF-8 characters straddle network reads.
        await _send_events(writer, [data[i : i + 97] for i in range(0, len(data), 97)])
    else:
        await _send_bytes(writer, status, content_type, data, step.get("headers"))


# -- command line --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until interrupted; print the URL on the first line of output."""
    parser = argparse.ArgumentParser(description="A fake OpenAI / Anthropic API server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--script", type=Path, help="JSON list of steps (default: one greeting)")
    parser.add_argument("--loop", action="store_true", help="cycle the script forever")
    parser.add_argument(
        "--per-conversation",
        action="store_true",
        help="pick each step by the conversation's turn count, for concurrent conversations",
    )
    parser.add_argument(
        "--cache-min-tokens",
        type=int,
        default=DEFAULT_MIN_TOKENS,
        help="shortest prompt prefix the prompt cache keeps (tokens)",
    )
    args = parser.parse_args(argv)
    steps = json.loads(args.script.read_text()) if args.script else [{"text": "Hello."}]
    if isinstance(steps, dict):
        steps = steps["steps"]
    loop = args.loop or not args.script
    server = FakeLLMServer(
        steps,
        latency=args.latency,
        loop=loop,
        host=args.host,
        port=args.port,
        per_conversation=args.per_conversation,
        record=False,
        cache_min_tokens=args.cache_min_tokens,
    )
    asyncio.run(_serve_until_stopped(server))


async def _serve_until_stopped(server: FakeLLMServer) -> None:
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with server:
        print(server.url, flush=True)
        await stop.wait()


if __name__ == "__main__":
    main()
