"""tinyetl: load and save small tabular files as lists of dicts."""

from pathlib import Path

from .options import ReadOptions, WriteOptions
from .readers import READERS
from .writers import WRITERS

__version__ = "0.9.3"
__all__ = ["load", "save", "ReadOptions", "WriteOptions"]


def load(path, **options):
    """Read ``path`` into a list of dicts. Keyword options are those of ``ReadOptions``."""
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"tinyetl cannot read {path.suffix!r} files")
    return reader(path, ReadOptions(**options))


def save(rows, path, **options):
    """Write a list of dicts to ``path``. Keyword options are those of ``WriteOptions``."""
    path = Path(path)
    writer = WRITERS.get(path.suffix.lower())
    if writer is None:
        raise ValueError(f"tinyetl cannot write {path.suffix!r} files")
    writer(rows, path, WriteOptions(**options))
