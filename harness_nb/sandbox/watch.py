"""``FolderWatch``: whether anything in the workdir may have changed since the last walk,
from Linux's inotify, so that the snapshot *before* a call can often be the one taken
after the previous call instead of a second walk.

Every folder a snapshot enters is watched (by its open descriptor, through
``/proc/self/fd``, so a folder swapped for a symlink is never the one watched); any event
— a file written, created, deleted, moved, its mode or times changed — or a lost event
queue makes the workdir "changed". The kernel queues an event within the call that changes
a file, so an empty queue after a walk means nothing was written since through a path the
walk saw. What inotify cannot see is a write through a mapping or descriptor a process
opened before the walk; the snapshot *after* a call is therefore always a full walk, and
only the attribution of such a change between two calls could be off (it would count as
the next call's).

Where inotify is missing (not Linux) or runs out of watches, ``changed`` is always true:
every snapshot walks.

A folder can also be watched for some of its entries only (``add(fd, names=...)``): its
events about other entries are read and dropped. ``ReadWatch`` watches the folders above
what it read that way, for the one name on the way down: the workdir for ``.claude``, not
for every notebook autosave and every file the agent writes there.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
import struct
import sys
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path

__all__ = ["FolderWatch", "ReadWatch", "linked"]

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_IGNORED = 0x8000  # the watch is gone (its folder deleted, or the file system unmounted)
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name
_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
    | _IN_DELETE_SELF | _IN_MOVE_SELF
)
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC


class FolderWatch:
    """inotify watches on the folders of the last walk (see the module doc)."""

    def __init__(self) -> None:
        self._fd = -1
        self._lock = threading.Lock()
        self._broken = False
        self._names: dict[int, frozenset[bytes] | None] = {}  # watch -> the entries it is for (None: all)
        self._filtered = False  # some watch is for some entries only: events are parsed
        self._libc = _libc()
        if self._libc is not None:
            fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            self._fd = fd if fd >= 0 else -1

    @property
    def working(self) -> bool:
        return self._fd >= 0 and not self._broken

    def start_walk(self) -> None:
        """A walk begins: what happened before it is in what it will see."""
        self._drain()
        self._broken = False

    def add(self, folder_fd: int, names: Iterable[str] | None = None) -> None:
        """Watch the folder open as ``folder_fd`` (before it is listed, so that nothing
        written into it after the listing goes unseen): for everything in it, or with
        ``names`` for those entries only (and the folder itself). A folder added twice is
        watched for what either asked."""
        if self._fd < 0 or self._libc is None:
            return
        path = f"/proc/self/fd/{folder_fd}".encode()
        wd = self._libc.inotify_add_watch(self._fd, path, _MASK)
        if wd < 0:
            self._broken = True  # out of watches (ENOSPC), or no /proc: walk every time
            return
        wanted = None if names is None else frozenset(os.fsencode(n) for n in names)
        with self._lock:
            if wd in self._names:
                known = self._names[wd]
                wanted = None if known is None or wanted is None else known | wanted
            self._names[wd] = wanted
            self._filtered = self._filtered or wanted is not None

    def changed(self) -> bool:
        """Whether anything may have changed since the last walk began."""
        if not self.working:
            return True
        return self._drain()

    def _drain(self) -> bool:
        """Read every queued event; whether there was any that counts."""
        if self._fd < 0:
            return True
        seen = False
        with self._lock:
            while True:
                try:
                    events = os.read(self._fd, 65536)  # whole events: the kernel never splits one
                except BlockingIOError:
                    return seen
                except OSError as exc:
                    if exc.errno == errno.EINTR:
                        continue
                    self._broken = True
                    return True
                if not events:
                    return seen
                seen = seen or not self._filtered or self._counts(events)

    def _counts(self, events: bytes) -> bool:
        """Whether one of ``events`` is about what its watch is for: an entry it names, the
        folder itself (no name), a watch gone, or events lost (``IN_Q_OVERFLOW``, no watch)."""
        counts = False
        offset = 0
        while offset + _EVENT.size <= len(events):
            wd, mask, _cookie, size = _EVENT.unpack_from(events, offset)
            start = offset + _EVENT.size
            name = events[start : start + size].split(b"\0", 1)[0]
            offset = start + size
            wanted = self._names.get(wd)  # None also for the overflow event's wd, -1
            if mask & _IN_IGNORED:
                self._names.pop(wd, None)
                counts = True
            elif wanted is None or not name or name in wanted:
                counts = True
        return counts

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ReadWatch:
    """Whether files read from some folders may have changed since they were read, known
    without the file system: for what a cache keeps of a few files (the settings files'
    rules, the skill catalog) so that the event loop can use it without a worker thread.

    ``reading(folders, files=...)`` starts watching before the files are read: each
    folder whole, and the way down to each folder and file, the two folders above it, for
    the one entry on that way only (where a folder is made, removed or moved: a file
    written beside ``.claude`` is no news about the skills under it). ``read(trusted=...)``
    says the read is done, ``unchanged()`` then says whether no such event has come since:
    a file written, created, deleted or moved in a folder watched whole, an entry on a way
    down made, removed, moved or changed, or a watched folder itself. ``trusted``: the
    watches show every change to what was read — not so when a file read is a link to one
    elsewhere (written through its other name, it changes without an event here), or a
    folder is missing that is not watched from the one above. Without inotify,
    ``unchanged`` is always false. Not thread-safe: call it under the lock its owner reads
    under."""

    def __init__(self) -> None:
        self._watch: FolderWatch | None = None
        self._quiet = False

    def reading(self, folders: Iterable[Path] = (), *, files: Iterable[Path] = ()) -> set[Path]:
        """A read begins: watch ``folders`` whole and the way down to them and to ``files``
        from now on. Returns the folders to watch that are missing."""
        if self._watch is None:
            self._watch = FolderWatch()
            weakref.finalize(self, self._watch.close)
        self._watch.start_walk()
        self._quiet = False
        wanted: dict[Path, set[str] | None] = dict.fromkeys(folders)  # watched whole
        for target in [*wanted, *files]:
            for entry in (target, target.parent):  # from the folder above, and the one above that
                names = wanted.setdefault(entry.parent, set())
                if names is not None:
                    names.add(entry.name)
        return self._add(wanted)

    def reading_more(self, folders: Iterable[Path]) -> set[Path]:
        """Watch ``folders`` whole too, found in the course of the read (before their files
        are read). Returns those that are missing."""
        if self._watch is None:
            raise RuntimeError("reading_more before reading")
        return self._add(dict.fromkeys(folders))

    def _add(self, wanted: dict[Path, set[str] | None]) -> set[Path]:
        assert self._watch is not None
        missing = set()
        for folder, names in wanted.items():
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                missing.add(folder)
                continue
            try:
                self._watch.add(fd, names)
            finally:
                os.close(fd)
        return missing

    def read(self, *, trusted: bool) -> None:
        """The read that ``reading`` began is done."""
        self._quiet = trusted and self._watch is not None and self._watch.working

    def unchanged(self) -> bool:
        """Whether nothing read can have changed since ``read`` (false from the first event
        until the next read). Never blocks: one read of the event queue."""
        if not self._quiet or self._watch is None or self._watch.changed():
            self._quiet = False
            return False
        return True

    def close(self) -> None:
        self._quiet = False
        if self._watch is not None:
            self._watch.close()


def linked(path: Path) -> bool:
    """Whether ``path`` is a symbolic link or a file with more than one name (a ``ReadWatch``
    on its folder would miss a change made through the other)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: count it as one
    return stat.S_ISLNK(st.st_mode) or (not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library's inotify calls, looked up once per process: in the symbols the
    interpreter already has (``CDLL(None)``), not by ``find_library``, which runs
    ``ldconfig -p`` in a subprocess (~2 ms, and every harness built made two watches)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc
