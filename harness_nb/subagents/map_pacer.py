"""``LoopPacer``: a background map leaves the kernel's event loop room for the notebook.

A map's rows run on the loop that also answers the notebook: a cell's execute request,
its output and its reply each wait for the loop to come round. A map against a fast
server is CPU-bound (a row is a whole subagent run, milliseconds of Python), and at
concurrency 32 it fills the loop: a trivial cell then takes several times as long.

So a background map asks before it starts each row: the pacer measures how long the loop
takes to come back to it (one ``sleep(0)``: the work every other ready callback does
first, which is what a kernel message waits for at each step) and keeps a window of rows
that may run, grown while the loop comes back within ``limit`` and halved when it does
not (the row's own work comes after it is let in, so a window, not the latest measure,
decides). Rows already running go on; ``floor`` rows may always run, so a map on a
machine busy with other work still moves. When the rows wait on the network (a real model: seconds a call) the loop has room
and nothing is held; only a map that would starve the notebook is slowed, to what the loop
can give it. The answers do not change, only when rows start.

A map also makes a great deal of garbage (every row is a whole run), and Python's full
collections walk every object the kernel holds — hundreds of milliseconds with pandas
and a notebook's data loaded, a stall for every cell that meets one. While paced maps run
the objects that were there before the first began are frozen (``gc.freeze``): the
collections walk only what is new. The last map to end unfreezes them. Nothing is freed
later than it would be by reference counting; only cycles among the frozen objects that
become garbage meanwhile wait for that end. A process that froze objects itself is left
alone.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

__all__ = ["LoopPacer"]

_frozen_by = 0  # paced maps running that froze the heap (-1: someone else froze it)


class LoopPacer:
    """Lets rows start while the loop keeps up (see the module doc): a window of rows that
    may run grows by one each time the loop comes back within ``limit`` seconds, and
    halves each time it does not (never below ``floor``); a row past the window waits,
    measuring again every ``wait`` seconds. One row at a time measures (the others wait
    their turn on a lock, which costs the loop nothing): 32 workers probing at once would
    themselves be the load."""

    def __init__(self, *, limit: float = 0.001, floor: int = 2, wait: float = 0.01) -> None:
        self.limit = limit
        self.floor = floor
        self.wait = wait
        self.window = float(floor)
        """How many rows may run now."""
        self._turn = asyncio.Lock()

    def start(self) -> None:
        """A map begins: freeze the objects there are, if this is the first paced map."""
        global _frozen_by
        if _frozen_by == 0 and gc.get_freeze_count() > 0:
            _frozen_by = -1  # frozen by someone else: never ours to undo
        if _frozen_by >= 0:
            if _frozen_by == 0:
                gc.freeze()
            _frozen_by += 1

    def stop(self) -> None:
        """A map has ended: unfreeze when it was the last paced one."""
        global _frozen_by
        if _frozen_by > 0:
            _frozen_by -= 1
            if _frozen_by == 0:
                gc.unfreeze()
        elif _frozen_by < 0 and gc.get_freeze_count() == 0:
            _frozen_by = 0

    async def admit(self, running: Callable[[], int]) -> None:
        """Return once fewer rows run (``running()``) than the window allows."""
        loop = asyncio.get_running_loop()
        async with self._turn:
            while True:
                began = loop.time()
                await asyncio.sleep(0)
                if loop.time() - began <= self.limit:
                    self.window += 1
                else:
                    self.window = max(float(self.floor), self.window / 2)
                if running() < self.window:
                    return
                await asyncio.sleep(self.wait)
