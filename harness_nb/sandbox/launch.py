"""One command's launch: ``Plan``, made by ``Sandbox.plan`` (``bubblewrap.py``), gives the
argv (``launch``) and cleans up after (``release``).

The order of bubblewrap's options is the order its mounts are made in: the read-only root,
private /dev, /proc, /tmp and /run, a root kernel's home hidden but for what commands need
(weaker mode; as the sandbox uid the root helper's namespace has done that), the
interpreter where /tmp would hide it, the workdir, then what is read-only or hidden inside
it. A hidden home is made read-only last, once the workdir inside it has its mount point.

The folders of the working directory a command may read but never change (agent files,
skills and settings, git's hooks) are ``protected.SANDBOX_READ_ONLY``; git's config is
mounted read-only too (git runs hooks and config later, outside the sandbox). A missing
folder is made as a mount point for the command (so the command cannot create it either)
and removed after. That empty folder is the one trace a command leaves that it did not
write itself, seen by every process while the command runs: a mount needs a place in the
real tree (the workdir is bound through), and keeping a name free another way would take
an overlay of the workdir, which hides the kernel's own writes from a running command. The
checkpoints know these places and never record an empty folder there
(``protected.sandbox_mount_point``), so a call running beside the command neither reports
the folder nor "reverts" it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from .identity import SANDBOX_UID, Identity
from .limits import PidsCgroup, SandboxLimits
from .program import harness_program
from .seccomp import filter_fd

__all__ = ["Plan", "resolver_sources"]

# Created as an empty mount point when missing and then kept: the harness's own state folder.
_KEPT_MOUNT_POINTS = frozenset({".harness_nb"})


@dataclass
class Plan:
    """One command's launch, from ``Sandbox.plan``: ``launch()`` gives the argv and must be
    followed by ``release()`` once the command is over."""

    workdir: Path
    env: dict[str, str]
    command: str
    executable: str | None = None  # bubblewrap, when sandboxed
    network: bool = False
    mount_points: tuple[Path, ...] = ()  # read-only folders, made when missing
    protected: tuple[Path, ...] = ()  # read-only files and folders that exist
    hidden: tuple[tuple[Path, bool], ...] = ()  # (path, is a folder)
    identity: Identity = "user"
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    timeout: float = 120.0
    prlimit: str | None = None  # the prlimit program, when there is one
    bash: str = "bash"  # unsandboxed, where it is (program.py); in the sandbox its PATH finds it, contained
    seccomp: bytes | None = None  # the filter, where the machine has one
    disable_userns: bool = True
    namespace: str | None = None  # the root helper's mount namespace to enter, as SANDBOX_UID
    home_binds: tuple[tuple[Path, tuple[Path, ...]], ...] = ()  # (home hidden, entries bound back)
    secrets: tuple[tuple[Path, bool], ...] = ()  # root-only secrets to hide (path, is a folder)
    cgroup: PidsCgroup | None = None
    made: list[Path] = field(default_factory=list)  # mount points launch() created
    fds: list[int] = field(default_factory=list)  # to pass to bubblewrap

    @property
    def sandboxed(self) -> bool:
        """Whether the command runs under bubblewrap."""
        return self.executable is not None

    @property
    def limited(self) -> bool:
        """Whether the limits are set on the command (``prlimit`` is there)."""
        return self.prlimit is not None

    def note(self, output: str, status: int) -> str | None:
        """What to tell the model when the output shows a limit was reached (``limits.py``)."""
        return self.limits.note(output, status, self.timeout) if self.limited else None

    def launch(self) -> list[str]:
        """The argv to run, passing it ``fds``. A missing protected folder is created first
        (a read-only mount needs a place), so that a command cannot create it either;
        ``release()`` removes it again if it is still empty, and closes ``fds``."""
        limits = self._limit_args()
        if self.executable is None:
            return [*limits, self.bash, "-c", self.command]
        w = str(self.workdir)
        argv: list[str] = []
        if self.namespace is not None:
            nsenter = cast(str, harness_program("nsenter"))  # there: identity.py found it
            argv += [nsenter, f"--mount={self.namespace}", f"--setuid={SANDBOX_UID}", f"--setgid={SANDBOX_UID}", "--"]
        argv += [self.executable, "--die-with-parent", "--new-session", "--unshare-all"]
        if self.network:
            argv.append("--share-net")
        argv.append("--unshare-user")
        if self.identity == "idmapped":
            argv += ["--uid", "0", "--gid", "0"]  # the command sees itself as the kernel's user: root
        if self.disable_userns:
            argv.append("--disable-userns")
        argv += ["--cap-drop", "ALL"]
        if self.seccomp is not None:
            self.fds.append(filter_fd(self.seccomp))
            argv += ["--seccomp", str(self.fds[-1])]
        argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
        for home, entries in self.home_binds:  # a root kernel's home, but for what commands need
            argv += ["--tmpfs", str(home)]
            for entry in entries:
                if entry.is_symlink():
                    argv += ["--symlink", os.readlink(entry), str(entry)]
                else:
                    argv += ["--ro-bind", str(entry), str(entry)]
        for prefix in _interpreters_under_private_folders():  # a venv in /tmp/… must not vanish
            argv += ["--ro-bind", prefix, prefix]
        if self.network:
            argv += _resolver_binds()
        argv += ["--bind", w, w]
        held = [p for p in self.mount_points if _hold_mount_point(p, self.workdir, self.made)]
        for path in (*held, *self.protected):
            argv += ["--ro-bind", str(path), str(path)]
        for path, is_folder in (*self.hidden, *self.secrets):
            if is_folder:
                argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
            else:
                # a read-only file with the fd's content (none). /dev/null itself cannot be
                # bound: a user namespace's mounts refuse device files, so reads would fail.
                self.fds.append(os.open(os.devnull, os.O_RDONLY))
                argv += ["--ro-bind-data", str(self.fds[-1]), str(path)]
        for home, _ in self.home_binds:  # last: the workdir may lie inside and needed a mount point
            argv += ["--remount-ro", str(home)]
        argv += ["--chdir", w, *limits, self.bash, "-c", self.command]
        return self.cgroup.wrap(argv) if self.cgroup is not None else argv

    def _limit_args(self) -> list[str]:
        # unsandboxed the process count is left out: the kernel would count all of the
        # person's processes; as root it counts none (the cgroup does)
        if self.prlimit is None:
            return []
        processes = self.sandboxed and self.identity != "root"
        return [self.prlimit, *self.limits.prlimit_args(self.timeout, processes=processes), "--"]

    def release(self) -> None:
        """Close ``fds``; remove the mount points ``launch()`` made, once no running
        command uses them, and the command's cgroup."""
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        _release_mount_points(self.made)
        self.made.clear()
        if self.cgroup is not None:
            self.cgroup.remove()


def _interpreters_under_private_folders() -> list[str]:
    """The kernel's Python (its virtualenv and the base install) where the sandbox's
    private /tmp or /run would hide it: commands run ``python`` from there too."""
    found = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return sorted(p for p in found if p.startswith(("/tmp/", "/run/")))


def resolver_sources() -> list[str]:
    # /etc/resolv.conf may point into /run (systemd-resolved, resolvconf), which is hidden.
    real = os.path.realpath("/etc/resolv.conf")
    return [os.path.dirname(real)] if real.startswith("/run/") else []


def _resolver_binds() -> list[str]:
    return [arg for folder in resolver_sources() for arg in ("--ro-bind-try", folder, folder)]


# Protected folders created as mount points, and how many running commands use each: the
# last one out removes it (if still empty), so a concurrent command never loses its mount.
_mount_points: dict[Path, int] = {}
_mount_lock = threading.Lock()


def _hold_mount_point(path: Path, workdir: Path, made: list[Path]) -> bool:
    """Whether ``path`` can be mounted read-only: it exists, or was created for it now."""
    with _mount_lock:
        if path in _mount_points:
            _mount_points[path] += 1
            made.append(path)
            return True
        if path.exists():
            return True
        if not path.parent.is_dir():
            return False  # e.g. .git/hooks of a removed repository: nothing to protect
        try:
            path.mkdir()
        except OSError:
            return path.exists()
        if path.relative_to(workdir).as_posix() not in _KEPT_MOUNT_POINTS:
            _mount_points[path] = 1
            made.append(path)
        return True


def _release_mount_points(paths: Iterable[Path]) -> None:
    with _mount_lock:
        for path in paths:
            left = _mount_points.get(path, 1) - 1
            if left > 0:
                _mount_points[path] = left
                continue
            _mount_points.pop(path, None)
            try:
                path.rmdir()  # only when empty: never removes what someone put there
            except OSError:
                pass
