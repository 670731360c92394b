"""``Entry`` and ``Manifest``: what a snapshot (``snapshot.Snapshotter``) records of each
path of the workdir, and of the walk as a whole — what the diffs, the checkpoints on disk
(``history``) and going back (``restore``) read.

A manifest may be partial: its walk stops at bounds (``snapshot.WalkLimits``) and names
the folders it did not finish, so that an absence under them is never read as a deletion
(``Manifest.covers``, ``Manifest.knows``).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from typing import Any

from ..protected import ProtectedPlaces

__all__ = ["Entry", "Manifest", "with_blob"]

_FILE_TYPES = {
    "file": stat.S_IFREG,
    "symlink": stat.S_IFLNK,
    "folder": stat.S_IFDIR,
    "named pipe": stat.S_IFIFO,
    "socket": stat.S_IFSOCK,
}


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
    (``time.time_ns()`` at its start), the folders it did not finish — ``incomplete``, not
    every entry recorded (``""`` is the workdir itself), and of those ``unlisted``, not
    every name read — and, when it stopped early, why (``partial``); ``places``: what it
    found that a path's name does not show; ``read``: how many files it had to read."""

    entries: dict[str, Entry] = field(default_factory=dict)
    taken_ns: int = 0
    incomplete: frozenset[str] = frozenset()
    partial: str = ""
    read: int = 0
    """How many files this snapshot had to read (0: every entry was known already)."""
    unlisted: frozenset[str] = frozenset()
    places: ProtectedPlaces = field(default_factory=ProtectedPlaces)

    def covers(self, rel: str, *, guarded: bool = False) -> bool:
        """Whether the walk finished every folder above ``rel`` (so its absence means it is
        not there). ``guarded``: ``rel`` is protected, which the walk records past its
        bounds too, so only an unlisted folder leaves it unknown."""
        folders = self.unlisted if guarded else self.incomplete
        if not folders:
            return True
        parts = rel.split("/")
        return not any("/".join(parts[:n]) in folders for n in range(len(parts)))

    def knows(self, rel: str, *, guarded: bool = False) -> bool:
        """Whether this snapshot says what ``rel`` was: it recorded it, or it covers it."""
        return rel in self.entries or self.covers(rel, guarded=guarded)

    def header(self) -> dict[str, Any]:
        """Everything but the entries, as JSON (``History`` writes the entries itself)."""
        return {
            "taken_ns": self.taken_ns,
            "incomplete": sorted(self.incomplete),
            "partial": self.partial,
            "unlisted": sorted(self.unlisted),
            "git_dirs": sorted(self.places.git_dirs),
            "hooks": sorted(self.places.hooks),
        }

    def to_json(self) -> dict[str, Any]:
        return {**self.header(), "entries": {rel: e.to_json() for rel, e in self.entries.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        places = ProtectedPlaces(
            git_dirs=frozenset(map(str, data.get("git_dirs", ()))), hooks=frozenset(map(str, data.get("hooks", ())))
        )
        return cls(
            {str(rel): Entry.from_json(row) for rel, row in data["entries"].items()},
            int(data["taken_ns"]),
            frozenset(map(str, data["incomplete"])),
            str(data["partial"]),
            unlisted=frozenset(map(str, data.get("unlisted", ()))),
            places=places,
        )

    def copy(self) -> Manifest:
        """A copy whose entries may be changed without touching this one."""
        return Manifest(
            dict(self.entries), self.taken_ns, self.incomplete, self.partial, self.read, self.unlisted, self.places
        )


def with_blob(entry: Entry, blob: str) -> Entry:
    """``entry`` with its content stored as ``blob``."""
    return Entry(entry.kind, entry.mode, entry.size, entry.mtime_ns, entry.ctime_ns, entry.ino, blob)
