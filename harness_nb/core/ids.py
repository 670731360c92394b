"""Identifiers: short, sortable enough for humans, unique within a process."""

from __future__ import annotations

import itertools
import os
import time

_counter = itertools.count(1)


def new_id(prefix: str) -> str:
    """Return ``<prefix>-<time><pid><n>``: unique in this process and readable in a file name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{os.getpid() % 10000:04d}{next(_counter):04d}"
