"""Run limits, the tool-call slots a run's calls take turns for, the timer bounding its tool
calls, and the result of a run."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core import ConfigError, Message, Usage

EARLY_STOPS = frozenset(
    {
        "max_turns", "token_budget", "budget_usd", "wall_time", "max_tokens", "empty_answer",
        "max_repeated_calls", "max_turns_without_text",
    }
)  # fmt: skip
"""Stop reasons of a run that ended before the model was done: a limit of the run (those of
``progress.py`` included), an answer cut at ``max_tokens``, or a model that twice answered
nothing."""

BUDGET_STOPS = frozenset({"token_budget", "budget_usd"})
"""Stop reasons of a run that ran out of budget (a subagent's is an error to its parent)."""


def stop_label(stop_reason: str) -> str:
    """How a finished run's end reads to a person: ``done``, or ``stopped: max_turns``."""
    return f"stopped: {stop_reason}" if stop_reason in EARLY_STOPS else "done"


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run stops on its own: ``max_turns`` LLM calls, ``token_budget`` tokens (every
    token read or written, cached prompt tokens included), ``budget_usd`` US dollars,
    ``wall_time`` seconds; ``tool_timeout`` bounds each ordinary tool call;
    ``max_parallel_tool_calls`` run at once, the run's subagents' included (``ToolSlots``).
    Both budgets count the run's subagents and are checked before each call (``budget.py``).
    A run that repeats one call with one result ``max_repeated_calls`` times, or makes
    ``max_turns_without_text`` turns of tool calls in a row without text, is told once,
    then stopped (``progress.py``).
    ``None`` means no limit; an impossible value (``max_turns=0``, a negative budget) is a
    ``ConfigError`` when the limits are made, not a run that stops before it starts."""

    max_turns: int = 50
    token_budget: int | None = None
    wall_time: float | None = None
    tool_timeout: float = 60.0
    budget_usd: float | None = None
    max_parallel_tool_calls: int = 8
    max_repeated_calls: int | None = 3
    max_turns_without_text: int | None = 25

    def __post_init__(self) -> None:
        require_positive("max_turns", self.max_turns, whole=True)
        require_positive("token_budget", self.token_budget, whole=True, optional=True)
        require_positive("budget_usd", self.budget_usd, optional=True)
        require_positive("wall_time", self.wall_time, optional=True)
        require_positive("tool_timeout", self.tool_timeout)
        require_positive("max_parallel_tool_calls", self.max_parallel_tool_calls, whole=True)
        require_positive("max_repeated_calls", self.max_repeated_calls, whole=True, optional=True)
        require_positive("max_turns_without_text", self.max_turns_without_text, whole=True, optional=True)


def require_positive(name: str, value: object, *, whole: bool = False, optional: bool = False) -> None:
    """Raise ``ConfigError`` unless ``value`` is a number above zero (a whole one with
    ``whole``; ``None`` is allowed with ``optional``, meaning "no limit")."""
    if value is None and optional:
        return
    kind = int if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        what = "a whole number" if whole else "a number"
        none = " (or None for no limit)" if optional else ""
        raise ConfigError(f"{name} must be {what} above 0{none}, not {value!r}")


class ToolTimer:
    """The timeouts of one engine's tool calls, kept by one timer on the event loop.

    ``asyncio.timeout`` schedules a timer and cancels it again for every call (~4 µs, most
    of what bounding a call cost). Calls end long before a timeout of a minute, so here a
    call only notes its ``Deadline`` (``start``) and drops it when done (``finish``); the
    one timer is set for the earliest deadline and, when it fires, cancels the tasks of
    the calls past theirs and is set again for the next, if any. ``finish`` says whether
    the call ended by its timeout, as ``asyncio.timeout`` would have (an outside cancel of
    the same task still propagates).

        deadline = timer.start(60)
        try:
            outcome = await call()
        except BaseException as exc:
            if not timer.finish(deadline, exc):
                raise
            outcome = timed_out
        else:
            timer.finish(deadline)
    """

    __slots__ = ("_loop", "_live", "_timer", "_timer_when")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._live: dict[Deadline, None] = {}  # the calls under way, as an ordered set
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0

    def start(self, seconds: float) -> Deadline:
        """The deadline of a call starting now in the current task, ``seconds`` from now."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # an engine used from another loop: its timer is there
            self._loop, self._live, self._timer = loop, {}, None
        task = asyncio.current_task()
        assert task is not None, "a tool call runs in a task"
        deadline = Deadline(task, loop.time() + seconds)
        self._live[deadline] = None
        if self._timer is None or deadline.when < self._timer_when:
            self._arm(loop, deadline.when)
        return deadline

    def finish(self, deadline: Deadline, exc: BaseException | None = None) -> bool:
        """The call is over, ended by ``exc`` (``None``: it returned): True when that was
        its timeout. Every call must be finished, whatever it ended with. The timer stays
        set: when it fires with no call past its deadline it only sets itself for the next."""
        self._live.pop(deadline, None)
        return deadline.timed_out(exc)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_when = loop.call_at(when, self._fire), when

    def _fire(self) -> None:
        self._timer = None
        assert self._loop is not None
        now, earliest = self._loop.time(), None
        for deadline in list(self._live):
            if deadline.when <= now:
                del self._live[deadline]
                deadline.expire()
            elif earliest is None or deadline.when < earliest:
                earliest = deadline.when
        if earliest is not None:
            self._arm(self._loop, earliest)


class Deadline:
    """One tool call's deadline (``ToolTimer.start``): ``expired`` once the timer cancelled
    its task for it."""

    __slots__ = ("task", "when", "expired", "_cancelling")

    def __init__(self, task: asyncio.Task[Any], when: float) -> None:
        self.task = task
        self.when = when
        self.expired = False
        self._cancelling = task.cancelling()  # cancels already asked of the task when the call began

    def expire(self) -> None:
        self.expired = True
        self.task.cancel()

    def timed_out(self, exc: BaseException | None) -> bool:
        """Once the call is over, whether it ended by this timeout: after an expiry the
        timeout's cancel is taken back (the task goes on), and the call timed out when it
        ended with a ``CancelledError`` no one else asked for (``asyncio.timeout``'s rule)."""
        if not self.expired:
            return False
        self.expired = False  # taken back once
        return self.task.uncancel() <= self._cancelling and isinstance(exc, asyncio.CancelledError)


_State = Literal["deciding", "aside", "waiting", "running", "done"]


class ToolSlots:
    """At most ``size`` tool calls of one run, its subagents' included, execute at once;
    the others wait their turn in the order the calls were made.

    A call takes its ``place`` in line as it starts (the engine takes it before the call's
    first ``await``, so places follow the model's order). While its permission is decided
    it keeps later calls waiting behind it; while it waits for an approval it stands aside
    (a call waiting for the person holds up no one) and takes its place back once approved;
    it holds a slot only while it executes (``Place.held``). Calls let in together enter in
    their order too (a call let in while it was itself asking does not overtake one let in
    before it that has yet to wake). The delegation tool never takes a slot: a foreground
    subagent's calls need the slots its parent's call would hold.
    """

    def __init__(self, size: int) -> None:
        require_positive("max_parallel_tool_calls", size, whole=True)
        self.size = size
        self.running = 0
        self._line: list[Place] = []  # places not yet running, in call order
        self._tickets = itertools.count()
        self._last_let_in: Place | None = None

    def place(self) -> Place:
        """A new call's place in line, after every place taken before."""
        place = Place(self, next(self._tickets))
        self._line.append(place)
        return place

    def _dispatch(self) -> None:
        """Let the first waiting calls run while slots are free; a call still deciding keeps
        its turn (those behind it wait), one standing aside does not."""
        line = self._line
        while line and self.running < self.size:
            for first in line:  # a plain loop, not next() over a generator: every call passes here
                if first.state == "waiting":
                    break
                if first.state == "deciding":
                    return
            else:
                return
            line.remove(first)
            first.state = "running"
            first.after, self._last_let_in = self._last_let_in, first
            self.running += 1
            if first._granted is not None:
                first._granted.set()

    def _leave(self, place: Place) -> None:
        if place.state == "running":
            self.running -= 1
        elif place in self._line:
            self._line.remove(place)
        place.state = "done"
        self._dispatch()

    def __repr__(self) -> str:
        return f"<ToolSlots {self.running}/{self.size} running, {len(self._line)} in line>"


class Place:
    """One call's place in a ``ToolSlots`` line (see there).

    Its events are made only when a call has to wait for one (``_granted``: its slot,
    ``_entered``: for the call let in after it to wait until it is through the door): most
    calls find a slot free and the call before them through, and every call passes here."""

    __slots__ = ("slots", "ticket", "state", "entered", "after", "_granted", "_entered")

    def __init__(self, slots: ToolSlots, ticket: int) -> None:
        self.slots = slots
        self.ticket = ticket
        self.state: _State = "deciding"
        self.entered = False  # it has passed the door (or left the line)
        self.after: Place | None = None  # the place let in just before it
        self._granted: asyncio.Event | None = None
        self._entered: asyncio.Event | None = None

    def step_aside(self) -> None:
        """The call waits for an approval: the calls behind it may go first meanwhile."""
        if self.state == "deciding":
            self.state = "aside"
            self.slots._dispatch()

    def leave(self) -> None:
        """The call needs no slot (any more): denied, failed, delegated or done."""
        self._enter()
        self.after = None
        if self.state != "done":
            self.slots._leave(self)

    def held(self) -> Place:
        """Wait for this call's turn and a free slot, hold it while the body runs:
        ``async with place.held():`` (the place is its own context manager, a class rather
        than a generator's: every tool call takes one)."""
        return self

    async def __aenter__(self) -> None:
        if self.state in ("deciding", "aside"):
            self.state = "waiting"
            self.slots._dispatch()
        try:
            if self.state != "running":
                self._granted = asyncio.Event()
                await self._granted.wait()
            after = self.after
            if after is not None:
                if not after.entered:
                    after._entered = after._entered or asyncio.Event()
                    await after._entered.wait()
                self.after = None
        except BaseException:
            self.leave()
            raise
        self._enter()

    async def __aexit__(self, *exc_info: object) -> None:
        self.leave()

    def _enter(self) -> None:
        self.entered = True
        if self._entered is not None:
            self._entered.set()


class RunResult(BaseModel):
    """What a run produced. ``usage`` is what the run had used when it ended, its subagents
    included; ``account`` is its live usage account, which background work it launched keeps
    billing after the run has ended (``result.account.usage``)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    final_text: str
    usage: Usage
    stop_reason: str
    turns: int
    tool_calls: int
    run_id: str
    session_id: str
    model: str = ""
    agent: str = "main"
    task_id: str | None = None  # set for subagent runs: their entry in the task tracker
    messages: list[Message] = []
    account: Any = Field(default=None, exclude=True, repr=False)  # engine.UsageAccount

    def __str__(self) -> str:
        return self.final_text
