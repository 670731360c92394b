"""``SubagentHandle``: a background subagent seen from Python code."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

from ..core import HarnessError
from ..engine import RunResult
from .tracker import TaskEntry, TaskStatus, TaskTracker


class SubagentHandle:
    """Await it for the ``RunResult``; ``cancel()`` stops it; ``send()`` steers it."""

    def __init__(self, tracker: TaskTracker, entry: TaskEntry) -> None:
        self._tracker = tracker
        self.entry = entry

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def status(self) -> TaskStatus:
        return self.entry.status

    def done(self) -> bool:
        return self.entry.done

    def send(self, message: str) -> None:
        """Queue a message; the subagent reads it at its next turn."""
        if self.entry.done:
            raise HarnessError(f"task {self.id} has already ended ({self.status}); it cannot take messages")
        self._tracker.add_pending(self.id, message)

    def cancel(self) -> None:
        self._tracker.cancel(self.id)

    async def result(self, timeout: float | None = None) -> RunResult:
        """Wait for the end. Raises ``CancelledError`` if it was cancelled, ``HarnessError``
        if it failed, ``TimeoutError`` if ``timeout`` passes first."""
        entry = await self._tracker.wait(self.id, timeout)
        if not entry.done:
            raise TimeoutError(f"task {self.id} still running after {timeout} s")
        if entry.status is TaskStatus.CANCELLED:
            raise asyncio.CancelledError(f"task {self.id} was cancelled")
        if entry.status is TaskStatus.FAILED:
            raise HarnessError(f"task {self.id} ({entry.agent}) failed: {entry.error}")
        assert entry.run_result is not None  # a completed subagent entry always has one
        return entry.run_result

    def __await__(self) -> Generator[Any, None, RunResult]:
        return self.result().__await__()

    def __repr__(self) -> str:
        return f"<SubagentHandle {self.id} {self.entry.agent} {self.status}>"
