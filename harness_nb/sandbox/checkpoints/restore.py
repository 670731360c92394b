"""Putting paths of the workdir back to a snapshot's state, without following a symlink.

``Restorer.apply(targets)`` takes, per relative path, the ``Entry`` it should be (``None``:
it should not exist) and makes it so. Every path is reached from the workdir's descriptor
one folder at a time with ``O_NOFOLLOW``, so a symlink planted after the snapshot (``data``
now pointing at ``/etc``) is never walked through: a folder that should be there but is a
symlink or a file is replaced by the folder. Content is written to a new file beside its
target and renamed over it (``rename`` replaces a symlink, never what it points at), with
its permission bits and mtime; a symlink is made again as a symlink; a named pipe is made
again; a socket, a device or a file whose content was not kept (over the size cap) cannot
be, and is listed as not restored with why.

A folder that should not exist loses what the snapshots track in it, then goes if it is
empty; one that still holds what snapshots never track (a cache, the harness's own state)
stays, and is listed. A git directory that should not exist (a ``.git`` folder, or one
named in ``whole``: recognised by what it holds) goes whole: nothing in it but its config
and hooks was ever tracked, and all of it came after.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .gitstore import GitStore
from .manifest import Entry

__all__ = ["Restorer", "Restored"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Restored:
    """What ``apply`` did: paths written back, paths removed, and those it could not put
    back, with why."""

    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return [*self.written, *self.removed]


class _Blocked(Exception):
    """A path cannot be reached or put back; the message says why."""


class Restorer:
    """Writes snapshot states back into ``workdir`` from ``store`` (see the module doc)."""

    def __init__(self, workdir: Path, store: GitStore) -> None:
        self.workdir = workdir
        self.store = store

    def apply(
        self, targets: Mapping[str, Entry | None], current: Mapping[str, Entry], *, whole: Container[str] = ()
    ) -> Restored:
        """Make each path of ``targets`` what it maps to; ``current`` is a snapshot taken
        just before (what each path is now); ``whole``: git directories not named ``.git``,
        removed with everything in them. Removals go deepest first, then folders and files
        shallowest first, so a folder exists before what goes into it."""
        done = Restored()
        removals = sorted((p for p, e in targets.items() if e is None), key=lambda p: -p.count("/"))
        writes = sorted((p for p, e in targets.items() if e is not None), key=lambda p: (p.count("/"), p))
        with _opened(self.workdir) as root:
            for rel in removals:
                if rel not in current:
                    continue
                try:
                    if self._remove(root, rel, whole=rel in whole):
                        done.removed.append(rel)
                    else:
                        done.failed.append((rel, "kept: it holds files checkpoints do not track"))
                except (_Blocked, OSError) as exc:
                    done.failed.append((rel, _reason(exc)))
            for rel in writes:
                entry = targets[rel]
                assert entry is not None
                now = current.get(rel)
                if now is not None and now.same(entry):
                    continue
                try:
                    self._write(root, rel, entry, now)
                    done.written.append(rel)
                except (_Blocked, OSError) as exc:
                    done.failed.append((rel, _reason(exc)))
        return done

    # ------------------------------------------------------------------ removing
    def _remove(self, root: int, rel: str, *, whole: bool) -> bool:
        parent, name = _split(rel)
        with self._folder(root, parent, create=False) as fd:
            if fd is None:
                return True
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return True
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=fd)
                return True
            if name == ".git" or whole:
                shutil.rmtree(name, dir_fd=fd)
                return True
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                return False
            return True

    # ------------------------------------------------------------------ writing
    def _write(self, root: int, rel: str, entry: Entry, now: Entry | None) -> None:
        if entry.kind in ("file", "symlink") and entry.blob is None:
            raise _Blocked("its content was not kept (over the size cap, or unreadable then)")
        if entry.kind not in ("file", "symlink", "folder", "named pipe"):
            raise _Blocked(f"a {entry.kind} cannot be made again")
        parent, name = _split(rel)
        with self._folder(root, parent, create=True) as fd:
            assert fd is not None
            if entry.kind == "folder":
                self._make_folder(fd, name, entry)
                return
            temp = f".harness_nb-restore-{secrets.token_hex(6)}"
            try:
                self._make(fd, temp, entry)
                self._clear_folder(fd, name)
                os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=fd)
                raise

    def _make(self, fd: int, temp: str, entry: Entry) -> None:
        if entry.kind == "symlink":
            assert entry.blob is not None
            os.symlink(self.store.read_blob(entry.blob), os.fsencode(temp), dir_fd=fd)
            return
        if entry.kind == "named pipe":
            os.mkfifo(temp, entry.mode, dir_fd=fd)
            os.chmod(temp, entry.mode, dir_fd=fd)  # a name of our own, just made
            return
        assert entry.blob is not None
        data = self.store.read_blob(entry.blob)
        handle = os.open(temp, _NEW_FILE, 0o600, dir_fd=fd)
        try:
            with os.fdopen(handle, "wb", closefd=False) as fh:
                fh.write(data)
            os.fchmod(handle, entry.mode)
            os.utime(handle, ns=(entry.mtime_ns, entry.mtime_ns))
        finally:
            os.close(handle)

    def _make_folder(self, fd: int, name: str, entry: Entry) -> None:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=fd)  # a file or symlink where the folder was
            st = None
        if st is None:
            os.mkdir(name, 0o700, dir_fd=fd)
        folder = os.open(name, _DIR_FLAGS, dir_fd=fd)
        try:
            os.fchmod(folder, entry.mode)
        finally:
            os.close(folder)

    def _clear_folder(self, fd: int, name: str) -> None:
        """A folder where a file goes back: it came after the snapshot, all of it."""
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=fd)

    @contextlib.contextmanager
    def _folder(self, root: int, rel: str, *, create: bool) -> Iterator[int | None]:
        """A descriptor of folder ``rel`` reached without following symlinks; with
        ``create``, missing folders are made and a symlink or file in the way is replaced
        by a folder (it is not what the snapshot had); without, ``None`` when it is not
        there."""
        fd = os.dup(root)
        try:
            for part in rel.split("/") if rel else ():
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                        raise
                    if not create:
                        os.close(fd)
                        fd = -1
                        yield None
                        return
                    if exc.errno != errno.ENOENT:
                        os.unlink(part, dir_fd=fd)
                    os.mkdir(part, 0o755, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
            yield fd
        finally:
            if fd >= 0:
                os.close(fd)


@contextlib.contextmanager
def _opened(folder: Path) -> Iterator[int]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def _split(rel: str) -> tuple[str, str]:
    parent, _, name = rel.rpartition("/")
    if not name or name in (".", "..") or ".." in parent.split("/"):
        raise _Blocked(f"not a path inside the workdir: {rel!r}")
    return parent, name


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)
