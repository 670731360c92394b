"""A map's rows and its template: what ``h.map`` takes as rows (a list, a mapping, a pandas
Series or DataFrame), the fields a template may name, and each row's prompt.

The template names what goes into each row's prompt: ``{value}`` (the row's value; a
DataFrame row as ``column: value`` lines), ``{index}``, and a mapping's or DataFrame row's
fields by name (``{review}``). Only plain names are allowed — ``{value.__class__}`` or
``{value[0]}`` would let a template reach into the objects it formats — and each is checked
before any row runs.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core import ConfigError

__all__ = ["MAX_VALUE_CHARS", "Row", "check_template", "fill", "map_rows"]

MAX_VALUE_CHARS = 20_000
"""Most characters of one row's value put into its prompt (the rest is cut, and said so)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One row: its index label, its value and its named fields (a mapping's or a DataFrame row's)."""

    index: Any
    value: Any
    fields: Mapping[str, Any]


def map_rows(rows: Any) -> list[Row]:
    """The rows of ``rows`` (see the module doc for what it may be), each with its index
    label, value and named fields."""
    if hasattr(rows, "iterrows") and hasattr(rows, "columns"):  # a DataFrame
        out = []
        for index, row in rows.iterrows():
            fields = {str(column): value for column, value in row.items()}
            out.append(Row(index, "\n".join(f"{k}: {v}" for k, v in fields.items()), fields))
        return out
    if isinstance(rows, Mapping):
        return [Row(key, value, _fields(value)) for key, value in rows.items()]
    if hasattr(rows, "items") and hasattr(rows, "index"):  # a Series
        return [Row(index, value, _fields(value)) for index, value in rows.items()]
    if isinstance(rows, str | bytes) or not isinstance(rows, Iterable):
        raise ConfigError(
            f"map rows must be a list, a mapping, a pandas Series or DataFrame, not {type(rows).__name__}"
        )
    return [Row(position, value, _fields(value)) for position, value in enumerate(rows)]


def _fields(value: Any) -> Mapping[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def check_template(template: str, first: Row | None) -> None:
    """``ConfigError`` unless ``template`` names only plain fields the rows have, and at
    least one (else every row would get the same prompt)."""
    try:
        names = [name for _text, name, _spec, _conv in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"map template {template[:80]!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    if not names:
        raise ConfigError("the map template names no field: put {value} where each row's value goes")
    known = {"value", "index", *(first.fields if first else {})}
    for name in names:
        if not name.isidentifier():
            raise ConfigError(
                f"map template field {{{name}}} is not a plain name; use {{value}}, {{index}} or a column name"
            )
        if first is not None and name not in known:
            raise ConfigError(f"map template field {{{name}}} is not among the row's fields: {', '.join(sorted(known))}")


def fill(template: str, row: Row) -> str:
    """The prompt for ``row`` (each value cut to ``MAX_VALUE_CHARS``)."""
    values = {name: _bounded(v) for name, v in row.fields.items()}
    values.update(value=_bounded(row.value), index=_bounded(row.index))
    return template.format_map(values)


def _bounded(value: Any) -> str:
    text = str(value)
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS]}[… {len(text) - MAX_VALUE_CHARS:,} more characters cut]"


