"""A snapshot of the workdir: a bounded walk into a ``Manifest`` of what each path is.

``Snapshotter.take(previous)`` walks the workdir with ``os.scandir`` and records, per path
(relative, ``/``-separated), an ``Entry``: its kind, permission bits, size, times, inode
and — for a file or a symlink — the id of its content in the ``GitStore``. A file is read
and stored only when its signature (kind, mode, size, mtime, ctime, inode) differs from
``previous``'s, so a snapshot of an unchanged tree costs a stat walk. The ctime is part of
the signature because nothing short of the system clock can set it: a command that writes
a file and puts its mtime back (``touch -r``) still changes it. An entry written within
``RACY_NS`` of the previous snapshot is not trusted (git's "racily clean" rule: a second
write in the same clock tick can leave every time unchanged) and is read again.

The walk never follows a symlink and cannot be redirected by one: every folder is opened
relative to its parent's descriptor with ``O_NOFOLLOW`` and checked (same inode) before it
is listed; a file is opened the same way with ``O_NONBLOCK`` and checked with ``fstat``
before it is read; a symlink is stored as its target; a named pipe, socket or device is
recorded by kind and never opened. Files over ``max_file_bytes`` (the cap) are recorded by
size and times only: their content cannot come back. So are files beyond the snapshot's
byte budget (a first snapshot of a huge tree), which later snapshots store as the budget
allows.

Left out of the walk (none is an effect a person wants undone, and each changes on its
own): the harness's own state under ``.harness_nb/`` (``HARNESS_STATE``, and that folder
itself: the sandbox makes it as a mount point), regenerable
caches (``CACHE_DIRS``), virtualenvs (a folder holding ``pyvenv.cfg``), the folders in
``skip`` (the checkpoint store when it lies inside the workdir, IPython's folder), and in
every ``.git`` folder everything but the files that run programs (``protection``): a new
``.git`` folder or file anywhere is still seen. A walk past ``max_entries`` entries or
``max_depth`` folders deep stops there: the manifest is ``partial`` and names the folders
it did not finish (``incomplete``), so that a diff never calls their contents deleted.
Given a ``FolderWatch``, the walk watches every folder it enters (``watch.py``).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.fs import file_kind
from .gitstore import GitStore
from .protected import HARNESS_STATE, protection
from .watch import FolderWatch

__all__ = [
    "CACHE_DIRS",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "RACY_NS",
    "SNAPSHOT_BUDGET",
    "Entry",
    "Manifest",
    "Snapshotter",
]

CACHE_DIRS = frozenset(
    {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules", ".ipynb_checkpoints", ".cache"}
)
"""Folders anywhere in the tree that tools regenerate (``.cache``: the XDG cache of a home
folder inside the workdir): never walked, never restored."""
MAX_ENTRIES = 200_000
"""Most entries one snapshot records; past it the snapshot is partial."""
MAX_DEPTH = 64
"""Deepest folder one snapshot enters; deeper ones are left incomplete."""
SNAPSHOT_BUDGET = 2 << 30
"""Most bytes of new content one snapshot stores (a first snapshot of a large tree)."""
RACY_NS = 1_000_000_000
"""Entries changed this close to the previous snapshot are read again (see the module doc)."""

_FILE_TYPES = {
    "file": stat.S_IFREG,
    "symlink": stat.S_IFLNK,
    "folder": stat.S_IFDIR,
    "named pipe": stat.S_IFIFO,
    "socket": stat.S_IFSOCK,
}
# Inside a .git folder: what git itself rewrites all the time and never runs.
_GIT_BULK = frozenset({"objects", "refs", "logs", "lfs", "rr-cache", "index", "packed-refs"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Entry:
    """One path of a snapshot. ``kind``: ``core.file_kind``'s word (``file``, ``symlink``,
    ``folder``, ``named pipe``, ``socket``, ``device``); ``mode``: its permission bits;
    ``blob``: the store id of a file's content or a symlink's target (``None``: a folder, a
    special file, or content not kept)."""

    kind: str
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    blob: str | None = None
    stamp: tuple[int, int, int, int, int] = field(init=False, repr=False, compare=False)
    """What ``lstat`` said, as compared in the walk: (st_mode, size, mtime, ctime, inode)."""

    def __post_init__(self) -> None:
        mode = _FILE_TYPES.get(self.kind, 0) | self.mode
        object.__setattr__(self, "stamp", (mode, self.size, self.mtime_ns, self.ctime_ns, self.ino))

    @property
    def kept(self) -> bool:
        """Whether its content is in the store (a folder or special file has none to keep)."""
        return self.blob is not None or self.kind not in ("file", "symlink")

    def same(self, other: Entry) -> bool:
        """Whether ``other`` is this entry as far as a person cares: same kind, permission
        bits and content (a folder: kind and mode; content not kept: size and mtime)."""
        if (self.kind, self.mode) != (other.kind, other.mode):
            return False
        if self.kind not in ("file", "symlink"):
            return True
        if self.blob is not None and other.blob is not None:
            return self.blob == other.blob
        return (self.size, self.mtime_ns, self.blob) == (other.size, other.mtime_ns, other.blob)

    def to_json(self) -> list[object]:
        return [self.kind, self.mode, self.size, self.mtime_ns, self.ctime_ns, self.ino, self.blob]

    @classmethod
    def from_json(cls, row: list[Any]) -> Entry:
        kind, mode, size, mtime, ctime, ino, blob = row
        blob = None if blob is None else str(blob)
        return cls(str(kind), int(mode), int(size), int(mtime), int(ctime), int(ino), blob)


@dataclass
class Manifest:
    """What a snapshot found: ``entries`` by relative path, when it was ``taken``
    (``time.time_ns()`` at its start), the folders it did not finish (``incomplete``; ``""``
    is the workdir itself) and, when it stopped early, why (``partial``); ``read``: how many
    files it had to read (their signature was new)."""

    entries: dict[str, Entry] = field(default_factory=dict)
    taken_ns: int = 0
    incomplete: frozenset[str] = frozenset()
    partial: str = ""
    read: int = 0
    """How many files this snapshot had to read (0: every entry was known already)."""

    def covers(self, rel: str) -> bool:
        """Whether the walk finished every folder above ``rel`` (so its absence means it is
        not there)."""
        if not self.incomplete:
            return True
        parts = rel.split("/")
        return not any("/".join(parts[:n]) in self.incomplete for n in range(len(parts)))

    def to_json(self) -> dict[str, Any]:
        return {
            "taken_ns": self.taken_ns,
            "incomplete": sorted(self.incomplete),
            "partial": self.partial,
            "entries": {rel: e.to_json() for rel, e in self.entries.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            {str(rel): Entry.from_json(row) for rel, row in data["entries"].items()},
            int(data["taken_ns"]),
            frozenset(map(str, data["incomplete"])),
            str(data["partial"]),
        )

    def copy(self) -> Manifest:
        """A copy whose entries may be changed without touching this one."""
        return Manifest(dict(self.entries), self.taken_ns, self.incomplete, self.partial, self.read)


class Snapshotter:
    """Takes snapshots of ``workdir`` into ``store`` (see the module doc). ``folders``:
    more protected folders (relative paths of agent folders given to the harness)."""

    def __init__(
        self,
        workdir: Path,
        store: GitStore,
        *,
        max_file_bytes: int,
        skip: Iterable[Path] = (),
        folders: Iterable[str] = (),
        max_entries: int = MAX_ENTRIES,
        max_depth: int = MAX_DEPTH,
        budget: int = SNAPSHOT_BUDGET,
        racy_ns: int = RACY_NS,
        watch: FolderWatch | None = None,
    ) -> None:
        self.workdir = workdir
        self.store = store
        self.max_file_bytes = max_file_bytes
        self.skip = list(skip)
        self.folders = tuple(folders)
        self.max_entries = max_entries
        self.max_depth = max_depth
        self.budget = budget
        self.racy_ns = racy_ns
        self.watch = watch

    def take(self, previous: Manifest | None = None) -> Manifest:
        """A snapshot of the workdir now, storing the content of every file whose
        signature differs from ``previous``'s. Blocking: run it on a worker thread."""
        walk = _Walk(self, previous)
        if self.watch is not None:
            self.watch.start_walk()
        root = os.open(self.workdir, _DIR_FLAGS)
        try:
            if self.watch is not None:
                self.watch.add(root)
            walk.folder(root, "", 0, in_git=False)
        finally:
            os.close(root)
        return Manifest(walk.entries, walk.taken_ns, frozenset(walk.incomplete), walk.partial, walk.read)


class _Walk:
    """The state of one snapshot's walk."""

    def __init__(self, owner: Snapshotter, previous: Manifest | None) -> None:
        self.owner = owner
        self.store = owner.store
        self.taken_ns = time.time_ns()
        self.previous = previous.entries if previous is not None else {}
        # entries the previous snapshot saw settled for at least RACY_NS can be trusted
        self.trusted_before = (previous.taken_ns - owner.racy_ns) if previous is not None else 0
        self.entries: dict[str, Entry] = {}
        self.incomplete: set[str] = set()
        self.partial = ""
        self.budget = owner.budget
        self.read = 0
        self.skipped: set[tuple[int, int]] = set()
        for path in owner.skip:
            try:
                found = os.stat(path)
            except OSError:
                continue
            self.skipped.add((found.st_dev, found.st_ino))

    def stop(self, where: str, why: str) -> None:
        self.incomplete.add(where.rstrip("/"))
        if not self.partial:
            self.partial = why

    def folder(self, fd: int, prefix: str, depth: int, *, in_git: bool) -> None:
        try:
            with os.scandir(fd) as listing:
                items = list(listing)
        except OSError:
            self.stop(prefix, f"{prefix or 'the workdir'} could not be read")
            return
        # the loop every snapshot runs over every entry: kept lean (locals, no calls for
        # an entry whose stamp is known and settled)
        entries, previous, trusted, limit = self.entries, self.previous, self.trusted_before, self.owner.max_entries
        state_folder = prefix == ".harness_nb/"
        for item in items:
            if len(entries) >= limit:
                self.stop(prefix, f"the workdir has more than {limit:,} entries")
                return
            name = item.name
            if name in CACHE_DIRS or (state_folder and name in HARNESS_STATE):
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            rel = prefix + name
            if stat.S_ISDIR(st.st_mode):
                self._folder(fd, rel, name, st, depth, in_git=in_git)
                continue
            if in_git and protection(rel, folders=self.owner.folders) is None:
                continue
            known = previous.get(rel)
            if (
                known is not None
                and known.stamp == (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                and known.mtime_ns < trusted
                and known.ctime_ns < trusted
                and (known.blob is not None or known.size > self.owner.max_file_bytes)
            ):
                entries[rel] = known
            else:
                entries[rel] = self._entry(fd, name, st)

    def _folder(self, fd: int, rel: str, name: str, st: os.stat_result, depth: int, *, in_git: bool) -> None:
        if (st.st_dev, st.st_ino) in self.skipped or (in_git and name in _GIT_BULK):
            return
        if depth >= self.owner.max_depth:
            self.stop(rel, f"{rel} is more than {self.owner.max_depth} folders deep")
            return
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            self.stop(rel, f"{rel} could not be opened")
            return
        try:
            opened = os.fstat(child)
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                return  # replaced since it was listed: the next snapshot sees what is there
            git = in_git or name == ".git"
            if not git and _is_virtualenv(child):
                return
            if self.owner.watch is not None:
                self.owner.watch.add(child)
            # .harness_nb itself is the harness's (the sandbox makes it as a mount point); what
            # is put in it is watched like anything else
            if rel != ".harness_nb" and (not git or protection(rel, folders=self.owner.folders) is not None):
                self.entries[rel] = Entry("folder", stat.S_IMODE(st.st_mode), 0, 0, 0, st.st_ino)
            self.folder(child, rel + "/", depth + 1, in_git=git)
        finally:
            os.close(child)

    def _entry(self, fd: int, name: str, st: os.stat_result) -> Entry:
        """The entry of ``name``, its content read and stored (its stamp was not known)."""
        kind = file_kind(st.st_mode)
        entry = Entry(kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if kind not in ("file", "symlink"):
            return entry
        self.read += 1
        if kind == "symlink":
            try:
                return _with_blob(entry, self.store.write("blob", os.readlink(os.fsencode(name), dir_fd=fd)))
            except OSError:
                return entry
        if st.st_size > self.owner.max_file_bytes:
            return entry
        if st.st_size > self.budget:
            self.partial = self.partial or "the first snapshot of this workdir is still being stored"
            return entry
        data = self._read(fd, name, st)
        if data is None:
            return entry
        self.budget -= len(data)
        return _with_blob(entry, self.store.write("blob", data))

    def _read(self, fd: int, name: str, st: os.stat_result) -> bytes | None:
        """The content of regular file ``name`` if it is still the file listed and within
        the cap; ``None`` otherwise."""
        try:
            handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
        except OSError:
            return None
        try:
            opened = os.fstat(handle)
            if not stat.S_ISREG(opened.st_mode) or opened.st_ino != st.st_ino:
                return None
            with os.fdopen(handle, "rb", closefd=False) as fh:
                data = fh.read(self.owner.max_file_bytes + 1)
        except OSError:
            return None
        finally:
            os.close(handle)
        return data if len(data) <= self.owner.max_file_bytes else None


def _with_blob(entry: Entry, blob: str) -> Entry:
    return Entry(entry.kind, entry.mode, entry.size, entry.mtime_ns, entry.ctime_ns, entry.ino, blob)


def _is_virtualenv(fd: int) -> bool:
    try:
        os.stat("pyvenv.cfg", dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True
