"""Run limits and the result of a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..core import ConfigError, Message, Usage


EARLY_STOPS = frozenset(
    {"max_turns", "token_budget", "budget_usd", "wall_time", "max_tokens", "empty_answer"}
)
"""Stop reasons of a run that ended before the model was done: a limit of the run, an answer
cut at ``max_tokens``, or a model that twice answered nothing."""

BUDGET_STOPS = frozenset({"token_budget", "budget_usd"})
"""Stop reasons of a run that ran out of budget (a subagent's is an error to its parent)."""


def stop_label(stop_reason: str) -> str:
    """How a finished run's end reads to a person: ``done``, or ``stopped: max_turns``."""
    return f"stopped: {stop_reason}" if stop_reason in EARLY_STOPS else "done"


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run stops on its own: ``max_turns`` LLM calls, ``token_budget`` tokens (every
    token read or written, cached prompt tokens included), ``budget_usd`` US dollars,
    ``wall_time`` seconds; ``tool_timeout`` bounds each ordinary tool call. Both budgets
    count the run's subagents and are checked before each call (``budget.py``).
    ``None`` means no limit; an impossible value (``max_turns=0``, a negative budget) is a
    ``ConfigError`` when the limits are made, not a run that stops before it starts."""

    max_turns: int = 50
    token_budget: int | None = None
    wall_time: float | None = None
    tool_timeout: float = 60.0
    budget_usd: float | None = None

    def __post_init__(self) -> None:
        require_positive("max_turns", self.max_turns, whole=True)
        require_positive("token_budget", self.token_budget, whole=True, optional=True)
        require_positive("budget_usd", self.budget_usd, optional=True)
        require_positive("wall_time", self.wall_time, optional=True)
        require_positive("tool_timeout", self.tool_timeout)


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
