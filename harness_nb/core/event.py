"""Events a run emits, in the order they happen. Names are past tense.

A UI draws from these; a subagent's events reach its parent wrapped in ``SubagentUpdate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, SkipValidation

from .media import DisplayData, ImagePart
from .message import AssistantMessage, Message, ToolCall, ToolSpec
from .usage import Usage, plural, usd

if TYPE_CHECKING:
    from collections.abc import Callable


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    agent: str = "main"


class RunStarted(_Event):
    """A run has begun: ``model`` is its ``provider/model``, ``session_id`` the
    conversation it runs in (a subagent's has one of its own)."""

    kind: Literal["run_started"] = "run_started"
    run_id: str
    model: str
    prompt: str
    session_id: str = ""


class TextDelta(_Event):
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ModelCallFinished(_Event):
    """One LLM call of a run has ended, for an observer that times calls (a tracer): sent
    to ``provider`` (its name: ``openai``, ``anthropic``, ``ollama``…) at ``server`` (its
    base URL; ``""`` offline) for ``model`` (as the request named it) at ``started``
    (``time.time_ns()``), ``streamed`` or not. What was sent: ``system``, ``messages`` (as
    they were at the call), ``tools``; what came back: ``answer``, ``stop_reason``,
    ``response_model`` (the server's name for the model that answered) and ``usage`` (this
    call's, priced). ``error`` says how the call failed, if it did (then nothing came back):
    a ``ProviderError``'s kind (``context_length``) or HTTP status (``429``), else the
    exception's class name."""

    kind: Literal["model_call_finished"] = "model_call_finished"
    provider: str
    model: str
    started: int
    streamed: bool = False
    server: str = ""
    system: str = ""
    # the engine's own values, passed on as they are: checking each message of a long
    # conversation on every call would cost every run that listens, traced or not
    messages: Annotated[tuple[Message, ...], SkipValidation] = ()
    tools: Annotated[tuple[ToolSpec, ...], SkipValidation] = ()
    answer: Annotated[AssistantMessage | None, SkipValidation] = None
    stop_reason: str = ""
    response_model: str = ""
    usage: Usage | None = None
    error: str = ""


class ToolCallStarted(_Event):
    kind: Literal["tool_call_started"] = "tool_call_started"
    call: ToolCall


class ToolCallFinished(_Event):
    """A tool call's result: the text and ``images`` the model gets, and the ``displays``
    the tool made for the person (a DataFrame's HTML, a figure), which a view shows."""

    kind: Literal["tool_call_finished"] = "tool_call_finished"
    call: ToolCall
    result: str
    is_error: bool = False
    duration: float = 0.0
    images: tuple[ImagePart, ...] = ()
    displays: tuple[DisplayData, ...] = ()


class ApprovalRequested(_Event):
    kind: Literal["approval_requested"] = "approval_requested"
    call: ToolCall
    reason: str
    risk: str = "medium"


class ApprovalDecided(_Event):
    """How an approval ended. ``by_person``: the person denied it, and ``feedback`` is their
    (cleaned) reason, maybe empty; otherwise ``feedback`` is the policy's words."""

    kind: Literal["approval_decided"] = "approval_decided"
    call: ToolCall
    approved: bool
    feedback: str = ""
    by_person: bool = False


class EffectsRecorded(_Event):
    """What a call that can change files did to the workdir, from snapshots taken right
    before and after it: ``line`` for the view (``changed 2 files · deleted data/ (3
    files)``), ``checkpoint`` the number that undoes it (``None``: nothing to undo);
    ``reverted``, as the person reads it, what it changed that only the person may change,
    put back at once; ``lost`` what cannot be undone; ``overlapped`` the calls that ran
    beside it (their effects may be among these); ``partial`` why the snapshots did not
    see everything; ``problem`` why no checkpoint could be taken."""

    kind: Literal["effects_recorded"] = "effects_recorded"
    call: ToolCall
    line: str = ""
    checkpoint: int | None = None
    reverted: str = ""
    lost: tuple[str, ...] = ()
    overlapped: tuple[str, ...] = ()
    partial: str = ""
    problem: str = ""


class MessagesInjected(_Event):
    """Text put into the conversation before an LLM call (background results, mailbox)."""

    kind: Literal["messages_injected"] = "messages_injected"
    texts: tuple[str, ...]


class ContextMeasured(_Event):
    """How full the next request will be: ``tokens`` (the last answer's input usage plus an
    estimate of what was added since) of a ``window`` (``None``: not known)."""

    kind: Literal["context_measured"] = "context_measured"
    tokens: int
    window: int | None = None

    @property
    def fraction(self) -> float | None:
        """``tokens`` as a fraction of the window (``None`` without one)."""
        return self.tokens / self.window if self.window else None

    def label(self) -> str:
        """The gauge: ``context 61% of 128k``, or ``context ~12k tokens`` without a window."""
        if self.window:
            return f"context {round(100 * self.tokens / self.window)}% of {short_count(self.window)}"
        return f"context ~{short_count(self.tokens)} tokens"


def short_count(n: int) -> str:
    """A token count for a glance: ``2,048``, ``12k``, ``128k``, ``1M``, ``1.5M``."""
    if n < 10_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{round(n / 1000)}k"
    return f"{n / 1_000_000:.1f}".removesuffix(".0") + "M"


class CompactionStarted(_Event):
    """The conversation is about to be compacted. ``reason``: ``threshold`` (the next request
    would pass it), ``context_length`` (the provider said the request was too long) or
    ``requested`` (``Harness.compact()``, ``%agent --compact``)."""

    kind: Literal["compaction_started"] = "compaction_started"
    reason: str
    tokens: int
    window: int | None = None

    def describe(self) -> str:
        """One line: ``compacting the conversation (near the context limit): context 84% of
        12k``."""
        gauge = ContextMeasured(tokens=self.tokens, window=self.window).label()
        return f"compacting the conversation ({COMPACTION_REASONS.get(self.reason, self.reason)}): {gauge}"


COMPACTION_REASONS = {
    "threshold": "near the context limit",
    "context_length": "the model said the request was too long",
    "requested": "as asked",
}


class Compacted(_Event):
    """What a compaction did: ``cleared`` old tool results became one-line stubs (their
    content is in the offload folder), ``summarised`` messages were replaced by a summary
    marked as history; ``tokens_before`` / ``tokens_after`` are estimates. The transcript
    on disk keeps every original message. ``note`` says why less was done than asked (the
    summary call failed, nothing was old enough to summarise)."""

    kind: Literal["compacted"] = "compacted"
    reason: str
    cleared: int
    summarised: int
    tokens_before: int
    tokens_after: int
    window: int | None = None
    note: str = ""
    usage: Usage | None = None  # the summary calls of a compaction asked for on its own (Harness.compact)

    def describe(self) -> str:
        """One line: ``compacted: 3 tool results cleared, 12 messages summarised · 9,800 →
        3,100 tokens``."""
        done = []
        if self.cleared:
            done.append(f"{plural(self.cleared, 'tool result')} cleared")
        if self.summarised:
            done.append(f"{plural(self.summarised, 'message')} summarised")
        what = ", ".join(done) or "nothing to compact"
        line = f"compacted: {what} · {self.tokens_before:,} → {self.tokens_after:,} tokens"
        return f"{line} ({self.note})" if self.note else line


class TurnFinished(_Event):
    kind: Literal["turn_finished"] = "turn_finished"
    turn: int
    usage: Usage


class BudgetWarning(_Event):
    """A run has used 80% of one of its budgets (``budget_usd`` in USD, ``token_budget`` in
    tokens); emitted once per budget and run."""

    kind: Literal["budget_warning"] = "budget_warning"
    limit: Literal["budget_usd", "token_budget"]
    spent: float
    budget: float

    def text(self) -> str:
        """``used 81% of the $0.50 budget ($0.4050)``."""
        share = f"{self.spent / self.budget:.0%}"
        if self.limit == "budget_usd":
            return f"used {share} of the {usd(self.budget)} budget ({usd(self.spent)})"
        return f"used {share} of the {self.budget:,.0f}-token budget ({self.spent:,.0f} tokens)"


class ServerAdapted(_Event):
    """The harness found that the server of ``model`` cannot do something, and works around
    it from now on, in every run of the process: ``text`` says what happened, on which
    server, and what changed (``providers/quirks.py``). Emitted once per server and thing
    learnt."""

    kind: Literal["server_adapted"] = "server_adapted"
    model: str
    text: str


class SubagentUpdate(_Event):
    """A child's event, wrapped with the child's task id and agent name."""

    kind: Literal["subagent_update"] = "subagent_update"
    task_id: str
    event: Event


class RunFinished(_Event):
    kind: Literal["run_finished"] = "run_finished"
    final_text: str
    stop_reason: str
    usage: Usage


class RunFailed(_Event):
    kind: Literal["run_failed"] = "run_failed"
    error: str
    interrupted: bool = False
    usage: Usage


Event = (
    RunStarted
    | TextDelta
    | ModelCallFinished
    | ToolCallStarted
    | ToolCallFinished
    | ApprovalRequested
    | ApprovalDecided
    | EffectsRecorded
    | MessagesInjected
    | ContextMeasured
    | CompactionStarted
    | Compacted
    | TurnFinished
    | BudgetWarning
    | ServerAdapted
    | SubagentUpdate
    | RunFinished
    | RunFailed
)

SubagentUpdate.model_rebuild()

if TYPE_CHECKING:
    EventSink = Callable[[Event], Any]


def unheard(event: Event) -> None:
    """The event sink of a run nobody listens to. The engine and its parts compare a sink
    with it to skip building the events of every call (a pydantic model each) for no one."""
