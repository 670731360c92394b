"""Turning text fields into numbers and dates."""

from datetime import date


def to_number(text, decimal="."):
    """A float from ``text`` (``decimal`` is its decimal mark); None for an empty field."""
    if text in ("", None):
        return None
    if decimal != ".":
        text = text.replace(".", "").replace(decimal, ".")
    return float(text)


def to_date(text):
    """A date from an ISO ``YYYY-MM-DD`` field; None for an empty field."""
    return date.fromisoformat(text) if text else None


def convert(rows, numbers=(), dates=(), decimal="."):
    out = []
    for row in rows:
        row = dict(row)
        for name in numbers:
            row[name] = to_number(row.get(name), decimal)
        for name in dates:
            row[name] = to_date(row.get(name))
        out.append(row)
    return out
