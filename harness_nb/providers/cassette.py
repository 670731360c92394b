"""Record a real provider's answers to a cassette, and replay them offline.

A cassette is JSONL, one line per LLM call::

    {"hash": "…", "agent": "main", "model": "openai/gpt-4o-mini",
     "request": {"system": "…", "messages": [...], "tools": [...]},
     "response": {ModelResponse as JSON},
     "timing": {"chunks": [[8, 0.41], ...], "end": 0.2, "gap": 1.3}}

``timing`` (``pace.py``) is how the answer streamed, bounded in size, for a replay at the
recorded pace (``replay_pace``); lines without it (older cassettes) replay at once.

A request is matched by the sha256 of the canonical JSON of its system prompt, messages
and tool specs: not the model name (a cassette recorded on one model replays under any
name) and not the calling agent; a tool result's image by its type and size, not its
bytes. The working directory's path is written as
``{workdir}`` so that a cassette recorded on one machine replays on another, and every
secret the process knows (``core.secret.SECRETS``: provider keys, credential-like
environment variables, ``.env`` values, key-shaped strings) is redacted before anything is
written, and alike when replaying, so a replayed request hashes as its recording did.
Volatile lines (the system prompt's environment line: Python version, system, today's
date) are stored as they were but left out of matching, so a cassette replays any day, on
any machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..core import ConfigError, Message, ProviderError, ToolResultMessage, json_line, run_blocking
from ..core.environment import normalise_environment
from ..core.secret import SECRETS, scrub
from .base import ModelRequest, ModelResponse, Provider, StreamItem, TextChunk, under
from .options import ProviderOptions
from .pace import AnswerTimes, AnswerTiming, Clock, Pacer, Sleep, Stopwatch, pace_factor


def request_record(
    request: ModelRequest, *, workdir: Path | None = None, secrets: Sequence[str] = ()
) -> dict[str, Any]:
    """The meaningful fields of ``request`` as plain JSON, normalised for matching: the
    workdir as ``{workdir}``, every known secret (and ``secrets``) redacted. A request's
    own ``tool_choice`` and ``json_answer`` count only when set, so the records (and
    hashes) of requests without them are what they always were."""
    record: dict[str, Any] = {
        "system": request.system,
        "messages": [_message_record(m) for m in request.messages],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in request.tools
        ],
    }
    if request.tool_choice is not None:
        record["tool_choice"] = request.tool_choice
    if request.json_answer is not None:
        answer = request.json_answer
        record["json_answer"] = {"name": answer.name, "schema": dict(answer.schema), "strict": answer.strict}
    place = str(workdir) if workdir else None

    def clean(text: str) -> str:
        text = text.replace(place, "{workdir}") if place else text
        return SECRETS.scrub(scrub(text, secrets) if secrets else text)

    result: dict[str, Any] = _map_strings(record, clean)
    return result


def _message_record(message: Message) -> dict[str, Any]:
    """``message`` as JSON; a tool result's images as their type and size, without the
    data: a PNG's bytes change with the version of the library that drew it, and a
    cassette should replay a run that plotted the same figure, and stay small."""
    record: dict[str, Any] = message.model_dump(mode="json")
    if isinstance(message, ToolResultMessage) and message.images:
        record["images"] = [
            {"media_type": i.media_type, "width": i.width, "height": i.height} for i in message.images
        ]
    return record


def matchable(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without what changes from day to day and machine to machine (the
    environment line), as requests are compared."""
    result: dict[str, Any] = _map_strings(record, normalise_environment)
    return result


def request_hash(record: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a request record, volatile lines left out."""
    canonical = json.dumps(
        matchable(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    # surrogatepass: a lone surrogate (a non-UTF-8 file name) still hashes, the same way
    # when recording and when replaying.
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


class RecordingProvider(Provider):
    """Forwards every call to ``inner`` and appends each request/response pair to the
    cassette at ``path`` (append-only, one flushed line per call; never headers or keys),
    with its timing on ``clock`` (see ``pace.py``)."""

    def __init__(
        self, inner: Provider, path: str | Path, *, workdir: Path | None = None, clock: Clock = time.monotonic
    ) -> None:
        super().__init__(inner.model)
        # Look like the wrapped provider: callers branch on ``name`` (e.g. model aliases).
        self.name = inner.name  # type: ignore[misc]
        self.inner = inner
        self.path = Path(path)
        self.workdir = workdir
        self.streaming = inner.streaming
        self.context_window = inner.context_window
        self.vision = inner.vision  # the request is made for the wrapped model
        self.structured_output = inner.structured_output
        self.token_ratio = inner.token_ratio  # one calibration, whoever calls
        self._lock = asyncio.Lock()
        self._clock = clock
        self._answers = AnswerTimes()

    async def discover_window(self) -> int | None:
        """The wrapped provider's window (asking its server, if it does)."""
        if self.context_window is None:
            self.context_window = await self.inner.discover_window()
        return self.context_window

    def learn_window(self, tokens: int) -> None:
        """Take a stated window, here and in the wrapped provider."""
        self.context_window = tokens
        self.inner.learn_window(tokens)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Forward, then record."""
        watch = self._stopwatch(request)
        response = await self.inner.complete(request)
        await self._append(request, response, watch.finish())
        return response

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        """Forward the stream, timing its text; record the answer before handing it on."""
        watch = self._stopwatch(request)
        async for item in self.inner.stream(request):
            if isinstance(item, TextChunk):
                watch.chunk(len(item.text))
            else:
                await self._append(request, item, watch.finish())
            yield item

    def _stopwatch(self, request: ModelRequest) -> Stopwatch:
        return Stopwatch(self._clock, gap=self._answers.since(request.messages, self._clock()))

    async def _append(self, request: ModelRequest, response: ModelResponse, timing: AnswerTiming) -> None:
        # from now on the tools run: the next request's gap is measured from here
        self._answers.answered(response.message, self._clock())
        record = request_record(request, workdir=self.workdir)
        line = {
            "hash": request_hash(record),
            "agent": request.agent,
            "model": self.inner.model_id,
            "request": record,
            "response": SECRETS.scrub_data(response.model_dump(mode="json")),
            "timing": timing.record(),
        }
        text = json_line(line) + "\n"
        async with self._lock:  # concurrent subagents must not interleave lines
            await run_blocking(self._write, text)

    def _write(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text)
            f.flush()

    async def aclose(self) -> None:
        """Close the wrapped provider."""
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"<RecordingProvider {self.inner!r} to {self.path}>"


def recording(
    provider: Provider, record_to: str | Path | None, *, workdir: Path | None = None
) -> Provider:
    """``provider``, with every call also appended to the cassette ``record_to`` (relative
    to ``workdir`` unless absolute). Returned unchanged when ``record_to`` is ``None``, when
    it is offline (replaying with recording still switched on must not append the replayed
    answers to a cassette, possibly the very one being replayed), and when it already
    records to that cassette."""
    if record_to is None or provider.offline:
        return provider
    path = under(workdir, record_to)
    if isinstance(provider, RecordingProvider) and provider.path == path:
        return provider
    return RecordingProvider(provider, path, workdir=workdir)


@dataclass
class _Entry:
    line: int
    agent: str
    request: dict[str, Any]  # as recorded
    response: ModelResponse
    timing: AnswerTiming | None  # None: recorded before timing was kept


class ReplayProvider(Provider):
    """Answers from a cassette, offline (``replay/<path>``). The same request recorded
    several times is answered in recorded order; a request not in the cassette is a
    ``ProviderError`` naming the nearest recorded request and what differs.

    ``path`` is read relative to ``workdir``; the model is named after the path as given
    (``replay/cassettes/demo.jsonl``), which is the same wherever the notebook is. Of
    ``options`` it takes ``streaming``, ``context_window``, ``structured_output`` (that of
    the recorded model, for typed map rows to be asked as they were: default ``"tool"``)
    and ``replay_pace``: at any pace but ``"instant"`` the answers come with the recorded
    delays (``pace.py``), waited with ``sleep`` and measured on ``clock`` (both injectable
    for tests)."""

    name: ClassVar[str] = "replay"
    offline: ClassVar[bool] = True

    def __init__(
        self,
        path: str | Path,
        *,
        workdir: Path | None = None,
        options: ProviderOptions | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        super().__init__(str(path), options=options)
        self.path = under(workdir, path)
        self.workdir = workdir
        if not self.path.is_file():
            raise ConfigError(
                f"cassette {self.path} not found: record one first (create_provider(..., "
                "record_to=PATH)) or check the path after 'replay/'"
            )
        self._entries: list[_Entry] | None = None
        self._by_hash: dict[str, list[_Entry]] = {}
        self._served: dict[str, int] = {}
        self._lock = asyncio.Lock()
        if options is not None and options.structured_output is not None:
            self.structured_output = options.structured_output
        factor = pace_factor(options.replay_pace if options else None)
        self.pacer = None if factor is None else Pacer(factor, clock=clock, sleep=sleep)
        """Waits the recorded delays; ``None`` at the instant pace."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded answer to ``request`` (after its recorded time, when paced)."""
        response, timing = await self._lookup(request)
        if self.pacer is not None:
            if timing is not None:
                await self.pacer.before_request(timing, request.messages)
                await self.pacer.wait(timing.total)
            self.pacer.answered(response.message)
        return response

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        """The recorded text, then the recorded answer: in a few chunks at once, or, when
        paced, in the recorded chunks with the recorded delays."""
        response, timing = await self._lookup(request)
        text = response.message.content
        if self.pacer is None or timing is None:
            step = max(1, -(-len(text) // 4))
            for start in range(0, len(text), step):
                yield TextChunk(text[start : start + step])
        else:
            await self.pacer.before_request(timing, request.messages)
            pieces, rest = timing.schedule(text)
            for piece, delay in pieces:
                await self.pacer.wait(delay)
                yield TextChunk(piece)
            await self.pacer.wait(rest)
        if self.pacer is not None:
            self.pacer.answered(response.message)
        yield response

    async def _lookup(self, request: ModelRequest) -> tuple[ModelResponse, AnswerTiming | None]:
        async with self._lock:
            if self._entries is None:
                self._entries = await run_blocking(self._load)
        record = request_record(request, workdir=self.workdir)
        key = request_hash(record)
        matches = self._by_hash.get(key)
        if not matches:
            raise self._miss(record, request.agent)
        served = self._served.get(key, 0)
        self._served[key] = served + 1
        entry = matches[min(served, len(matches) - 1)]
        return entry.response.model_copy(deep=True), entry.timing

    def _load(self) -> list[_Entry]:
        entries = []
        with self.path.open(encoding="utf-8") as f:
            for number, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    data = json.loads(raw)
                    entry = _Entry(
                        number,
                        str(data.get("agent", "main")),
                        data["request"],
                        ModelResponse.model_validate(data["response"]),
                        AnswerTiming.read(data.get("timing"), where=f"cassette {self.path} line {number}"),
                    )
                except (ValueError, KeyError, TypeError) as exc:
                    raise ConfigError(
                        f"cassette {self.path} line {number} is not a recorded call ({exc}); "
                        "re-record it"
                    ) from None
                entries.append(entry)
                # Re-hash rather than trust the stored hash, so the format may evolve.
                self._by_hash.setdefault(request_hash(entry.request), []).append(entry)
        return entries

    def _miss(self, record: dict[str, Any], agent: str) -> ProviderError:
        entries = self._entries or []
        where = f"no recorded answer for this request (agent {agent!r}) in {self.path}"
        if not entries:
            return ProviderError(f"{where}: the cassette is empty", provider=self.name)
        now = matchable(record)
        nearest = max(entries, key=lambda e: _closeness(e, now, agent))
        return ProviderError(
            f"{where} ({len(entries)} recorded). Nearest: line {nearest.line} (agent "
            f"{nearest.agent!r}); {first_difference(nearest.request, record)}. Re-record the "
            "cassette, or make the run match the recording.",
            provider=self.name,
        )


def _closeness(entry: _Entry, record: dict[str, Any], agent: str) -> tuple[int, ...]:
    """How near ``entry`` is to ``record`` (already ``matchable``): higher is nearer."""
    then = matchable(entry.request)
    recorded, now = then["messages"], record["messages"]
    prefix = next(
        (i for i, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
        min(len(recorded), len(now)),
    )
    return (
        prefix,
        then["system"] == record["system"],
        then["tools"] == record["tools"],
        entry.agent == agent,
        -abs(len(recorded) - len(now)),
    )


def first_difference(recorded: dict[str, Any], now: dict[str, Any]) -> str:
    """Where two request records first differ, as ``path: recorded … vs now …`` (volatile
    lines left out, as in matching)."""
    recorded, now = matchable(recorded), matchable(now)
    if recorded["system"] != now["system"]:
        at = _first_char_diff(recorded["system"], now["system"])
        return (
            f"the system prompt differs at char {at}: recorded "
            f"{_window(recorded['system'], at)!r} vs now {_window(now['system'], at)!r}"
        )
    if recorded["tools"] != now["tools"]:
        names_then = [t["name"] for t in recorded["tools"]]
        names_now = [t["name"] for t in now["tools"]]
        if names_then != names_now:
            return f"tools: recorded [{', '.join(names_then)}] vs now [{', '.join(names_now)}]"
        return _describe(recorded["tools"], now["tools"], "tools")
    then, current = recorded["messages"], now["messages"]
    for i, (a, b) in enumerate(zip(then, current, strict=False)):
        if a != b:
            return _describe(a, b, f"messages[{i}]")
    extra = current[len(then) :] or then[len(current) :]
    first = extra[0] if extra else {}
    return (
        f"messages: recorded {len(then)} vs now {len(current)} (first extra: "
        f"{first.get('role', '?')} {_window(str(first.get('content', '')), 0)!r})"
    )


def _describe(a: Any, b: Any, path: str) -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _describe(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _describe(x, y, f"{path}[{i}]")
        return f"{path}: recorded {len(a)} items vs now {len(b)}"
    if isinstance(a, str) and isinstance(b, str):
        at = _first_char_diff(a, b)
        return f"{path}: recorded {_window(a, at)!r} vs now {_window(b, at)!r}"
    return f"{path}: recorded {a!r} vs now {b!r}"


def _first_char_diff(a: str, b: str) -> int:
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


def _window(text: str, at: int, width: int = 60) -> str:
    start = max(0, at - 20)
    piece = text[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
