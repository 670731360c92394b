"""``TaskTracker``: every subagent, teammate and shell task a harness has started.

Rules (from harness9's tests): finished results are drained into the main agent's next
LLM call exactly once; a cancelled task stays cancelled even if a finish arrives later; a
crashed task is ``failed`` with its error. Everything runs on one event loop, so no lock is
needed — methods never await between reading and writing an entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from ..core import UnknownNameError, Usage
from .render import background_completed

if TYPE_CHECKING:
    from ..engine import RunResult

TaskKind = Literal["subagent", "teammate", "shell", "map"]


class TaskStatus(StrEnum):
    QUEUED = "queued"  # a background task waiting for a free slot
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass
class TaskEntry:
    """One tracked task. ``log`` keeps the last ``log_limit`` progress lines; ``usage`` is
    the task's live usage (its account's); ``run_result`` the subagent's whole result once
    it completed; ``denials`` one line per call of it the person denied (``denial_line``),
    which its result shows the run above it. A teammate's entry also names its ``team``, its
    ``member`` name and its ``member_state`` (working, idle, exited)."""

    id: str
    kind: TaskKind
    agent: str
    description: str
    prompt: str
    background: bool = True
    status: TaskStatus = TaskStatus.RUNNING
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    log: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    result: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    delivered: bool = False
    pending: list[str] = field(default_factory=list)
    task: asyncio.Task[Any] | None = None
    run_result: RunResult | None = None
    denials: list[str] = field(default_factory=list)
    team: str | None = None
    member: str | None = None
    member_state: str | None = None
    _done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def done(self) -> bool:
        return self.status not in (TaskStatus.RUNNING, TaskStatus.QUEUED)

    @property
    def elapsed(self) -> float:
        return (self.finished_at or time.time()) - self.started_at

    @property
    def outcome(self) -> str:
        """What the task ended with: its result when it completed, else its error (the one
        rule every view of a finished task uses)."""
        if self.status is TaskStatus.COMPLETED:
            return self.result or ""
        return self.error or self.result or ""


Listener = Callable[[TaskEntry], Any]


class TaskTracker:
    """The registry of tasks of one harness (ids ``bg-1``, ``bg-2`` … per prefix)."""

    def __init__(self, *, log_limit: int = 200) -> None:
        self.log_limit = log_limit
        self._entries: dict[str, TaskEntry] = {}
        self._counters: dict[str, int] = {}
        self.listeners: list[Listener] = []

    def next_id(self, prefix: str = "bg") -> str:
        self._counters[prefix] = self._counters.get(prefix, 0) + 1
        return f"{prefix}-{self._counters[prefix]}"

    def start(
        self,
        kind: TaskKind,
        agent: str,
        prompt: str,
        *,
        description: str = "",
        background: bool = True,
        task_id: str | None = None,
    ) -> TaskEntry:
        """Register a running task and return its entry."""
        tid = task_id or self.next_id("bg" if background else "fg")
        entry = TaskEntry(
            id=tid,
            kind=kind,
            agent=agent,
            description=description or _title(prompt),
            prompt=prompt,
            background=background,
            log=deque(maxlen=self.log_limit),
            # foreground results go straight back to the caller: nothing to deliver later
            delivered=not background,
        )
        self._entries[tid] = entry
        self._changed(entry)
        return entry

    def get(self, task_id: str) -> TaskEntry:
        """The entry for ``task_id``; an unknown id raises an error listing the valid ones."""
        try:
            return self._entries[task_id]
        except KeyError:
            raise UnknownNameError("task id", task_id, self._entries) from None

    def find(self, task_id: str) -> TaskEntry | None:
        return self._entries.get(task_id)

    def running(self) -> list[TaskEntry]:
        return [e for e in self._entries.values() if not e.done]

    def set_queued(self, task_id: str, queued: bool) -> None:
        """A running-or-waiting task waits for a slot (``queued``) or has got one. Ignored
        once the task has ended."""
        entry = self._entries.get(task_id)
        if entry is not None and not entry.done:
            entry.status = TaskStatus.QUEUED if queued else TaskStatus.RUNNING
            self._changed(entry)

    def log(self, task_id: str, line: str) -> None:
        entry = self._entries.get(task_id)
        if entry is not None:
            entry.log.append(line)
            self._changed(entry)

    def note_denial(self, task_id: str, line: str) -> None:
        """Record that the person denied one of the task's calls (``line`` names it and
        gives their reason); at most 20 are kept."""
        entry = self._entries.get(task_id)
        if entry is not None and len(entry.denials) < 20:
            entry.denials.append(line)

    def finish(self, task_id: str, result: str, *, failed: bool = False) -> None:
        """Record the end of a task. Ignored when the task already ended (cancelled stays
        cancelled)."""
        entry = self._entries.get(task_id)
        if entry is None:
            return
        if entry.done:
            return
        entry.status = TaskStatus.FAILED if failed else TaskStatus.COMPLETED
        if failed:
            entry.error = result
        else:
            entry.result = result
        self._end(entry)

    def cancel(self, task_id: str) -> TaskEntry:
        """Stop a task: mark it cancelled and cancel its asyncio task (no-op when done)."""
        entry = self.get(task_id)
        if not entry.done:
            entry.status = TaskStatus.CANCELLED
            entry.error = "cancelled"
            if entry.task is not None and not entry.task.done():
                entry.task.cancel()
            self._end(entry)
        return entry

    def _end(self, entry: TaskEntry) -> None:
        entry.finished_at = time.time()
        entry._done.set()
        self._changed(entry)

    def drain_completed(self) -> list[TaskEntry]:
        """Finished background tasks not yet delivered; each is returned exactly once."""
        out = [e for e in self._entries.values() if e.done and not e.delivered]
        for e in out:
            e.delivered = True
        return out

    def completion_texts(self) -> list[str]:
        """``drain_completed`` as the blocks injected into the main agent's next call."""
        return [background_completed(e) for e in self.drain_completed()]

    def add_pending(self, task_id: str, message: str) -> None:
        """Queue a steering message; the task takes it at its next turn."""
        self.get(task_id).pending.append(message)

    def drain_pending(self, task_id: str) -> list[str]:
        entry = self._entries.get(task_id)
        if entry is None or not entry.pending:
            return []
        out, entry.pending = entry.pending, []
        return out

    async def wait(self, task_id: str, timeout: float | None = None) -> TaskEntry:
        """Wait until the task ends or ``timeout`` passes; return the entry either way."""
        entry = self.get(task_id)
        if not entry.done:
            try:
                async with asyncio.timeout(timeout):
                    await entry._done.wait()
            except TimeoutError:
                pass
        return entry

    async def aclose(self) -> None:
        """Cancel every running task and wait for them to end."""
        tasks = []
        for entry in self.running():
            t = entry.task
            self.cancel(entry.id)
            if t is not None:
                tasks.append(t)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # defined last: as a method name, `list` would shadow the builtin in later annotations
    def list(self) -> list[TaskEntry]:
        """Every task, in the order they started."""
        return [*self._entries.values()]

    def _changed(self, entry: TaskEntry) -> None:
        for listener in list(self.listeners):
            try:
                listener(entry)
            except Exception:  # a UI listener must not break task bookkeeping
                logging.getLogger("harness_nb.subagents").exception("task listener failed")


def _title(prompt: str, words: int = 6) -> str:
    parts = prompt.split()
    text = " ".join(parts[:words])
    return text + ("…" if len(parts) > words else "")
