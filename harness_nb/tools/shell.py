"""The ``bash`` tool: run a shell command in the working directory.

A command runs under the tool's ``Sandbox`` (``sandbox/bubblewrap.py``: bubblewrap where it
works) with an allow-listed environment, in its own session. When it ends — finished,
timed out or interrupted — its whole process group is killed, so background jobs end with
it. Under bubblewrap its pid namespace makes that cover every process it started
(``setsid`` ones too) and the kernel's death (``--die-with-parent``); without bubblewrap a
process that leaves the group can outlive the command, and the result says so when it
still holds the output. Commands still running when the interpreter exits or the
extension is unloaded are killed (``kill_running_commands``).

Output comes through a pipe this module makes and always closes, read as it comes; only
its head and tail are kept, so a command printing megabytes costs a bounded amount of
memory.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import os
import signal
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ..core import ToolError, run_blocking
from ..sandbox import Plan, Sandbox, default_sandbox, stop_mount_helper
from .base import FunctionTool, ToolContext

BASH_MAX_OUTPUT_CHARS = 30_000
"""Most characters of output ``bash`` returns: the first and the last half of that."""
LINGER_SECONDS = 0.2
"""How long to wait for the output pipe to close after bash itself has exited."""


class _HeadTail:
    """Decodes a byte stream as UTF-8 and keeps only its first and last ``limit // 2``
    characters, counting what falls in between."""

    def __init__(self, limit: int) -> None:
        self._half = limit // 2
        self._head = ""
        self._tail = ""
        self._omitted = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if len(self._head) < self._half:
            room = self._half - len(self._head)
            self._head += text[:room]
            text = text[room:]
        if text:
            tail = self._tail + text
            if len(tail) > self._half:
                self._omitted += len(tail) - self._half
                tail = tail[-self._half :]
            self._tail = tail

    def text(self) -> str:
        if self._omitted:
            return f"{self._head}\n[… {self._omitted} chars omitted …]\n{self._tail}"
        return self._head + self._tail


class _Collect(asyncio.Protocol):
    """Feeds the output pipe into a ``_HeadTail``; ``closed`` is done once the pipe is."""

    def __init__(self, sink: _HeadTail) -> None:
        self.sink = sink
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.sink.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.sink.feed(b"", final=True)
            self.closed.set_result(None)


# Process groups (= session ids) of the commands running now, in this process.
_running: set[int] = set()
_atexit_registered = False


def kill_running_commands() -> int:
    """Kill every ``bash`` command still running in this process, with its process group
    (under bubblewrap, its whole sandbox), and stop the root helper (a root kernel's;
    the next command starts it again). Called at interpreter exit and when the extension
    is unloaded; returns how many commands were killed."""
    killed = sum(_kill_group(pgid) for pgid in list(_running))
    _running.clear()
    stop_mount_helper()
    return killed


def _track(pgid: int) -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(kill_running_commands)
        _atexit_registered = True
    _running.add(pgid)


def _kill_group(pgid: int) -> bool:
    """SIGKILL the group; whether anything was left in it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _exit_status(code: int) -> str:
    # bash (and bubblewrap, passing on bash's status) report a child killed by signal N
    # as 128 + N; Python reports a process it saw killed as -N.
    number = -code if code < 0 else code - 128 if 128 < code < 128 + signal.NSIG else 0
    if not number:
        return f"exit code: {code}"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"exit code: {code} (killed by {name})"


_STOPPED_NOTE = "[background processes the command left running were stopped: every process a command starts ends with it]"
_ESCAPED_NOTE = (
    "[a process that left the command's process group (setsid) still holds the output and "
    "could not be stopped: it may still be running (without the sandbox, such processes "
    "outlive the command)]"
)


async def run_command(workdir: Path, command: str, *, timeout: float, sandbox: Sandbox) -> str:
    """Run ``command`` in ``workdir`` under ``sandbox`` and return its output and status
    (``ToolError`` on timeout or when it cannot start)."""
    plan = await run_blocking(sandbox.plan, command, workdir, timeout=timeout)
    try:
        return await _execute(plan.launch(), plan, timeout=timeout)
    finally:
        plan.release()


async def _execute(argv: list[str], plan: Plan, *, timeout: float) -> str:
    loop = asyncio.get_running_loop()
    output = _HeadTail(BASH_MAX_OUTPUT_CHARS)
    collect = _Collect(output)
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: collect, pipe)
    except BaseException:
        pipe.close()
        os.close(write_fd)
        raise
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=plan.workdir,
                env=plan.env,
                pass_fds=plan.fds,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(f"cannot start bash in {plan.workdir}: {exc.strerror or exc}") from exc
        finally:
            os.close(write_fd)  # the child has its copy; ours would keep the pipe open
        _track(proc.pid)
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await proc.wait()
            # Give children that bash left behind a moment to release the output.
            await asyncio.wait({collect.closed}, timeout=LINGER_SECONDS)
        except TimeoutError:
            timed_out = True
        finally:
            # Also on interrupt (CancelledError, re-raised after): the group goes, always.
            leftovers = _kill_group(proc.pid)
            _running.discard(proc.pid)
            if proc.returncode is None:
                await proc.wait()
            if not collect.closed.done():
                await asyncio.wait({collect.closed}, timeout=LINGER_SECONDS)
        escaped = not collect.closed.done() and not plan.sandboxed
    finally:
        transport.close()
    text = output.text().rstrip("\n") or "(no output)"
    if timed_out:
        hint = f"\n{_ESCAPED_NOTE}" if escaped else ""
        raise ToolError(
            f"timed out after {timeout:g} s; the command and its child processes were "
            f"killed. Raise `timeout` if it needs longer.{hint} Output so far:\n{text}"
        )
    assert proc.returncode is not None  # waited for above
    limit = plan.note(text, proc.returncode)
    shown = ((_STOPPED_NOTE, leftovers), (_ESCAPED_NOTE, escaped), (limit, limit is not None))
    notes = "".join(f"{note}\n" for note, show in shown if show)
    return f"{text}\n{notes}{_exit_status(proc.returncode)}"


async def _bash(
    ctx: ToolContext,
    command: str,
    timeout: Annotated[float, Field(gt=0, le=3600, description="Seconds.")] = 120,
) -> str:
    """Run a bash command in the working directory: output (stdout and stderr) and exit code.
    No stdin; processes it starts end with it. Sandboxed where supported: writes only in
    the working directory and /tmp, no network unless allowed, no credentials."""
    return await run_command(ctx.workdir, command, timeout=timeout, sandbox=default_sandbox())


class BashTool(FunctionTool):
    """The ``bash`` tool bound to a ``Sandbox`` (``None``: the default ``auto`` one, probed
    on first use). ``sandboxed`` tells a permission policy whether the OS confines its
    calls."""

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        super().__init__(_bash, name="bash", timeout_param="timeout")
        self._sandbox = sandbox

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox this tool's commands run under."""
        return self._sandbox if self._sandbox is not None else default_sandbox()

    @property
    def sandboxed(self) -> bool:
        return self.sandbox.active

    async def run(self, params: Any, ctx: ToolContext) -> str:
        return await run_command(ctx.workdir, params.command, timeout=params.timeout, sandbox=self.sandbox)


bash = BashTool()
"""The ``bash`` tool with the default sandbox; ``builtin_tools(sandbox=…)`` binds another."""
