"""Opening and writing files in an untrusted tree without hanging on them or being led
elsewhere by a symlink swapped in.

Opening a named pipe for reading blocks until a writer appears, and reading a device can
block for ever, so harness_nb reads only regular files. ``open_regular`` checks with
``os.stat`` first (a clear error, never an open), then opens with ``O_NONBLOCK`` (a pipe
swapped in after the check cannot block the open either) and checks the opened file
again with ``fstat`` before reading.

A path checked and then opened by name can change in between: a folder of it replaced by a
symlink sends the open somewhere else. ``open_folder(base, parts)`` opens each folder of a path
relative to the one before with ``O_NOFOLLOW`` (a symlink met on the way is a
``SymlinkError``), so what is opened is the path that was checked; ``open_regular(name,
dir_fd=…)`` and ``replace_regular(dir_fd, name, data)`` then read and write in that folder,
never through a symlink and never onto a pipe or device.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "NotRegularFileError",
    "SymlinkError",
    "file_kind",
    "open_folder",
    "open_regular",
    "read_regular",
    "replace_regular",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


class NotRegularFileError(OSError):
    """The path is a named pipe, socket or device: harness_nb never reads one."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(f"{kind}, not a regular file")
        self.filename = os.fspath(path)
        self.kind = kind


class SymlinkError(OSError):
    """A path met a symlink where ``folder`` or ``replace_regular`` follow none; ``filename``
    is the path up to and including the symlink."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.ELOOP, "is a symlink", path)


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


def _check_kind(path: str | os.PathLike[str], mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise SymlinkError(os.fspath(path))
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder", os.fspath(path))
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(path, file_kind(mode))


def open_regular(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> BinaryIO:
    """``path`` opened for reading in binary mode, or an ``OSError``: ``NotRegularFileError``
    for a pipe, socket or device, ``IsADirectoryError`` for a folder, the usual ones for a
    missing or unreadable file. Symlinks are followed — except with ``dir_fd`` (a folder
    from ``open_folder``), where ``path`` is a name in that folder and a symlink is a
    ``SymlinkError``."""
    follow = dir_fd is None
    _check_kind(path, os.stat(path, dir_fd=dir_fd, follow_symlinks=follow).st_mode)
    flags = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:  # swapped for a symlink since the stat
            raise SymlinkError(os.fspath(path)) from None
        raise
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


def _why_not_opened(exc: OSError, name: str, dir_fd: int, shown: str) -> OSError:
    """What stood in the way of opening the folder ``name``: a symlink or a file there is
    named as such; any other error is ``exc`` itself."""
    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
        return exc
    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode):
        return SymlinkError(shown)
    return NotADirectoryError(errno.ENOTDIR, f"is a {file_kind(mode)}, not a folder", shown)


def _open_one(name: str, dir_fd: int, shown: str, *, create: bool) -> int:
    """The folder ``name`` in ``dir_fd`` opened without following a symlink (made first
    when ``create`` and it is missing)."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        raise _why_not_opened(exc, name, dir_fd, shown) from None
    try:
        os.mkdir(name, 0o777, dir_fd=dir_fd)
    except FileExistsError:
        pass  # made meanwhile: open what is there now, never through a symlink either
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _why_not_opened(exc, name, dir_fd, shown) from None


def open_folder(base: str | os.PathLike[str], parts: Sequence[str], *, create: bool = False) -> int:
    """A descriptor (the caller closes it) of the folder ``base/parts[0]/parts[1]/…``, each
    part opened relative to the one before and never through a symlink (``SymlinkError``
    naming the path up to it; ``NotADirectoryError`` for a file on the way). ``base`` itself
    is trusted and opened as it is. With ``create`` missing folders are made (``mkdir -p``)."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for i, name in enumerate(parts):
            if name in ("", ".", "..") or "/" in name:
                raise ValueError(f"not a plain folder name: {name!r}")
            inner = _open_one(name, fd, "/".join(parts[: i + 1]), create=create)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_regular(dir_fd: int, name: str, data: bytes) -> None:
    """Write ``data`` as the file ``name`` of the folder ``dir_fd``: through a temp file in
    that folder and a rename, so a reader (or a crash) never sees half a file. An existing
    file keeps its mode; a symlink (``SymlinkError``), a folder, a pipe or a device
    (``NotRegularFileError``) there is refused, never replaced."""
    try:
        mode: int | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None:
        _check_kind(name, mode)
        mode = stat.S_IMODE(mode)
    # short, so a name near the 255-byte limit still has a temp name that fits
    tmp = f".harness_nb-{secrets.token_hex(6)}.tmp"
    # 0o666 lets the umask decide a new file's mode, as any editor would.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
