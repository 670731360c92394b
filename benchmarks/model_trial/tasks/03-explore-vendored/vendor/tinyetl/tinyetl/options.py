"""Options shared by the readers and writers."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ReadOptions:
    encoding: str = "utf-8"
    delimiter: str | None = None  # None: sniffed from the first lines (io/sniff.py)
    skip_rows: int = 0
    strip_whitespace: bool = True
    sample_lines: int = 20


@dataclass(frozen=True)
class WriteOptions:
    encoding: str = "utf-8"
    delimiter: str = ","
    newline: str = "\n"
