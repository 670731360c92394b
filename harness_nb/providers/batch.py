"""Vendors' batch APIs: many requests sent at once, answered within 24 hours at half the
online price (``h.map(..., mode="batch")``).

``BatchAPI`` is what a map needs of one: ``encode`` a request (a body as the online
endpoint takes it, with the caller's ``custom_id``), ``submit`` encoded requests as one
batch, ``poll`` it (``BatchState``), read its ``results`` once it has ended
(``BatchAnswer`` per request, by ``custom_id``, in any order) and ``cancel`` it. Two
implementations: ``openai_batch.py`` (OpenAI's Batch API: a JSONL file uploaded to
``/v1/files``, a batch made from it at ``/v1/batches``, results in an output file and an
error file) and ``anthropic_batch.py`` (Anthropic's Message Batches at
``/v1/messages/batches``, results as JSONL at the batch's ``results_url``).
``batch_api(provider)`` picks the one for a provider; any other provider is a
``ConfigError`` saying so.

A batch has bounds (``max_requests``, ``max_bytes``): a ``Packer`` fills one batch with
encoded requests up to them, and the next request starts the next batch.

Everything a server sends is bounded: a results line longer than ``MAX_LINE_BYTES`` or
not JSON is skipped (its request then has no answer, which the caller reports), a batch's
own error messages are cut, and a results URL on another host than the API's is refused
(the API key would go with the request).
"""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx

from ..core import ConfigError, ProviderError
from .base import ModelResponse, Provider
from .http import HTTPProvider

__all__ = [
    "MAX_LINE_BYTES",
    "SAFE_ID",
    "BatchAPI",
    "BatchAnswer",
    "BatchOutcome",
    "BatchState",
    "Packer",
    "batch_api",
    "jsonl",
]

log = logging.getLogger("harness_nb.providers")

MAX_LINE_BYTES = 32 * 1024 * 1024
"""Longest results line read (one answer and its envelope); a longer one is skipped."""
_MAX_PROBLEM_CHARS = 500
SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,200}$")
"""What an id from a server (a batch's, a file's) must look like to go into a request's path."""

BatchOutcome = Literal["completed", "failed", "expired", "cancelled"]


@dataclass(frozen=True, slots=True)
class BatchState:
    """Where a batch is: its ``id``, the vendor's own ``status`` word (shown as it is),
    whether it has ``ended`` and how (``outcome``: ``completed``; ``failed``, the batch as a
    whole, ``problem`` saying why; ``expired``, its 24 hours ran out; ``cancelled``), and
    its requests: ``total``, ``succeeded`` and ``failed`` so far (a vendor that does not
    say: ``None``). ``results``: where an ended batch's answers are read (paths under the
    base URL, or a URL on the API's own host)."""

    id: str
    status: str
    ended: bool = False
    outcome: BatchOutcome | None = None
    total: int | None = None
    succeeded: int = 0
    failed: int = 0
    problem: str | None = None
    results: tuple[str, ...] = ()

    def line(self) -> str:
        """``in_progress 412/1,000`` (failed requests said when there are some)."""
        counted = f" {self.succeeded + self.failed:,}/{self.total:,}" if self.total else ""
        failed = f" ({self.failed:,} failed)" if self.failed else ""
        return f"{self.status}{counted}{failed}"


@dataclass(frozen=True, slots=True)
class BatchAnswer:
    """One request's outcome: its ``custom_id`` and the ``response``, or the ``error``;
    ``not_run``: it never ran (the batch expired or was cancelled first), so sending it
    again is all it needs."""

    custom_id: str
    response: ModelResponse | None = None
    error: str | None = None
    not_run: bool = False


NOT_RUN_EXPIRED = "not run: its batch's 24 hours ran out before it"
NOT_RUN_CANCELLED = "not run: its batch was cancelled before it"


class BatchAPI(ABC):
    """One vendor's batch API, reached through ``provider`` (its client, key, base URL,
    retries and error wording; its ``body`` and ``answer`` are the online wire format,
    which a batch carries unchanged)."""

    max_requests: ClassVar[int]
    """Most requests one batch takes."""
    max_bytes: ClassVar[int]
    """Most bytes of encoded requests one batch takes (its envelope left room)."""
    endpoint: ClassVar[str]
    """The path (under the base URL) the online requests would go to: named in errors."""
    batches: ClassVar[str]
    """The path (under the base URL) of the batches: ``{batches}/{id}`` is one, and
    ``{batches}/{id}/cancel`` cancels it."""

    def __init__(self, provider: HTTPProvider) -> None:
        self.provider = provider

    @abstractmethod
    def encode(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        """The request of ``body`` (as the online endpoint takes it) as the batch carries it."""

    @abstractmethod
    async def submit(self, encoded: Sequence[bytes], *, label: str) -> BatchState:
        """Make one batch of ``encoded`` requests (a ``Packer``'s); ``label`` names it
        where the vendor shows one (a file name, metadata)."""

    @abstractmethod
    def state(self, data: Any) -> BatchState:
        """A batch as the vendor's JSON describes it (``ProviderError`` without a usable id)."""

    @abstractmethod
    def line_answer(self, line: Any) -> BatchAnswer | None:
        """One line of a batch's results (``None``: a line without a ``custom_id``)."""

    async def poll(self, batch_id: str) -> BatchState:
        """The batch's state now."""
        return self.state(await self.batch_call("GET", f"{self.batches}/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchState:
        """Ask the vendor to stop the batch: what has run stays; the rest end not run."""
        return self.state(await self.batch_call("POST", f"{self.batches}/{batch_id}/cancel"))

    async def results(self, state: BatchState) -> AsyncIterator[BatchAnswer]:
        """The answers of an ended batch, as they are read."""
        for where in state.results:
            async with self.provider.download(where) as response:
                async for line in jsonl(response, source=f"batch {state.id}: {where}"):
                    answer = self.line_answer(line)
                    if answer is not None:
                        yield answer

    async def batch_call(
        self, method: str, path: str, *, content: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        """The JSON answering ``method path`` (a 404 said as ``missing`` says it)."""
        try:
            response = await self.provider.call(method, path, content=content, headers=headers)
        except ProviderError as exc:
            raise self.missing(path, exc) from exc
        try:
            return response.json()
        except ValueError:
            raise ProviderError(
                f"{path} answered with something that is not JSON: {self.problem(response.text)}",
                provider=self.provider.name,
            ) from None

    # -- shared by the vendors -------------------------------------------------------------

    def answer(self, custom_id: str, body: Any) -> BatchAnswer:
        """The answer in an online response ``body``, or what was wrong with its shape."""
        try:
            with self.provider.reading(body):
                return BatchAnswer(custom_id, response=self.provider.answer(body))
        except ProviderError as exc:
            return BatchAnswer(custom_id, error=str(exc))

    def missing(self, path: str, exc: ProviderError) -> ProviderError:
        """``exc`` of a 404 on a batch path: the server has no batch API (or no such batch)."""
        if exc.status != 404:
            return exc
        return ProviderError(
            f"{self.provider.base_url} answered 404 to {path}: it has no batch API there, or not this batch "
            f"({exc.message}). Run the map without mode='batch' to send its rows to {self.endpoint} one by one",
            provider=self.provider.name,
            status=404,
        )

    def problem(self, text: str) -> str:
        """A server's message about a batch, scrubbed and cut."""
        text = self.provider.scrub(text)
        return text if len(text) <= _MAX_PROBLEM_CHARS else text[: _MAX_PROBLEM_CHARS - 1] + "…"


class Packer:
    """The requests of one batch being filled, in order: at most ``most_requests`` of them
    and ``most_bytes`` bytes (a newline or comma each counted)."""

    def __init__(self, most_requests: int, most_bytes: int) -> None:
        self.most_requests = most_requests
        self.most_bytes = most_bytes
        self.keys: list[str] = []
        self.lines: list[bytes] = []
        self.size = 0

    def fits(self, line: bytes) -> bool:
        """Whether ``line`` still fits (an empty batch takes any, for the vendor to judge)."""
        if not self.lines:
            return True
        return len(self.lines) < self.most_requests and self.size + len(line) + 1 <= self.most_bytes

    def add(self, key: str, line: bytes) -> None:
        self.keys.append(key)
        self.lines.append(line)
        self.size += len(line) + 1

    def take(self) -> tuple[list[str], list[bytes]]:
        """The keys and lines so far; the batch is empty again."""
        taken = (self.keys, self.lines)
        self.keys, self.lines, self.size = [], [], 0
        return taken


async def jsonl(response: httpx.Response, *, source: str) -> AsyncIterator[Any]:
    """The JSON values of a JSONL body, one per line as it arrives; a line longer than
    ``MAX_LINE_BYTES`` or not JSON is skipped with a warning naming ``source``."""
    pending = bytearray()
    skipping = False  # inside a line too long to keep
    async for chunk in response.aiter_bytes():
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if not skipping:
                pending += chunk[start:end]
                value = _line(bytes(pending), source)
                if value is not None:
                    yield value
            pending.clear()
            skipping = False
            start = end + 1
        if not skipping:
            pending += chunk[start:]
            if len(pending) > MAX_LINE_BYTES:
                log.warning("%s: a line longer than %d bytes was skipped", source, MAX_LINE_BYTES)
                pending.clear()
                skipping = True
    if pending and not skipping:
        value = _line(bytes(pending), source)
        if value is not None:
            yield value


def _line(data: bytes, source: str) -> Any:
    if not data.strip():
        return None
    try:
        return json.loads(data)
    except ValueError:
        log.warning("%s: a line that is not JSON was skipped (%d bytes)", source, len(data))
        return None


def batch_api(provider: Provider) -> BatchAPI:
    """The batch API ``provider`` reaches: OpenAI's Batch API for ``openai/`` and
    ``openai-compatible/`` models (a server that has one), Anthropic's Message Batches for
    ``anthropic/``; any other is a ``ConfigError`` naming what batch mode needs."""
    from .anthropic import AnthropicProvider
    from .cassette import RecordingProvider
    from .openai import OllamaProvider, OpenAIProvider

    if isinstance(provider, RecordingProvider):
        raise ConfigError(
            f"mode='batch' cannot record to a cassette (record_to={str(provider.path)!r}): a batch is no call a "
            "cassette can replay. Leave record_to unset for a batch map, or run it without mode='batch'"
        )
    if isinstance(provider, AnthropicProvider):
        from .anthropic_batch import AnthropicBatches

        return AnthropicBatches(provider)
    if isinstance(provider, OpenAIProvider) and not isinstance(provider, OllamaProvider):
        from .openai_batch import OpenAIBatches

        return OpenAIBatches(provider)
    raise ConfigError(
        f"mode='batch' sends rows through OpenAI's Batch API or Anthropic's Message Batches: {provider.model_id} "
        "has neither. Use an openai/, openai-compatible/ (a server with /v1/batches) or anthropic/ model, or run "
        "the map without mode='batch'"
    )
