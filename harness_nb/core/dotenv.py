"""``.env`` files under a working directory: found by a bounded walk, parsed, and kept
current. ``Secrets`` masks their values; the sandbox hides the same files from ``bash``
(``sandbox.dotenv_files``): one walk, so the two cannot disagree.

The walk goes to any depth, breadth first (shallow files first), and into virtualenvs (a
``.env`` kept in ``venv/`` is still someone's settings). It skips only what nobody keeps
settings in and what holds most of a tree's folders: version-control internals, installed
packages (``site-packages``, ``node_modules``) and tool caches. It is safe on a hostile
tree: it never follows a symlinked folder, stops after ``MAX_DIRS`` folders, ``MAX_ENTRIES``
entries and ``MAX_FILES`` files (``truncated`` then says so), opens a file without blocking
(a FIFO named ``.env`` cannot hang it), reads only regular files and at most ``MAX_BYTES``
of each.

A ``DotenvScan`` remembers the modification time of every folder it walked and file it
read; ``update()`` re-stats them (no listing, no reading) and re-lists only the folders that
changed, so a caller can look before every tool result.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DotenvScan", "is_dotenv_name", "parse_dotenv", "scan_dotenv"]

MAX_DIRS = 4096
MAX_ENTRIES = 100_000  # directory entries looked at, over all folders
MAX_FILES = 256
MAX_BYTES = 64 * 1024
MAX_VALUE_LINES = 200  # a quoted value spanning lines (a PEM key) ends by this many lines
SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".harness_nb", "node_modules", "site-packages", "dist-packages",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints",
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


_Stamp = tuple[int, int, int]


@dataclass(frozen=True)
class _Folder:
    """One folder walked: its stamp when listed, its depth, and what the listing held."""

    stamp: _Stamp
    depth: int
    entries: int
    subfolders: tuple[str, ...]
    dotenvs: tuple[str, ...]


@dataclass
class DotenvScan:
    """One walk of ``root``, kept current by ``update()``: the ``.env`` files found and, when
    ``read``, every ``NAME=value`` in them (file by file)."""

    root: Path
    read: bool = True
    files: dict[Path, dict[str, str]] = field(default_factory=dict)
    truncated: bool = False  # a limit stopped the walk: files further in are not known
    folders: dict[str, _Folder] = field(default_factory=dict, repr=False)
    stamps: dict[str, _Stamp] = field(default_factory=dict, repr=False)  # of the files read
    entries: int = 0

    def paths(self) -> list[Path]:
        """The ``.env`` files found, shallow ones first."""
        return list(self.files)

    def pairs(self) -> Iterator[tuple[str, str]]:
        """Every ``(name, value)`` found, file by file."""
        for found in self.files.values():
            yield from found.items()

    def changed(self) -> bool:
        """Whether a folder walked or a file read has changed (or gone) since it was looked
        at: a folder's time changes when an entry is added, removed or renamed in it."""
        return bool(self._changed_folders() or self._changed_files())

    def update(self) -> bool:
        """Re-state what was walked and read; re-list the folders that changed and re-read
        the files that did. True when the files found or their values changed."""
        folders, files = self._changed_folders(), self._changed_files()
        if not folders and not files:
            return False
        before = {path: dict(found) for path, found in self.files.items()}
        for folder in folders:
            if folder in self.folders:  # not dropped with a changed folder above it
                self._relist(folder)
        for name in files:
            if name in self.stamps:
                self._drop_file(name)
                self._read(name)
        return self.files != before

    # -- walking ----------------------------------------------------------------------------

    def _walk(self, start: Iterable[tuple[str, int]]) -> None:
        """List the folders ``start`` (path, depth) and everything below them, breadth first."""
        pending = deque(start)
        while pending:
            folder, depth = pending.popleft()
            if len(self.folders) >= MAX_DIRS or self.entries >= MAX_ENTRIES:
                self.truncated = True
                return
            listed = self._list(folder, depth)
            if listed is not None:
                pending.extend((sub, depth + 1) for sub in listed.subfolders)

    def _list(self, folder: str, depth: int) -> _Folder | None:
        try:
            stamp = _stamp(os.stat(folder))
            subfolders: list[str] = []
            dotenvs: list[str] = []
            entries = 0
            with os.scandir(folder) as listing:
                for entry in listing:
                    entries += 1
                    if self.entries + entries > MAX_ENTRIES:
                        self.truncated = True
                        break
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name not in SKIP_DIRS:
                                subfolders.append(entry.path)
                        elif is_dotenv_name(entry.name):
                            dotenvs.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            return None  # unreadable or gone: nothing to find there
        listed = _Folder(stamp, depth, entries, tuple(subfolders), tuple(dotenvs))
        self.folders[folder] = listed
        self.entries += entries
        for path in dotenvs:
            if len(self.files) >= MAX_FILES:
                self.truncated = True
                break
            self._read(path)
        return listed

    def _relist(self, folder: str) -> None:
        old = self.folders.pop(folder)
        self.entries -= old.entries
        new = self._list(folder, old.depth)
        kept_subfolders = set(new.subfolders) if new is not None else set()
        kept_files = set(new.dotenvs) if new is not None else set()
        for sub in old.subfolders:
            if sub not in kept_subfolders:
                self._drop_tree(sub)
        for path in old.dotenvs:
            if path not in kept_files:
                self._drop_file(path)
        if new is not None:
            self._walk((sub, new.depth + 1) for sub in new.subfolders if sub not in self.folders)

    def _drop_tree(self, folder: str) -> None:
        gone = self.folders.pop(folder, None)
        if gone is None:
            return
        self.entries -= gone.entries
        for path in gone.dotenvs:
            self._drop_file(path)
        for sub in gone.subfolders:
            self._drop_tree(sub)

    def _drop_file(self, name: str) -> None:
        self.stamps.pop(name, None)
        self.files.pop(Path(name), None)

    def _read(self, name: str) -> None:
        path = Path(name)
        if not self.read:
            self.files[path] = {}
            return
        try:
            # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever
            fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return
            data = os.read(fd, MAX_BYTES)
        except OSError:
            return
        finally:
            os.close(fd)
        self.stamps[name] = _stamp(st)
        self.files[path] = parse_dotenv(data.decode("utf-8", errors="replace"))

    def _changed_folders(self) -> list[str]:
        changed = []
        for path, folder in self.folders.items():
            try:
                if _stamp(os.stat(path)) != folder.stamp:
                    changed.append(path)
            except OSError:
                changed.append(path)
        return changed

    def _changed_files(self) -> list[str]:
        changed = []
        for path, seen in self.stamps.items():
            try:
                if _stamp(os.stat(path)) != seen:
                    changed.append(path)
            except OSError:
                changed.append(path)
        return changed


def _stamp(st: os.stat_result) -> _Stamp:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def scan_dotenv(root: Path, *, read: bool = True) -> DotenvScan:
    """Walk ``root`` (bounded, see the module docstring) and, when ``read``, parse its
    ``.env`` files."""
    scan = DotenvScan(Path(root), read=read)
    scan._walk([(str(root), 0)])
    return scan
