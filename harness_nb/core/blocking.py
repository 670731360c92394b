"""Blocking work (disk reads, walks, small writes) on harness_nb's own threads.

The event loop is the notebook kernel's, so nothing that can block runs on it; and the
loop's default executor is shared with the kernel and everything else in the process, so
harness_nb does not use it either. ``run_blocking`` runs a function on a fixed pool of
``BLOCKING_WORKERS`` threads named ``harness_nb-io-N``.

A thread cannot be killed: a caller that times out or is cancelled stops waiting, but the
thread runs on and keeps its slot until the function returns. So the work given to this
pool is written never to hang — files are opened only after ``os.stat`` says they are
regular (and with ``O_NONBLOCK``), walks and reads have caps, searches a time budget.
What remains is the kernel itself stalling a read (a dead network mount): when every
worker has been busy on one call for ``STUCK_AFTER`` seconds, a new call fails at once
with a ``ToolError`` saying so, instead of waiting in a queue that will not move.

The terminal view's approval prompt (``input()``, waiting for the person as long as they
take) is the one blocking call left on the loop's default executor, on purpose: it must
never hold one of these slots.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from .error import ToolError

__all__ = ["BLOCKING_WORKERS", "STUCK_AFTER", "run_blocking"]

BLOCKING_WORKERS = 8
"""Threads in harness_nb's pool for blocking work."""
STUCK_AFTER = 120.0
"""Seconds after which a call still running on a worker counts as stuck."""

_P = ParamSpec("_P")
_T = TypeVar("_T")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_running: dict[int, float] = {}  # call number -> when it started on a worker
_calls = 0


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(BLOCKING_WORKERS, thread_name_prefix="harness_nb-io")
        return _pool


def _all_stuck() -> bool:
    now = time.monotonic()
    with _lock:
        stuck = sum(1 for started in _running.values() if now - started > STUCK_AFTER)
    return stuck >= BLOCKING_WORKERS


def _tracked(number: int, fn: Callable[[], _T]) -> _T:
    with _lock:
        _running[number] = time.monotonic()
    try:
        return fn()
    finally:
        with _lock:
            del _running[number]


async def run_blocking(fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """``fn(*args, **kwargs)`` on harness_nb's worker threads (context variables kept, as
    ``asyncio.to_thread`` keeps them). Cancelling the caller stops the wait, not ``fn``."""
    global _calls
    if _all_stuck():
        raise ToolError(
            f"all {BLOCKING_WORKERS} file workers have been stuck for over {STUCK_AFTER:.0f} s "
            "(a read the operating system does not finish, e.g. on a dead network mount); "
            "restart the kernel to get them back"
        )
    with _lock:
        _calls += 1
        number = _calls
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), _tracked, number, call)
