"""Guessing the shape of a text file from its first lines."""

DEFAULT_CANDIDATES = (",", "\t", "|")


def guess_delimiter(lines, candidates=DEFAULT_CANDIDATES):
    """The candidate that splits every sample line into the same number (> 1) of fields;
    the comma when none does."""
    best, best_fields = ",", 1
    for candidate in candidates:
        counts = {line.count(candidate) for line in lines if line.strip()}
        if len(counts) == 1:
            fields = counts.pop() + 1
            if fields > best_fields:
                best, best_fields = candidate, fields
    return best


def guess_encoding(raw: bytes) -> str:
    """utf-8 when the bytes decode as such, else latin-1."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "latin-1"
    return "utf-8"


def has_header(lines, delimiter):
    """Whether the first line looks like a header: no field of it is a number."""
    if not lines:
        return False
    first = lines[0].rstrip("\r\n").split(delimiter)
    return not any(_is_number(field) for field in first)


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True
