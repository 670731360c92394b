"""A bounded walk over a file tree that one bad entry cannot stop.

``Walker`` yields every entry below a folder depth first in name order (so results come
sorted by path), without recursion, at most ``max_entries`` of them and at most
``WALK_MAX_DEPTH`` folders deep. Each entry says what it is:

- ``dir`` — a folder (a symlink to a folder is listed, never entered: no loops);
- ``file`` — a regular file, or a symlink to one;
- ``skip`` — something no file tool opens, with the reason: a named pipe, socket or
  device (reading one can block for ever), a symlink loop, a broken symlink.

The folders in ``IGNORED_DIRS`` are not entered (below the starting folder). A walk that
stops short says so (``walk_note``): at its count bound, at its depth bound (a tree 5,000
folders deep is cut at ``WALK_MAX_DEPTH``), and at folders it could not read (past about
4 KiB of path none can be) — a search that found nothing must not look like one that looked
everywhere. Names in notes are escaped (``core.escape_name``).
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

from ..core import escape_name, file_kind

__all__ = ["IGNORED_DIRS", "WALK_MAX_DEPTH", "WALK_MAX_ENTRIES", "Entry", "Walker", "entry_problem", "walk_note"]

IGNORED_DIRS = frozenset({".git", "__pycache__", ".harness_nb", "node_modules", ".venv"})
"""Folders never searched: version control, caches, dependencies, harness_nb's own files."""
WALK_MAX_ENTRIES = 100_000
"""Most entries one glob or grep looks at; past it the walk stops and says so."""
WALK_MAX_DEPTH = 2000
"""Most folder levels one glob or grep goes down; deeper folders are not entered, and the
result says so (no real tree is this deep: it is a hostile one)."""
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
    it stopped at ``max_entries``, ``too_deep`` names the first folder it did not enter for
    being ``WALK_MAX_DEPTH`` levels down, and ``unreadable`` lists the folders it could not
    list (path relative to ``folder``, why). ``stop`` (a ``threading.Event``) ends it early,
    as when the caller was cancelled; ``max_depth`` limits how many levels down it goes
    (a limit the caller chose, such as a pattern's reach: not noted)."""

    def __init__(
        self,
        folder: Path,
        *,
        stop: threading.Event | None = None,
        max_depth: int | None = None,
        max_entries: int | None = None,
    ) -> None:
        self.folder = folder
        self.stop = stop or threading.Event()
        self.max_depth = max_depth
        self.max_entries = WALK_MAX_ENTRIES if max_entries is None else max_entries
        self.visited = 0
        self.cut = False
        self.too_deep: str | None = None
        self.unreadable: list[tuple[str, str]] = []

    @property
    def stopped_short(self) -> bool:
        """Whether part of the tree was not looked at (count or depth bound, unreadable folders)."""
        return self.cut or self.too_deep is not None or bool(self.unreadable)

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
        except OSError as exc:  # the rest of the walk goes on; the note names it
            self.unreadable.append((rel.rstrip("/") or ".", exc.strerror or type(exc).__name__))
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
                if self.max_depth is not None and depth >= self.max_depth:
                    continue
                if depth >= WALK_MAX_DEPTH:
                    self.too_deep = self.too_deep or entry.rel
                    continue
                stack.append((depth + 1, self._list(entry.path, entry.rel + "/")[::-1]))


def _names(items: list[str]) -> str:
    """At most ``NOTE_MAX_NAMES`` of ``items``, and how many more there are."""
    more = len(items) - NOTE_MAX_NAMES
    return ", ".join(items[:NOTE_MAX_NAMES]) + (f" and {more} more" if more > 0 else "")


def walk_note(walker: Walker, skipped: list[Entry]) -> str:
    """One line naming the entries left out (``skipped``: at most ``NOTE_MAX_NAMES`` by
    name), and where ``walker`` stopped short — its count bound, its depth bound, folders it
    could not read; ``""`` when there is nothing to say."""
    parts = []
    if skipped:
        noun = "entry" if len(skipped) == 1 else "entries"
        named = _names([f"{escape_name(e.rel)} ({e.problem})" for e in skipped])
        parts.append(f"skipped {len(skipped)} {noun} no file tool reads: {named}")
    if walker.unreadable:
        noun = "folder" if len(walker.unreadable) == 1 else "folders"
        named = _names([f"{escape_name(rel)} ({why})" for rel, why in walker.unreadable])
        parts.append(f"could not read {len(walker.unreadable)} {noun}: {named}")
    if walker.too_deep is not None:
        shown = escape_name(walker.too_deep)
        if len(shown) > 120:
            shown = f"{shown[:60]}…{shown[-59:]}"
        parts.append(
            f"stopped at {WALK_MAX_DEPTH:,} folder levels: {shown}/ and any other folder that deep were not "
            "searched; give a deeper `path` to search below them"
        )
    if walker.cut:
        parts.append(
            f"stopped after looking at {walker.max_entries:,} entries; narrow `path` to search the rest"
        )
    return f"[{'; '.join(parts)}]" if parts else ""
