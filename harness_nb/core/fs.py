"""Opening files from an untrusted tree without hanging on them.

Opening a named pipe for reading blocks until a writer appears, and reading a device can
block for ever, so harness_nb reads only regular files. ``open_regular`` checks with
``os.stat`` first (a clear error, never an open), then opens with ``O_NONBLOCK`` (a pipe
swapped in after the check cannot block the open either) and checks the opened file
again with ``fstat`` before reading.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["NotRegularFileError", "file_kind", "open_regular", "read_regular"]


class NotRegularFileError(OSError):
    """The path is a named pipe, socket or device: harness_nb never reads one."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(f"{kind}, not a regular file")
        self.filename = os.fspath(path)
        self.kind = kind


def file_kind(mode: int) -> str:
    """What ``st_mode`` describes, in words: ``file``, ``folder``, ``named pipe``, ..."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special file"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary mode, or an ``OSError``: ``NotRegularFileError``
    for a pipe, socket or device, ``IsADirectoryError`` for a folder, the usual ones for a
    missing or unreadable file. Symlinks are followed."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "is a folder", os.fspath(path))
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(path, file_kind(mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, file_kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a regular file (one more than allowed tells the caller
    the file is too big, whatever its size was when checked)."""
    with open_regular(Path(path)) as f:
        return f.read(limit + 1)
