"""A server that floods its output is logged a bounded number of times, then once a minute.

The SDK logs, with a traceback, every line a stdio server writes that is not JSON-RPC: a
server printing to its stdout in a loop made 19,479 tracebacks (17 MB of stderr) in five
seconds, in the notebook. ``FloodFilter`` lets the first ``FLOOD_FIRST`` records of each kind
(logger and message) through, then one per ``FLOOD_EVERY`` seconds, which says how many like it
were left out since. ``limit_floods("mcp")`` puts it on every logger of the SDK.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["FLOOD_EVERY", "FLOOD_FIRST", "FloodFilter", "limit_floods"]

FLOOD_FIRST = 5
"""Records of one kind logged as they come, before the rest are thinned out."""
FLOOD_EVERY = 60.0
"""Seconds between the records of one kind logged after the first ``FLOOD_FIRST``."""
_MAX_KINDS = 256  # kinds tracked one by one; past that, per logger (a message built with f"…")


class FloodFilter(logging.Filter):
    """Passes the first ``first`` records of each kind, then one per ``every`` seconds of
    ``clock``, adding how many were left out before it. Thread-safe: the SDK may log from
    worker threads."""

    def __init__(
        self, *, first: int = FLOOD_FIRST, every: float = FLOOD_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.first = first
        self.every = every
        self.clock = clock
        self._lock = threading.Lock()
        # kind -> [records seen, time the last one was let through, left out since]
        self._kinds: dict[tuple[str, str], list[float]] = {}

    def _kind(self, record: logging.LogRecord) -> tuple[str, str]:
        kind = (record.name, str(record.msg)[:200])
        if kind in self._kinds or len(self._kinds) < _MAX_KINDS:
            return kind
        return (record.name, "")

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            now = self.clock()
            state = self._kinds.setdefault(self._kind(record), [0, now, 0])
            state[0] += 1
            if state[0] <= self.first:
                state[1] = now
                return True
            if now - state[1] < self.every:
                state[2] += 1
                return False
            left_out, state[1], state[2] = int(state[2]), now, 0
        if left_out:
            # the note holds no %: it joins the message's format string safely
            record.msg = f"{record.msg} [{left_out:,} more like this in the last {self.every:g} s were not logged]"
        return True


_FILTER = FloodFilter()


def limit_floods(package: str) -> None:
    """Put the flood filter on every logger of ``package`` that exists now (a filter on a
    parent logger does not see its children's records)."""
    names = {package, *(n for n in logging.root.manager.loggerDict if n.startswith(package + "."))}
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
