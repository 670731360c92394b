"""The sandbox ``bash`` runs in, and the environment every command gets.

On Linux with bubblewrap (Debian's ``bubblewrap``) a command runs as::

    [nsenter --mount=/proc/H/ns/mnt --setuid=U --setgid=U --]    as root: identity.py
    bwrap --die-with-parent --new-session --unshare-all [--share-net]
          --unshare-user [--uid 0 --gid 0] --disable-userns --cap-drop ALL --seccomp FD
          --ro-bind / /  --dev /dev  --proc /proc  --tmpfs /tmp  --tmpfs /run
          --bind W W                      the working directory, writable
          --ro-bind W/.claude W/.claude   agent, skill and settings folders, .git hooks/config
          --tmpfs ~/.ssh --remount-ro ~/.ssh, --ro-bind-data FD ~/.netrc   hidden, as are W/.env
          --chdir W  prlimit --nproc=N --as=A --fsize=F --cpu=C --  bash -c COMMAND

so the file system is read-only except the working directory and a private /tmp, the
machine's service sockets (/run: docker, dbus, databases) are out of reach, there is no
network unless allowed, and, with its own pid namespace, every process a command starts
dies when the command ends or when the kernel dies (``--die-with-parent``: bubblewrap
dies with the process that started it, and its namespace's processes with it).

The command holds whoever starts it: it runs in a user namespace of its own with no
capabilities and no way to make another, under a seccomp filter refusing mount, umount,
ptrace, unshare and their kin (``seccomp.py``), as a uid the kernel holds to file
permissions — the kernel's own user, or, when the kernel is root, an unused uid that owns
the working directory through an idmapped mount (``identity.py``: why, and the weaker mode
where that cannot be made) — and within limits on processes, memory, file size and CPU
time (``limits.py``).

Every command, sandboxed or not, gets ``command_environment()``: an allow-list (PATH,
HOME, locale, terminal, time zone, the virtualenv), never the kernel's whole environment.
Without the sandbox that keeps keys out of the obvious places only: a process running with
your rights can still read your files (and ``/proc/<kernel pid>/environ``); the limits but
the process count apply there too.

``Sandbox.create("auto")`` probes bubblewrap once per process and falls back to no
sandbox with one logged warning; ``"bwrap"`` requires it (``ConfigError`` naming the
fix); ``"off"`` never uses it. ``Sandbox.active`` says which it is, ``Sandbox.identity``
who commands run as.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast

from ..core import ConfigError, ToolError
from .helper import HelperError, mount_helper
from .identity import SANDBOX_UID, Identity, home_entries, needed_paths, probe_idmap, root_secrets
from .limits import PidsCgroup, SandboxLimits
from .protected import PROTECTED_FOLDERS
from .seccomp import filter_fd, filter_program

log = logging.getLogger("harness_nb.sandbox")

SandboxMode = Literal["auto", "bwrap", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "bwrap", "off")

INSTALL_HINT = "install it: apt-get install bubblewrap"

# The folders of the working directory a command may read but never change (agent files,
# skills and settings) are ``protected.PROTECTED_FOLDERS``; git's hooks and config are
# mounted read-only too (git runs them later, outside the sandbox).
# Created as an empty mount point when missing and then kept: the harness's own state folder.
_KEPT_MOUNT_POINTS = frozenset({".harness_nb"})

# Credential files and folders under the home folder, hidden from commands even though
# they would only be readable: folders become empty and read-only, files read as empty.
CREDENTIAL_PATHS: tuple[str, ...] = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".gnupg",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".pgpass",
    ".my.cnf",
    ".boto",
    ".s3cfg",
    ".vault-token",
    ".config/gh",
    ".config/hub",
    ".config/rclone",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".huggingface/token",
    ".cache/huggingface/token",
    # shell and IPython histories hold keys typed as `export KEY=…` or `os.environ[…] = …`
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".ipython",
    # kernel connection files: their HMAC key lets a process drive the kernel
    ".local/share/jupyter/runtime",
)

# `.env`, `.env.local`, `.env.production`, `.envrc` (direnv)
_DOTENV = re.compile(r"\.env(\..+)?|\.envrc")
# Folders the .env search never enters: tool caches and installed packages.
_DOTENV_SKIP = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache", "site-packages"})
DOTENV_MAX_ENTRIES = 20_000
"""Most directory entries the ``.env`` search looks at per command (a hostile tree is bounded)."""
_DOTENV_MAX_DEPTH = 8

# The environment a command gets: these names and LC_*, nothing else.
ENVIRONMENT_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TZ",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "PYTHONPATH",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
    }
)
_ENVIRONMENT_PREFIXES = ("LC_",)


def command_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a ``bash`` command gets: the allow-listed variables of ``environ``
    (default ``os.environ``, read now, so a later ``export`` in the kernel is seen), with
    the interpreter's virtualenv active, so ``python`` and ``pip`` are the kernel's."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if k in ENVIRONMENT_NAMES or k.startswith(_ENVIRONMENT_PREFIXES)}
    env.setdefault("HOME", str(Path.home()))
    env.setdefault("PATH", os.defpath)
    if sys.prefix != sys.base_prefix:  # a virtualenv, activated or not
        env.setdefault("VIRTUAL_ENV", sys.prefix)
        venv_bin = str(Path(sys.prefix) / "bin")
        if venv_bin not in env["PATH"].split(os.pathsep):
            env["PATH"] = os.pathsep.join([venv_bin, env["PATH"]])
    return env


@functools.cache
def _probe(executable: str) -> str | None:
    """Why bubblewrap at ``executable`` cannot sandbox here (``None`` when it can).

    Run once per process: one tiny sandbox with every namespace the real ones use. It is
    a blocking call of a few milliseconds, made once when the first harness is built.
    """
    argv = [executable, "--die-with-parent", "--unshare-all", "--unshare-user", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{executable} does not run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap cannot create a sandbox here ({said[0] if said else f'exit {done.returncode}'})"
    return None


@functools.cache
def _disables_userns(executable: str) -> bool:
    """Whether this bubblewrap has ``--disable-userns`` (0.8 and later; before, the seccomp
    filter alone stops a command making a user namespace)."""
    try:
        done = subprocess.run([executable, "--help"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--disable-userns" in done.stdout + done.stderr


@functools.cache
def _program(name: str) -> str | None:
    return shutil.which(name)


def _unavailable(executable: str | None) -> tuple[str, str]:
    """(why bubblewrap cannot be used, how to fix it); ("", "") when it can."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})", "run on Linux to sandbox commands"
    if executable is None or not Path(executable).is_file():
        return "bubblewrap is not installed (no `bwrap` on PATH)", INSTALL_HINT
    problem = _probe(executable)
    if problem is not None:
        return problem, "allow user namespaces (a container needs e.g. --security-opt seccomp=unconfined)"
    return "", ""


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(message: str) -> None:
    with _warned_lock:
        if message in _warned:
            return
        _warned.add(message)
    log.warning("%s", message)


@dataclass(frozen=True)
class Sandbox:
    """How ``bash`` commands run: ``active`` when under bubblewrap. Made by ``create``.

    ``network`` lets sandboxed commands use the network; ``read_only`` names more folders
    inside the working directory to keep read-only (agent folders given to the harness);
    ``hidden`` more files or folders to hide (the kernel's connection file); ``limits`` what
    one command may use. ``identity`` is who sandboxed commands run as (``identity.py``);
    ``weaker`` why a root kernel's commands run as root (the weaker mode). ``reason`` and
    ``fix`` say why the sandbox is not active and how to get it.
    """

    mode: SandboxMode = "off"
    active: bool = False
    network: bool = False
    reason: str = "the sandbox setting is 'off'"
    fix: str = ""
    executable: str | None = None
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    identity: Identity = "user"
    weaker: str = ""

    @classmethod
    def create(
        cls,
        mode: str = "auto",
        *,
        network: bool = False,
        read_only: Iterable[Path] = (),
        hidden: Iterable[Path] = (),
        executable: str | None = None,
        limits: SandboxLimits | Mapping[str, Any] | None = None,
        idmap: bool = True,
    ) -> Sandbox:
        """The sandbox for ``mode``: ``"auto"`` (bubblewrap where it works, else none, with
        one warning), ``"bwrap"`` (``ConfigError`` when it cannot work) or ``"off"``.
        ``executable`` is the ``bwrap`` to use (default: the one on PATH); ``limits`` what a
        command may use (``SandboxLimits`` or a mapping of its fields; default: its
        defaults). As root, ``idmap=False`` chooses the weaker mode (commands as root
        without capabilities) even where idmapped mounts work."""
        if mode not in SANDBOX_MODES:
            raise ConfigError(f"sandbox must be one of {', '.join(map(repr, SANDBOX_MODES))}, not {mode!r}")
        base = cls(
            cast(SandboxMode, mode),
            network=network,
            read_only=tuple(Path(p) for p in read_only),
            hidden=tuple(Path(p) for p in hidden),
            limits=SandboxLimits.of(limits),
        )
        if mode == "off":
            return base
        executable = executable or shutil.which("bwrap")
        reason, fix = _unavailable(executable)
        if not reason:
            assert executable is not None
            identity, weaker = _identity(executable, idmap=idmap)
            sandbox = replace(base, active=True, reason="", executable=executable, identity=identity, weaker=weaker)
            if weaker:
                _warn_once(sandbox.weaker_notice)
            return sandbox
        if mode == "bwrap":
            raise ConfigError(f"sandbox 'bwrap' cannot be used: {reason}; {fix} (or use sandbox 'auto')")
        sandbox = replace(base, reason=reason, fix=fix, executable=executable)
        _warn_once(cast(str, sandbox.notice))
        return sandbox

    def protecting(self, paths: Iterable[Path]) -> Sandbox:
        """This sandbox, also keeping ``paths`` read-only."""
        return replace(self, read_only=(*self.read_only, *(Path(p) for p in paths)))

    def limited(self, limits: SandboxLimits | Mapping[str, Any] | None) -> Sandbox:
        """This sandbox with other ``limits``."""
        return replace(self, limits=SandboxLimits.of(limits))

    @property
    def notice(self) -> str | None:
        """What to tell the person once when ``auto`` found no sandbox (``None`` otherwise)."""
        if self.active or self.mode != "auto":
            return None
        return (
            f"harness_nb: bash is not sandboxed: {self.reason}; {self.fix}. Commands run with "
            "your rights, so the approval rules apply to them in full."
        )

    @property
    def weaker_notice(self) -> str:
        """The one warning of the weaker mode for root (empty when it is not in force)."""
        if not self.weaker:
            return ""
        return (
            f"harness_nb: sandboxed bash runs as root without capabilities, not as an unprivileged uid: {self.weaker}. "
            "Known root-only secrets are hidden, but other files only root may read are readable to "
            f"commands, and {_process_limit_for_root()}."
        )

    def describe(self) -> str:
        """One paragraph for people: what a ``bash`` command can and cannot do."""
        if self.active:
            net = "the network is allowed" if self.network else "no network"
            who = {
                "user": "as you, in a user namespace without capabilities",
                "idmapped": (
                    f"as an unprivileged uid ({SANDBOX_UID}) without capabilities, which owns the working "
                    "directory through an idmapped mount, cannot read files only root may read, and sees "
                    "of root's home only the folders of Python and the PATH's programs"
                ),
                "root": (
                    f"as root without capabilities ({self.weaker}): known root-only secrets and root's home "
                    f"are hidden, but other files only root may read are readable, and {_process_limit_for_root()}"
                ),
            }[self.identity]
            return (
                f"bash runs sandboxed (bubblewrap) {who}; a seccomp filter refuses mount, ptrace, "
                "namespaces and their kin: files are read-only except the working "
                f"directory and a private /tmp; {net}; the environment is cleared to an "
                "allow-list; credential files, .env files, agent/skill/settings folders and git "
                "hooks are protected; every process a command starts ends with it; limits per "
                f"command: {self.limits.describe()}."
            )
        fix = f" ({self.fix})" if self.fix else ""
        return (
            f"bash is not sandboxed: {self.reason}{fix}. Commands run with your rights and "
            "network; only the environment is cleared to an allow-list, processes that "
            "leave the command's process group (setsid) can outlive it, and the limits "
            f"({self.limits.describe()}) apply but for the process count."
        )

    def plan(self, command: str, workdir: Path, *, timeout: float = 120.0) -> Plan:
        """How to run ``command`` in ``workdir`` with ``timeout`` seconds. Blocking (it looks
        for credential and ``.env`` files; as root it asks the root helper, starting it the
        first time): call it off the event loop. ``ToolError`` when ``workdir`` is gone."""
        workdir = Path(workdir).resolve()
        if not workdir.is_dir():
            raise ToolError(f"cannot start bash in {workdir}: it is not a folder")
        env = command_environment()
        prlimit = _program("prlimit")
        if not self.active:
            return Plan(workdir, env, command, limits=self.limits, timeout=timeout, prlimit=prlimit)
        env["XDG_CACHE_HOME"] = "/tmp/.cache"  # the home folder is read-only: pip, matplotlib cache here
        env["MPLCONFIGDIR"] = "/tmp/.cache/matplotlib"  # else it warns on every import that ~/.config is read-only
        folders = [workdir / name for name in PROTECTED_FOLDERS]
        protected: list[Path] = []
        if (workdir / ".git").is_dir():
            folders.append(workdir / ".git" / "hooks")
            protected.append(workdir / ".git" / "config")
        protected.append(workdir / ".mcp.json")  # names the commands MCP servers run
        folders += [Path(p).resolve() for p in self.read_only if _inside(p, workdir)]
        interpreter = Path(sys.prefix).resolve()
        if _inside(interpreter, workdir):  # a venv inside the workdir: the kernel runs it
            protected.append(interpreter)
        hidden = _reachable([*_home_credentials(env["HOME"]), *self.hidden, *dotenv_files(workdir)], workdir)
        plan = Plan(
            workdir,
            env,
            command,
            executable=self.executable,
            network=self.network,
            mount_points=tuple(folders),
            protected=tuple(p for p in protected if p.exists()),
            hidden=tuple(hidden),
            identity=self.identity,
            limits=self.limits,
            timeout=timeout,
            prlimit=prlimit,
            seccomp=filter_program(),
            disable_userns=_disables_userns(cast(str, self.executable)),
        )
        if self.identity == "user":
            return plan
        homes = _homes(env["HOME"], workdir)
        needed = needed_paths(env, extra=[Path(p) for p in _resolver_sources()] if self.network else ())
        if self.identity == "idmapped" and _enter_helper(plan, homes, needed):
            return plan
        plan.identity = "root"
        plan.home_binds = tuple((home, tuple(home_entries(home, needed))) for home in homes)
        plan.hidden = tuple((p, d) for p, d in plan.hidden if _outside_hidden_homes(p, plan.home_binds, workdir))
        plan.secrets = tuple(root_secrets())
        if self.limits.processes:
            plan.cgroup = PidsCgroup.make(self.limits.processes)
        return plan


def _identity(executable: str, *, idmap: bool) -> tuple[Identity, str]:
    """(who commands run as, why the weaker mode when it is in force)."""
    if os.geteuid() != 0:
        return "user", ""
    if not idmap:
        return "root", "idmapped mounts were turned off (idmap=False)"
    problem = probe_idmap(executable)
    if problem is not None:
        return "root", problem
    return "idmapped", ""


def _process_limit_for_root() -> str:
    if PidsCgroup.available():
        return "the process limit holds through a pids cgroup"
    return "the process limit is not enforced (the kernel does not count root's processes; no pids cgroup can be made)"


def _homes(home: str, workdir: Path) -> list[Path]:
    """Root's home folders to hide from a root kernel's commands (the one ``$HOME`` names and
    root's own), unless the working directory is one of them or holds one."""
    found: dict[Path, None] = {}
    for candidate in (home, os.path.expanduser("~root")):
        path = Path(os.path.realpath(candidate)) if candidate.startswith("/") else None
        if path is not None and path.is_dir() and path != Path("/") and not path.is_relative_to(workdir):
            found[path] = None
    return list(found)


def _enter_helper(plan: Plan, homes: list[Path], needed: list[Path]) -> bool:
    """Prepare the root helper's namespace for ``plan`` (the working directory idmapped,
    ``needed`` reachable, ``homes`` covered) and point the plan at it; ``False`` (with one
    warning) when that cannot be done here, for the weaker mode."""
    try:
        cover, reach = [str(h) for h in homes], [str(p) for p in needed]
        helper = mount_helper(SANDBOX_UID)
        failed = helper.prepare(cover=cover, reach=reach, workdir=str(plan.workdir))
        if failed is not None and failed[0] == "stale":  # the workdir was replaced: a new view
            helper = mount_helper(SANDBOX_UID, fresh=True)
            failed = helper.prepare(cover=cover, reach=reach, workdir=str(plan.workdir))
        # what the command's uid cannot see needs no hiding, and cannot be mounted on
        candidates = [*plan.protected, *(p for p, _ in plan.hidden)]
        seen = dict(zip(candidates, helper.visible([str(p) for p in candidates]))) if failed is None else {}
    except HelperError as exc:
        failed = ("helper", str(exc))
    if failed is not None:
        stage, why = failed
        where = f"idmapped mounts cannot be made in {plan.workdir}" if stage == "idmap" else "the root helper failed"
        _warn_once(
            f"harness_nb: {where} ({why}): commands there run as root without capabilities, a weaker "
            "sandbox (files only root may read are readable to them)."
        )
        return False
    plan.namespace = helper.namespace
    plan.protected = tuple(p for p in plan.protected if seen[p])
    plan.hidden = tuple((p, d) for p, d in plan.hidden if seen[p])
    return True


def _outside_hidden_homes(path: Path, home_binds: tuple[tuple[Path, tuple[Path, ...]], ...], workdir: Path) -> bool:
    """Whether ``path`` is still there once the home folders are hidden (in the working
    directory, outside them, or in an entry bound back)."""
    if path.is_relative_to(workdir):
        return True
    for home, entries in home_binds:
        if path.is_relative_to(home):
            return any(path.is_relative_to(entry) for entry in entries)
    return True


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
            return [*limits, "bash", "-c", self.command]
        w = str(self.workdir)
        argv: list[str] = []
        if self.namespace is not None:
            uid = f"{SANDBOX_UID}"
            argv += [cast(str, _program("nsenter")), f"--mount={self.namespace}", f"--setuid={uid}", f"--setgid={uid}", "--"]
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
                argv += ["--symlink", os.readlink(entry), str(entry)] if entry.is_symlink() else ["--ro-bind", str(entry), str(entry)]
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
        argv += ["--chdir", w, *limits, "bash", "-c", self.command]
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


def _inside(path: Path, folder: Path) -> bool:
    try:
        return Path(path).resolve().is_relative_to(folder)
    except (OSError, RuntimeError):
        return False


def _home_credentials(home: str) -> list[Path]:
    homes = {Path(home), Path.home()}
    return [h / rel for h in homes for rel in CREDENTIAL_PATHS]


def _reachable(paths: Iterable[Path], workdir: Path) -> list[tuple[Path, bool]]:
    """(real location, is a folder) of the ``paths`` that exist and that a command could
    see: what lies in the private /tmp or /run is out of sight already (unless in the
    workdir)."""
    found: dict[Path, bool] = {}
    for path in paths:
        try:
            real = Path(os.path.realpath(path))
            if not real.exists():
                continue
            is_folder = real.is_dir()
        except (OSError, ValueError):
            continue
        if workdir.is_relative_to(real):
            continue  # hiding it would hide the working directory too
        if real.is_relative_to(workdir) or not (real.is_relative_to("/tmp") or real.is_relative_to("/run")):
            found[real] = is_folder
    return list(found.items())


def _interpreters_under_private_folders() -> list[str]:
    """The kernel's Python (its virtualenv and the base install) where the sandbox's
    private /tmp or /run would hide it: commands run ``python`` from there too."""
    found = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return sorted(p for p in found if p.startswith(("/tmp/", "/run/")))


def _resolver_sources() -> list[str]:
    # /etc/resolv.conf may point into /run (systemd-resolved, resolvconf), which is hidden.
    real = os.path.realpath("/etc/resolv.conf")
    return [os.path.dirname(real)] if real.startswith("/run/") else []


def _resolver_binds() -> list[str]:
    return [arg for folder in _resolver_sources() for arg in ("--ro-bind-try", folder, folder)]


def dotenv_files(workdir: Path, *, max_entries: int = DOTENV_MAX_ENTRIES) -> list[Path]:
    """``.env`` files (``.env``, ``.env.*``, ``.envrc``) under ``workdir``: a bounded walk
    that follows no symlinked folder and skips caches and installed packages."""
    found: list[Path] = []
    budget = max_entries
    stack: list[tuple[Path, int]] = [(workdir, 0)]
    while stack and budget > 0:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        _warn_once(f"more than {max_entries} entries under {workdir}: .env files further in are not hidden")
                        break
                    name = entry.name
                    if _DOTENV.fullmatch(name):
                        found.append(Path(entry.path))
                    elif depth < _DOTENV_MAX_DEPTH and name not in _DOTENV_SKIP and entry.is_dir(follow_symlinks=False):
                        stack.append((Path(entry.path), depth + 1))
        except OSError:
            continue  # unreadable or vanished: nothing to hide there
    return found


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


@functools.cache
def default_sandbox() -> Sandbox:
    """The ``auto`` sandbox without network: what a ``bash`` tool not bound to a harness's
    sandbox uses (probed on first use, not at import)."""
    return Sandbox.create("auto")
