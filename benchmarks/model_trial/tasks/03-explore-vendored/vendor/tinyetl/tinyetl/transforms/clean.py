"""Small clean-ups applied while reading."""


def strip_fields(row):
    """The row with whitespace stripped from every key and string value."""
    return {k.strip() if isinstance(k, str) else k: v.strip() if isinstance(v, str) else v for k, v in row.items()}


def drop_empty(rows):
    """Rows with at least one non-empty value."""
    return [row for row in rows if any(v not in ("", None) for v in row.values())]
