"""Shared pieces of the sandbox tests: the bubblewrap sandbox (or a skip, or in CI a
failure), and processes found on the host by their exact command line — a sandboxed
command's ``$!`` is a pid of its own namespace, meaningless outside it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from harness_nb.core import ConfigError
from harness_nb.tools import Sandbox


def bwrap_sandbox(*, network: bool = False) -> Sandbox:
    """The bubblewrap sandbox. Skips only where bubblewrap genuinely cannot work; with
    ``$CI`` set (``.ci/run`` sets it, and ``.ci/setup`` installs bubblewrap) it fails."""
    try:
        return Sandbox.create("bwrap", network=network)
    except ConfigError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the sandbox tests: {exc}")
        pytest.skip(f"bubblewrap cannot sandbox here: {exc}")


def host_pids(*argv: str) -> list[int]:
    """Pids of the live (not zombie) processes whose command line is exactly ``argv``."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() != wanted:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # exited meanwhile
        if state != "Z":
            found.append(int(entry.name))
    return found


async def wait_running(*argv: str, count: int = 1) -> list[int]:
    """Wait until ``count`` processes run ``argv``; their pids."""
    for _ in range(500):
        pids = host_pids(*argv)
        if len(pids) >= count:
            return pids
        await asyncio.sleep(0.02)
    raise AssertionError(f"{' '.join(argv)!r} never ran")


async def wait_gone(*argv: str) -> bool:
    """Whether every process running ``argv`` is gone (an orphan is reaped asynchronously,
    so this polls for a bounded while; the assertion is about liveness, not time)."""
    for _ in range(250):
        if not host_pids(*argv):
            return True
        await asyncio.sleep(0.02)
    return False


def kill_all(*argv: str) -> None:
    """Clean up processes a test started (by their exact command line)."""
    for pid in host_pids(*argv):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def open_fds() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


def sleep_arg() -> str:
    """A ``sleep`` duration no other process on the machine is running (for ``host_pids``)."""
    return f"{900 + int.from_bytes(os.urandom(2), 'big') % 100}.{int.from_bytes(os.urandom(4), 'big')}"
