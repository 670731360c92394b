"""A bounded walk over a file tree that one bad entry cannot stop.

``Walker`` yields every entry below a folder depth first in name order (so results come
sorted by path), without recursion (a tree thousands of levels deep is just a long walk)
and at most ``max_entries`` of them. Each entry says what it is:

- ``dir`` — a folder (a symlink to a folder is listed, never entered: no loops);
- ``file`` — a regular file, or a symlink to one;
- ``skip`` — something no file tool opens, with the reason: a named pipe, socket or
  device (reading one can block for ever), a symlink loop, a broken symlink.

The folders in ``IGNORED_DIRS`` are not entered (below the starting folder); a folder
that cannot be read is left out quietly, as in any search over a tree.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..core import escape_surrogates, file_kind

__all__ = ["IGNORED_DIRS", "WALK_MAX_ENTRIES", "Entry", "Walker", "entry_problem", "skipped_note"]

IGNORED_DIRS = frozenset({".git", "__pycache__", ".harness_nb", "node_modules", ".venv"})
"""Folders never searched: version control, caches, dependencies, harness_nb's own files."""
WALK_MAX_ENTRIES = 100_000
"""Most entries one glob or grep looks at; past it the walk stops and says so."""
NOTE_MAX_NAMES = 10
"""Most skipped entries named in a note (the rest are counted)."""

Kind = Literal["dir", "file", "skip"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the walk: its path, its path relative to the start (``/`` form, as
    Python holds it: not-UTF-8 bytes are surrogates), its kind and, for ``skip``, why."""

    path: Path
    rel: str
    kind: Kind
    problem: str = ""
    link: bool = False


def entry_problem(entry: os.DirEntry[str]) -> tuple[Kind, str]:
    """What ``entry`` is, following a symlink once, without ever opening it."""
    try:
        if entry.is_symlink():
            try:
                mode = os.stat(entry.path).st_mode
            except FileNotFoundError:
                return "skip", "broken symlink"
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    return "skip", "symlink loop"
                return "skip", f"unreadable symlink ({exc.strerror or exc})"
        # The type from the listing itself (no system call) settles the common cases.
        elif entry.is_dir(follow_symlinks=False):
            return "dir", ""
        elif entry.is_file(follow_symlinks=False):
            return "file", ""
        else:
            mode = entry.stat(follow_symlinks=False).st_mode
    except OSError as exc:  # vanished since the listing, or no permission
        return "skip", f"unreadable ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "dir", ""
    if stat.S_ISREG(mode):
        return "file", ""
    return "skip", f"{file_kind(mode)}, not read"


class Walker:
    """Iterate once over the entries below ``folder``. After the walk, ``cut`` says whether
    it stopped at ``max_entries``. ``stop`` (a ``threading.Event``) ends it early, as when
    the caller was cancelled; ``max_depth`` limits how many levels down it goes."""

    def __init__(
        self,
        folder: Path,
        *,
        stop: threading.Event | None = None,
        max_depth: int | None = None,
        max_entries: int = WALK_MAX_ENTRIES,
    ) -> None:
        self.folder = folder
        self.stop = stop or threading.Event()
        self.max_depth = max_depth
        self.max_entries = max_entries
        self.visited = 0
        self.cut = False

    def _list(self, folder: Path, rel: str) -> list[Entry]:
        entries: list[Entry] = []
        try:
            with os.scandir(folder) as it:
                for item in it:
                    if self.visited >= self.max_entries:
                        self.cut = True
                        break
                    self.visited += 1
                    kind, problem = entry_problem(item)
                    if kind == "dir" and item.name in IGNORED_DIRS:
                        continue
                    link = item.is_symlink()
                    path = folder / item.name
                    entries.append(Entry(path, f"{rel}{item.name}", kind, problem, link))
        except OSError:
            return entries  # an unreadable folder is left out, as in any search
        entries.sort(key=lambda e: e.rel)
        return entries

    def __iter__(self) -> Iterator[Entry]:
        # A stack of (depth, entries still to yield, reversed): depth first, name order.
        stack: list[tuple[int, list[Entry]]] = [(1, self._list(self.folder, "")[::-1])]
        while stack:
            depth, pending = stack[-1]
            if not pending:
                stack.pop()
                continue
            if self.stop.is_set():
                return
            entry = pending.pop()
            yield entry
            if entry.kind == "dir" and not entry.link and not self.cut:
                if self.max_depth is None or depth < self.max_depth:
                    stack.append((depth + 1, self._list(entry.path, entry.rel + "/")[::-1]))


def skipped_note(skipped: list[Entry], *, cut: bool = False, limit: int = 0) -> str:
    """One line naming the entries left out (at most ``NOTE_MAX_NAMES`` by name) and, when
    ``cut``, that the walk stopped at ``limit`` entries; ``""`` when there is nothing."""
    parts = []
    if skipped:
        named = ", ".join(
            f"{escape_surrogates(e.rel)} ({e.problem})" for e in skipped[:NOTE_MAX_NAMES]
        )
        more = len(skipped) - NOTE_MAX_NAMES
        tail = f" and {more} more" if more > 0 else ""
        noun = "entry" if len(skipped) == 1 else "entries"
        parts.append(f"skipped {len(skipped)} {noun} no file tool reads: {named}{tail}")
    if cut:
        parts.append(
            f"stopped after looking at {limit:,} entries; narrow `path` to search the rest"
        )
    return f"[{'; '.join(parts)}]" if parts else ""
