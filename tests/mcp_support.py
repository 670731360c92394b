"""Shared pieces of the MCP tests: the demo server's configuration, and the demo server
served over streamable HTTP on a loopback port. Both start it through ``forked.py``: forked
from a process that imported the SDK once, so that a start costs milliseconds, not the
second the SDK takes to import."""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

DEMO = Path(__file__).parent / "mcp_servers" / "demo.py"
FORKED = Path(__file__).parent / "mcp_servers" / "forked.py"
READY_WITHIN = 60.0  # seconds: a bound on waiting, not a measurement

_fork_server: str | None = None


def server_command(script: str | Path = DEMO) -> list[str]:
    """The command line that runs ``script``, an MCP server written with the SDK, as
    ``python script`` does (its arguments follow): forked by this process's fork server
    (started at the first call, stopped when the process ends), or, where ``forked.py``
    cannot work (no ``os.pidfd_open``), ``python script`` itself."""
    global _fork_server
    if not hasattr(os, "pidfd_open"):
        return [sys.executable, str(script)]
    if _fork_server is None:
        folder = tempfile.mkdtemp(prefix="mcp-forks-")
        path = os.path.join(folder, "forks.sock")
        # its own session: it ends its copies by killing its process group
        forks = subprocess.Popen(
            [sys.executable, str(FORKED), "--serve", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert forks.stdout is not None
        if forks.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the MCP servers' fork server did not start (exit {forks.wait()})")
        atexit.register(_stop_fork_server, forks, folder)
        _fork_server = path
    return [sys.executable, str(FORKED), _fork_server, str(script)]


def _stop_fork_server(forks: subprocess.Popen[bytes], folder: str) -> None:
    """Closing its stdin ends it, with every copy it forked."""
    assert forks.stdin is not None and forks.stdout is not None
    forks.stdin.close()
    forks.wait()
    forks.stdout.close()
    shutil.rmtree(folder, ignore_errors=True)


def stdio_demo(**env: str) -> dict[str, Any]:
    """The ``.mcp.json`` entry of the demo server over stdio (``env`` for its process)."""
    command, *args = server_command()
    entry: dict[str, Any] = {"command": command, "args": args}
    if env:
        entry["env"] = env
    return entry


@pytest.fixture(autouse=True)
def home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of the test's own, beside its workdir (``$HOME``, so ``Path.home()``):
    the person's settings and the MCP trust file are read and written there, never in the
    real one. Autouse: a test module that imports it gets it in every test."""
    folder = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(folder))
    return folder


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpDemo:
    """The demo server over streamable HTTP on ``port``, run as a process by the test;
    ``start()`` returns once it accepts connections, ``stop()`` kills it."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def entry(self, **headers: str) -> dict[str, Any]:
        """Its ``.mcp.json`` entry."""
        entry: dict[str, Any] = {"type": "http", "url": self.url}
        if headers:
            entry["headers"] = headers
        return entry

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *server_command(),
            "--http",
            str(self.port),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with asyncio.timeout(READY_WITHIN):
            while True:
                if self.process.returncode is not None:
                    raise RuntimeError(f"the HTTP demo server exited ({self.process.returncode})")
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                await writer.wait_closed()
                return

    async def wait_exit(self) -> int:
        """Wait for the process to end by itself (a crash the test caused)."""
        assert self.process is not None
        async with asyncio.timeout(READY_WITHIN):
            return await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
        if self.process is not None:
            await self.process.wait()
        self.process = None
