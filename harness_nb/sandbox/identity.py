"""Who a sandboxed command runs as, and what of the machine that identity needs.

Every sandboxed command runs in a user namespace of its own, with no capabilities, unable to
make another (``--disable-userns``), under the seccomp filter (``seccomp.py``). What differs
is the uid the kernel checks file permissions against (``Identity``):

``"user"``
    The kernel is not root: the command runs as the kernel's own user.
``"idmapped"``
    The kernel is root. Dropping capabilities is not enough for root: a process whose uid is
    0 outside its namespace still passes every owner check (``cat /etc/shadow`` works) and
    the kernel counts no process limit for root. So the command does not run as root at all
    but as ``SANDBOX_UID``, a uid nothing else uses. The root helper (``helper_program.py``)
    keeps a private mount namespace per working directory, in which that working directory
    (and no other) is an idmapped mount on which its owner appears as ``SANDBOX_UID`` — the
    command owns what the kernel owns there, and what it creates lands on disk as the
    folder's owner — and in which root's home, and any folder that uid could not pass on the
    way to Python and the ``PATH``'s programs, is an empty folder with just those entries
    bound back (``needed_paths``). The command enters its workdir's namespace as
    ``SANDBOX_UID`` (``nsenter``) and runs the same unprivileged bubblewrap a user's command
    runs. The machine's mount table never changes.

    Chosen over running bubblewrap as root and dropping to the uid at the end (``setpriv``,
    where bubblewrap could reach every path itself): that leaves the command no user
    namespace of its own — so no per-command process count and no ``--disable-userns`` —
    unless a second, unprivileged bubblewrap makes one, two more programs per command
    (measured: about 6 ms, where ``nsenter`` costs under 1 ms); the helper's namespace is
    made once per kernel and working directory.
``"root"``
    The kernel is root but idmapped mounts cannot be made (Linux before 5.12, no
    ``CAP_SYS_ADMIN``, ``nsenter`` missing, a working directory on a file system without
    idmapping, or ``idmap=False``): uid 0 without capabilities. Root's home is hidden but for
    the same entries and the known root-only secrets (``ROOT_SECRETS``) are hidden, but other
    files only root may read stay readable, and the process limit holds only where a pids
    cgroup can be made. One warning says so.
"""

from __future__ import annotations

import functools
import glob
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from .limits import PidsCgroup
from .program import harness_program

__all__ = [
    "ROOT_SECRETS",
    "SANDBOX_UID",
    "Identity",
    "home_entries",
    "identity_for",
    "needed_paths",
    "probe_idmap",
    "process_limit_for_root",
    "root_secrets",
]

Identity = Literal["user", "idmapped", "root"]

SANDBOX_UID = 1_900_000_000
"""The uid a root kernel's commands run as: above the ranges systemd and ``/etc/subuid``
hand out (systemd's container range ends at 1,879,048,191), owned by nothing on disk."""

ROOT_SECRETS: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/letsencrypt",
    "/etc/krb5.keytab",
    "/etc/NetworkManager/system-connections",
    "/etc/wpa_supplicant",
    "/var/lib/docker",
    "/var/lib/kubelet",
)
"""Files and folders only root may read that hold secrets (``*`` as in a shell), hidden
where a command runs as root (``"root"``); as ``SANDBOX_UID`` file permissions keep them."""

# Entries of root's home that commands keep seeing besides the interpreter and the PATH's
# folders: git's identity (its credentials live in .git-credentials, hidden).
_HOME_KEPT = (".gitconfig", ".config/git")


def needed_paths(env: Mapping[str, str], *, extra: Iterable[Path] = ()) -> list[Path]:
    """What a command needs to reach besides the working directory: the interpreter (its
    virtualenv and base install), the user site-packages, the ``PATH``'s folders, git's
    configuration, and ``extra``; as written and resolved, those that exist."""
    candidates: list[str] = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    site = sys.modules.get("site")
    user_site = getattr(site, "USER_SITE", None)
    if isinstance(user_site, str):
        candidates.append(user_site)
    candidates += [p for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")]
    home = env.get("HOME", "")
    if home.startswith("/"):
        candidates += [os.path.join(home, rel) for rel in _HOME_KEPT]
    candidates += [str(p) for p in extra]
    found: dict[str, None] = {}
    for path in candidates:
        if not os.path.lexists(path):
            continue
        found[os.path.normpath(path)] = None
        found[os.path.realpath(path)] = None
    return [Path(p) for p in found]


def home_entries(home: Path, paths: Iterable[Path]) -> list[Path]:
    """The entries of ``home`` that ``paths`` lie in (or are): what stays visible of a home
    folder hidden by an empty one."""
    entries: dict[Path, None] = {}
    for path in paths:
        if path != home and path.is_relative_to(home):
            entries[home / path.relative_to(home).parts[0]] = None
    return list(entries)


def root_secrets() -> list[tuple[Path, bool]]:
    """(path, is a folder) of the ``ROOT_SECRETS`` on this machine."""
    found: list[tuple[Path, bool]] = []
    for pattern in ROOT_SECRETS:
        for path in glob.glob(pattern) if "*" in pattern else [pattern]:
            try:
                if os.path.lexists(path) and not os.path.islink(path):
                    found.append((Path(path), os.path.isdir(path)))
            except OSError:
                continue
    return found


@functools.cache
def probe_idmap(bwrap: str) -> str | None:
    """Why a root kernel's commands cannot run as ``SANDBOX_UID`` here (``None`` when they
    can): idmapped mounts of the root file system, ``nsenter``, and bubblewrap run by that
    uid. Runs a few tiny processes, once per process (a blocking call of some 50 ms, made
    when the first root harness is built)."""
    nsenter = harness_program("nsenter")
    if nsenter is None:
        return "nsenter (util-linux) is not installed (outside the working directories)"
    program = Path(__file__).with_name("helper_program.py")
    checks = {
        "idmapped mounts cannot be made": [sys.executable, "-I", "-S", str(program), "--probe", str(SANDBOX_UID)],
        "bubblewrap cannot run as an unprivileged uid": [
            nsenter, f"--setuid={SANDBOX_UID}", f"--setgid={SANDBOX_UID}", "--",
            bwrap, "--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0", "--cap-drop", "ALL",
            "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "true",
        ],
    }  # fmt: skip
    for problem, argv in checks.items():
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False, cwd="/")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{problem} ({exc})"
        if done.returncode != 0:
            said = done.stdout.decode("utf-8", "replace").strip() or done.stderr.decode("utf-8", "replace").strip()
            return f"{problem} ({said.splitlines()[-1] if said else f'exit {done.returncode}'})"
    return None


def identity_for(executable: str, *, idmap: bool) -> tuple[Identity, str]:
    """(who commands run as here, why the weaker mode when it is in force); ``executable``
    is bubblewrap, ``idmap=False`` asks for the weaker mode as root."""
    if os.geteuid() != 0:
        return "user", ""
    if not idmap:
        return "root", "idmapped mounts were turned off (idmap=False)"
    problem = probe_idmap(executable)
    if problem is not None:
        return "root", problem
    return "idmapped", ""


def process_limit_for_root() -> str:
    """How the process limit holds for commands running as root, for people."""
    if PidsCgroup.available():
        return "the process limit holds through a pids cgroup"
    return "the process limit is not enforced (the kernel does not count root's processes; no pids cgroup can be made)"
