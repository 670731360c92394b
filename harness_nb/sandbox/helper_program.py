"""The root helper: a program (never imported by harness_nb) that a kernel running as root
starts once, and whose private mount namespaces its sandboxed commands enter.

    python -I -S helper_program.py UID PARENT_PID

Each working directory gets a mount namespace of its own, made from the helper's, in which
the machine looks the way uid ``UID`` (an otherwise unused uid) should see it from there:
the working directory is an idmapped mount on which its owner appears as ``UID`` (so the
command owns what the kernel owns there, and what it creates lands on disk as the
kernel's), and each folder on the way to what commands need (the interpreter, the
``PATH``'s folders) that ``UID`` could not pass through is covered by an empty tmpfs with
just those entries bound back. Root's home is covered the same way whether or not ``UID``
could pass it. Only that one working directory is idmapped there: a command in one
workdir never sees another's view (where ``UID`` would own that workdir's files too), nor
one left from earlier commands. Nothing of this is seen outside the namespaces: the
machine's mount table is unchanged, and a namespace goes when the helper and the last
command in it have.

It reads one JSON request per line on stdin and answers one JSON line on stdout:

- ``{"op": "prepare", "cover": [H], "reach": [P, ...], "workdir": W, "inode": [dev, ino],
  "check": [C, ...]}`` in ``W``'s namespace (made now if there is none; ``null``: one
  without a workdir): covers the folders ``H``, makes every ``P`` reachable for ``UID``,
  idmaps ``W`` (``inode``: what the machine has at ``W``; a namespace holding a folder the
  machine has since replaced is left for a new one) and answers ``{"ok": true,
  "namespace": "/proc/PID/fd/N", "visible": [true, false, ...]}``: the path a command
  enters it by (``nsenter --mount=…``) and which of the paths ``C`` ``UID`` can see there;
  or ``{"error": "...", "stage": "reach" | "idmap"}``.

End of input ends it; so does its parent's death (``PR_SET_PDEATHSIG``). Only the standard
library: it runs with ``-I -S``, and nothing in the working directory can shadow an import.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import stat
import struct
import sys
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)

# linux/sched.h, linux/mount.h, linux/prctl.h, fcntl.h; the syscall numbers are the same
# on x86_64 and aarch64 (asm/unistd_64.h, asm-generic/unistd.h)
_CLONE_NEWNS = 0x00020000  # also setns's type of a mount namespace
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_SLAVE = 0x2, 0x4, 0x8, 0x4000, 1 << 19
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_OPEN_TREE_CLONE, _AT_FDCWD, _AT_EMPTY_PATH, _AT_RECURSIVE = 1, -100, 0x1000, 0x8000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_IDMAP = 0x2, 0x4, 0x100000
_PR_SET_PDEATHSIG = 1
_MNT_DETACH = 2


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


def _open_tree(dirfd: int, path: str) -> int:
    """A detached copy of the tree at ``path`` (``""``: at ``dirfd`` itself), submounts included."""
    flags = _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE | (0 if path else _AT_EMPTY_PATH)
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


def _mounts_at(path: str) -> int:
    """How many mounts are stacked at ``path`` in this namespace."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        points = [line.split()[4] for line in f]
    # mountinfo escapes space, tab, newline and backslash as octal
    return sum(1 for p in points if re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), p) == path)


class View:
    """One namespace's file system as ``uid`` sees it (one working directory's), built up
    request by request.

    Each folder covered by a tmpfs and the workdir mounted idmapped over itself keep an
    ``O_PATH`` descriptor of what they hide (``originals``): entries are bound back, and the
    workdir mapped, from there, never from the view itself.
    """

    def __init__(self, uid: int, userns: dict[tuple[int, int], int]) -> None:
        self.uid = uid
        self.originals: dict[str, int] = {}  # covered folder or idmapped workdir -> what it hides
        self.covers: set[str] = set()
        self.idmapped: set[str] = set()
        self.exposed: set[str] = set()
        self.userns = userns  # (uid, gid) on disk -> its user namespace: shared by every view

    def close(self) -> None:
        """Close the descriptors of what the view hides (the namespace is left as it is)."""
        for fd in self.originals.values():
            os.close(fd)
        self.originals.clear()

    def passable(self, folder: str) -> bool:
        """Whether ``uid`` may pass through ``folder`` (search permission)."""
        st = os.stat(folder)
        if st.st_uid == self.uid:
            return bool(st.st_mode & 0o100)
        if st.st_gid == self.uid:
            return bool(st.st_mode & 0o010)
        return bool(st.st_mode & 0o001)

    def original(self, path: str) -> tuple[int, str]:
        """Where ``path`` is on the machine, below what the view put over it: (a directory
        descriptor, the path relative to it; ``""``: the descriptor itself)."""
        best = ""
        for top in self.originals:
            if (path == top or path.startswith(top.rstrip("/") + "/")) and len(top) > len(best):
                best = top
        if not best:
            return _AT_FDCWD, path
        return self.originals[best], path[len(best) :].lstrip("/")

    def _open_original(self, folder: str) -> int:
        """An ``O_PATH`` descriptor of the machine's ``folder``, below the view."""
        dirfd, rel = self.original(folder)
        if not rel:
            return os.dup(dirfd)
        return os.open(rel, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dirfd)

    def cover(self, folder: str) -> None:
        """An empty tmpfs over ``folder``; what it hides stays reachable for ``expose``."""
        if folder in self.covers or not os.path.isdir(folder):
            return
        fd = self._open_original(folder)
        try:
            flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
            _check(_libc.mount(b"tmpfs", folder.encode(), b"tmpfs", flags, b"mode=0755,size=1m"), f"tmpfs on {folder}")
        except OSError:
            os.close(fd)
            raise
        self.originals[folder] = fd
        self.covers.add(folder)
        # what was arranged inside it before (a workdir idmapped before $HOME pointed above
        # it) is now under the tmpfs: bind its entries back, with what is mounted there
        inside = folder.rstrip("/") + "/"
        for path in sorted({*self.idmapped, *self.exposed, *self.originals}):
            if path.startswith(inside):
                self.expose(folder, path[len(inside) :].split("/")[0])

    def expose(self, folder: str, name: str) -> None:
        """Bind the covered ``folder``'s entry ``name`` back (a symlink is copied)."""
        path = os.path.join(folder, name)
        hidden = self.originals[folder]
        try:
            st = os.stat(name, dir_fd=hidden, follow_symlinks=False)
        except FileNotFoundError:
            return
        if path in self.exposed:
            if self._current(path, st, name, hidden):
                return
            self._forget(path)  # the machine replaced the entry since: bind the new one
        if os.path.lexists(path):
            pass  # a mount point made before
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=hidden), path)
            self.exposed.add(path)
            return
        elif stat.S_ISDIR(st.st_mode):
            os.mkdir(path, 0o755)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        tree = _open_tree(hidden, name)
        try:
            _move_mount(tree, path)
        finally:
            os.close(tree)
        self.exposed.add(path)

    def _current(self, path: str, original: os.stat_result, name: str, hidden: int) -> bool:
        """Whether the exposed ``path`` still shows the machine's entry ``original`` (seen
        below what the view put over it since: a cover, an idmapped mount)."""
        try:
            shown = os.fstat(self.originals[path]) if path in self.originals else os.lstat(path)
        except OSError:
            return False
        if stat.S_ISLNK(original.st_mode):
            return stat.S_ISLNK(shown.st_mode) and os.readlink(path) == os.readlink(name, dir_fd=hidden)
        return (shown.st_dev, shown.st_ino) == (original.st_dev, original.st_ino)

    def _forget(self, path: str) -> None:
        """Undo what the view put at ``path`` (its bind, and a cover or idmapped mount on
        it, with everything arranged inside), leaving the empty mount point."""
        if stat.S_ISLNK(os.lstat(path).st_mode):
            os.unlink(path)
        else:
            for _ in range(_mounts_at(path)):  # the view's own: nothing else mounts at its paths
                _check(_libc.umount2(path.encode(), _MNT_DETACH), f"unmount {path}")
        inside = path.rstrip("/") + "/"
        for done in (self.exposed, self.covers, self.idmapped):
            done.difference_update({p for p in done if p == path or p.startswith(inside)})
        for top in [p for p in self.originals if p == path or p.startswith(inside)]:
            os.close(self.originals.pop(top))

    def reach(self, path: str) -> None:
        """Make ``path`` (an absolute real path) reachable: every covered or impassable
        folder on the way gets the next entry bound back."""
        current = "/"
        for name in [p for p in path.split("/") if p]:
            try:
                if current in self.covers or not self.passable(current):
                    self.cover(current)
                    self.expose(current, name)
            except FileNotFoundError:
                return  # gone meanwhile (a PATH folder removed): nothing to reach
            current = os.path.join(current, name)
            if not os.path.lexists(current):
                return

    def map_owner(self, workdir: str) -> None:
        """Mount ``workdir`` idmapped over itself: its owner appears as ``uid``. Redone when
        the machine's folder there was replaced (its mount then went with the old one)."""
        self.reach(workdir)
        if os.stat(workdir).st_uid == self.uid:
            return  # mapped already, by an earlier command's request
        if workdir in self.originals:
            os.close(self.originals.pop(workdir))
            self.idmapped.discard(workdir)
        below = self._open_original(workdir)
        try:
            st = os.fstat(below)
            userns = self._userns(st.st_uid, st.st_gid)
            tree = _open_tree(below, "")
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
        except OSError:
            os.close(below)
            raise
        self.originals[workdir] = below
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


class Namespaces:
    """The views commands enter: one mount namespace per working directory, each made from
    the helper's own (``base``, where nothing is covered or mapped), and entered with
    ``setns`` before the view is changed or asked."""

    def __init__(self, uid: int) -> None:
        self.uid = uid
        self.base = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        self.userns: dict[tuple[int, int], int] = {}
        self.views: dict[str, tuple[View, int]] = {}  # workdir ("": none) -> its view, its namespace
        # replaced namespaces stay open: a command may be entering one by its path, which a
        # new namespace must never take over
        self.retired: list[int] = []

    def enter(self, workdir: str, *, fresh: bool = False) -> tuple[View, int]:
        """Enter ``workdir``'s namespace, made now when there is none (or ``fresh``, in
        place of the one there is); (its view, its descriptor)."""
        known = self.views.get(workdir)
        if known is not None and not fresh:
            _setns(known[1])
            return known
        if known is not None:
            known[0].close()
            self.retired.append(known[1])
        _setns(self.base)
        _check(_libc.unshare(_CLONE_NEWNS), "unshare a mount namespace")
        made = (View(self.uid, self.userns), os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC))
        self.views[workdir] = made
        return made


def _setns(fd: int) -> None:
    _check(_libc.setns(fd, _CLONE_NEWNS), "enter a mount namespace")


def _serve(spaces: Namespaces, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") != "prepare":
        return {"error": f"unknown op {request.get('op')!r}", "stage": "request"}
    workdir = str(request.get("workdir") or "")
    for fresh in (False, True):
        view, namespace = spaces.enter(workdir, fresh=fresh)
        stage = "reach"
        try:
            for folder in request.get("cover", []):
                view.cover(str(folder))
            for path in request.get("reach", []):
                view.reach(str(path))
            if workdir:
                stage = "idmap"
                view.map_owner(workdir)
                st = os.stat(workdir)
                if [st.st_dev, st.st_ino] != request.get("inode", [st.st_dev, st.st_ino]):
                    continue  # the machine's folder was replaced since this view bound it: a new view
        except OSError as exc:
            return {"error": exc.strerror or str(exc), "stage": stage}
        visible = view.visible([str(p) for p in request.get("check", [])])
        return {"ok": True, "namespace": f"/proc/{os.getpid()}/fd/{namespace}", "visible": visible}
    return {"error": f"{workdir} was replaced again while it was being mounted", "stage": "idmap"}


def probe(uid: int) -> int:
    """Whether the root file system can be mounted idmapped here, in a namespace of its own
    that ends with this process (0: it can; else the reason is printed)."""
    try:
        _check(_libc.unshare(_CLONE_NEWNS), "unshare a mount namespace")
        _check(_libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "make / a slave mount")
        _check(_libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"mode=0700,size=64k"), "tmpfs on /tmp")
        view = View(uid, {})
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
    spaces = Namespaces(uid)
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            reply = _serve(spaces, json.loads(line))
        except (ValueError, KeyError, TypeError, OSError) as exc:
            reply = {"error": f"bad request: {exc}", "stage": "request"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
