"""How much a model can read at once: its context window, how many tokens a text is, and
how to tell a "too long" error from any other.

- ``known_window(model)``: the window of a known OpenAI or Anthropic model (date suffixes
  and ``-latest`` tolerated: ``gpt-4o-2024-08-06`` is ``gpt-4o``).
- ``TokenRatio``: characters per token, calibrated from what a server reports. tiktoken
  would need to download its encodings (there may be no internet) and knows nothing of
  Claude's or a local model's tokenizer, so the estimate is ``characters / ratio`` with the
  ratio learnt from each answer's input usage (input tokens / characters sent, smoothed).
- ``probe_window(client, …)``: what an OpenAI-compatible server says of its window:
  ``GET /v1/models`` (``max_model_len`` from vLLM, ``context_length`` from LM Studio,
  OpenRouter and others, ``meta.n_ctx_train`` from llama.cpp), then llama.cpp's ``/props``
  (``default_generation_settings.n_ctx``) and ``/slots`` (``n_ctx``): bounded in time and
  size; any failure means "not said". (httpx is imported only by the probe.)
- ``WINDOWS`` (a ``WindowLookups``): the process's one lookup of what each server says,
  shared by every provider: asked once per server, model and key, kept for ten minutes.
- ``context_length_error(message, body)``: whether an API's error says the request was too
  long, and the maximum it names if it does (``ProviderError.kind == "context_length"``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..core.imports import shielded_imports

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("harness_nb.providers")

__all__ = [
    "CONTEXT_WINDOWS",
    "DEFAULT_CHARS_PER_TOKEN",
    "WINDOWS",
    "TokenRatio",
    "WindowLookups",
    "WindowUnansweredError",
    "context_length_error",
    "known_window",
    "probe_window",
]

# Tokens of context (input and output together), from the vendors' model pages.
CONTEXT_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-5-pro": 400_000,
    "gpt-5-codex": 400_000,
    "gpt-5-chat": 128_000,
    "gpt-5.1": 400_000,
    "gpt-5.2": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4.5-preview": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106-preview": 128_000,
    "gpt-4-0125-preview": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-pro": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o3-pro": 200_000,
    "o4-mini": 200_000,
    "gpt-oss-120b": 131_072,
    "gpt-oss-20b": 131_072,
    # Anthropic: every Claude 3, 3.5, 3.7 and 4.x model has 200k (Sonnet 4's 1M is a beta)
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
}

DEFAULT_CHARS_PER_TOKEN = 4.0
_PROBE_SECONDS = 3.0
_PROBE_BYTES = 4 << 20  # OpenRouter's model list is large; nothing real is 4 MB


def known_window(model: str) -> int | None:
    """The context window of ``model`` from ``CONTEXT_WINDOWS`` (the longest entry that is
    the name or a ``-``-separated prefix of it: ``claude-sonnet-4-5-20250929`` is
    ``claude-sonnet-4``), or ``None``. A name after a ``/`` (``openai/gpt-4o`` as a proxy
    names it) is looked up by its last part."""
    name = model.rsplit("/", 1)[-1].lower()
    if name in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[name]
    best = max((k for k in CONTEXT_WINDOWS if name.startswith(k + "-")), key=len, default=None)
    return CONTEXT_WINDOWS[best] if best else None


class TokenRatio:
    """Characters per token for one provider, learnt from its answers.

    ``observe(chars, tokens)`` takes one request's size in characters and the input tokens
    the server billed for it; the ratio moves a third of the way towards each sample, so
    one odd request does not swing it. Samples outside 0.5–16 characters a token (a server
    that reports nonsense) are ignored."""

    __slots__ = ("value", "samples")

    def __init__(self, value: float = DEFAULT_CHARS_PER_TOKEN) -> None:
        self.value = value
        self.samples = 0

    def observe(self, chars: int, tokens: int) -> None:
        """Learn from one request of ``chars`` characters that held ``tokens`` tokens."""
        if tokens <= 0 or chars <= 0:
            return
        sample = chars / tokens
        if not 0.5 <= sample <= 16:
            return
        self.value = sample if self.samples == 0 else self.value + (sample - self.value) / 3
        self.samples += 1

    def tokens(self, chars: int) -> int:
        """The tokens ``chars`` characters are estimated to hold."""
        return int(chars / self.value + 0.5)

    def __repr__(self) -> str:
        return f"<TokenRatio {self.value:.2f} chars/token from {self.samples} samples>"


# -- what a server says -------------------------------------------------------------------

_MODEL_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")


class WindowUnansweredError(Exception):
    """The server did not answer (transport failure, 5xx, timeout): nothing learnt."""


async def probe_window(client: httpx.AsyncClient, base_url: str, model: str) -> int | None:
    """The context window an OpenAI-compatible server at ``base_url`` reports for ``model``,
    or ``None`` (not said, not reachable, not in time: never an error)."""
    try:
        return await _ask_window(client, base_url, model)
    except WindowUnansweredError:
        return None


async def _ask_window(client: httpx.AsyncClient, base_url: str, model: str) -> int | None:
    """What ``probe_window`` says, but a server that did not answer raises ``WindowUnansweredError``
    (so that ``WindowLookups`` asks it again, where it keeps a "said nothing")."""
    root = re.sub(r"/v1/?$", "", base_url.rstrip("/"))
    try:
        async with asyncio.timeout(_PROBE_SECONDS):
            models = await _get_json(client, base_url.rstrip("/") + "/models")
            found, trained = _from_models(models, model)
            if found:
                return found
            props = await _get_json(client, root + "/props")
            settings = props.get("default_generation_settings") if isinstance(props, dict) else None
            n_ctx = _positive((settings or {}).get("n_ctx") if isinstance(settings, dict) else None)
            if n_ctx:
                return n_ctx
            slots = await _get_json(client, root + "/slots")
            if isinstance(slots, list) and slots and isinstance(slots[0], dict):
                n_ctx = _positive(slots[0].get("n_ctx"))
                if n_ctx:
                    return n_ctx
            return trained  # llama.cpp's training context: better than nothing
    except TimeoutError:
        log.info("%s did not say its context window within %.0f s", base_url, _PROBE_SECONDS)
        raise WindowUnansweredError from None


async def _get_json(client: httpx.AsyncClient, url: str) -> Any:
    """The JSON at ``url``, or ``None`` when the server says nothing there (4xx, size,
    syntax); ``WindowUnansweredError`` when it does not answer (transport failure, 5xx)."""
    with shielded_imports():
        import httpx  # here: the providers' base imports this module, and must not import httpx

    try:
        async with client.stream("GET", url) as response:
            if response.status_code >= 500:
                raise WindowUnansweredError
            if response.status_code != 200:
                return None
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > _PROBE_BYTES:
                    return None
        return json.loads(data)
    except httpx.HTTPError:
        raise WindowUnansweredError from None
    except ValueError:
        return None


WindowKey = tuple[str, str, str]


class WindowLookups:
    """What servers say of their context windows, asked once for the whole process.

    Every harness of a fan-out makes its own provider; each asking its server (three
    ``GET``s on a fresh connection for llama.cpp) cost ~35 ms of event-loop time apiece.
    Here an answer, "said nothing" (``None``) included, is kept per ``(base URL, model,
    key identity)`` for ``ttl`` seconds of ``clock``; concurrent askers of one server await
    one request. A server that did not answer is not remembered, so the next asker tries
    again; ``forget`` drops a server's answer when it refuses a request as too long (a
    llama.cpp restarted with another ``--ctx-size``). The key identity is a keyed hash,
    salted per process, so neither the key nor a digest of it that could be checked
    against guesses is kept."""

    def __init__(self, *, ttl: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._answers: dict[WindowKey, tuple[float, int | None]] = {}
        self._pending: dict[WindowKey, asyncio.Task[int | None]] = {}
        self._salt = os.urandom(16)

    def key(self, base_url: str, model: str, api_key: str | None) -> WindowKey:
        """The identity of one server's answer for ``model`` to ``api_key``."""
        who = hmac.new(self._salt, (api_key or "").encode(), hashlib.sha256).hexdigest() if api_key else ""
        return base_url.rstrip("/"), model, who

    async def window(self, key: WindowKey, client: httpx.AsyncClient) -> int | None:
        """The window the server of ``key`` reports (``None``: it says nothing), asked
        through ``client`` unless known; ``WindowUnansweredError`` when it did not answer."""
        kept = self._answers.get(key)
        if kept is not None and self.clock() < kept[0]:
            return kept[1]
        pending = self._pending.get(key)
        if pending is None or pending.get_loop() is not asyncio.get_running_loop():
            pending = asyncio.ensure_future(self._ask(key, client))
            pending.add_done_callback(_retrieved)  # every asker cancelled: no "never retrieved" warning
            self._pending[key] = pending
        # shielded: one asker cancelled (its cell interrupted) leaves the others' answer coming
        return await asyncio.shield(pending)

    async def _ask(self, key: WindowKey, client: httpx.AsyncClient) -> int | None:
        try:
            answer = await _ask_window(client, key[0], key[1])
            self._answers[key] = (self.clock() + self.ttl, answer)
            return answer
        finally:
            if self._pending.get(key) is asyncio.current_task():
                del self._pending[key]

    def forget(self, key: WindowKey) -> None:
        """Drop what the server of ``key`` said (it refused a request as too long)."""
        self._answers.pop(key, None)


WINDOWS = WindowLookups()


def _retrieved(task: asyncio.Task[int | None]) -> None:
    if not task.cancelled():
        task.exception()


def _from_models(data: Any, model: str) -> tuple[int | None, int | None]:
    """``(window, training window)`` of ``model`` in a ``/v1/models`` answer."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None, None
    entries = [e for e in entries if isinstance(e, dict)]
    mine = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in mine:
        for name in _MODEL_FIELDS:
            value = _positive(entry.get(name))
            if value:
                return value, None
        meta = entry.get("meta")
        if isinstance(meta, dict):
            return None, _positive(meta.get("n_ctx_train"))
    return None, None


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


# -- "too long" errors --------------------------------------------------------------------

_TOO_LONG = re.compile(
    r"context_length_exceeded|prompt is too long|exceeds? the available context size"
    r"|maximum context length|exceeds? the context window|exceed context limit"
    r"|longer than the model's context length|exceed_context_size",
    re.IGNORECASE,
)
_STATED_MAXIMUM = (
    re.compile(r"maximum context length is (\d[\d,]*)", re.IGNORECASE),  # OpenAI, vLLM
    re.compile(r"> ?(\d[\d,]*) maximum", re.IGNORECASE),  # Anthropic: "… 210000 tokens > 200000 maximum"
    re.compile(r"exceed context limit: [\d\s+,]*> ?(\d[\d,]*)", re.IGNORECASE),  # Anthropic, with max_tokens
    re.compile(r"context length \((\d[\d,]*) tokens\)", re.IGNORECASE),  # SGLang
)


def context_length_error(message: str, body: Any = None) -> tuple[bool, int | None]:
    """Whether an error (its ``message``, its parsed JSON ``body``) says the request was too
    long for the model's context, and the window it states when it does (llama.cpp sends
    ``n_ctx`` in the body; OpenAI, vLLM and Anthropic name the maximum in the message)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    fields = error if isinstance(error, Mapping) else {}
    words = " ".join(str(fields.get(k) or "") for k in ("code", "type")) + " " + message
    if not _TOO_LONG.search(words):
        return False, None
    stated = _positive(fields.get("n_ctx"))
    if stated:
        return True, stated
    for pattern in _STATED_MAXIMUM:
        found = pattern.search(message)
        if found:
            return True, int(found.group(1).replace(",", ""))
    return True, None
