"""File tools: ``read_file``, ``write_file``, ``edit_file`` and ``ls``.

Every path goes through ``resolve_in_workdir``; every disk access runs on harness_nb's
worker threads (``run_blocking``) because the event loop is the notebook kernel's. Each
tool is a thin async wrapper around one synchronous worker, so the whole
read-check-write of an edit happens in one place.

Nothing here can hang or blow up on a hostile file: only regular files are opened
(``open_regular``: a named pipe or device is an error, never an open), and reads are
bounded in bytes — ``read_file`` holds at most about a line's worth of a megabyte at a
time, however long the line, and ``edit_file`` refuses files over ``EDIT_MAX_BYTES``.
"""

from __future__ import annotations

import codecs
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated, BinaryIO

from pydantic import Field

from ..core import NotRegularFileError, ToolError, escape_surrogates, open_regular, run_blocking
from .base import ToolContext, tool
from .path import display_path, resolve_in_workdir
from .walker import WALK_MAX_ENTRIES, entry_problem

READ_MAX_CHARS = 256 * 1024
"""Most characters ``read_file`` returns in one call."""
READ_MAX_LINES = 2000
"""Most lines ``read_file`` returns when no ``limit`` is given."""
LINE_MAX_CHARS = 2000
"""Longer lines are cut, so one minified line cannot fill the whole answer."""
LS_MAX_ENTRIES = 500
"""Most entries ``ls`` lists."""
EDIT_MAX_BYTES = 32 * 1024 * 1024
"""Largest file ``edit_file`` rewrites (it holds the whole file in memory)."""

_SNIFF_BYTES = 8192
_CHUNK = 1 << 20
# Enough bytes for LINE_MAX_CHARS characters of up to 4 bytes each, and the newline.
_LINE_KEEP_BYTES = 4 * LINE_MAX_CHARS + 1


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of a file say "binary": a NUL byte, the test git uses too."""
    return b"\x00" in head


@contextmanager
def _os_errors(action: str, path: str) -> Iterator[None]:
    """Turn an ``OSError`` into a ``ToolError`` naming the action and the path the model gave."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ToolError(f"cannot {action} {path!r}: {reason}") from exc


def _atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temp file in the same folder and ``os.replace``,
    so a reader (or a crash) never sees half a file. An existing file keeps its mode."""
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    # 0o666 lets the umask decide a new file's mode, as any editor would.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _count_lines_left(f: IO[bytes]) -> int:
    """Count the lines from the current position to the end, in large chunks (fast)."""
    count = 0
    last = b""
    while chunk := f.read(_CHUNK):
        count += chunk.count(b"\n")
        last = chunk
    if last and not last.endswith(b"\n"):
        count += 1
    return count


def _skip_rest_of_line(f: IO[bytes], decoder: codecs.IncrementalDecoder | None = None) -> int:
    """Read past the rest of the current line a chunk at a time; the characters it held
    (counted when a ``decoder`` is given), its newline not counted."""
    count = 0
    while chunk := f.readline(_CHUNK):
        ended = chunk.endswith(b"\n")
        if decoder is not None:
            count += len(decoder.decode(chunk.removesuffix(b"\n"), final=ended))
        if ended:
            break
    return count


def _next_line(f: IO[bytes], *, keep: bool) -> tuple[bytes, int] | None:
    """The next line's first bytes (at most ``_LINE_KEEP_BYTES``) and how many characters
    of it did not fit; ``None`` at the end. A 200 MB line costs a chunk of memory, not
    200 MB. With ``keep=False`` the line is only skipped (nothing counted)."""
    raw = f.readline(_LINE_KEEP_BYTES if keep else _CHUNK)
    if not raw:
        return None
    if raw.endswith(b"\n") or len(raw) < (_LINE_KEEP_BYTES if keep else _CHUNK):
        return raw, 0
    if not keep:
        _skip_rest_of_line(f)
        return raw, 0
    # The line goes on: count its characters without holding them.
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    head = decoder.decode(raw)
    extra = _skip_rest_of_line(f, decoder)
    return raw, len(head) + extra - LINE_MAX_CHARS


def _numbered(number: int, raw: bytes, more: int = 0) -> str:
    line = raw.decode("utf-8", "replace").removesuffix("\n")
    if len(line) > LINE_MAX_CHARS or more > 0:
        more = more if more > 0 else len(line) - LINE_MAX_CHARS
        line = f"{line[:LINE_MAX_CHARS]}… [{more} more chars on this line]"
    return f"{number:6d}\t{line}"


def _open(p: Path, path: str, missing_hint: str) -> BinaryIO:
    """``p`` opened for reading, or a ``ToolError`` that says what it is instead."""
    try:
        return open_regular(p)
    except FileNotFoundError:
        raise ToolError(f"file not found: {path!r}; {missing_hint}") from None
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a folder, not a file; use ls to list it") from None
    except NotRegularFileError:
        # Never opened: reading a named pipe would block its worker thread for ever.
        raise ToolError(f"{path!r} is not a regular file (a device, pipe or socket)") from None
    except OSError as exc:
        raise ToolError(f"cannot read {path!r}: {exc.strerror or exc}") from None


def _read(p: Path, path: str, offset: int, limit: int | None) -> str:
    max_lines = limit or READ_MAX_LINES
    shown: list[str] = []
    used = 0
    total = 0
    with _open(p, path, "check the name with ls or glob") as f, _os_errors("read", path):
        if looks_binary(f.read(_SNIFF_BYTES)):
            size = os.fstat(f.fileno()).st_size
            raise ToolError(
                f"{path!r} is a binary file ({size:,} bytes); read_file shows text only. "
                f"Inspect it with bash instead, e.g. `file {path}` or `xxd {path} | head`"
            )
        f.seek(0)
        while (line := _next_line(f, keep=total + 1 >= offset)) is not None:
            total += 1
            if total < offset:
                continue
            text = _numbered(total, *line)
            # Always show at least one line, even past the character cap.
            if len(shown) >= max_lines or (shown and used + len(text) > READ_MAX_CHARS):
                total += _count_lines_left(f)
                break
            shown.append(text)
            used += len(text) + 1
    if total == 0:
        return f"(empty file: {path})"
    if offset > total:
        raise ToolError(
            f"offset {offset} is past the end of {path!r}, which has {total} lines; "
            f"use an offset from 1 to {total}"
        )
    last = offset + len(shown) - 1
    if last < total:
        shown.append(
            f"[truncated: showing lines {offset}–{last} of {total}; "
            "use offset/limit to read more]"
        )
    return "\n".join(shown)


@tool(read_only=True)
async def read_file(
    ctx: ToolContext,
    path: Annotated[
        str, Field(description="The file to read, relative to the working directory.")
    ],
    offset: Annotated[int, Field(ge=1, description="The first line to show (1-based).")] = 1,
    limit: Annotated[
        int | None,
        Field(ge=1, description=f"How many lines to show; default up to {READ_MAX_LINES}."),
    ] = None,
) -> str:
    """Read a text file. Lines come numbered like `cat -n` (number, tab, text).

    A long file is cut at 2000 lines or 256 KiB with a note saying which lines were shown
    and how many there are; read further with `offset` and `limit`. Binary files are
    refused. Read a file before editing it, and copy text for edit_file from this output
    without the line-number prefix.
    """
    p = resolve_in_workdir(ctx.workdir, path, roots=ctx.roots)
    return await run_blocking(_read, p, path, offset, limit)


def _write(p: Path, path: str, content: str) -> int:
    if p.is_dir():
        raise ToolError(f"{path!r} is a folder; give a file path to write to")
    data = content.encode("utf-8")
    with _os_errors("write", path):
        p.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(p, data)
    return len(data)


@tool
async def write_file(
    ctx: ToolContext,
    path: Annotated[
        str, Field(description="The file to write, relative to the working directory.")
    ],
    content: Annotated[str, Field(description="The complete new content of the file.")],
) -> str:
    """Write a text file (UTF-8), replacing it if it exists and creating missing folders.

    The write is atomic: readers see the old file or the new one, never half of it. To
    change part of an existing file use edit_file instead of rewriting it.
    """
    p = resolve_in_workdir(ctx.workdir, path, roots=ctx.roots)
    size = await run_blocking(_write, p, path, content)
    return f"wrote {size} bytes to {display_path(ctx.workdir, p)}"


def _edit(p: Path, path: str, old: str, new: str, replace_all: bool) -> int:
    with _open(p, path, "to create a new file use write_file") as f, _os_errors("read", path):
        too_big = os.fstat(f.fileno()).st_size > EDIT_MAX_BYTES
        data = b"" if too_big else f.read(EDIT_MAX_BYTES + 1)
    if too_big or len(data) > EDIT_MAX_BYTES:
        raise ToolError(
            f"{path!r} is over {EDIT_MAX_BYTES // (1024 * 1024)} MiB; edit_file rewrites files "
            "up to that size — use bash (e.g. sed -i) for bigger ones"
        )
    if looks_binary(data[:_SNIFF_BYTES]):
        raise ToolError(f"{path!r} is a binary file; edit_file only edits text files")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Decoding with replacement and writing back would silently corrupt the file.
        raise ToolError(
            f"{path!r} is not UTF-8 text; edit_file only edits UTF-8 files — "
            "use bash to change it"
        ) from None
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string not found in {path!r}; read the file first and copy the exact text, "
            "including whitespace"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string found {count} times in {path!r}; add surrounding lines to make it "
            "unique or set replace_all"
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    with _os_errors("write", path):
        _atomic_write(p, updated.encode("utf-8"))
    return count


@tool
async def edit_file(
    ctx: ToolContext,
    path: Annotated[
        str, Field(description="The file to change, relative to the working directory.")
    ],
    old_string: Annotated[
        str, Field(description="The exact text to replace, whitespace and indentation included.")
    ],
    new_string: Annotated[str, Field(description="The text to put in its place.")],
    replace_all: Annotated[
        bool, Field(description="Replace every occurrence instead of exactly one.")
    ] = False,
) -> str:
    """Replace exact text in a file (no regex, no line numbers).

    `old_string` must appear exactly once unless `replace_all` is set; copy it from
    read_file output without the line-number prefix and include enough surrounding lines
    to make it unique. The file is rewritten atomically.
    """
    if not old_string:
        raise ToolError("old_string is empty; give the exact text to replace, or use write_file")
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; there is nothing to change")
    p = resolve_in_workdir(ctx.workdir, path, roots=ctx.roots)
    count = await run_blocking(_edit, p, path, old_string, new_string, replace_all)
    noun = "occurrence" if count == 1 else "occurrences"
    return f"replaced {count} {noun} in {display_path(ctx.workdir, p)}"


def _list(p: Path, path: str) -> list[str]:
    if not p.exists():
        raise ToolError(f"folder not found: {path!r}; list its parent with ls to check the name")
    if not p.is_dir():
        raise ToolError(f"{path!r} is a file, not a folder; use read_file to read it")
    named: list[tuple[str, str]] = []
    cut = False
    with _os_errors("list", path), os.scandir(p) as entries:
        for entry in entries:
            if len(named) >= WALK_MAX_ENTRIES:
                cut = True
                break
            kind, problem = entry_problem(entry)
            name = escape_surrogates(entry.name)
            # A pipe, device or bad symlink is listed with what it is: no tool reads it.
            shown = name + "/" if kind == "dir" else f"{name}  [{problem}]" if problem else name
            named.append((entry.name, shown))
    lines = [line for _name, line in sorted(named)]
    if cut:
        lines.append(f"[stopped reading the folder after {WALK_MAX_ENTRIES:,} entries]")
    return lines


@tool(read_only=True)
async def ls(
    ctx: ToolContext,
    path: Annotated[
        str, Field(description="The folder to list, relative to the working directory.")
    ] = ".",
) -> str:
    """List a folder: one entry per line, sorted by name, folders marked with a trailing `/`.

    Hidden entries are included; an entry no file tool reads (a named pipe, a device, a
    broken or looping symlink) says so in brackets. Long listings are cut at 500 entries;
    use glob to find specific files in a large tree.
    """
    p = resolve_in_workdir(ctx.workdir, path, roots=ctx.roots)
    names = await run_blocking(_list, p, path)
    if not names:
        return f"(empty folder: {display_path(ctx.workdir, p)})"
    if len(names) > LS_MAX_ENTRIES:
        hidden = len(names) - LS_MAX_ENTRIES
        names = names[:LS_MAX_ENTRIES] + [
            f"[… {hidden} more entries not shown ({len(names)} in total); "
            "use glob with a pattern to narrow the listing]"
        ]
    return "\n".join(names)
