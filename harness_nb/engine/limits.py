"""Run limits and the result of a run."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from ..core import Message, Usage


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run stops on its own: ``max_turns`` LLM calls, ``token_budget`` input+output
    tokens, ``wall_time`` seconds; ``tool_timeout`` bounds each ordinary tool call."""

    max_turns: int = 50
    token_budget: int | None = None
    wall_time: float | None = None
    tool_timeout: float = 60.0


class RunResult(BaseModel):
    """What a run produced. ``usage`` includes the usage of any subagents it started."""

    model_config = ConfigDict(frozen=True)

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

    def __str__(self) -> str:
        return self.final_text
