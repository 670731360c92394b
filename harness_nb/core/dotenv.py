"""``.env`` files under a working directory: found by a bounded walk, parsed, and noticed
when they change — the part of ``Secrets`` that reads the disk.

The walk is hostile-input safe: it never follows a symlinked folder, skips version-control,
virtualenv and cache folders, stops after ``MAX_DIRS`` folders, ``MAX_DEPTH`` levels and
``MAX_FILES`` files, opens a file without blocking (a FIFO named ``.env`` cannot hang it),
reads only regular files and at most ``MAX_BYTES`` of each.

A ``DotenvScan`` remembers the modification times of every folder it walked and file it
read; ``changed()`` re-stats them (no listing, no reading), so a caller can look often and
re-walk only when a ``.env`` was written, added or removed.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DotenvScan", "is_dotenv_name", "parse_dotenv", "scan_dotenv"]

MAX_DEPTH = 3  # the workdir is depth 0
MAX_DIRS = 256
MAX_FILES = 32
MAX_BYTES = 64 * 1024
MAX_VALUE_LINES = 200  # a quoted value spanning lines (a PEM key) ends by this many lines
SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".harness_nb", "node_modules", "__pycache__", ".venv", "venv",
        ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints",
        "site-packages",
    }
)  # fmt: skip
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)$")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


def is_dotenv_name(name: str) -> bool:
    """``.env``, ``.env.<anything>`` (``.env.local``, ``.env.production``), ``<name>.env``
    and direnv's ``.envrc``."""
    return name == ".env" or name.startswith(".env.") or name == ".envrc" or (name.endswith(".env") and name != ".env")


def parse_dotenv(text: str) -> dict[str, str]:
    """The ``NAME=value`` pairs of a ``.env`` text, as python-dotenv and docker compose read
    them: ``export`` prefixes, ``#`` comments (also after an unquoted value), single quotes
    (literal), double quotes (with ``\\n``-style escapes) and quoted values spanning lines.
    Lines that are not assignments are skipped."""
    pairs: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        match = _LINE.match(line)
        if match is None:
            continue
        name, rest = match.group(1), match.group(2).strip()
        pairs[name] = _value(rest, lines)
    return pairs


def _value(rest: str, lines: Iterator[str]) -> str:
    quote = rest[:1]
    if quote not in ("'", '"'):
        return re.split(r"\s+#", rest, maxsplit=1)[0].strip()
    body = rest[1:]
    for _ in range(MAX_VALUE_LINES):
        end = _closing(body, quote)
        if end is not None:
            body = body[:end]
            break
        following = next(lines, None)
        if following is None:
            break
        body = f"{body}\n{following}"
    if quote == "'":
        return body
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), body)


def _closing(body: str, quote: str) -> int | None:
    """Index of the quote closing ``body`` (a backslash escapes one in double quotes)."""
    i = 0
    while i < len(body):
        if body[i] == "\\" and quote == '"':
            i += 2
            continue
        if body[i] == quote:
            return i
        i += 1
    return None


@dataclass
class DotenvScan:
    """What one walk of ``root`` found: every ``NAME=value`` of its ``.env`` files (file by
    file), and the stamps (modification time, size, inode) it saw."""

    root: Path
    files: dict[Path, dict[str, str]] = field(default_factory=dict)
    stamps: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    truncated: bool = False  # a limit stopped the walk

    def pairs(self) -> Iterator[tuple[str, str]]:
        """Every ``(name, value)`` found, file by file."""
        for found in self.files.values():
            yield from found.items()

    def changed(self) -> bool:
        """Whether a folder walked or a file read has changed (or gone) since the scan: a
        folder's time changes when an entry is added, removed or renamed in it."""
        for path, seen in self.stamps.items():
            try:
                st = os.stat(path)
            except OSError:
                return True
            if (st.st_mtime_ns, st.st_size, st.st_ino) != seen:
                return True
        return False


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def scan_dotenv(root: Path) -> DotenvScan:
    """Walk ``root`` (bounded, see the module docstring) and read its ``.env`` files."""
    scan = DotenvScan(root)
    pending: deque[tuple[str, int]] = deque([(str(root), 0)])  # breadth first: shallow files first
    walked = 0
    while pending:
        folder, depth = pending.popleft()
        if walked >= MAX_DIRS:
            scan.truncated = True
            break
        walked += 1
        try:
            with os.scandir(folder) as entries:
                listing = list(entries)
            scan.stamps[folder] = _stamp(os.stat(folder))
        except OSError:
            continue
        if any(e.name == "pyvenv.cfg" for e in listing) and depth > 0:
            continue  # a virtualenv: installed packages, not the project's settings
        for entry in listing:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < MAX_DEPTH and entry.name not in SKIP_DIRS:
                        pending.append((entry.path, depth + 1))
                elif is_dotenv_name(entry.name):
                    if len(scan.files) >= MAX_FILES:
                        scan.truncated = True
                        continue
                    _read(scan, Path(entry.path))
            except OSError:
                continue
    return scan


def _read(scan: DotenvScan, path: Path) -> None:
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        data = os.read(fd, MAX_BYTES)
    finally:
        os.close(fd)
    scan.stamps[str(path)] = _stamp(st)
    scan.files[path] = parse_dotenv(data.decode("utf-8", errors="replace"))
