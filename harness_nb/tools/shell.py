"""The ``bash`` tool: run a shell command in the working directory.

The command runs in its own session (``start_new_session=True``), so its process group
holds bash and everything it starts; on a timeout, an interrupt, or children left
holding the output pipe, the whole group is killed — nothing outlives the call by
accident. Output is read as it comes and only its head and tail are kept, so a command
printing megabytes costs a bounded amount of memory.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
from contextlib import suppress
from typing import Annotated

from pydantic import Field

from ..core import ToolError
from .base import ToolContext, tool

BASH_MAX_OUTPUT_CHARS = 30_000
"""Most characters of output ``bash`` returns: the first and the last half of that."""
LINGER_SECONDS = 0.2
"""How long to wait for the output pipe to close after bash itself has exited."""
_POLL_SECONDS = 0.05


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


async def _pump(stream: asyncio.StreamReader, sink: _HeadTail) -> None:
    while chunk := await stream.read(1 << 16):
        sink.feed(chunk)
    sink.feed(b"", final=True)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    # The group id is bash's pid (it leads its own session). The group may already be
    # gone when every member has exited: nothing left to kill.
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _wait_exit(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    """Wait until bash itself has exited.

    ``Process.wait()`` also waits for the output pipe to close, which a background child
    may hold open for ever; so while the pipe is open, wake when the output ends (the
    usual way a command finishes) or every ``_POLL_SECONDS`` to look at the exit status.
    """
    while proc.returncode is None:
        if reader.done():
            await proc.wait()  # no pipe left open: this returns as soon as bash exits
        else:
            await asyncio.wait({reader}, timeout=_POLL_SECONDS)


async def _stop(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    """Kill the command's process group, wait for bash and let the output reader finish."""
    _kill_group(proc)
    await _wait_exit(proc, reader)
    done, _ = await asyncio.wait({reader}, timeout=LINGER_SECONDS)
    if not done:
        # Only a process that left the group (setsid) can still hold the pipe open.
        reader.cancel()
        await asyncio.wait({reader})


def _exit_status(code: int) -> str:
    if code >= 0:
        return f"exit code: {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"exit code: {code} (killed by {name})"


@tool(timeout_param="timeout")
async def bash(
    ctx: ToolContext,
    command: Annotated[str, Field(description="The bash command (or script) to run.")],
    timeout: Annotated[
        float, Field(gt=0, le=3600, description="Seconds before the command is killed.")
    ] = 120,
) -> str:
    """Run a bash command in the working directory and return its output and exit code.

    stdout and stderr come back merged, in order; stdin is empty, so interactive
    programs get end-of-file instead of waiting. Long output keeps its beginning and end
    with a note of what was left out. On timeout the command and every process it started
    are killed. Processes left running in the background that still write to the output
    are stopped when the command ends; to keep one running, send its output to a file:
    `nohup cmd > log.txt 2>&1 &`.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=ctx.workdir,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"cannot start bash in {ctx.workdir}: {exc.strerror or exc}") from exc
    assert proc.stdout is not None  # stdout=PIPE above
    output = _HeadTail(BASH_MAX_OUTPUT_CHARS)
    reader = asyncio.create_task(_pump(proc.stdout, output), name=f"bash-output-{ctx.call.id}")
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await _wait_exit(proc, reader)
        except TimeoutError:
            timed_out = True
        else:
            # Give children that bash left behind a moment to release the output.
            await asyncio.wait({reader}, timeout=LINGER_SECONDS)
    finally:
        # Runs on timeout, on interrupt (CancelledError, re-raised after) and when
        # background children still hold the pipe.
        lingering = not reader.done()
        if proc.returncode is None or lingering:
            await _stop(proc, reader)
    text = output.text().rstrip("\n") or "(no output)"
    if timed_out:
        raise ToolError(
            f"timed out after {timeout:g} s; the command and its child processes were "
            f"killed. Raise `timeout` if it needs longer. Output so far:\n{text}"
        )
    assert proc.returncode is not None  # _wait_exit or _stop saw bash exit
    notes = ""
    if lingering:
        notes = (
            "[background processes still writing to the output were stopped; to keep one "
            "running, send its output to a file: nohup cmd > log.txt 2>&1 &]\n"
        )
    return f"{text}\n{notes}{_exit_status(proc.returncode)}"
