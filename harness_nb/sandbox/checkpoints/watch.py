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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
import threading

__all__ = ["FolderWatch"]

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
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

    def add(self, folder_fd: int) -> None:
        """Watch the folder open as ``folder_fd`` (before it is listed, so that nothing
        written into it after the listing goes unseen)."""
        if self._fd < 0 or self._libc is None:
            return
        path = f"/proc/self/fd/{folder_fd}".encode()
        if self._libc.inotify_add_watch(self._fd, path, _MASK) < 0:
            self._broken = True  # out of watches (ENOSPC), or no /proc: walk every time

    def changed(self) -> bool:
        """Whether anything may have changed since the last walk began."""
        if not self.working:
            return True
        return self._drain()

    def _drain(self) -> bool:
        """Read every queued event; whether there was any."""
        if self._fd < 0:
            return True
        seen = False
        with self._lock:
            while True:
                try:
                    if not os.read(self._fd, 65536):
                        return seen
                except BlockingIOError:
                    return seen
                except OSError as exc:
                    if exc.errno == errno.EINTR:
                        continue
                    self._broken = True
                    return True
                seen = True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc
