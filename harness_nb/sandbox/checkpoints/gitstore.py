"""``GitStore``: a bare git repository written in git's own formats, by hand.

The checkpoints keep the workdir's contents here, so ``git --git-dir <store> log``,
``show``, ``diff`` and ``fsck`` work on it, yet nothing of git is run or needed:

- objects are loose, ``objects/ab/cdef…`` = zlib(``<kind> <size>\\0<body>``), named by the
  SHA-1 of the uncompressed bytes; written once (content-addressed), atomically (a
  temporary file renamed into place), read-only like git's own;
- a tree is ``<mode> <name>\\0<20-byte id>`` per entry, sorted as git sorts them (a
  folder's name compares as if it ended in ``/``); modes ``100644``, ``100755``,
  ``120000`` (a symlink: the blob is its target) and ``40000`` (a folder);
- a commit names its tree, its parent, an author and a committer line, then the message;
- ``refs/heads/checkpoints`` holds the newest commit and ``HEAD`` points at it; ``shallow``
  lists the oldest commit kept, so that dropping old checkpoints leaves a history git reads
  as a shallow clone (``fsck`` stays clean).

Level 1 compression: the objects are read back rarely (a rewind), written on every
change, and git reads any level.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import threading
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["GitStore", "StoreError", "TreeItem"]

BRANCH = "refs/heads/checkpoints"
_HEX = re.compile(r"^[0-9a-f]{40}$")
_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"
_IDENTITY = b"harness_nb <harness_nb@localhost>"
_TEMP_NAMES = itertools.count()

TreeItem = tuple[str, bytes, str]
"""One tree entry: git mode (``100644``, ``100755``, ``120000``, ``40000``), name, id."""


class StoreError(OSError):
    """The store is damaged or cannot be written: the message names the object or file."""


class GitStore:
    """The bare repository at ``root`` (created by ``init``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._known: set[str] = set()  # ids known to exist: saves a stat per object
        self._fanout: set[str] = set()  # objects/xx folders known to exist

    # ------------------------------------------------------------------ layout
    def init(self) -> None:
        """Create the repository's folders and files if they are missing (idempotent)."""
        for folder in ("objects", "refs/heads", "refs/tags"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        files = {"HEAD": f"ref: {BRANCH}\n", "config": _CONFIG, "description": "harness_nb checkpoints\n"}
        for name, text in files.items():
            path = self.root / name
            if not path.exists():
                _write_atomic(path, text.encode())

    def _path(self, oid: str) -> Path:
        if not _HEX.match(oid):
            raise StoreError(f"not an object id: {oid!r}")
        return self.root / "objects" / oid[:2] / oid[2:]

    def has(self, oid: str) -> bool:
        """Whether object ``oid`` is in the store."""
        if oid in self._known:
            return True
        if self._path(oid).exists():
            self._known.add(oid)
            return True
        return False

    # ------------------------------------------------------------------ writing
    def write(self, kind: str, body: bytes) -> str:
        """Store an object of ``kind`` (``blob``, ``tree``, ``commit``) holding ``body``;
        its id. Storing what is already there costs one hash."""
        header = f"{kind} {len(body)}\0".encode()
        digest = hashlib.sha1(header, usedforsecurity=False)
        digest.update(body)
        oid = digest.hexdigest()
        if self.has(oid):
            return oid
        path = self._path(oid)
        if oid[:2] not in self._fanout:
            path.parent.mkdir(exist_ok=True)
            self._fanout.add(oid[:2])
        compressor = zlib.compressobj(1)
        data = compressor.compress(header) + compressor.compress(body) + compressor.flush()
        _write_atomic(path, data, mode=0o444)
        self._known.add(oid)
        return oid

    def write_tree(self, items: Iterable[TreeItem]) -> str:
        """Store a tree of ``items`` (sorted here, as git wants them); its id."""
        ordered = sorted(items, key=lambda item: item[1] + b"/" if item[0] == "40000" else item[1])
        body = b"".join(mode.encode() + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in ordered)
        return self.write("tree", body)

    def write_commit(self, tree: str, parent: str | None, message: str, when: int) -> str:
        """Store a commit of ``tree`` after ``parent`` made at ``when`` (Unix seconds)."""
        stamp = f" {when} +0000".encode()
        lines = [b"tree " + tree.encode()]
        if parent:
            lines.append(b"parent " + parent.encode())
        lines += [b"author " + _IDENTITY + stamp, b"committer " + _IDENTITY + stamp]
        body = b"\n".join(lines) + b"\n\n" + message.strip().encode("utf-8", "surrogateescape") + b"\n"
        return self.write("commit", body)

    # ------------------------------------------------------------------ reading
    def read(self, oid: str) -> tuple[str, bytes]:
        """Object ``oid`` as (kind, body), checked against its id (a damaged store is a
        ``StoreError``, never wrong data)."""
        try:
            raw = zlib.decompress(self._path(oid).read_bytes())
        except (OSError, zlib.error) as exc:
            raise StoreError(f"checkpoint object {oid} cannot be read ({exc})") from None
        if hashlib.sha1(raw, usedforsecurity=False).hexdigest() != oid:
            raise StoreError(f"checkpoint object {oid} is damaged (its content does not match its id)")
        header, _, body = raw.partition(b"\0")
        kind, _, size = header.decode("ascii", "replace").partition(" ")
        if not size.isdigit() or int(size) != len(body):
            raise StoreError(f"checkpoint object {oid} is damaged (bad header)")
        return kind, body

    def read_blob(self, oid: str) -> bytes:
        kind, body = self.read(oid)
        if kind != "blob":
            raise StoreError(f"checkpoint object {oid} is a {kind}, not a file's content")
        return body

    def read_tree(self, oid: str) -> Iterator[TreeItem]:
        """The entries of tree ``oid``."""
        kind, body = self.read(oid)
        if kind != "tree":
            raise StoreError(f"checkpoint object {oid} is a {kind}, not a tree")
        at = 0
        while at < len(body):
            space = body.index(b" ", at)
            nul = body.index(b"\0", space)
            yield body[at:space].decode("ascii"), body[space + 1 : nul], body[nul + 1 : nul + 21].hex()
            at = nul + 21

    def commit_tree(self, oid: str) -> str:
        """The tree id of commit ``oid``."""
        kind, body = self.read(oid)
        if kind != "commit" or not body.startswith(b"tree "):
            raise StoreError(f"checkpoint object {oid} is not a commit")
        return body[5:45].decode("ascii")

    def objects(self) -> Iterator[str]:
        """Every loose object id in the store."""
        base = self.root / "objects"
        for folder in base.iterdir() if base.is_dir() else ():
            if len(folder.name) == 2 and folder.is_dir():
                for item in folder.iterdir():
                    oid = folder.name + item.name
                    if _HEX.match(oid):
                        yield oid

    def remove(self, oid: str) -> None:
        """Delete object ``oid`` (pruning; nothing else calls it)."""
        self._known.discard(oid)
        try:
            self._path(oid).unlink()
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ refs
    def head(self) -> str | None:
        """The newest checkpoint commit (``refs/heads/checkpoints``), if any."""
        try:
            oid = (self.root / BRANCH).read_text().strip()
        except FileNotFoundError:
            return None
        return oid if _HEX.match(oid) else None

    def set_head(self, oid: str) -> None:
        path = self.root / BRANCH
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, f"{oid}\n".encode())

    def set_shallow(self, oids: Iterable[str]) -> None:
        """Make ``oids`` the commits git treats as having no parents (their parents were
        pruned); an empty list removes the file."""
        listed = sorted(set(oids))
        path = self.root / "shallow"
        if listed:
            _write_atomic(path, "".join(f"{oid}\n" for oid in listed).encode())
        else:
            path.unlink(missing_ok=True)


def _write_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to a new file beside ``path`` (its final mode from the start), then
    rename it into place: a reader sees the whole file or none."""
    temp = path.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{next(_TEMP_NAMES)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
