"""An OpenAI-compatible server on loopback whose "model" is whoever answers its files.

    python relay.py DIR [--port 8031] [--timeout 3600] [--full-history]

It prints its base URL (``http://127.0.0.1:PORT/v1``) as its first line. For each
``POST /v1/chat/completions`` it writes, in DIR:

- ``req-NNNN.json``: the request body exactly as received;
- ``req-NNNN.txt``: the readable form (``conversation.render``): the conversation it
  continues and the agent it serves, its sizes, the system prompt and tools in full when
  the conversation first shows or changes them, the messages new since its previous
  request, and how to answer;
- a line in ``requests.jsonl`` (number, conversation, role, sizes: what ``summarise.py``
  reads); ``pending.txt`` lists the requests waiting now;

then waits for ``resp-NNNN.json`` (the form is in ``exchange.py``). An answer is checked
before it is sent; a bad one is not sent: ``resp-NNNN.error`` says what is wrong, and the
relay waits for a corrected ``resp-NNNN.json``. The answer goes back in Chat Completions
form, streamed as server-sent events when the request asks to stream. Several requests may
wait at once (subagents, background tasks, map rows), each for its own file.

A request ends without an answer when none comes within ``--timeout`` seconds (HTTP 504:
a forgotten answer cannot hang a run), when ``DIR/STOP`` exists (HTTP 503, and for every
later request too) or when the client hangs up; ``req-NNNN.closed`` then says which, and an
answer written later is ignored. ``timing.log`` has a line per request that ended: number,
conversation, outcome, seconds waited, answers refused. ``GET /v1/models`` reports the
model ``relay`` with a 128k window (vLLM's ``max_model_len``).

Standard library only, so any Python 3.11 runs it; it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from conversation import Conversations, Placed, image_saver, render
from exchange import ANSWER_FORMAT, Sizes, compact, completion_calls, messages_of, read_answer, tool_names, tools_of

WINDOW = 128_000
MODEL_ID = "relay"
MAX_BODY = 64 * 1024 * 1024  # a larger request body is refused (413)
POLL = 0.2  # seconds between looks at an answer file
STREAM_PIECE = 40  # characters of content per streamed chunk
UNANSWERED = {
    "timeout": "no answer within {timeout:g} s: the client got HTTP 504",
    "stopped": "the relay was stopped (STOP): the client got HTTP 503",
    "abandoned": "the client hung up before an answer came",
}


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class Relay:
    """The relay's state: its folder, the request counter, the conversations, what waits.
    Handler threads share it under ``lock``."""

    def __init__(self, directory: Path, *, timeout: float, full_history: bool = False) -> None:
        self.dir = directory
        self.timeout = timeout
        self.full_history = full_history
        self.lock = threading.Lock()
        self.conversations = Conversations()
        self.waiting: dict[int, tuple[str, str]] = {}  # number -> (conversation, since when)
        numbers = [
            int(m.group(1)) for p in directory.glob("req-*.json") if (m := re.fullmatch(r"req-(\d+)\.json", p.name))
        ]
        self.count = max(numbers, default=0)  # a restarted relay never overwrites earlier requests

    @property
    def stopped(self) -> bool:
        return (self.dir / "STOP").exists()

    def admit(self, raw: bytes, body: Mapping[str, Any]) -> tuple[int, Placed]:
        """Number a request, write its files and mark it waiting."""
        with self.lock:
            self.count += 1
            n = self.count
            placed = self.conversations.place(n, body)
            sizes = Sizes.of(body, raw)
            (self.dir / f"req-{n:04d}.json").write_bytes(raw)
            text = render(n, body, sizes, placed, image=image_saver(self.dir, n), full_history=self.full_history)
            write_atomic(self.dir / f"req-{n:04d}.txt", text)
            c = placed.conversation
            entry = {
                "n": n,
                "conversation": c.id,
                "role": c.role,
                "agent": c.agent,
                "parent": c.parent,
                "bytes": sizes.request,
                "tools_bytes": sizes.tools,
                "system_bytes": sizes.system,
                "tools": len(tool_names(tools_of(body))),
                "messages": len(messages_of(body)),
                "stream": bool(body.get("stream")),
            }
            with open(self.dir / "requests.jsonl", "a", encoding="utf-8") as index:
                index.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self.waiting[n] = (c.id, datetime.now().strftime("%H:%M:%S"))
            self._write_pending()
        return n, placed

    def wait(
        self, n: int, offered: Sequence[str], tool_choice: Any, gone: Callable[[], bool]
    ) -> tuple[str, dict[str, Any] | None, int]:
        """Wait for request ``n``'s answer: ``("answered", answer, refused)`` or
        ``(outcome, None, refused)`` with an outcome of ``UNANSWERED``; ``refused`` counts
        the bad answers written meanwhile. ``gone()`` says whether the client hung up."""
        path, error = self.dir / f"resp-{n:04d}.json", self.dir / f"resp-{n:04d}.error"
        deadline = time.monotonic() + self.timeout
        refused_version: tuple[int, int] | None = None
        refused = 0
        while True:
            try:
                stat = path.stat()
                version: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
            except FileNotFoundError:
                version = None
            if version is not None and version != refused_version:
                answer, problems = read_answer(path, offered, tool_choice)
                if answer is not None:
                    error.unlink(missing_ok=True)
                    return "answered", answer, refused
                if problems:
                    refused_version, refused = version, refused + 1
                    listed = "".join(f"- {p}\n" for p in problems)
                    again = f"Write a corrected resp-{n:04d}.json; req-{n:04d} is still waiting."
                    text = f"resp-{n:04d}.json was not sent to the model:\n{listed}{again}\nThe form: {ANSWER_FORMAT}\n"
                    write_atomic(error, text)
            if self.stopped:
                return "stopped", None, refused
            if time.monotonic() > deadline:
                return "timeout", None, refused
            if gone():
                return "abandoned", None, refused
            time.sleep(POLL)

    def finish(
        self, n: int, placed: Placed, outcome: str, waited: float, refused: int, answer: Mapping[str, Any] | None
    ) -> None:
        """Request ``n`` has ended: log it, and say why when it got no answer."""
        with self.lock:
            self.waiting.pop(n, None)
            placed.conversation.waiting = False
            if answer is not None:
                self.conversations.answered(placed.conversation, n, answer.get("tool_calls") or [])
            else:
                write_atomic(self.dir / f"req-{n:04d}.closed", UNANSWERED[outcome].format(timeout=self.timeout) + "\n")
            with open(self.dir / "timing.log", "a", encoding="utf-8") as log:
                log.write(f"req-{n:04d}\t{placed.conversation.id}\t{outcome}\t{waited:.1f}\trefused={refused}\n")
            self._write_pending()

    def _write_pending(self) -> None:
        lines = [f"req-{n:04d}\t{cid}\twaiting since {since}" for n, (cid, since) in sorted(self.waiting.items())]
        write_atomic(self.dir / "pending.txt", "".join(line + "\n" for line in lines))


class Handler(BaseHTTPRequestHandler):
    """Chat Completions and the model list, answered from the relay's files."""

    protocol_version = "HTTP/1.1"
    server: RelayServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Nothing: the files are the log."""

    def _json(self, code: int, obj: Any) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str, kind: str) -> None:
        self._json(code, {"error": {"message": message, "type": kind, "code": code}})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.rstrip("/").endswith("/models"):
            model = {"id": MODEL_ID, "object": "model", "owned_by": "relay", "max_model_len": WINDOW}
            return self._json(200, {"object": "list", "data": [model]})
        return self._error(404, f"no such endpoint: GET {self.path}", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        relay = self.server.relay
        try:
            length = int(self.headers.get("content-length") or -1)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            return self._error(
                413, f"the body must state its length, at most {MAX_BODY:,} bytes", "invalid_request_error"
            )
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._error(404, f"no such endpoint: POST {self.path}", "not_found")
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return self._error(400, f"the body is not JSON: {exc}", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._error(400, "the body must be an object with a 'messages' list", "invalid_request_error")
        if relay.stopped:
            return self._error(503, "the relay is stopped (STOP exists)", "server_error")
        n, placed = relay.admit(raw, body)
        start = time.monotonic()
        outcome, answer, refused = relay.wait(n, tool_names(tools_of(body)), body.get("tool_choice"), self._client_gone)
        relay.finish(n, placed, outcome, time.monotonic() - start, refused, answer)
        if answer is not None:
            try:
                self._answer(body, answer)
            except (BrokenPipeError, ConnectionResetError):  # it hung up as the answer went out
                self.close_connection = True
            return None
        if outcome == "timeout":
            return self._error(504, f"no answer to req-{n:04d} within {relay.timeout:g} s", "timeout")
        if outcome == "stopped":
            return self._error(503, "the relay is stopped (STOP exists)", "server_error")
        self.close_connection = True
        return None

    def _client_gone(self) -> bool:
        """Whether the client has closed its end: readable, with nothing to read."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _answer(self, body: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        content = answer.get("content") or ""
        calls = completion_calls(answer)
        finish = "tool_calls" if calls else "stop"
        prompt_tokens = len(compact(body)) // 4  # the usual 4 characters a token
        completion_tokens = max(1, len(compact(answer)) // 4)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        head = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "created": int(time.time()), "model": MODEL_ID}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return self._json(200, {**head, "object": "chat.completion", "choices": [choice], "usage": usage})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        chunks: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        chunks += [{"content": content[i : i + STREAM_PIECE]} for i in range(0, len(content), STREAM_PIECE)]
        chunks += [{"tool_calls": [{"index": i, **call}]} for i, call in enumerate(calls)]
        events: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in chunks
        ]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"choices": [], "usage": usage})
        for event in events:
            data = json.dumps({**head, "object": "chat.completion.chunk", **event}, ensure_ascii=False)
            self.wfile.write(b"data: " + data.encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        return None


class RelayServer(ThreadingHTTPServer):
    """One thread per request, so that many can wait at once."""

    daemon_threads = True

    def __init__(self, port: int, relay: Relay) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.relay = relay


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(
        description="An OpenAI-compatible server answered from files (see relay.py's docstring)."
    )
    parser.add_argument("dir", type=Path, help="the folder of request and answer files")
    parser.add_argument("--port", type=int, default=8031, help="port on 127.0.0.1; 0 picks a free one (default 8031)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="seconds a request waits for its answer, then HTTP 504 (default 3600)",
    )
    parser.add_argument(
        "--full-history", action="store_true", help="show every message in each readable request, not only the new ones"
    )
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    args.dir.mkdir(parents=True, exist_ok=True)
    server = RelayServer(args.port, Relay(args.dir, timeout=args.timeout, full_history=args.full_history))
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    print(f"relay: files in {args.dir}; a request waits at most {args.timeout:g} s", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
