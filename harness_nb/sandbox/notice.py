"""Warnings the sandbox gives once per process (the same message is not repeated)."""

from __future__ import annotations

import logging
import threading

__all__ = ["log", "warn_once"]

log = logging.getLogger("harness_nb.sandbox")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning, unless it was logged before in this process."""
    with _warned_lock:
        if message in _warned:
            return
        _warned.add(message)
    log.warning("%s", message)
