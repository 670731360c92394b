"""Shared pieces of the team tests: a harness with teams over the scripted model, a
``gate`` tool the test opens when it wants a turn to go on, and step builders.

Teammates appear to the scripted model under their own names (``alice``), the main agent
as ``main``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness_nb.core import ToolResultMessage, UserMessage
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition
from harness_nb.team import TeamManager
from harness_nb.tools import Tool, ToolContext, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)


@tool(read_only=True)
async def read_file(ctx: ToolContext, path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


class Gates:
    """``gate(name)`` blocks a tool call until the test calls ``open(name)``; ``entered``
    tells the test that a call is waiting there."""

    def __init__(self) -> None:
        self.opened: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.entered: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

        @tool(name="gate")
        async def gate(ctx: ToolContext, name: str) -> str:
            """Wait at a gate until it opens."""
            self.entered[name].set()
            await self.opened[name].wait()
            return f"gate {name} opened"

        self.tool: Tool = gate

    def open(self, name: str) -> None:
        self.opened[name].set()

    async def reached(self, name: str, timeout: float = 5) -> None:
        async with asyncio.timeout(timeout):
            await self.entered[name].wait()


def call(tool_name: str, /, **args: object) -> dict[str, Any]:
    return {"name": tool_name, "arguments": args}


def task(**args: object) -> dict[str, Any]:
    return call("task", **args)


def gated(name: str, text: str, **extra: Any) -> list[dict[str, Any]]:
    """Two steps: wait at gate ``name``, then answer ``text``."""
    return [{"tool_calls": [call("gate", name=name)]}, {"text": text, **extra}]




def make_harness(tmp_path: Path, script: Any, **kw: Any) -> tuple[Harness, ScriptedProvider, Gates]:
    """A harness with teams on, the ``reader`` agent (read_file + gate) and the gate tool."""
    provider = kw.pop("provider", None) or ScriptedProvider(script)
    gates = Gates()
    h = Harness(
        provider,
        workdir=tmp_path,
        tools=[read_file, gates.tool],
        include_user_agents=False,
        approval_policy="never",
        teams=True,
        **kw,
    )
    h.registry.register(
        SubAgentDefinition(
            name="reader", description="Reads files.", system_prompt="You read.", tools=["read_file", "gate"]
        )
    )
    OPEN.append(h)
    return h, provider, gates


def teams(h: Harness) -> TeamManager:
    assert h.teams is not None
    return h.teams


def requests_of(provider: ScriptedProvider, agent: str) -> list[Any]:
    return [r for r in provider.requests if r.agent == agent]


def tool_results(messages: Any) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def user_texts(messages: Any) -> list[str]:
    return [m.content for m in messages if isinstance(m, UserMessage)]


def lead(text: str) -> str:
    """A prompt as a teammate receives it from the lead."""
    return f'<teammate-message from="team-lead">{text}</teammate-message>'
