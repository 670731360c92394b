"""``MapHandle``: a map running in the background (``h.start_map``, ``%agent map --bg``)."""

from __future__ import annotations

import asyncio
from typing import Any

from .agent_map import AgentMap
from .map_result import MapProgress, MapResult
from .tracker import TaskEntry, TaskTracker

__all__ = ["MapHandle", "start_map"]


class MapHandle:
    """A map running in the background (``start_map``): ``await`` it for the ``MapResult``,
    read ``progress()`` or the rows so far (``result()``), ``cancel()`` it. Its task entry
    (``id``, e.g. ``bg-3``) is in the tracker, so ``%task`` lists it and ``%task stop``
    cancels it."""

    def __init__(self, mapped: AgentMap, entry: TaskEntry, tracker: TaskTracker) -> None:
        self.map = mapped
        self.entry = entry
        self._tracker = tracker

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def done(self) -> bool:
        return self.entry.done

    def progress(self) -> MapProgress:
        return self.map.progress()

    def result(self) -> MapResult:
        """The rows so far, in order (those not finished marked as not run)."""
        return self.map.result()

    def cancel(self) -> None:
        if self.entry.task is not None and not self.entry.task.done():
            self.entry.task.cancel()

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> MapResult:
        await self._tracker.wait(self.entry.id)
        if self.entry.task is not None:  # cancelled: the rows' own tasks unwind first
            await asyncio.wait({self.entry.task})
        return self.map.result()

    def __repr__(self) -> str:
        state = "running" if not self.done else str(self.entry.status)
        return f"<map {self.id}: {self.map.definition.name} over {len(self.map.rows):,} rows, {state}>"


def start_map(mapped: AgentMap, tracker: TaskTracker) -> MapHandle:
    """Run ``mapped`` as a background task owned by ``tracker`` (which cancels it when the
    harness closes) and return its handle at once. Its entry ends completed (its summary as
    the result; failed rows are in the rows), cancelled, or failed on a bug. The person
    started it, so its end is not reported to the main agent."""
    prompt = f"map over {len(mapped.rows):,} rows: {mapped.template}"
    entry = tracker.start("map", mapped.definition.name, prompt, description=f"map over {len(mapped.rows):,} rows")
    entry.delivered = True
    entry.usage = mapped.account.usage

    async def body() -> None:
        try:
            result = await mapped.run()
        except asyncio.CancelledError:
            tracker.cancel(entry.id)
            raise
        except Exception as exc:  # a bug: recorded on the entry, which nobody awaits
            tracker.finish(entry.id, f"{type(exc).__name__}: {exc}", failed=True)
            return
        tracker.finish(entry.id, result.summary())

    entry.task = asyncio.get_running_loop().create_task(body(), name=f"harness_nb:{mapped.id}")
    return MapHandle(mapped, entry, tracker)
