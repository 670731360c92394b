"""Events a run emits, in the order they happen. Names are past tense.

A UI draws from these; a subagent's events reach its parent wrapped in ``SubagentUpdate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from .message import ToolCall
from .usage import Usage

if TYPE_CHECKING:
    from collections.abc import Callable


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    agent: str = "main"


class RunStarted(_Event):
    kind: Literal["run_started"] = "run_started"
    run_id: str
    model: str
    prompt: str


class TextDelta(_Event):
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallStarted(_Event):
    kind: Literal["tool_call_started"] = "tool_call_started"
    call: ToolCall


class ToolCallFinished(_Event):
    kind: Literal["tool_call_finished"] = "tool_call_finished"
    call: ToolCall
    result: str
    is_error: bool = False
    duration: float = 0.0


class ApprovalRequested(_Event):
    kind: Literal["approval_requested"] = "approval_requested"
    call: ToolCall
    reason: str
    risk: str = "medium"


class ApprovalDecided(_Event):
    kind: Literal["approval_decided"] = "approval_decided"
    call: ToolCall
    approved: bool
    feedback: str = ""


class MessagesInjected(_Event):
    """Text put into the conversation before an LLM call (background results, mailbox)."""

    kind: Literal["messages_injected"] = "messages_injected"
    texts: tuple[str, ...]


class TurnFinished(_Event):
    kind: Literal["turn_finished"] = "turn_finished"
    turn: int
    usage: Usage


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
    | ToolCallStarted
    | ToolCallFinished
    | ApprovalRequested
    | ApprovalDecided
    | MessagesInjected
    | TurnFinished
    | SubagentUpdate
    | RunFinished
    | RunFailed
)

SubagentUpdate.model_rebuild()

if TYPE_CHECKING:
    EventSink = Callable[[Event], Any]
