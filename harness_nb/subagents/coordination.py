"""The main agent's tools for background work: ``task_output``, ``task_stop`` and
``send_message``. ``send_message`` routes through a ``MessageRouter``: the tracker's route
(a running background subagent takes the message at its next turn) and, when teams are on,
the team's route (mailboxes).

They are offered once there is something to use them on (``Tool.usable``): ``task_output``
and ``task_stop`` once a background task has been started, ``send_message`` once there is
someone to write to. Until then their schemas would only weigh down every call; after,
they stay, so the offered set changes once and the prompt cache survives."""

from __future__ import annotations

from typing import Annotated, Protocol

from pydantic import Field

from ..core import ToolError, UnknownNameError
from ..tools import Tool, ToolContext, tool
from .render import finished_task, task_snapshot
from .tracker import TaskTracker


class Route(Protocol):
    """A place messages can go: ``names()`` lists recipients, ``deliver`` returns a receipt
    or ``None`` when ``to`` is not one of its recipients."""

    def names(self) -> list[str]: ...

    async def deliver(self, to: str, message: str, sender: str) -> str | None: ...


class TrackerRoute:
    """Messages to a running background subagent, by task id (steering)."""

    def __init__(self, tracker: TaskTracker) -> None:
        self.tracker = tracker

    def names(self) -> list[str]:
        return [e.id for e in self.tracker.list() if e.kind == "subagent" and e.background]

    async def deliver(self, to: str, message: str, sender: str) -> str | None:
        entry = self.tracker.find(to)
        if entry is None or entry.kind != "subagent":
            return None
        if entry.done:
            raise ToolError(f"task {to} has already ended ({entry.status}); it cannot take messages")
        self.tracker.add_pending(to, message)
        return f"delivered to {to} ({entry.agent}); it reads it at its next turn"


class MessageRouter:
    """Tries each route in order; an unknown recipient gets an error listing who exists."""

    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes

    async def send(self, to: str, message: str, sender: str) -> str:
        for route in self.routes:
            receipt = await route.deliver(to, message, sender)
            if receipt is not None:
                return receipt
        names = {n for r in self.routes for n in r.names()}
        raise UnknownNameError("recipient", to, names)


def coordination_tools(tracker: TaskTracker, router: MessageRouter) -> list[Tool]:
    """Fresh ``task_output``, ``task_stop`` and ``send_message`` tools bound to one harness."""

    def started() -> bool:
        return any(e.background for e in tracker.list())

    def recipients() -> bool:
        return any(route.names() for route in router.routes)

    @tool(name="task_output", coordination=True, long_running=True, read_only=True, usable=started)
    async def task_output(
        ctx: ToolContext,
        task_id: Annotated[str, Field(description="e.g. bg-1")],
        block: Annotated[bool, Field(description="Wait for it to end.")] = False,
        timeout: Annotated[float, Field(ge=0, le=600)] = 60,
    ) -> str:
        """A background task's status, or its report once it ended (which also arrives by
        itself at your next step)."""
        try:
            entry = tracker.get(task_id)
        except UnknownNameError as exc:
            raise ToolError(str(exc)) from None
        if block and not entry.done:
            entry = await tracker.wait(task_id, timeout)
        if not entry.done:
            return task_snapshot(entry)
        entry.delivered = True  # read here, so not injected again later
        return finished_task(entry)

    @tool(name="task_stop", coordination=True, usable=started)
    async def task_stop(ctx: ToolContext, task_id: str) -> str:
        """Stop a running background task."""
        try:
            entry = tracker.get(task_id)
        except UnknownNameError as exc:
            raise ToolError(str(exc)) from None
        if entry.done:
            return f"task {task_id} already ended ({entry.status})"
        tracker.cancel(task_id)
        return f"task {task_id} ({entry.agent}) cancelled"

    @tool(name="send_message", coordination=True, usable=recipients)
    async def send_message(
        ctx: ToolContext,
        to: Annotated[str, Field(description="A running background task's id, or a teammate's name.")],
        message: str,
    ) -> str:
        """Message a running background subagent (it reads it at its next step) or a
        teammate."""
        try:
            return await router.send(to, message, ctx.agent)
        except UnknownNameError as exc:
            raise ToolError(str(exc)) from None

    return [task_output, task_stop, send_message]
