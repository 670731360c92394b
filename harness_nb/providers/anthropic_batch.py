"""Anthropic's Message Batches (``AnthropicBatches``), as its reference describes it.

- ``POST /v1/messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``, each
  ``params`` a Messages request body (without ``stream``); at most 100,000 requests and
  256 MB a batch. A ``custom_id`` is 1 to 64 letters, digits, ``_`` or ``-``.
- ``GET /v1/messages/batches/{id}`` gives its ``processing_status`` (``in_progress``,
  ``canceling``, ``ended``) and ``request_counts`` (``processing``, ``succeeded``,
  ``errored``, ``canceled``, ``expired``); once ended, ``results_url``.
- ``results_url`` serves JSONL lines ``{"custom_id", "result": {"type": …}}``, in any
  order: ``succeeded`` (with the ``message``), ``errored`` (with the ``error``),
  ``canceled`` (``POST /v1/messages/batches/{id}/cancel`` came first) or ``expired`` (its
  24 hours ran out first).

The results are read from ``results_url`` when it is on the API's own host, else from
``/v1/messages/batches/{id}/results`` there: the API key goes with the request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx

from ..core import ProviderError
from .batch import NOT_RUN_CANCELLED, NOT_RUN_EXPIRED, SAFE_ID, BatchAnswer, BatchAPI, BatchOutcome, BatchState
from .wire import encode_body, to_json

__all__ = ["AnthropicBatches"]

log = logging.getLogger("harness_nb.providers")

PATH = "/v1/messages/batches"


class AnthropicBatches(BatchAPI):
    """Anthropic's Message Batches through an ``AnthropicProvider`` (see the module doc)."""

    max_requests: ClassVar[int] = 100_000
    max_bytes: ClassVar[int] = 256_000_000 - 1_024  # with room for the body's envelope
    endpoint: ClassVar[str] = "/v1/messages"
    batches: ClassVar[str] = PATH

    def encode(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        return b'{"custom_id":' + to_json(custom_id) + b',"params":' + encode_body(body) + b"}"

    async def submit(self, encoded: Sequence[bytes], *, label: str) -> BatchState:
        return self.state(await self.batch_call("POST", PATH, content=b'{"requests":[' + b",".join(encoded) + b"]}"))

    def line_answer(self, line: Any) -> BatchAnswer | None:
        """One results line."""
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            return None
        custom_id = line["custom_id"]
        result = _mapping(line.get("result"))
        kind = result.get("type")
        if kind == "succeeded":
            return self.answer(custom_id, result.get("message"))
        if kind == "expired":
            return BatchAnswer(custom_id, error=NOT_RUN_EXPIRED, not_run=True)
        if kind == "canceled":
            return BatchAnswer(custom_id, error=NOT_RUN_CANCELLED, not_run=True)
        if kind == "errored":
            envelope = _mapping(result.get("error"))
            error = _mapping(envelope.get("error")) or envelope
            said = f"{error.get('type') or 'error'}: {error.get('message') or ''}"
            return BatchAnswer(custom_id, error=self.problem(said))
        return BatchAnswer(custom_id, error=self.problem(f"an unknown result type {kind!r}"))

    def state(self, data: Any) -> BatchState:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not SAFE_ID.match(data["id"]):
            raise ProviderError(f"a batch's answer has no usable id: {self.problem(str(data))}", provider=self.provider.name)
        status = str(data.get("processing_status") or "unknown")
        counts = _mapping(data.get("request_counts"))
        number = {name: _count(counts.get(name)) for name in ("processing", "succeeded", "errored", "canceled", "expired")}
        ended = status == "ended"
        outcome: BatchOutcome | None = None
        if ended:
            outcome = "cancelled" if number["canceled"] else "expired" if number["expired"] else "completed"
        return BatchState(
            id=data["id"],
            status=status,
            ended=ended,
            outcome=outcome,
            total=sum(number.values()),
            succeeded=number["succeeded"],
            failed=number["errored"] + number["canceled"] + number["expired"],
            results=(self._results_at(data["id"], data.get("results_url")),) if ended else (),
        )

    def _results_at(self, batch_id: str, url: Any) -> str:
        """``url`` when it is on the API's own host, else the documented path there."""
        own = f"{PATH}/{batch_id}/results"
        if not isinstance(url, str) or not url:
            return own
        try:
            given, base = httpx.URL(url), httpx.URL(self.provider.base_url)
            same = given.is_absolute_url and (given.scheme, given.host, given.port) == (base.scheme, base.host, base.port)
        except (httpx.InvalidURL, TypeError):
            same = False
        if same:
            return url
        log.warning("batch %s: its results_url is not on %s; reading %s there instead", batch_id, self.provider.base_url, own)
        return own


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
