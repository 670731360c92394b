"""A fake of the vendors' batch APIs on loopback HTTP, as their references describe them:
OpenAI's Batch API (files and batches) and Anthropic's Message Batches. For tests of
``h.map(..., mode="batch")`` through the real HTTP providers.

OpenAI (paths with or without ``/v1``):

- ``POST /files`` takes a multipart upload (``purpose=batch``, a JSONL ``file``);
  ``GET /files/{id}/content`` gives a file back (an input, output or error file).
- ``POST /batches`` (``input_file_id``, ``endpoint: /v1/chat/completions``,
  ``completion_window: 24h``, ``metadata``) makes a batch in ``validating``. Its file is
  checked as OpenAI does: a line that is not JSON, lacks a ``custom_id`` (or repeats one),
  is not ``POST`` to the batch's endpoint or has no body ends the batch ``failed`` at the
  first poll, with ``errors.data`` naming the line; so does a file over ``max_requests``.
- ``GET /batches/{id}`` moves it on (see *Progress*); ``POST /batches/{id}/cancel`` makes it
  ``cancelling``, then ``cancelled`` at the next poll. An ended batch has an
  ``output_file_id`` (lines ``{"id", "custom_id", "response": {"status_code": 200,
  "request_id", "body"}, "error": null}``) and an ``error_file_id`` (a refused request with
  its status and error body; one that never ran with ``error: {"code": "batch_expired" or
  "batch_cancelled", "message"}``), each only when it has lines.

Anthropic:

- ``POST /v1/messages/batches`` (``{"requests": [{"custom_id", "params"}]}``) checks the
  requests (1 to ``max_requests``, each ``custom_id`` 1–64 of ``[A-Za-z0-9_-]`` and
  unique, ``params`` an object with ``model``, ``max_tokens`` and ``messages``, no
  ``stream``) and answers 400 ``invalid_request_error`` otherwise, else a batch
  ``in_progress``.
- ``GET /v1/messages/batches/{id}`` moves it on; once ``ended`` it has ``results_url``.
- ``GET /v1/messages/batches/{id}/results`` (400 before it has ended) gives JSONL lines
  ``{"custom_id", "result": {"type": "succeeded", "message"}}``, ``errored`` (with
  ``error: {"type": "error", "error": {"type", "message"}}``), ``canceled``, ``expired``.
- ``POST /v1/messages/batches/{id}/cancel`` makes it ``canceling``, ``ended`` at the next poll.

What a request answers: ``answer(api, body)`` gives a step, as ``FakeLLMServer``'s script
does (``{"text": …, "tool_calls": …, "usage": …, "stop_reason": …}``), or
``{"error": "why", "status": 400}`` (the vendor refuses that request) or ``{"expire":
True}`` (it never runs: the batch's 24 hours run out first, and the batch ends
``expired`` with the answers of the others).

Faults: ``failing_polls=N`` makes the next N polls answer HTTP 500; ``junk=True`` starts
every results file with a line that is not JSON and one without a ``custom_id``;
``results_host`` puts Anthropic's ``results_url`` on another host (the results stay served
here).

Progress: each poll of a batch in progress runs ``ceil(requests / polls)`` more of its
requests, in order, so the counts grow poll by poll; when none is left it ends (OpenAI
through one poll of ``finalizing``). With ``polls=0`` a batch has ended at its first
poll. Every request the server receives is kept in ``requests``; ``created`` counts the
batches made (a map that resumes must make none).

    async with FakeBatchServer(answer=answer, polls=2) as srv: ...
    with FakeBatchServer(answer=answer).in_thread() as srv: ...   # own thread (a kernel test)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .fake_answers import error_body
from .fake_server import FakeLLMServer, ReceivedRequest, _send_bytes, _send_json

__all__ = ["FakeBatchServer"]

Api = Literal["openai", "anthropic"]
Step = Mapping[str, Any]
OPENAI_MAX_REQUESTS = 50_000
ANTHROPIC_MAX_REQUESTS = 100_000
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_OPENAI_ENDPOINT = "/v1/chat/completions"


def _answer_ok(api: str, body: Any) -> Step:
    return {"text": "ok"}


@dataclass
class _Request:
    custom_id: str
    body: dict[str, Any]
    outcome: str = "waiting"  # waiting, succeeded, errored, expired, cancelled
    line: dict[str, Any] | None = None  # its results line, once it has one
    expires: bool = False  # its step says it never runs: it waits until the batch ends


@dataclass
class _Batch:
    api: Api
    id: str
    requests: list[_Request]
    created: int
    status: str
    problems: list[dict[str, Any]] = field(default_factory=list)  # a refused file's errors
    endpoint: str = _OPENAI_ENDPOINT
    input_file_id: str = ""
    metadata: Any = None
    polls: int = 0
    cancelling: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None
    ended_at: int | None = None


@dataclass
class FakeBatchServer(FakeLLMServer):
    """``FakeLLMServer`` (its online answers, lifetime, ``in_thread``) that also fakes both
    vendors' batch APIs (see the module doc): ``answer`` says what each batch request
    answers, ``polls`` how many polls a batch takes to run its requests, ``max_requests``
    overrides the vendors' bound of a batch; ``failing_polls``, ``junk`` and
    ``results_host`` are faults. Its POSTs are kept in ``requests``, its GETs in
    ``info_requests``; ``calls`` looks through both."""

    answer: Callable[[str, Any], Step] = _answer_ok
    polls: int = 1
    max_requests: int | None = None
    failing_polls: int = 0
    junk: bool = False
    results_host: str | None = None
    batches: dict[str, _Batch] = field(default_factory=dict)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # id: (purpose, content)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._ids = itertools.count(1)

    @property
    def created(self) -> int:
        """Batches made (of either vendor)."""
        return len(self.batches)

    def calls(self, method: str, pattern: str) -> list[ReceivedRequest]:
        """The requests received of ``method`` whose path (query left out) matches ``pattern``."""
        received = self.requests if method == "POST" else self.info_requests
        return [r for r in received if r.method == method and re.search(pattern, r.path.split("?")[0])]

    async def _answer(self, request: ReceivedRequest, writer: asyncio.StreamWriter) -> bool:
        """A batch API's request here; any other as ``FakeLLMServer`` answers it."""
        routed = self._route(request)
        if routed is None:
            return await super()._answer(request, writer)
        status, body = routed
        if isinstance(body, bytes):
            await _send_bytes(writer, status, "application/jsonl", body)
        else:
            await _send_json(writer, status, body)
        return True

    # -- routes ----------------------------------------------------------------------------

    def _route(self, request: ReceivedRequest) -> tuple[int, Any] | None:
        """The status and body answering a batch API's request; ``None``: not one."""
        path = request.path.split("?")[0].rstrip("/").removeprefix("/v1")
        method = request.method
        parts = path.strip("/").split("/")
        if parts[:2] == ["messages", "batches"]:
            return self._anthropic(method, parts[2:], request)
        if parts[0] == "files":
            return self._files(method, parts[1:], request)
        if parts[0] == "batches":
            return self._openai(method, parts[1:], request)
        return None

    def _files(self, method: str, rest: list[str], request: ReceivedRequest) -> tuple[int, Any]:
        if method == "POST" and not rest:
            fields = _multipart(request)
            if fields is None or "file" not in fields:
                return 400, error_body("openai", "invalid_request_error", "expected a multipart upload with a file")
            if fields.get("purpose") != b"batch":
                return 400, error_body("openai", "invalid_request_error", "purpose must be one of: batch, …")
            file_id = f"file-fake{next(self._ids)}"
            self.files[file_id] = ("batch", fields["file"])
            return 200, {
                "id": file_id, "object": "file", "bytes": len(fields["file"]), "created_at": int(time.time()),
                "filename": fields.get("filename", b"").decode(), "purpose": "batch",
            }
        if method == "GET" and len(rest) == 2 and rest[1] == "content" and rest[0] in self.files:
            return 200, self.files[rest[0]][1]
        return 404, error_body("openai", "not_found_error", f"no file {'/'.join(rest)}")

    def _openai(self, method: str, rest: list[str], request: ReceivedRequest) -> tuple[int, Any]:
        if method == "POST" and not rest:
            return self._openai_create(request.body)
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "openai":
            return 404, error_body("openai", "not_found_error", f"No batch found with id '{rest[0] if rest else ''}'.")
        if method == "GET" and len(rest) == 1:
            if self._failing():
                return 500, error_body("openai", "server_error", "The server had an error processing your request.")
            self._openai_poll(batch)
            return 200, self._openai_object(batch)
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch.status not in ("validating", "in_progress", "finalizing"):
                return 400, error_body("openai", "invalid_request_error", f"Cannot cancel a batch with status '{batch.status}'.")
            batch.status, batch.cancelling = "cancelling", True
            return 200, self._openai_object(batch)
        return 404, error_body("openai", "not_found_error", "no such route")

    def _openai_create(self, body: Any) -> tuple[int, Any]:
        body = body if isinstance(body, dict) else {}
        file = self.files.get(str(body.get("input_file_id")))
        if file is None:
            return 400, error_body("openai", "invalid_request_error", "No file found with the given input_file_id")
        if body.get("endpoint") != _OPENAI_ENDPOINT or body.get("completion_window") != "24h":
            return 400, error_body("openai", "invalid_request_error", "endpoint and completion_window are not supported")
        batch = _Batch("openai", f"batch_fake{next(self._ids)}", [], int(time.time()), "validating")
        batch.input_file_id, batch.metadata = str(body["input_file_id"]), body.get("metadata")
        seen: set[str] = set()
        for number, raw in enumerate(file[1].splitlines(), start=1):
            if not raw.strip():
                continue
            line, problem = _openai_line(raw, seen)
            if problem is not None:
                batch.problems.append({"code": "invalid_request", "message": problem, "param": None, "line": number})
                continue
            seen.add(line["custom_id"])
            batch.requests.append(_Request(line["custom_id"], line["body"]))
        most = self.max_requests or OPENAI_MAX_REQUESTS
        if len(batch.requests) > most:
            batch.problems.append({"code": "too_many_requests", "message": f"The batch has more than {most} requests.", "line": None})
        self.batches[batch.id] = batch
        return 200, self._openai_object(batch)

    def _openai_poll(self, batch: _Batch) -> None:
        """One poll's worth of progress (see the module doc)."""
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return
        if batch.status == "validating" and batch.problems:
            batch.status, batch.ended_at = "failed", int(time.time())
            return
        if batch.cancelling:
            self._end(batch, "cancelled")
            return
        if batch.status == "finalizing":
            self._end(batch, "expired" if any(r.expires for r in batch.requests) else "completed")
            return
        batch.status = "in_progress"
        self._run_some(batch)
        if not _runnable(batch):
            batch.status = "finalizing"
            if self.polls == 0:
                self._openai_poll(batch)

    def _openai_object(self, batch: _Batch) -> dict[str, Any]:
        done = sum(1 for r in batch.requests if r.outcome == "succeeded")
        failed = sum(1 for r in batch.requests if r.outcome not in ("waiting", "succeeded"))
        ended = batch.ended_at
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint,
            "errors": {"object": "list", "data": batch.problems} if batch.problems else None,
            "input_file_id": batch.input_file_id, "completion_window": "24h", "status": batch.status,
            "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            "created_at": batch.created, "in_progress_at": batch.created if batch.polls else None,
            "expires_at": batch.created + 86_400,
            "completed_at": ended if batch.status == "completed" else None,
            "failed_at": ended if batch.status == "failed" else None,
            "expired_at": ended if batch.status == "expired" else None,
            "cancelled_at": ended if batch.status == "cancelled" else None,
            "request_counts": {"total": len(batch.requests), "completed": done, "failed": failed},
            "metadata": batch.metadata,
        }

    def _anthropic(self, method: str, rest: list[str], request: ReceivedRequest) -> tuple[int, Any]:
        if method == "POST" and not rest:
            return self._anthropic_create(request.body)
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "anthropic":
            return 404, error_body("anthropic", "not_found_error", "Message batch not found.")
        if method == "GET" and len(rest) == 1:
            if self._failing():
                return 500, error_body("anthropic", "api_error", "Internal server error")
            self._anthropic_poll(batch)
            return 200, self._anthropic_object(batch)
        if method == "GET" and rest[1:] == ["results"]:
            if batch.status != "ended":
                return 400, error_body("anthropic", "invalid_request_error", f"Message batch {batch.id} has not ended.")
            return 200, self._jsonl([r.line for r in batch.requests])
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch.status == "ended":
                return 400, error_body("anthropic", "invalid_request_error", "Message batch has already ended.")
            batch.status, batch.cancelling = "canceling", True
            return 200, self._anthropic_object(batch)
        return 404, error_body("anthropic", "not_found_error", "no such route")

    def _anthropic_create(self, body: Any) -> tuple[int, Any]:
        requests = body.get("requests") if isinstance(body, dict) else None
        most = self.max_requests or ANTHROPIC_MAX_REQUESTS
        if not isinstance(requests, list) or not 1 <= len(requests) <= most:
            return 400, error_body("anthropic", "invalid_request_error", f"requests: between 1 and {most} items")
        seen: set[str] = set()
        batch = _Batch("anthropic", f"msgbatch_fake{next(self._ids)}", [], int(time.time()), "in_progress")
        for number, item in enumerate(requests):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            params = item.get("params") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id) or custom_id in seen:
                return 400, error_body("anthropic", "invalid_request_error", f"requests.{number}.custom_id: invalid or repeated")
            if not isinstance(params, dict) or not all(k in params for k in ("model", "max_tokens", "messages")):
                return 400, error_body("anthropic", "invalid_request_error", f"requests.{number}.params: model, max_tokens and messages are required")
            if params.get("stream"):
                return 400, error_body("anthropic", "invalid_request_error", f"requests.{number}.params.stream: not supported in a batch")
            seen.add(custom_id)
            batch.requests.append(_Request(custom_id, params))
        self.batches[batch.id] = batch
        return 200, self._anthropic_object(batch)

    def _anthropic_poll(self, batch: _Batch) -> None:
        if batch.status == "ended":
            return
        if batch.cancelling:
            self._end(batch, "cancelled")
            return
        self._run_some(batch)
        if not _runnable(batch):
            self._end(batch, "expired" if any(r.expires for r in batch.requests) else "completed")

    def _anthropic_object(self, batch: _Batch) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        word = {"waiting": "processing", "succeeded": "succeeded", "errored": "errored", "cancelled": "canceled", "expired": "expired"}
        for r in batch.requests:
            counts[word[r.outcome]] += 1
        if batch.status != "ended":  # what has run shows only once the batch has ended
            counts = {"processing": len(batch.requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        stamp = _rfc3339
        return {
            "id": batch.id, "type": "message_batch", "processing_status": batch.status, "request_counts": counts,
            "ended_at": stamp(batch.ended_at), "created_at": stamp(batch.created),
            "expires_at": stamp(batch.created + 86_400), "archived_at": None,
            "cancel_initiated_at": stamp(batch.created) if batch.cancelling else None,
            "results_url": (
                f"http://{self.results_host or f'{self.host}:{self.port}'}/v1/messages/batches/{batch.id}/results"
                if batch.status == "ended" else None
            ),
        }

    # -- running requests ------------------------------------------------------------------

    def _run_some(self, batch: _Batch) -> None:
        """Run the next ``ceil(n / polls)`` waiting requests (all of them with ``polls=0``);
        one whose step says ``expire`` stays waiting, to expire when the batch ends."""
        batch.polls += 1
        share = len(batch.requests) if self.polls <= 0 else math.ceil(len(batch.requests) / self.polls)
        for request in [r for r in batch.requests if r.outcome == "waiting" and not r.expires][:share]:
            self._run(batch, request)

    def _run(self, batch: _Batch, request: _Request) -> None:
        step = self.answer(batch.api, request.body)
        if step.get("expire"):
            request.expires = True
            return
        if "error" in step:
            request.outcome = "errored"
            kind, status = "invalid_request_error", int(step.get("status", 400))
            if batch.api == "anthropic":
                error = {"type": "errored", "error": error_body("anthropic", kind, str(step["error"]))}
                request.line = {"custom_id": request.custom_id, "result": error}
            else:
                response = {"status_code": status, "request_id": f"req_fake{next(self._ids)}",
                            "body": error_body("openai", kind, str(step["error"]))}
                request.line = {"id": f"batch_req_fake{next(self._ids)}", "custom_id": request.custom_id,
                                "response": response, "error": None}
            return
        body = self._writer.body(batch.api, step, request.body)
        request.outcome = "succeeded"
        if batch.api == "anthropic":
            request.line = {"custom_id": request.custom_id, "result": {"type": "succeeded", "message": body}}
        else:
            response = {"status_code": 200, "request_id": f"req_fake{next(self._ids)}", "body": body}
            request.line = {"id": f"batch_req_fake{next(self._ids)}", "custom_id": request.custom_id,
                            "response": response, "error": None}

    def _not_run(self, batch: _Batch, request: _Request, why: str) -> dict[str, Any]:
        if batch.api == "anthropic":
            return {"custom_id": request.custom_id, "result": {"type": "expired" if why == "expired" else "canceled"}}
        code = "batch_expired" if why == "expired" else "batch_cancelled"
        message = ("This request could not be executed before the completion window expired." if why == "expired"
                   else "This request was not executed because the batch was cancelled.")
        return {"id": f"batch_req_fake{next(self._ids)}", "custom_id": request.custom_id, "response": None,
                "error": {"code": code, "message": message}}

    def _end(self, batch: _Batch, outcome: str) -> None:
        """End ``batch``: the requests not run are ``outcome`` (expired, cancelled), and
        its results are written (OpenAI: its files; Anthropic: served by ``results``)."""
        for request in batch.requests:
            if request.outcome == "waiting":
                request.outcome = "expired" if outcome == "expired" else "cancelled"
                request.line = self._not_run(batch, request, request.outcome)
        batch.ended_at = int(time.time())
        if batch.api == "anthropic":
            batch.status = "ended"
            return
        batch.status = outcome
        good = [r.line for r in batch.requests if r.outcome == "succeeded"]
        bad = [r.line for r in batch.requests if r.outcome != "succeeded"]
        if good:
            batch.output_file_id = self._file(good)
        if bad:
            batch.error_file_id = self._file(bad)

    def _file(self, lines: list[Any]) -> str:
        file_id = f"file-fake{next(self._ids)}"
        self.files[file_id] = ("batch_output", self._jsonl(lines))
        return file_id

    def _jsonl(self, lines: list[Any]) -> bytes:
        junk = b'{"broken": \n{"no_custom_id": true}\n' if self.junk else b""
        return junk + b"".join(json.dumps(line).encode() + b"\n" for line in lines)

    def _failing(self) -> bool:
        """Whether this poll fails (one of the ``failing_polls``)."""
        if self.failing_polls <= 0:
            return False
        self.failing_polls -= 1
        return True


def _openai_line(raw: bytes, seen: set[str]) -> tuple[dict[str, Any], str | None]:
    """One line of an input file, and what OpenAI would refuse in it (``None``: nothing)."""
    try:
        line = json.loads(raw)
    except ValueError:
        return {}, "This line is not parseable as valid JSON."
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str) or line["custom_id"] in seen:
        return {}, "The custom_id for this request is missing or a duplicate of another request."
    if line.get("method") != "POST" or line.get("url") != _OPENAI_ENDPOINT:
        return line, "The url or method of this request does not match the batch's endpoint."
    if not (isinstance(line.get("body"), dict) and line["body"].get("model")):
        return line, "The request body is missing or has no model."
    return line, None


def _runnable(batch: _Batch) -> bool:
    """Whether ``batch`` has requests left to run (not counting those that expire)."""
    return any(r.outcome == "waiting" and not r.expires for r in batch.requests)


def _rfc3339(stamp: int | None) -> str | None:
    return None if stamp is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _multipart(request: ReceivedRequest) -> dict[str, bytes] | None:
    """The fields of a ``multipart/form-data`` body (a file's name under ``filename``)."""
    kind = request.headers.get("content-type", "")
    found = re.search(r"boundary=([^;]+)", kind)
    if not kind.startswith("multipart/form-data") or found is None or not isinstance(request.body, str):
        return None
    boundary = found.group(1).strip('"').encode()
    data = request.body.encode("utf-8", "surrogateescape")
    fields: dict[str, bytes] = {}
    for part in data.split(b"--" + boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, value = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        filename = re.search(rb'filename="([^"]*)"', head)
        if name is None:
            continue
        fields[name.group(1).decode()] = value.removesuffix(b"\r\n")
        if filename is not None:
            fields["filename"] = filename.group(1)
    return fields

