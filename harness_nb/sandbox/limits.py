"""Limits on what one ``bash`` command may use: ``SandboxLimits``, the one definition the
``Harness(sandbox_limits=…)`` keyword and ``%config HarnessNB.sandbox_limits`` both take.

========================  =======================================  ============================
limit                     default                                  when reached
========================  =======================================  ============================
``processes``             1024 (threads count)                     ``fork`` fails (``EAGAIN``)
``address_space``         the machine's memory (at least 8 GiB),   allocations fail (ENOMEM)
                          per process
``file_size``             16 GiB per file written                  the writer gets ``SIGXFSZ``
``cpu_seconds``           ``"timeout"``: the command's timeout     the process gets ``SIGXCPU``
                          times the cores (never ends a command
                          the timeout would not)
========================  =======================================  ============================

``None`` lifts a limit. They are resource limits (``prlimit``) set on the command's first
process and inherited by everything it starts; the hard limits equal the soft ones (CPU
time: a second more, so a process first gets ``SIGXCPU``), so a command cannot raise them.
In the sandbox the process count is per command: each command has its own user namespace,
and the kernel counts processes per user and namespace. Where the command runs
as root (the sandbox's weaker mode, or no sandbox) the kernel does not count root's
processes; there a pids cgroup holds the count where one can be made (``PidsCgroup``), and
without the sandbox it is not limited (it would count all of the person's processes).

The defaults were measured not to get in the way of ordinary data work: importing numpy,
pandas and matplotlib, pip, git, a C compiler, a process pool (``benchmarks/bench_sandbox.py``).
"""

from __future__ import annotations

import difflib
import itertools
import logging
import math
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from ..core import ConfigError
from .program import harness_program

__all__ = ["LIMIT_NAMES", "PidsCgroup", "SandboxLimits"]

log = logging.getLogger("harness_nb.sandbox")

_GIB = 1024**3
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": _GIB, "t": 1024**4}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def _address_space() -> int:
    # a JVM reserves a quarter of the memory for its heap and some 3 GiB besides, V8 about
    # 1 GiB, whatever the machine: below 8 GiB the limit would stop them, not a runaway
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        memory = 0
    return max(memory, 8 * _GIB)


def _size(name: str, value: object) -> int | None:
    """Bytes from an int or a string such as ``"16G"``, ``"512 MiB"``; ``None`` stays."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and (match := _SIZE.fullmatch(value)):
        amount = float(match.group(1)) * _UNITS[match.group(2).lower()]
        if amount >= 1:
            return int(amount)
    raise ConfigError(f"sandbox_limits {name} must be a size above 0 in bytes or like '16G', or None, not {value!r}")


def _whole(name: str, value: object) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ConfigError(f"sandbox_limits {name} must be a whole number above 0, or None, not {value!r}")


def size_text(size: int) -> str:
    """``17179869184`` -> ``"16 GiB"``."""
    for unit, scale in (("TiB", 1024**4), ("GiB", _GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


@dataclass(frozen=True)
class SandboxLimits:
    """What one ``bash`` command may use (see the module doc). Made from keywords or a
    mapping (``SandboxLimits.of({"processes": 2000, "file_size": "64G"})``); checked when
    made, so a bad value is a ``ConfigError`` naming it."""

    processes: int | None = 1024
    """Processes and threads at once."""
    address_space: int | None = field(default_factory=_address_space)
    """Bytes of address space per process (default: the machine's memory, at least 8 GiB)."""
    file_size: int | None = 16 * _GIB
    """Bytes a process may write to one file."""
    cpu_seconds: int | None | Literal["timeout"] = "timeout"
    """CPU seconds per process; ``"timeout"``: the command's timeout times the cores."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "processes", _whole("processes", self.processes))
        object.__setattr__(self, "address_space", _size("address_space", self.address_space))
        object.__setattr__(self, "file_size", _size("file_size", self.file_size))
        if self.cpu_seconds != "timeout":
            object.__setattr__(self, "cpu_seconds", _whole("cpu_seconds", self.cpu_seconds))

    @classmethod
    def of(cls, value: SandboxLimits | Mapping[str, Any] | None) -> SandboxLimits:
        """``value`` as limits: a ``SandboxLimits`` as it is, a mapping of some of its
        fields over the defaults (an unknown name is a ``ConfigError`` with a
        did-you-mean), ``None`` the defaults."""
        if value is None:
            return cls()
        if isinstance(value, SandboxLimits):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"sandbox_limits must be a mapping such as {{'processes': 2000}}, not {value!r}")
        for name in value:
            if name not in LIMIT_NAMES:
                close = difflib.get_close_matches(str(name), LIMIT_NAMES, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                known = ", ".join(LIMIT_NAMES)
                raise ConfigError(f"sandbox_limits has no limit {name!r}{hint}; the limits are: {known}")
        return cls(**value)

    def cpu_limit(self, timeout: float) -> int | None:
        """The CPU seconds per process for a command given ``timeout`` seconds."""
        if self.cpu_seconds == "timeout":
            return max(1, math.ceil(timeout * (os.cpu_count() or 1)))
        return self.cpu_seconds

    def prlimit_args(self, timeout: float, *, processes: bool = True) -> list[str]:
        """``prlimit`` options setting these limits (soft = hard); ``processes=False`` leaves
        the process count out (where the kernel would count the person's every process)."""
        cpu = self.cpu_limit(timeout)
        values = {
            "nproc": self.processes if processes else None,
            "as": self.address_space,
            "fsize": self.file_size,
            # at the soft limit SIGXCPU, which says what happened; SIGKILL a second later
            "cpu": None if cpu is None else f"{cpu}:{cpu + 1}",
        }
        return [f"--{name}={value}" for name, value in values.items() if value is not None]

    def describe(self) -> str:
        """``"1024 processes, 24 GiB address space and 16 GiB per file per process, CPU time up
        to the timeout"``, for people."""
        parts = [
            f"{self.processes} processes" if self.processes else "any number of processes",
            f"{size_text(self.address_space)} of address space per process" if self.address_space else "",
            f"{size_text(self.file_size)} per file written" if self.file_size else "",
            "CPU time up to what the timeout allows" if self.cpu_seconds == "timeout"
            else f"{self.cpu_seconds} CPU seconds per process" if self.cpu_seconds else "",
        ]  # fmt: skip
        return ", ".join(p for p in parts if p)

    def note(self, output: str, status: int, timeout: float) -> str | None:
        """What to tell the model when the command's ``output`` or exit ``status`` shows a
        limit was reached (``None`` when none shows): which limit, and how the person
        raises it."""
        hit = _hit(output, status)
        if hit is None:
            return None
        name, what = hit
        value: int | None = {
            "processes": self.processes,
            "address_space": self.address_space,
            "file_size": self.file_size,
            "cpu_seconds": self.cpu_limit(timeout),
        }[name]
        if value is None:
            return None  # no limit of ours: the machine's own
        shown = size_text(value) if name in ("address_space", "file_size") else str(value)
        suggestion = {"processes": value * 4, "cpu_seconds": value * 4}.get(name)
        example = repr(suggestion) if suggestion else repr(f"{math.ceil(value * 4 / _GIB)}G")
        return (
            f"[{what}: the sandbox's limit {name} = {shown} was reached. Only the person can raise it: "
            f"%config HarnessNB.sandbox_limits = {{{name!r}: {example}}} (or Harness(sandbox_limits=...)); "
            "ask them, or do the work in smaller pieces]"
        )


LIMIT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(SandboxLimits))
"""The names ``sandbox_limits`` takes."""

_SIGXCPU, _SIGXFSZ = 24, 25
_FORK_FAILED = re.compile(
    r"fork: (retry: )?Resource temporarily unavailable|can't start new thread|"
    r"BlockingIOError: \[Errno 11\]|pthread_create.*(Resource temporarily unavailable|EAGAIN)"
)
_NO_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory", re.IGNORECASE)


def _hit(output: str, status: int) -> tuple[str, str] | None:
    """(limit name, what happened) as far as the output and status show it."""
    if status in (-_SIGXFSZ, 128 + _SIGXFSZ) or "File size limit exceeded" in output:
        return "file_size", "a file grew past the largest size a command may write"
    if status in (-_SIGXCPU, 128 + _SIGXCPU) or "CPU time limit exceeded" in output:
        return "cpu_seconds", "a process used up its CPU time"
    if _FORK_FAILED.search(output):
        return "processes", "a process could not be started"
    if _NO_MEMORY.search(output):
        return "address_space", "memory could not be allocated (the limit, or the machine's memory)"
    return None


class PidsCgroup:
    """A pids cgroup holding one command's processes to ``limit``, where one can be made
    (the kernel's own cgroup in a writable ``pids`` hierarchy: cgroup v1, or v2 with the
    controller enabled for children). ``make`` gives ``None`` where it cannot.

    The command joins it through ``wrap(argv)`` (its first process writes its own pid to
    ``cgroup.procs`` before anything forks); ``remove()`` once the command is over removes
    it, or, while dying processes still hold it, leaves that to the next ``make``, which
    also removes what a process that has ended left behind."""

    _counter = itertools.count(1)
    _leftover: set[Path] = set()
    _lock = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def make(cls, limit: int) -> PidsCgroup | None:
        """A new cgroup limited to ``limit`` processes; ``None`` where none can be made."""
        cls.sweep()
        parent = _pids_parent()
        if parent is None:
            return None
        path = parent / f"harness_nb-{os.getpid()}-{next(cls._counter)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError as exc:
            log.debug("no pids cgroup at %s: %s", path, exc)
            _rmdir(path)
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this cgroup."""
        procs = str(self.path / "cgroup.procs")
        sh = harness_program("sh") or "/bin/sh"
        return [sh, "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]

    def remove(self) -> None:
        """Remove the cgroup (later, if processes still hold it)."""
        if not _rmdir(self.path):
            with self._lock:
                self._leftover.add(self.path)

    @staticmethod
    def available() -> bool:
        """Whether a pids cgroup can be made here."""
        return _pids_parent() is not None

    @classmethod
    def sweep(cls) -> None:
        """Remove cgroups whose processes have gone since: this process's, and those a
        process that has ended left behind (``harness_nb-<its pid>-<n>``)."""
        with cls._lock:
            left = set(cls._leftover)
        parent = _pids_parent()
        if parent is not None:
            try:
                left |= {p for p in parent.glob("harness_nb-*-*") if not _alive(p.name.split("-")[1])}
            except OSError:
                pass
        for path in left:
            if _rmdir(path):
                with cls._lock:
                    cls._leftover.discard(path)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _pids_parent() -> Path | None:
    """This process's cgroup in a hierarchy with the pids controller that children can use."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        left, _, right = line.partition(" - ")
        fstype, _, options = (right.split() + ["", "", ""])[:3]
        mount_point = Path(left.split()[4])
        if fstype == "cgroup" and "pids" in options.split(","):
            rel = next((c.split(":", 2)[2] for c in own if "pids" in c.split(":", 2)[1].split(",")), None)
        elif fstype == "cgroup2":
            rel = next((c.split(":", 2)[2] for c in own if c.startswith("0::")), None)
            if rel is not None:
                try:
                    enabled = (mount_point / rel.lstrip("/") / "cgroup.subtree_control").read_text().split()
                except OSError:
                    continue
                if "pids" not in enabled:
                    continue
        else:
            continue
        if rel is None:
            continue
        folder = mount_point / rel.lstrip("/")
        if os.access(folder, os.W_OK):
            return folder
    return None
