"""Tables in the kernel as the model is told of them: a shape (``DataFrame 365×4``) and,
for the tables a failing line names, their columns and dtypes — bounded, and safe on any
object (a property that raises, a ``dtypes`` that is no mapping).

A table is any two-dimensional object with ``columns`` (pandas, polars, …): read through
those attributes only, never by importing a library.
"""

from __future__ import annotations

import linecache
import re
from itertools import islice
from types import FrameType, TracebackType
from typing import Any

__all__ = ["MAX_COLUMNS", "MAX_TABLES", "TABLES_MAX_CHARS", "named_tables", "table_columns", "table_shape"]

MAX_TABLES = 3
"""Most tables described for one failing line."""
MAX_COLUMNS = 40
"""Most columns listed for one table."""
TABLES_MAX_CHARS = 2_000
"""Most characters of the whole description."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def table_shape(value: Any) -> str:
    """``DataFrame 365×4`` for a two-dimensional table with columns; ``""`` for anything else."""
    try:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple) and len(shape) == 2 and hasattr(value, "columns"):
            return f"{type(value).__name__} {shape[0]}×{shape[1]}"
    except Exception:  # a broken property must not break what reports it
        pass
    return ""


def table_columns(value: Any, limit: int = MAX_COLUMNS) -> str:
    """``date: datetime64[ns], temp_c: float64, …`` — at most ``limit`` columns, then how
    many more; ``""`` when they cannot be read."""
    try:
        columns = list(islice(value.columns, limit + 1))
        dtypes = value.dtypes
        pairs = dtypes.items() if hasattr(dtypes, "items") else zip(columns, dtypes, strict=False)
        kinds = dict(islice(pairs, limit))
        shown = [f"{column}: {kinds.get(column, '?')}" for column in columns[:limit]]
        total = len(value.columns)
    except Exception:  # an object with columns it cannot list is described by its shape alone
        return ""
    more = f", … and {total - limit} more" if total > limit else ""
    return ", ".join(shown) + more


def named_tables(tb: TracebackType | None, in_cell: Any) -> str:
    """The tables named by the line where the cell's code failed — the last frame of ``tb``
    whose file ``in_cell(filename)`` accepts — each with its shape, columns and dtypes as that
    frame saw them, bounded (``MAX_TABLES``, ``TABLES_MAX_CHARS``)."""
    frame, line = _failing_line(tb, in_cell)
    if frame is None:
        return ""
    blocks: list[str] = []
    for name in dict.fromkeys(_NAME.findall(line)):
        if len(blocks) >= MAX_TABLES:
            break
        value = frame.f_locals.get(name, frame.f_globals.get(name))
        shape = table_shape(value)
        if shape:
            blocks.append(f"{name}: {shape}\n  {table_columns(value) or '(columns not readable)'}")
    text = "\n".join(blocks)
    return text if len(text) <= TABLES_MAX_CHARS else text[:TABLES_MAX_CHARS] + " …"


def _failing_line(tb: TracebackType | None, in_cell: Any) -> tuple[FrameType | None, str]:
    found: tuple[FrameType | None, str] = (None, "")
    while tb is not None:
        code = tb.tb_frame.f_code
        if in_cell(code.co_filename):
            found = (tb.tb_frame, linecache.getline(code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return found
