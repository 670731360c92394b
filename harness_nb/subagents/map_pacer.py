"""``LoopPacer``: a background map leaves the kernel's event loop room for the notebook.

A map's rows run on the loop that also answers the notebook: a cell's execute request,
its output and its reply each wait for the loop to come round. A map against a fast
server is CPU-bound (a row is a whole subagent run, milliseconds of Python), and at
concurrency 32 it fills the loop: a trivial cell then takes several times as long.

So a background map asks before it starts each row: a heartbeat measures how late the
loop wakes it (the work other callbacks did first, which is what a kernel message waits
for at each step) and keeps a window of rows that may run, grown while the loop is on
time and shrunk while the map's own work makes it late (a row's work comes after it is
let in, so a window, not the latest measure, decides). Rows already running go on; ``floor`` rows may always run, so a map on a
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

And a kernel is several threads: a message reaches the main thread through the shell
channel's thread, output leaves through IOPub's, and each hop needs the GIL, which the main
thread — busy with rows — hands over only every switch interval (5 ms by default). While
paced maps run the interval is ``SWITCH_INTERVAL``; the last map to end restores it.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Callable

__all__ = ["LoopPacer"]

SWITCH_INTERVAL = 0.0005
"""Seconds a thread holds the GIL while another waits for it, while paced maps run (5 ms
otherwise): the kernel's shell and IOPub threads then get it back within that."""

_running = 0  # paced maps running in this process
_ours = False  # whether the first of them froze the heap
_switch = 0.005  # the switch interval before the first of them


class LoopPacer:
    """Lets rows start while the loop keeps up (see the module doc). A heartbeat every
    ``period`` seconds measures how late the loop wakes it and how much of the period the
    loop's thread spent working: late by more than ``limit`` while working at least
    ``busy`` of the time, the window of rows that may run shrinks by a third (never below
    ``floor``); otherwise it grows by one. (Late but idle is another process's doing —
    a busy machine — which holding rows back would not help.) A row past the window waits
    for the next beat; one row at a time waits (the others queue on a lock, which costs
    the loop nothing)."""

    def __init__(self, *, limit: float = 0.0005, busy: float = 0.15, floor: int = 2, period: float = 0.01) -> None:
        self.limit = limit
        self.busy = busy
        self.floor = floor
        self.period = period
        self.window = float(floor)
        """How many rows may run now."""
        self._turn = asyncio.Lock()
        self._beat: asyncio.Task[None] | None = None

    async def _heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, worked = loop.time() + self.period, time.thread_time()
            await asyncio.sleep(self.period)
            late = loop.time() - due
            self.judge(late, (time.thread_time() - worked) / (self.period + late))

    def judge(self, late: float, busy: float) -> None:
        """One beat: the loop woke it ``late`` seconds late, its thread working ``busy``
        of the time."""
        if late > self.limit and busy >= self.busy:
            self.window = max(float(self.floor), self.window * 2 / 3)
        else:
            self.window += 1

    def start(self) -> None:
        """A map begins: the first of those running freezes the objects there are (unless
        the process has frozen some itself) and shortens the switch interval."""
        global _running, _ours, _switch
        self._beat = asyncio.get_running_loop().create_task(self._heartbeat(), name="harness_nb:map-pacer")
        if _running == 0:
            _ours = gc.get_freeze_count() == 0
            if _ours:
                gc.freeze()
            _switch = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch, SWITCH_INTERVAL))
        _running += 1

    async def stop(self) -> None:
        """A map has ended: its heartbeat stops; the last of the maps running unfreezes
        what the first froze and restores the switch interval."""
        global _running, _ours
        _running -= 1
        if _running == 0:
            sys.setswitchinterval(_switch)
            if _ours:
                gc.unfreeze()
                _ours = False
        beat, self._beat = self._beat, None
        if beat is not None:
            beat.cancel()
            await asyncio.wait({beat})

    async def admit(self, running: Callable[[], int]) -> None:
        """Return once fewer rows run (``running()``) than the window allows."""
        async with self._turn:
            while running() >= self.window:
                await asyncio.sleep(self.period)
