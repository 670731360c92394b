"""The team's model-facing tools: ``team_create`` for the lead and, for each teammate, a
``send_message`` that speaks in the teammate's own name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from ..tools import Tool, ToolContext, tool
from .mailbox import TEAM_LEAD

if TYPE_CHECKING:
    from .manager import TeamManager


def team_create_tool(manager: TeamManager) -> Tool:
    """The lead's ``team_create`` tool, bound to ``manager``."""

    @tool(name="team_create", coordination=True)
    async def team_create(
        ctx: ToolContext,
        team_name: Annotated[str, Field(description="e.g. analysis")],
    ) -> str:
        """Name the team you are building, or start another. Add long-lived teammates with
        task(team_name=, name=, subagent_type=, prompt=); talk to them with send_message."""
        return manager.create_team(team_name)

    return team_create


def teammate_send_message(manager: TeamManager, name: str) -> Tool:
    """A ``send_message`` tool whose messages come from teammate ``name``."""

    @tool(name="send_message", coordination=True)
    async def send_message(
        ctx: ToolContext,
        to: Annotated[str, Field(description=f"{TEAM_LEAD!r} or the name of a teammate in your team.")],
        message: Annotated[str, Field(description="The message text.")],
    ) -> str:
        """Send a message to the team lead or to a teammate of your team; they read it at
        their next turn. Your last message of each turn already goes to the team lead, so
        use this for what cannot wait, or to talk to a peer."""
        return await manager.send(to, message, sender=name)

    return send_message
