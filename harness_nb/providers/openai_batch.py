"""OpenAI's Batch API (``OpenAIBatches``), as its reference describes it.

- The requests go as a JSONL file, one line a request: ``{"custom_id", "method": "POST",
  "url": "/v1/chat/completions", "body"}``, uploaded to ``POST /v1/files`` (multipart,
  ``purpose=batch``); at most 50,000 requests and 200 MB a file.
- ``POST /v1/batches`` with ``input_file_id``, ``endpoint: /v1/chat/completions`` and
  ``completion_window: 24h`` makes the batch (``metadata`` names the map).
- ``GET /v1/batches/{id}`` gives its ``status``: ``validating``, ``in_progress``,
  ``finalizing``, ``cancelling``, then one of ``completed``, ``failed`` (the file was
  refused: ``errors.data`` says why, with line numbers), ``expired`` (the 24 hours ran
  out: the requests that ran are in its output file, the others in its error file with the
  code ``batch_expired``) or ``cancelled`` (``POST /v1/batches/{id}/cancel``; likewise
  partial, ``batch_cancelled``). ``request_counts`` has ``total``, ``completed``, ``failed``.
- ``GET /v1/files/{id}/content`` of its ``output_file_id`` and ``error_file_id``: JSONL
  lines ``{"custom_id", "response": {"status_code", "body"}, "error": {"code", "message"}}``,
  in any order.

Paths are under the provider's base URL, which for OpenAI ends in ``/v1``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..core import ProviderError
from .batch import NOT_RUN_CANCELLED, NOT_RUN_EXPIRED, SAFE_ID, BatchAnswer, BatchAPI, BatchOutcome, BatchState
from .wire import encode_body, to_json

__all__ = ["OpenAIBatches"]

_ENDED: dict[str, BatchOutcome] = {
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}
_NOT_RUN = {"batch_expired": NOT_RUN_EXPIRED, "batch_cancelled": NOT_RUN_CANCELLED}


class OpenAIBatches(BatchAPI):
    """OpenAI's Batch API through an ``OpenAIProvider`` (see the module doc)."""

    max_requests: ClassVar[int] = 50_000
    max_bytes: ClassVar[int] = 200_000_000 - 1_024  # a file's limit, with room for the multipart envelope
    endpoint: ClassVar[str] = "/chat/completions"
    batches: ClassVar[str] = "/batches"
    url: ClassVar[str] = "/v1/chat/completions"  # what each line and the batch name, whatever the base URL

    def encode(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        return (
            b'{"custom_id":' + to_json(custom_id) + b',"method":"POST","url":' + to_json(self.url)
            + b',"body":' + encode_body(body) + b"}"
        )  # fmt: skip

    async def submit(self, encoded: Sequence[bytes], *, label: str) -> BatchState:
        content, kind = _multipart({"purpose": "batch"}, f"{label}.jsonl", b"\n".join(encoded) + b"\n")
        uploaded = await self.batch_call("POST", "/files", content=content, headers={"Content-Type": kind})
        file_id = uploaded.get("id") if isinstance(uploaded, dict) else None
        if not isinstance(file_id, str) or not file_id:
            raise ProviderError(f"the file upload's answer has no id: {self.problem(str(uploaded))}", provider=self.provider.name)
        body = {
            "input_file_id": file_id,
            "endpoint": self.url,
            "completion_window": "24h",
            "metadata": {"harness_nb": label[:512]},
        }
        return self.state(await self.batch_call("POST", self.batches, content=encode_body(body)))

    def line_answer(self, line: Any) -> BatchAnswer | None:
        """One line of an output or error file."""
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            return None
        custom_id = line["custom_id"]
        error = line.get("error")
        if isinstance(error, dict):
            code = str(error.get("code") or "")
            if code in _NOT_RUN:
                return BatchAnswer(custom_id, error=_NOT_RUN[code], not_run=True)
            return BatchAnswer(custom_id, error=self.problem(f"{code or 'error'}: {error.get('message') or ''}"))
        response = line.get("response")
        if not isinstance(response, dict):
            return BatchAnswer(custom_id, error="the batch gave this request neither a response nor an error")
        status, body = response.get("status_code"), response.get("body")
        if status == 200:
            return self.answer(custom_id, body)
        detail = body.get("error") if isinstance(body, dict) else None
        if isinstance(detail, dict):
            said = f"{detail.get('type') or detail.get('code') or 'error'}: {detail.get('message') or ''}"
        else:
            said = str(body)
        return BatchAnswer(custom_id, error=self.problem(f"HTTP {status}: {said}"))

    def state(self, data: Any) -> BatchState:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not SAFE_ID.match(data["id"]):
            raise ProviderError(f"a batch's answer has no usable id: {self.problem(str(data))}", provider=self.provider.name)
        status = str(data.get("status") or "unknown")
        counts = data.get("request_counts")
        counts = counts if isinstance(counts, dict) else {}
        outcome = _ENDED.get(status)
        problem = None
        if outcome == "failed":
            problem = self._errors(data.get("errors"))
        files = [data.get(name) for name in ("output_file_id", "error_file_id")]
        return BatchState(
            id=data["id"],
            status=status,
            ended=outcome is not None,
            outcome=outcome,
            total=_count(counts.get("total")),
            succeeded=_count(counts.get("completed")) or 0,
            failed=_count(counts.get("failed")) or 0,
            problem=problem,
            results=tuple(f"/files/{f}/content" for f in files if isinstance(f, str) and SAFE_ID.match(f)),
        )

    def _errors(self, errors: Any) -> str:
        """What a failed batch's ``errors.data`` says (the first three, with their lines)."""
        data = errors.get("data") if isinstance(errors, dict) else None
        said = []
        for error in data[:3] if isinstance(data, list) else ():
            if isinstance(error, dict):
                line = f"line {error['line']}: " if isinstance(error.get("line"), int) else ""
                said.append(f"{line}{error.get('code') or 'error'}: {error.get('message') or ''}")
        return self.problem("; ".join(said) or "the vendor gave no reason")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _multipart(fields: Mapping[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body of ``fields`` and one file, and its content type
    (made here: the client's JSON content type would win over httpx's own ``files=``)."""
    boundary = f"harness-nb-{secrets.token_hex(16)}"
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    )
    file_head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/jsonl\r\n\r\n"
    ).encode()
    return head + file_head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"
