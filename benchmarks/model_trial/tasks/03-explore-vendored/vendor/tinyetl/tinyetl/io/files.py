"""Opening files for the readers and writers."""

from itertools import islice


def head(path, n, encoding):
    """The first ``n`` lines of a text file."""
    with open(path, encoding=encoding, newline="") as f:
        return list(islice(f, n))


def open_text(path, encoding, mode="r"):
    return open(path, mode, encoding=encoding, newline="")
