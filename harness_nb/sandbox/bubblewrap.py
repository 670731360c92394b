"""The sandbox ``bash`` runs in, and the environment every command gets.

On Linux with bubblewrap (Debian's ``bubblewrap``) a command runs as::

    bwrap --die-with-parent --new-session --unshare-all [--share-net]
          --ro-bind / /  --dev /dev  --proc /proc  --tmpfs /tmp  --tmpfs /run
          --bind W W                      the working directory, writable
          --ro-bind W/.claude W/.claude   agent, skill and settings folders, .git hooks/config
          --tmpfs ~/.ssh --remount-ro ~/.ssh, --ro-bind-data FD ~/.netrc   hidden, as are W/.env
          --chdir W  bash -c COMMAND

so the file system is read-only except the working directory and a private /tmp, the
machine's service sockets (/run: docker, dbus, databases) are out of reach, there is no
network unless allowed, and, with its own pid namespace, every process a command starts
dies when the command ends or when the kernel dies (``--die-with-parent``: bubblewrap
dies with the process that started it, and its namespace's processes with it).

Every command, sandboxed or not, gets ``command_environment()``: an allow-list (PATH,
HOME, locale, terminal, time zone, the virtualenv), never the kernel's whole environment.
Without the sandbox that keeps keys out of the obvious places only: a process running with
your rights can still read your files (and ``/proc/<kernel pid>/environ``).

``Sandbox.create("auto")`` probes bubblewrap once per process and falls back to no
sandbox with one logged warning; ``"bwrap"`` requires it (``ConfigError`` naming the
fix); ``"off"`` never uses it. ``Sandbox.active`` says which it is.
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
from typing import Literal, cast

from ..core import ConfigError, ToolError
from .protected import PROTECTED_FOLDERS

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
    # the workdirs' checkpoints: copies of every file, hidden .env files among them
    ".harness_nb/checkpoints",
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
    argv = [executable, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--tmpfs", "/tmp", "true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{executable} does not run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap cannot create a sandbox here ({said[0] if said else f'exit {done.returncode}'})"
    return None


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
    ``hidden`` more files or folders to hide (the kernel's connection file). ``reason``
    and ``fix`` say why the sandbox is not active and how to get it.
    """

    mode: SandboxMode = "off"
    active: bool = False
    network: bool = False
    reason: str = "the sandbox setting is 'off'"
    fix: str = ""
    executable: str | None = None
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()

    @classmethod
    def create(
        cls,
        mode: str = "auto",
        *,
        network: bool = False,
        read_only: Iterable[Path] = (),
        hidden: Iterable[Path] = (),
        executable: str | None = None,
    ) -> Sandbox:
        """The sandbox for ``mode``: ``"auto"`` (bubblewrap where it works, else none, with
        one warning), ``"bwrap"`` (``ConfigError`` when it cannot work) or ``"off"``.
        ``executable`` is the ``bwrap`` to use (default: the one on PATH)."""
        if mode not in SANDBOX_MODES:
            raise ConfigError(f"sandbox must be one of {', '.join(map(repr, SANDBOX_MODES))}, not {mode!r}")
        base = cls(
            cast(SandboxMode, mode),
            network=network,
            read_only=tuple(Path(p) for p in read_only),
            hidden=tuple(Path(p) for p in hidden),
        )
        if mode == "off":
            return base
        executable = executable or shutil.which("bwrap")
        reason, fix = _unavailable(executable)
        if not reason:
            return replace(base, active=True, reason="", executable=executable)
        if mode == "bwrap":
            raise ConfigError(f"sandbox 'bwrap' cannot be used: {reason}; {fix} (or use sandbox 'auto')")
        sandbox = replace(base, reason=reason, fix=fix, executable=executable)
        _warn_once(cast(str, sandbox.notice))
        return sandbox

    def protecting(self, paths: Iterable[Path]) -> Sandbox:
        """This sandbox, also keeping ``paths`` read-only."""
        return replace(self, read_only=(*self.read_only, *(Path(p) for p in paths)))

    @property
    def notice(self) -> str | None:
        """What to tell the person once when ``auto`` found no sandbox (``None`` otherwise)."""
        if self.active or self.mode != "auto":
            return None
        return (
            f"harness_nb: bash is not sandboxed: {self.reason}; {self.fix}. Commands run with "
            "your rights, so the approval rules apply to them in full."
        )

    def describe(self) -> str:
        """One paragraph for people: what a ``bash`` command can and cannot do."""
        if self.active:
            net = "the network is allowed" if self.network else "no network"
            return (
                "bash runs sandboxed (bubblewrap): files are read-only except the working "
                f"directory and a private /tmp; {net}; the environment is cleared to an "
                "allow-list; credential files, .env files, agent/skill/settings folders and git "
                "hooks are protected; every process a command starts ends with it."
            )
        fix = f" ({self.fix})" if self.fix else ""
        return (
            f"bash is not sandboxed: {self.reason}{fix}. Commands run with your rights and "
            "network; only the environment is cleared to an allow-list, and processes that "
            "leave the command's process group (setsid) can outlive it."
        )

    def plan(self, command: str, workdir: Path) -> Plan:
        """How to run ``command`` in ``workdir``. Blocking (it looks for credential and
        ``.env`` files): call it off the event loop. ``ToolError`` when ``workdir`` is gone."""
        workdir = Path(workdir).resolve()
        if not workdir.is_dir():
            raise ToolError(f"cannot start bash in {workdir}: it is not a folder")
        env = command_environment()
        if not self.active:
            return Plan(workdir, env, command)
        env["XDG_CACHE_HOME"] = "/tmp/.cache"  # the home folder is read-only: pip, matplotlib cache here
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
        return Plan(
            workdir,
            env,
            command,
            executable=self.executable,
            network=self.network,
            mount_points=tuple(folders),
            protected=tuple(p for p in protected if p.exists()),
            hidden=tuple(hidden),
        )


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
    made: list[Path] = field(default_factory=list)  # mount points launch() created
    fds: list[int] = field(default_factory=list)  # to pass to bubblewrap: each reads as an empty file

    @property
    def sandboxed(self) -> bool:
        """Whether the command runs under bubblewrap."""
        return self.executable is not None

    def launch(self) -> list[str]:
        """The argv to run, passing it ``fds``. A missing protected folder is created first
        (a read-only mount needs a place), so that a command cannot create it either;
        ``release()`` removes it again if it is still empty, and closes ``fds``."""
        if self.executable is None:
            return ["bash", "-c", self.command]
        w = str(self.workdir)
        argv = [self.executable, "--die-with-parent", "--new-session", "--unshare-all"]
        if self.network:
            argv.append("--share-net")
        argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
        for prefix in _interpreters_under_private_folders():  # a venv in /tmp/… must not vanish
            argv += ["--ro-bind", prefix, prefix]
        if self.network:
            argv += _resolver_binds()
        argv += ["--bind", w, w]
        held = [p for p in self.mount_points if _hold_mount_point(p, self.workdir, self.made)]
        for path in (*held, *self.protected):
            argv += ["--ro-bind", str(path), str(path)]
        for path, is_folder in self.hidden:
            if is_folder:
                argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
            else:
                # a read-only file with the fd's content (none). /dev/null itself cannot be
                # bound: a user namespace's mounts refuse device files, so reads would fail.
                self.fds.append(os.open(os.devnull, os.O_RDONLY))
                argv += ["--ro-bind-data", str(self.fds[-1]), str(path)]
        return [*argv, "--chdir", w, "bash", "-c", self.command]

    def release(self) -> None:
        """Close ``fds``; remove the mount points ``launch()`` made, once no running
        command uses them."""
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        _release_mount_points(self.made)
        self.made.clear()


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


def _resolver_binds() -> list[str]:
    # /etc/resolv.conf may point into /run (systemd-resolved, resolvconf), which is hidden.
    real = os.path.realpath("/etc/resolv.conf")
    if real.startswith("/run/"):
        folder = os.path.dirname(real)
        return ["--ro-bind-try", folder, folder]
    return []


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
