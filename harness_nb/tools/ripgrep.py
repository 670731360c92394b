"""Run ripgrep over a list of files: a regex engine with linear-time matching.

``grep`` walks the tree itself (one bounded walk, the same skips and notes as ``glob``)
and hands the files it chose to ``rg``, which only matches. ``rg`` comes from the
``ripgrep`` wheel, installed next to the Python that runs harness_nb, or from ``PATH``.
It runs as a subprocess, not on a thread: a cancelled or timed-out search kills it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from ..core import escape_name
from ..sandbox.program import harness_program

__all__ = ["RgPatternError", "find_rg", "rg_search"]

LINE_MAX_BYTES = 1500
"""Longer lines come back from rg as a preview of this many bytes (plenty for 300 chars)."""
_BATCH_BYTES = 64 * 1024  # command-line bytes of file names per rg process
_STDERR_KEEP = 8192
_PATTERN_ERRORS = ("regex parse error", "exceeds size limit", "error parsing")


class RgPatternError(Exception):
    """rg refused the pattern (a look-around, a back-reference, a regex too big)."""


def find_rg() -> str | None:
    """The ``rg`` to use: the one the ``ripgrep`` wheel put beside ``sys.executable``, else
    one on ``PATH`` outside the working directories (``sandbox/program.py``), else ``None``
    (grep then uses its pure-Python fallback)."""
    return _beside_python() or harness_program("rg")


@cache
def _beside_python() -> str | None:
    # the kernel's own interpreter's folder: in a workdir, the sandbox keeps it read-only
    beside = Path(sys.executable).parent / "rg"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _batches(files: Sequence[bytes]) -> list[list[bytes]]:
    batches: list[list[bytes]] = [[]]
    size = 0
    for name in files:
        if batches[-1] and size + len(name) + 1 > _BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(name)
        size += len(name) + 1
    return batches


async def _drain(stream: asyncio.StreamReader) -> bytes:
    kept = b""
    while chunk := await stream.read(65536):
        if len(kept) < _STDERR_KEEP:
            kept += chunk[: _STDERR_KEEP - len(kept)]
    return kept


def _parse(line: bytes, text_max: int) -> str | None:
    """``path:line: text`` from rg's ``path\\0line:text`` (``None`` for anything else, e.g.
    rg's "binary file matches" notice, which has no NUL)."""
    path, nul, rest = line.partition(b"\0")
    number, colon, text = rest.partition(b":")
    if not nul or not colon or not number.isdigit():
        return None
    shown = escape_name(os.fsdecode(path))
    decoded = text.decode("utf-8", "replace").rstrip("\r\n")
    if len(decoded) > text_max:
        decoded = decoded[:text_max] + "…"
    return f"{shown}:{int(number)}: {decoded}"


async def _run_one(
    rg: str, args: list[str | bytes], cwd: Path, out: list[str], limit: int, text_max: int
) -> None:
    proc = await asyncio.create_subprocess_exec(
        rg,
        *args,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=4 * LINE_MAX_BYTES + 8192,
    )
    assert proc.stdout is not None and proc.stderr is not None
    errors = asyncio.create_task(_drain(proc.stderr), name="rg-stderr")
    finished = False
    try:
        while len(out) < limit:
            try:
                line = await proc.stdout.readline()
            except ValueError:  # a line past the limit: rg's preview makes this rare
                continue
            if not line:
                finished = True
                break
            shown = _parse(line, text_max)
            if shown is not None:
                out.append(shown)
    finally:
        if not finished and proc.returncode is None:
            # os.kill, not proc.kill(): Popen.kill() first polls, and a poll that reaps
            # the child races asyncio's own watcher for it.
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        stderr = await errors
        await proc.wait()
    message = stderr.decode("utf-8", "replace")
    # rg checks the pattern before it reads a file: a refusal comes with no output at all.
    if not out and any(e in message for e in _PATTERN_ERRORS):
        raise RgPatternError(message.strip())


async def rg_search(
    rg: str,
    pattern: str,
    files: Sequence[str],
    *,
    cwd: Path,
    ignore_case: bool,
    limit: int,
    text_max: int,
) -> list[str]:
    """Lines of ``files`` (paths relative to ``cwd``, in the order given) that match
    ``pattern``, as ``path:line: text``, at most ``limit``. ``RgPatternError`` when rg does
    not support the pattern."""
    flags: list[str | bytes] = [
        "--no-config",
        "--no-messages",
        "--null",
        "--line-number",
        "--with-filename",
        "--no-heading",
        "--color=never",
        "--crlf",
        "--threads=1",  # files in the order given: output sorted by path, as glob's
        f"--max-count={limit}",
        f"--max-columns={LINE_MAX_BYTES}",
        "--max-columns-preview",
    ]
    if ignore_case:
        flags.append("--ignore-case")
    out: list[str] = []
    # ``-e`` keeps a pattern starting with "-" a pattern; ``--`` does the same for names.
    names = [os.fsencode(f) for f in files]
    for batch in _batches(names):
        if len(out) >= limit or not batch:
            break
        await _run_one(rg, [*flags, "-e", pattern, "--", *batch], cwd, out, limit, text_max)
    return out
