"""The pace of a recorded answer, so that a replay can stream the way the live run did.

A class replaying a teacher's cassette at once sees every answer appear whole; at the
recorded pace it sees the wait for the first token, the text arriving, the pause while the
tools ran. Recording keeps, per answer, a small ``"timing"`` object on its cassette line::

    "timing": {"chunks": [[8, 0.412], [16, 0.031], ...], "end": 0.2, "gap": 1.35}

``chunks``
    the text as it streamed: ``[characters, seconds since the previous point]``, the first
    point's seconds counted from the request (the time to first token). At most
    ``MAX_POINTS`` a line: a longer stream keeps its first chunk and merges the rest evenly
    into fewer, larger points (their characters and seconds added up), so a long answer
    costs no more than a short one. Empty when the answer did not stream.
``end``
    seconds from the last text (or from the request, when none streamed) to the whole
    answer: tool-call arguments and usage arrive there.
``gap``
    seconds between the previous answer of the same conversation and this request, when the
    request carries that answer's tool results: what happened on our side (the tools, an
    approval, the engine). A request after a new prompt has none: the person's time to type
    is not the model's pace. At most ``MAX_GAP``.

Replaying (``ProviderOptions.replay_pace``): ``"instant"`` waits for nothing; ``"recorded"``
waits each recorded delay; a factor divides every delay by it (``2``: twice as fast). The
tools of a replayed run run for real, so their time is spent again by itself: before a
request that follows tool results the replay waits only what is left of the recorded gap
once the tools' real time is taken off, so the pause looks like the recording whether the
tools are faster now or not (and never adds to tools that were slower). A cassette line
without timing (recorded before timing was kept) replays at once, whatever the pace.

The clock and the sleep are injectable, so that tests check the requested waits without
waiting.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core import AssistantMessage, Message, ToolResultMessage
from .options import ReplayPace

__all__ = ["MAX_GAP", "MAX_POINTS", "AnswerTimes", "AnswerTiming", "Pacer", "Stopwatch", "pace_factor"]

log = logging.getLogger("harness_nb.providers")

MAX_POINTS = 32
"""Most timing points one answer keeps (its first chunk included)."""
MAX_GAP = 60.0
"""Longest gap recorded between an answer and the next request, in seconds: longer is a
person deciding on an approval, which a replay should not make a class sit through."""
_MAX_DELAY = 300.0  # a replayed delay longer than a request may take is not a recording
_REMEMBERED = 256  # answers awaiting their tool results, per provider

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
Seconds = Annotated[float, Field(ge=0, le=_MAX_DELAY, allow_inf_nan=False)]


class AnswerTiming(BaseModel):
    """The timing of one recorded answer (see the module doc for each field)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    chunks: tuple[tuple[Annotated[int, Field(ge=0)], Seconds], ...] = Field(default=(), max_length=MAX_POINTS)
    end: Seconds = 0.0
    gap: Annotated[float, Field(ge=0, le=MAX_GAP, allow_inf_nan=False)] | None = None

    @classmethod
    def read(cls, data: Any, *, where: str) -> AnswerTiming | None:
        """The timing stored as ``data`` (``None`` when there is none). A timing that is not
        one (edited by hand, too long) is logged and dropped: that answer replays at once,
        and the rest of the cassette still replays."""
        if data is None:
            return None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            log.warning("%s: timing ignored (that answer replays at once): %s", where, exc.errors()[0]["msg"])
            return None

    def record(self) -> dict[str, Any]:
        """As written to a cassette line: milliseconds, no empty field."""
        out: dict[str, Any] = {"chunks": [[chars, _ms(delay)] for chars, delay in self.chunks], "end": _ms(self.end)}
        if self.gap is not None:
            out["gap"] = _ms(self.gap)
        return out

    @property
    def total(self) -> float:
        """Seconds from the request to the whole answer."""
        return math.fsum(delay for _chars, delay in self.chunks) + self.end

    def schedule(self, text: str) -> tuple[list[tuple[str, float]], float]:
        """``text`` cut as it streamed, ``(piece, seconds before it)``, and the seconds from
        the last piece to the whole answer. The recorded characters are followed while the
        text lasts and the last piece takes what is left (a redacted secret may have changed
        the length); an answer recorded without chunks comes whole, after ``end``."""
        if not self.chunks:
            return ([(text, self.end)], 0.0) if text else ([], self.end)
        pieces: list[tuple[str, float]] = []
        at, waited = 0, 0.0
        for number, (chars, delay) in enumerate(self.chunks):
            last = number == len(self.chunks) - 1
            piece = text[at:] if last else text[at : at + chars]
            at += len(piece)
            waited += delay
            if piece:
                pieces.append((piece, waited))
                waited = 0.0
        return pieces, waited + self.end


def _ms(seconds: float) -> float:
    return round(seconds, 3)


class Stopwatch:
    """Times one answer as it is recorded: ``chunk`` for each piece of text, ``finish`` when
    it is whole. ``gap`` is the time since this conversation's previous answer, if known."""

    def __init__(self, clock: Clock, *, gap: float | None = None) -> None:
        self._clock = clock
        self._last = clock()
        self._points: list[tuple[int, float]] = []
        self._gap = None if gap is None else min(max(gap, 0.0), MAX_GAP)

    def chunk(self, chars: int) -> None:
        """Text of ``chars`` characters arrived now."""
        now = self._clock()
        self._points.append((chars, now - self._last))
        self._last = now

    def finish(self) -> AnswerTiming:
        """The timing of the answer, which is whole now (bounded: ``merged``)."""
        end = self._clock() - self._last
        return AnswerTiming(chunks=tuple(merged(self._points)), end=_bounded(end), gap=self._gap)


def merged(points: Sequence[tuple[int, float]], limit: int = MAX_POINTS) -> list[tuple[int, float]]:
    """``points`` as at most ``limit`` points: the first kept (the time to first token),
    the others merged in even runs, characters and seconds added up; delays bounded."""
    if len(points) <= limit:
        return [(chars, _bounded(delay)) for chars, delay in points]
    first, rest = points[0], points[1:]
    groups = limit - 1
    out = [(first[0], _bounded(first[1]))]
    for g in range(groups):
        run = rest[g * len(rest) // groups : (g + 1) * len(rest) // groups]
        out.append((sum(c for c, _d in run), _bounded(math.fsum(d for _c, d in run))))
    return out


def _bounded(seconds: float) -> float:
    return min(max(seconds, 0.0), _MAX_DELAY)


class AnswerTimes:
    """When each answer that called tools was given, so that the request carrying its tool
    results can say how long they took. Keyed by the answer's first tool call (id and name:
    what stays the same when the history is scrubbed of secrets), so concurrent
    conversations (subagents) never read each other's times; bounded, oldest forgotten."""

    def __init__(self) -> None:
        self._at: OrderedDict[tuple[str, str], float] = OrderedDict()

    def answered(self, message: AssistantMessage, now: float) -> None:
        """``message`` was answered at ``now``."""
        if message.tool_calls:
            self._at[_key(message)] = now
            self._at.move_to_end(_key(message))
            while len(self._at) > _REMEMBERED:
                self._at.popitem(last=False)

    def since(self, messages: Sequence[Message], now: float) -> float | None:
        """Seconds since the answer whose tool results end ``messages`` (``None``: the
        request does not follow tool results, or that answer was not seen here)."""
        if not messages or not isinstance(messages[-1], ToolResultMessage):
            return None
        answer = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
        if answer is None or not answer.tool_calls:
            return None
        then = self._at.pop(_key(answer), None)
        return None if then is None else now - then


def _key(message: AssistantMessage) -> tuple[str, str]:
    call = message.tool_calls[0]
    return (call.id, call.name)


def pace_factor(pace: ReplayPace | None) -> float | None:
    """How many times faster than recorded a replay streams; ``None``: at once."""
    if pace is None or pace == "instant":
        return None
    return 1.0 if pace == "recorded" else float(pace)


class Pacer:
    """Waits a replay's recorded delays divided by ``factor``, on an injectable clock and
    sleep. A replay provider has one; it remembers answers as ``AnswerTimes`` does."""

    def __init__(self, factor: float, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self.factor = factor
        self._clock = clock
        self._sleep = sleep
        self._answers = AnswerTimes()

    async def wait(self, recorded: float) -> None:
        """Wait ``recorded`` seconds of the recording (none at all for 0)."""
        if recorded > 0:
            await self._sleep(recorded / self.factor)

    async def before_request(self, timing: AnswerTiming, messages: Sequence[Message]) -> None:
        """Wait what is left of the recorded gap before this request once the real time
        since the previous answer (the tools ran again) is taken off."""
        if timing.gap is None:
            return
        spent = self._answers.since(messages, self._clock())
        left = timing.gap / self.factor - (spent or 0.0)
        if left > 0:
            await self._sleep(left)

    def answered(self, message: AssistantMessage) -> None:
        """``message`` was handed on now (its tool results' request will come)."""
        self._answers.answered(message, self._clock())
