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
HOME, locale, terminal, time zone, the virtualenv), never the kernel's whole environment,
and git settings that keep a repository's configuration from running programs
(``GIT_ENVIRONMENT``; ``permissions/shell/git_config.py``).
Without the sandbox that keeps keys out of the obvious places only: a process running with
your rights can still read your files (and ``/proc/<kernel pid>/environ``); the limits but
the process count apply there too.

bubblewrap, like every program the harness runs outside the sandbox, never comes from a
folder commands may write (``program.py``). ``Sandbox.create("auto")`` probes it once per
process, in a thread that the first harness starts and only what needs the verdict waits for
(a ``bash`` command, ``describe``), and falls back to no sandbox with one logged warning;
``"bwrap"`` requires it (``ConfigError`` naming the fix); ``"off"`` never uses it. ``Sandbox.active`` says which it is, ``Sandbox.identity``
who commands run as.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from ..core import ConfigError, ToolError
from ..core.dotenv import scan_dotenv
from .as_root import complete_as_root
from .identity import SANDBOX_UID, Identity, identity_for, process_limit_for_root
from .launch import Plan
from .limits import SandboxLimits
from .notice import warn_once
from .program import harness_program, note_workdir, writable_holder
from .protected import SANDBOX_READ_ONLY
from .seccomp import filter_program, machine_arch

SandboxMode = Literal["auto", "bwrap", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "bwrap", "off")

INSTALL_HINT = "install it: apt-get install bubblewrap"

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

GIT_OVERRIDES: dict[str, str] = {"safe.bareRepository": "explicit", "core.fsmonitor": "false"}
"""git settings every command gets, above every configuration file (``permissions/shell/git_config.py``
says why): no bare repository found by walking up, no file-system monitor program."""

GIT_ENVIRONMENT: dict[str, str] = {
    "GIT_OPTIONAL_LOCKS": "0",  # a read-only command rewrites no index, so runs no hook
    "GIT_CONFIG_COUNT": str(len(GIT_OVERRIDES)),
    **{f"GIT_CONFIG_KEY_{i}": key for i, key in enumerate(GIT_OVERRIDES)},
    **{f"GIT_CONFIG_VALUE_{i}": value for i, value in enumerate(GIT_OVERRIDES.values())},
}


def command_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a ``bash`` command gets: the allow-listed variables of ``environ``
    (default ``os.environ``, read now, so a later ``export`` in the kernel is seen), with
    the interpreter's virtualenv active, so ``python`` and ``pip`` are the kernel's, and
    ``PYTHONDONTWRITEBYTECODE=1``: a ``.pyc`` a command leaves in the workdir would run in
    the kernel at its next import (the checkpoints remove any that appears all the same);
    and the git settings of ``GIT_ENVIRONMENT``."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if k in ENVIRONMENT_NAMES or k.startswith(_ENVIRONMENT_PREFIXES)}
    env.update(GIT_ENVIRONMENT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
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
        done = subprocess.run(
            [executable, "--help"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--disable-userns" in done.stdout + done.stderr


def _unavailable(executable: str | None) -> tuple[str, str]:
    """(why bubblewrap cannot be used, how to fix it); ("", "") when it can."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})", "run on Linux to sandbox commands"
    if executable is None or not Path(executable).is_file():
        return "bubblewrap is not installed (no `bwrap` on PATH outside the working directories)", INSTALL_HINT
    problem = _probe(executable)
    if problem is not None:
        return problem, "allow user namespaces (a container needs e.g. --security-opt seccomp=unconfined)"
    return "", ""


_PROBED = ("active", "reason", "fix", "identity", "weaker")
"""The fields of a ``Sandbox`` that the probes of its bubblewrap decide."""


def _verdict(executable: str | None, idmap: bool) -> dict[str, Any]:
    """The ``_PROBED`` fields for bubblewrap at ``executable``: blocking, it runs the probes
    (each once per process)."""
    reason, fix = _unavailable(executable)
    if reason:
        return {"active": False, "reason": reason, "fix": fix, "identity": "user", "weaker": ""}
    identity, weaker = identity_for(cast(str, executable), idmap=idmap)
    return {"active": True, "reason": "", "fix": "", "identity": identity, "weaker": weaker}


_probing: dict[tuple[str, bool], Future[dict[str, Any]]] = {}
_probing_lock = threading.Lock()


def _verdict_later(executable: str, idmap: bool) -> Future[dict[str, Any]]:
    """``_verdict`` made in a thread of its own, once per process: the probes wait on a few
    processes (~5 ms, ~45 ms as root), which every process's first harness waited for as it
    was built, though most runs never need them (only ``bash`` does)."""
    with _probing_lock:
        future = _probing.get((executable, idmap))
        if future is None:
            future = _probing[(executable, idmap)] = Future()
            thread = threading.Thread(
                target=_settle, args=(future, executable, idmap), name="harness_nb sandbox probes", daemon=True
            )
            thread.start()
    return future


def _settle(future: Future[dict[str, Any]], executable: str, idmap: bool) -> None:
    try:
        future.set_result(_verdict(executable, idmap))
    except BaseException as exc:  # handed to whoever reads the verdict
        future.set_exception(exc)


def _later(default: Any) -> Any:
    """A field with a default but no class attribute (``default_factory``): a sandbox whose
    probes still run lacks it, so reading it reaches ``Sandbox.__getattr__``, which waits."""
    return field(default_factory=lambda: default)


@dataclass(frozen=True)
class Sandbox:
    """How ``bash`` commands run: ``active`` when under bubblewrap. Made by ``create``.

    ``network`` lets sandboxed commands use the network; ``read_only`` names more folders
    inside the working directory to keep read-only (agent folders given to the harness);
    ``hidden`` more files or folders to hide (the kernel's connection file); ``limits`` what
    one command may use. ``identity`` is who sandboxed commands run as (``identity.py``);
    ``weaker`` why a root kernel's commands run as root (the weaker mode). ``reason`` and
    ``fix`` say why the sandbox is not active and how to get it.

    Those five (``_PROBED``) come from probing bubblewrap: ``create("auto")`` returns before
    the probes end, and reading any of them waits for the verdict (then warns, once).
    """

    mode: SandboxMode = "off"
    active: bool = _later(False)
    network: bool = False
    reason: str = _later("the sandbox setting is 'off'")
    fix: str = _later("")
    executable: str | None = None
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    identity: Identity = _later("user")
    weaker: str = _later("")

    if not TYPE_CHECKING:  # mypy would let any attribute through

        def __getattr__(self, name: str) -> Any:
            # Reached only for a missing attribute: a _PROBED field of a sandbox whose probes
            # were still running when ``create`` returned.
            future = self.__dict__.get("_verdict")
            if future is None or name not in _PROBED:
                raise AttributeError(f"'Sandbox' object has no attribute {name!r}")
            self.__dict__.update(future.result())  # "_verdict" stays: a copy of this one finds its fields set
            self._warn()
            return self.__dict__[name]

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
        executable = executable or harness_program("bwrap")
        if (
            mode == "auto"
            and executable is not None
            and Path(executable).is_file()
            and sys.platform.startswith("linux")
        ):
            pending = replace(base, executable=executable)
            for name in _PROBED:
                del pending.__dict__[name]
            pending.__dict__["_verdict"] = _verdict_later(executable, idmap)
            return pending
        sandbox = replace(base, executable=executable, **_verdict(executable, idmap))
        if mode == "bwrap" and not sandbox.active:
            raise ConfigError(
                f"sandbox 'bwrap' cannot be used: {sandbox.reason}; {sandbox.fix} (or use sandbox 'auto')"
            )
        sandbox._warn()
        return sandbox

    def _warn(self) -> None:
        """Warn, once per process, of the weaker mode or of ``auto`` finding no sandbox."""
        notice = self.weaker_notice or self.notice
        if notice:
            warn_once(notice)

    def _copy(self, **changes: Any) -> Sandbox:
        """``replace(self, **changes)``, without waiting for the probes: the copy shares them."""
        if "_verdict" not in self.__dict__:
            return replace(self, **changes)
        copy = object.__new__(Sandbox)
        copy.__dict__.update(self.__dict__, **changes)
        return copy

    def protecting(self, paths: Iterable[Path]) -> Sandbox:
        """This sandbox, also keeping ``paths`` read-only."""
        return self._copy(read_only=(*self.read_only, *(Path(p) for p in paths)))

    def limited(self, limits: SandboxLimits | Mapping[str, Any] | None) -> Sandbox:
        """This sandbox with other ``limits``."""
        return self._copy(limits=SandboxLimits.of(limits))

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
            f"commands, and {process_limit_for_root()}."
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
                    f"are hidden, but other files only root may read are readable, and {process_limit_for_root()}"
                ),
            }[self.identity]
            seccomp = (
                "a seccomp filter refuses mount, ptrace, namespaces and their kin"
                if filter_program() is not None
                else f"no seccomp filter (none for {machine_arch()} machines)"
            )
            return (
                f"bash runs sandboxed (bubblewrap) {who}; {seccomp}: files are read-only except the working "
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
        note_workdir(workdir)  # before any program is looked up: none may come from there
        prlimit = harness_program("prlimit")
        env = command_environment()
        if not self.active:
            bash = harness_program("bash")  # run outside any sandbox: not found through the command's PATH
            if bash is None:
                raise ToolError("cannot start bash: there is none on PATH outside the working directories; install it")
            return Plan(workdir, env, command, limits=self.limits, timeout=timeout, prlimit=prlimit, bash=bash)
        held = writable_holder(cast(str, self.executable))
        if held is not None:
            raise ToolError(
                f"bubblewrap at {self.executable} lies in the working directory {held}, where commands can "
                f"replace it; {INSTALL_HINT} outside it (or pass that one as executable)"
            )
        env["XDG_CACHE_HOME"] = "/tmp/.cache"  # the home folder is read-only: pip, matplotlib cache here
        env["MPLCONFIGDIR"] = "/tmp/.cache/matplotlib"  # else it warns on every import that ~/.config is read-only
        folders = [workdir / name for name in SANDBOX_READ_ONLY]  # a missing one is made where its parent is a folder
        protected: list[Path] = []
        if (workdir / ".git").is_dir():
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
        return plan if self.identity == "user" else complete_as_root(plan, env)


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


def dotenv_files(workdir: Path) -> list[Path]:
    """``.env`` files (``.env``, ``.env.*``, ``*.env``, ``.envrc``) under ``workdir``, found
    by the walk whose values ``Secrets`` masks (``core.dotenv``: any depth, virtualenvs
    included, no symlinked folder followed, bounded)."""
    scan = scan_dotenv(workdir, read=False)
    if scan.truncated:
        warn_once(f"{workdir} holds more than the .env search looks at: .env files further in are not hidden")
    return scan.paths()


@functools.cache
def default_sandbox() -> Sandbox:
    """The ``auto`` sandbox without network: what a ``bash`` tool not bound to a harness's
    sandbox uses (probed on first use, not at import)."""
    return Sandbox.create("auto")
