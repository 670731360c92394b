"""The root helper: a program (never imported by harness_nb) that a kernel running as root
starts once, and whose private mount namespace its sandboxed commands enter.

    python -I -S helper_program.py UID PARENT_PID

In that namespace the machine looks the way uid ``UID`` (an otherwise unused uid) should see
it: each working directory is an idmapped mount on which the directory's owner appears as
``UID`` (so the command owns what the kernel owns there, and what it creates lands on disk
as the kernel's), and each folder on the way to what commands need (the interpreter, the
``PATH``'s folders) that ``UID`` could not pass through is covered by an empty tmpfs with
just those entries bound back. Root's home is covered the same way whether or not ``UID``
could pass it. Nothing of this is seen outside the namespace: the machine's mount table is
unchanged, and the namespace goes when the helper and the last command in it have.

It reads one JSON request per line on stdin and answers one JSON line on stdout:

- ``{"op": "prepare", "cover": [H], "reach": [P, ...], "workdir": W}`` covers the folders
  ``H``, makes every ``P`` reachable for ``UID``, idmaps ``W`` (``null``: none): ``{"ok":
  true}``, or ``{"error": "...", "stage": "reach" | "idmap"}``;
- ``{"op": "visible", "paths": [...]}``: which of them ``UID`` can see: ``{"visible":
  [true, false, ...]}``.

End of input ends it; so does its parent's death (``PR_SET_PDEATHSIG``). Only the standard
library: it runs with ``-I -S``, and nothing in the working directory can shadow an import.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import sys
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)

# linux/sched.h, linux/mount.h, linux/prctl.h, fcntl.h; the syscall numbers are the same
# on x86_64 and aarch64 (asm/unistd_64.h, asm-generic/unistd.h)
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_SLAVE = 0x2, 0x4, 0x8, 0x4000, 1 << 19
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_OPEN_TREE_CLONE, _AT_FDCWD, _AT_EMPTY_PATH, _AT_RECURSIVE = 1, -100, 0x1000, 0x8000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_IDMAP = 0x2, 0x4, 0x100000
_PR_SET_PDEATHSIG = 1


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


def _open_tree(dirfd: int, path: str) -> int:
    flags = _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE
    return _check(_libc.syscall(_SYS_OPEN_TREE, dirfd, path.encode(), flags), f"open_tree {path}")


def _move_mount(fd: int, target: str) -> None:
    _check(
        _libc.syscall(_SYS_MOVE_MOUNT, fd, b"", _AT_FDCWD, target.encode(), _MOVE_MOUNT_F_EMPTY_PATH),
        f"move_mount onto {target}",
    )


def _idmap(fd: int, userns: int, *, recursive: bool) -> None:
    attr = struct.pack("QQQQ", _MOUNT_ATTR_IDMAP | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV, 0, 0, userns)
    buf = ctypes.create_string_buffer(attr, len(attr))
    flags = _AT_EMPTY_PATH | (_AT_RECURSIVE if recursive else 0)
    _check(_libc.syscall(_SYS_MOUNT_SETATTR, fd, b"", flags, buf, len(attr)), "mount_setattr (idmap)")


class View:
    """The namespace's file system as ``uid`` sees it, built up request by request."""

    def __init__(self, uid: int) -> None:
        self.uid = uid
        self.covers: dict[str, int] = {}  # covered folder -> an O_PATH descriptor of what it hides
        self.exposed: set[str] = set()
        self.idmapped: set[str] = set()
        self.userns: dict[tuple[int, int], int] = {}

    def passable(self, folder: str) -> bool:
        """Whether ``uid`` may pass through ``folder`` (search permission)."""
        st = os.stat(folder)
        if st.st_uid == self.uid:
            return bool(st.st_mode & 0o100)
        if st.st_gid == self.uid:
            return bool(st.st_mode & 0o010)
        return bool(st.st_mode & 0o001)

    def cover(self, folder: str) -> None:
        """An empty tmpfs over ``folder``; what it hides stays reachable for ``expose``."""
        if folder in self.covers or not os.path.isdir(folder):
            return
        fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
            _check(_libc.mount(b"tmpfs", folder.encode(), b"tmpfs", flags, b"mode=0755,size=1m"), f"tmpfs on {folder}")
        except OSError:
            os.close(fd)
            raise
        self.covers[folder] = fd

    def expose(self, folder: str, name: str) -> None:
        """Bind the covered ``folder``'s entry ``name`` back (a symlink is copied)."""
        path = os.path.join(folder, name)
        if path in self.exposed:
            return
        hidden = self.covers[folder]
        try:
            st = os.stat(name, dir_fd=hidden, follow_symlinks=False)
        except FileNotFoundError:
            return
        if os.path.lexists(path):
            pass  # a mount point made before, or the target of a mount made since
        elif (st.st_mode & 0o170000) == 0o120000:
            os.symlink(os.readlink(name, dir_fd=hidden), path)
            self.exposed.add(path)
            return
        elif (st.st_mode & 0o170000) == 0o040000:
            os.mkdir(path, 0o755)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        tree = _open_tree(hidden, name)
        try:
            _move_mount(tree, path)
        finally:
            os.close(tree)
        self.exposed.add(path)

    def reach(self, path: str) -> None:
        """Make ``path`` (an absolute real path) reachable: every covered or impassable
        folder on the way gets the next entry bound back."""
        current = "/"
        for name in [p for p in path.split("/") if p]:
            if current in self.covers or not self.passable(current):
                self.cover(current)
                self.expose(current, name)
            current = os.path.join(current, name)
            if not os.path.lexists(current):
                return

    def map_owner(self, workdir: str) -> None:
        """Mount ``workdir`` idmapped over itself: its owner appears as ``uid``."""
        if any(workdir == done or workdir.startswith(done + "/") for done in self.idmapped):
            return  # reached through an idmapped folder above it
        self.reach(workdir)
        st = os.stat(workdir)
        userns = self._userns(st.st_uid, st.st_gid)
        tree = _open_tree(_AT_FDCWD, workdir)
        try:
            try:
                _idmap(tree, userns, recursive=True)
            except OSError:
                # a mount inside it on a file system without idmapping: map the folder's
                # own mount only, the inner ones keep their owners
                _idmap(tree, userns, recursive=False)
            _move_mount(tree, workdir)
        finally:
            os.close(tree)
        self.idmapped.add(workdir)

    def _userns(self, uid: int, gid: int) -> int:
        """A user namespace mapping ``uid``/``gid`` (on disk) to ``self.uid``, as a descriptor."""
        key = (uid, gid)
        if key in self.userns:
            return self.userns[key]
        ready_r, ready_w = os.pipe()
        done_r, done_w = os.pipe()
        child = os.fork()
        if child == 0:  # single-threaded, so fork is safe; the child only unshares and waits
            os.close(ready_r)
            os.close(done_w)
            code = 0 if _libc.unshare(_CLONE_NEWUSER) == 0 else 1
            if code == 0:
                os.write(ready_w, b"x")
                os.read(done_r, 1)
            os._exit(code)
        os.close(ready_w)
        os.close(done_r)
        try:
            if os.read(ready_r, 1) != b"x":
                raise OSError(0, "could not create a user namespace for the idmapped mount")
            with open(f"/proc/{child}/uid_map", "w") as f:
                f.write(f"{uid} {self.uid} 1\n")
            with open(f"/proc/{child}/setgroups", "w") as f:
                f.write("deny")
            with open(f"/proc/{child}/gid_map", "w") as f:
                f.write(f"{gid} {self.uid} 1\n")
            fd = os.open(f"/proc/{child}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(ready_r)
            os.close(done_w)
            os.waitpid(child, 0)
        self.userns[key] = fd
        return fd

    def visible(self, paths: list[str]) -> list[bool]:
        """Which ``paths`` exist for ``uid`` (checked by a child that becomes it)."""
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            try:
                os.close(read)
                os.setgroups([])
                os.setresgid(self.uid, self.uid, self.uid)
                os.setresuid(self.uid, self.uid, self.uid)
                os.write(write, b"".join(b"1" if os.path.lexists(p) else b"0" for p in paths))
            finally:
                os._exit(0)
        os.close(write)
        answer = b""
        while chunk := os.read(read, 65536):
            answer += chunk
        os.close(read)
        os.waitpid(child, 0)
        return [c == ord("1") for c in answer.ljust(len(paths), b"0")]


def _serve(view: View, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") == "visible":
        return {"visible": view.visible([str(p) for p in request["paths"]])}
    stage = "reach"
    try:
        for folder in request.get("cover", []):
            view.cover(str(folder))
        for path in request.get("reach", []):
            view.reach(str(path))
        if request.get("workdir"):
            stage = "idmap"
            view.map_owner(str(request["workdir"]))
    except OSError as exc:
        return {"error": exc.strerror or str(exc), "stage": stage}
    return {"ok": True}


def probe(uid: int) -> int:
    """Whether the root file system can be mounted idmapped here, in a namespace of its own
    that ends with this process (0: it can; else the reason is printed)."""
    try:
        _check(_libc.unshare(_CLONE_NEWNS), "unshare a mount namespace")
        _check(_libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "make / a slave mount")
        _check(_libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"mode=0700,size=64k"), "tmpfs on /tmp")
        view = View(uid)
        tree = _check(_libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, b"/", _OPEN_TREE_CLONE | os.O_CLOEXEC), "open_tree /")
        _idmap(tree, view._userns(0, 0), recursive=False)
        os.mkdir("/tmp/root")
        _move_mount(tree, "/tmp/root")
        if os.stat("/tmp/root").st_uid != uid:
            raise OSError(0, "the idmapped mount does not show the mapped owner")
    except OSError as exc:
        print(exc.strerror or str(exc))
        return 1
    return 0


def main(argv: list[str]) -> int:
    if argv[1] == "--probe":
        return probe(int(argv[2]))
    uid, parent = int(argv[1]), int(argv[2])
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        return 1  # the kernel died before the line above took effect
    out = sys.stdout
    try:
        _check(_libc.unshare(_CLONE_NEWNS), "unshare a mount namespace")
        # mounts made on the machine still appear here; none made here appear there
        _check(_libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "make / a slave mount")
    except OSError as exc:
        out.write(json.dumps({"error": exc.strerror or str(exc)}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    view = View(uid)
    for line in sys.stdin:
        try:
            reply = _serve(view, json.loads(line))
        except (ValueError, KeyError, TypeError, OSError) as exc:
            reply = {"error": f"bad request: {exc}", "stage": "request"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
