"""The machine's own folders, which no harness takes as its working directory.

The workdir is the one folder a sandboxed command may write (bound read-write into the
sandbox; as root, owned by the command through the idmapped mount), and the folder the
file tools, the checkpoints and the ``.env`` scan cover. Given ``/``, ``/usr``, ``/etc`` or
a home folder itself, that folder is the machine: a command "in the sandbox" could rewrite
``/etc/cron.d``, ``/usr/bin/python3`` or ``~/.bashrc``, and the machine would run what it
wrote outside any sandbox. So ``machine_folder_problem`` names such a folder, and a harness
is not built on one (``Harness``, ``%config HarnessNB.workdir``: one error saying to make a
project folder).

A folder inside one where projects live stays fine: ``~/project``, ``/tmp/x``,
``/root/project`` (a root kernel's), ``/srv/app``, ``/opt/app``, ``/usr/src/app``,
``/var/lib/jenkins/workspace/x``.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

__all__ = ["MACHINE_FOLDERS", "MACHINE_TREES", "PROJECT_HINT", "machine_folder_problem"]

MACHINE_FOLDERS: frozenset[str] = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/dev/shm", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
        "/media", "/mnt", "/nix", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp",
        "/usr", "/usr/local", "/usr/local/src", "/usr/src", "/var", "/var/cache", "/var/lib", "/var/local",
        "/var/log", "/var/mail", "/var/opt", "/var/spool", "/var/tmp", "/var/www",
        "/Applications", "/Library", "/System", "/Users", "/Volumes", "/private", "/private/tmp", "/private/var",
    }
)  # fmt: skip
"""Folders of the machine (Linux's and macOS's) that are refused themselves; a folder inside
may be a project, unless it lies in one of ``MACHINE_TREES``."""

MACHINE_TREES: tuple[str, ...] = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr",
    "/snap", "/nix/store", "/gnu/store", "/System", "/Library", "/private/etc",
)  # fmt: skip
"""Folders holding only the machine's programs, settings and state: nothing inside is a
project (but for ``SOURCE_FOLDERS``)."""

SOURCE_FOLDERS: tuple[str, ...] = ("/usr/src", "/usr/local/src")
"""Where sources live inside ``/usr`` (and some images' projects: ``/usr/src/app``)."""

_HOME_FOLDERS = (".config", ".local", ".local/bin", ".ssh", ".ipython", ".jupyter", ".harness_nb")
"""Folders of a home refused themselves: what runs at login, from ``PATH`` or when a kernel
starts, the keys, every workdir's checkpoints."""

PROJECT_HINT = "make a project folder and pass it as workdir, e.g. `mkdir -p ~/project` and workdir='~/project'"


def machine_folder_problem(folder: Path | str) -> str | None:
    """Why ``folder`` (a path; resolved here) cannot be a working directory, ending with
    what to do; ``None`` when it can."""
    path = os.path.realpath(folder)
    why = _why(path)
    if why is None:
        return None
    return (
        f"workdir {path} is {why}: commands may change everything in a workdir, so there they "
        f"could change what the machine itself runs, outside any sandbox; {PROJECT_HINT}"
    )


def _why(path: str) -> str | None:
    if path == "/":
        return "the root of the file system"
    accounts = _account_homes()
    for home in dict.fromkeys([*accounts, *_real(os.environ.get("HOME", ""))]):
        if path == home:
            return "a home folder"
        if home in accounts and Path(home).is_relative_to(path):
            return f"a folder holding the home folder {home}"
        for rel in _HOME_FOLDERS:
            if path == os.path.join(home, rel):
                return f"{rel} of the home folder {home}"
    if path in MACHINE_FOLDERS:
        return "one of the machine's own folders"
    inside = Path(path)
    for tree in MACHINE_TREES:
        if inside.is_relative_to(tree) and not any(inside.is_relative_to(s) for s in SOURCE_FOLDERS):
            return f"inside {tree}, which holds the machine's own files"
    return None


def _account_homes() -> list[str]:
    """The home folders of the kernel's account and of root: what a login reads, refused
    with every folder holding them. (``$HOME`` may name another folder, a tool's or a
    test's: that one is refused only itself.)"""
    try:
        own = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        own = ""  # a uid without an account (a container's)
    return [*_real(own), *_real(os.path.expanduser("~root"))]


def _real(home: str) -> list[str]:
    """``home`` resolved, when it names a folder other than ``/`` (a service account's home
    of ``/`` says nothing of the folder)."""
    real = os.path.realpath(home) if home.startswith("/") else "/"
    return [] if real == "/" else [real]
