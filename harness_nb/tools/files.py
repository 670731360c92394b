"""File tools: ``read_file``, ``write_file``, ``edit_file`` and ``ls``.

Every path goes through ``resolve_in_workdir``; every disk access runs on harness_nb's
worker threads (``run_blocking``) because the event loop is the notebook kernel's. Each
tool is a thin async wrapper around one synchronous worker, so the whole
read-check-write of an edit happens in one place.

The path written is the path the permission hook judged (``write_target``): its folders
are opened one by one without following symlinks (``core.open_folder``) and the file is
replaced inside the last one, so a folder swapped for a symlink between the check and the
write cannot send the write elsewhere (into ``.claude/``, say). A write through a symlink
is refused with the path it leads to, and so is a write onto anything but a regular file.

Nothing here can hang or blow up on a hostile file: only regular files are opened
(``open_regular``: a named pipe or device is an error, never an open), and reads are
bounded in bytes — ``read_file`` holds at most about a line's worth of a megabyte at a
time, however long the line, and ``edit_file`` refuses files over ``EDIT_MAX_BYTES``.

The descriptions the model reads are short (every schema goes with every call): a bound,
a refusal or a cut listing is explained by the result that meets it.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated, BinaryIO

from pydantic import Field

from ..core import (
    NotRegularFileError,
    SymlinkError,
    ToolError,
    escape_name,
    open_folder,
    open_regular,
    replace_regular,
    run_blocking,
)
from .base import ToolContext, tool
from .path import Target, display_path, read_target, resolve_in_workdir, write_target
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


def _through_symlink(target: Target, link: str, path: str, action: str) -> ToolError:
    """The error for a path that meets a symlink (``link``, relative to the target's base):
    where the path leads now, and what to do."""
    real = Path(os.path.realpath(target.path))
    if real == target.path:  # it was one a moment ago, and is not any more
        where = "; it changed while the tool ran: look at it with ls, then try again"
    elif real.is_relative_to(target.base):
        where = f"; {action} the file where it leads ({display_path(target.base, real)!r}) instead"
    else:
        where = ", and it leads outside the working directory"
    return ToolError(
        f"cannot {action} {path!r}: {escape_name(link)!r} is a symlink, and the file tools "
        f"never {action} through one{where}"
    )


@contextmanager
def _in_folder(
    target: Target, path: str, action: str, missing_hint: str = "", *, create: bool = False
) -> Iterator[int]:
    """The folder holding ``target``, opened folder by folder without following a symlink
    (made as needed with ``create``); what stands in the way is one clear error."""
    try:
        if create:  # a root (an agent's memory folder) may not exist yet; the harness chose it
            target.base.mkdir(parents=True, exist_ok=True)
        fd = open_folder(target.base, target.parts[:-1], create=create)
    except SymlinkError as exc:
        raise _through_symlink(target, str(exc.filename), path, action) from None
    except NotADirectoryError as exc:
        raise ToolError(f"cannot {action} {path!r}: {escape_name(str(exc.filename))!r} {exc.strerror}") from None
    except FileNotFoundError:
        raise ToolError(f"file not found: {path!r}; {missing_hint}") from None
    except OSError as exc:
        raise ToolError(f"cannot {action} {path!r}: {exc.strerror or exc}") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _open(target: Target, dir_fd: int, path: str, missing_hint: str) -> BinaryIO:
    """``target`` (a name in the folder ``dir_fd``) opened for reading, or a ``ToolError``
    that says what it is instead."""
    if not target.parts:
        raise ToolError(f"{path!r} is a folder, not a file; use ls to list it")
    try:
        return open_regular(target.parts[-1], dir_fd=dir_fd)
    except SymlinkError:  # the real path's last part became a symlink since
        raise _through_symlink(target, target.rel, path, "read") from None
    except FileNotFoundError:
        raise ToolError(f"file not found: {path!r}; {missing_hint}") from None
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a folder, not a file; use ls to list it") from None
    except NotRegularFileError:
        # Never opened: reading a named pipe would block its worker thread for ever.
        raise ToolError(
            f"{path!r} is not a regular file (a device, pipe or socket): only regular files are read"
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot read {path!r}: {exc.strerror or exc}") from None


def _read(target: Target, path: str, offset: int, limit: int | None) -> str:
    """The numbered lines from ``offset`` (``limit`` of them, at most ``READ_MAX_LINES`` and
    ``READ_MAX_CHARS``), then a note when not all of the file was shown: "truncated" only
    when the tool cut, "lines A–B of N" when the caller's own ``offset`` / ``limit`` chose
    the part."""
    max_lines = limit or READ_MAX_LINES
    shown: list[str] = []
    used = 0
    total = 0
    cut = False  # by this tool's own bounds, not by the caller's limit
    hint = "check the name with ls or glob"
    with (
        _in_folder(target, path, "read", hint) as dir_fd,
        _open(target, dir_fd, path, hint) as f,
        _os_errors("read", path),
    ):
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
                cut = limit is None or len(shown) < limit
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
    if cut:
        shown.append(f"[truncated: showing lines {offset}–{last} of {total}; use offset/limit to read more]")
    elif offset > 1 or last < total:
        shown.append(f"[lines {offset}–{last} of {total}]")
    return "\n".join(shown)


@tool(read_only=True)
async def read_file(
    ctx: ToolContext,
    path: str,
    offset: Annotated[int, Field(ge=1)] = 1,
    limit: Annotated[int | None, Field(ge=1)] = None,
) -> str:
    """Read a text file, lines numbered as by `cat -n`; at most 2000 lines a call. Copy text
    for edit_file without the number prefix."""
    target = read_target(ctx.workdir, path, roots=ctx.roots)
    return await run_blocking(_read, target, path, offset, limit)


def _replace(target: Target, dir_fd: int, path: str, data: bytes) -> None:
    """Replace ``target`` in the folder ``dir_fd`` with ``data`` (never a symlink, pipe or device)."""
    try:
        replace_regular(dir_fd, target.parts[-1], data)
    except SymlinkError:
        raise _through_symlink(target, target.rel, path, "write") from None
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a folder; give a file path to write to") from None
    except NotRegularFileError as exc:
        # Replacing a named pipe or device with a file would break whatever uses it.
        raise ToolError(
            f"{path!r} is a {exc.kind}, not a regular file; the file tools write regular files only"
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot write {path!r}: {exc.strerror or exc}") from None


def _write(target: Target, path: str, content: str) -> int:
    if not target.parts:
        raise ToolError(f"{path!r} is a folder; give a file path to write to")
    data = content.encode("utf-8")
    with _in_folder(target, path, "write", create=True) as dir_fd:
        _replace(target, dir_fd, path, data)
    return len(data)


@tool
async def write_file(
    ctx: ToolContext,
    path: str,
    content: str,
) -> str:
    """Create or replace a text file (folders made as needed). To change part of a file,
    use edit_file."""
    resolve_in_workdir(ctx.workdir, path, roots=ctx.roots)  # refuses a path leading outside
    target = write_target(ctx.workdir, path, roots=ctx.roots)
    size = await run_blocking(_write, target, path, content)
    return f"wrote {size} bytes to {display_path(ctx.workdir, target.path)}"


def _edit(target: Target, path: str, old: str, new: str, replace_all: bool) -> int:
    hint = "to create a new file use write_file"
    with _in_folder(target, path, "edit", hint) as dir_fd:
        return _edit_in(target, dir_fd, path, old, new, replace_all, hint)


def _edit_in(target: Target, dir_fd: int, path: str, old: str, new: str, replace_all: bool, hint: str) -> int:
    with _open(target, dir_fd, path, hint) as f, _os_errors("read", path):
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
    _replace(target, dir_fd, path, updated.encode("utf-8"))
    return count


@tool
async def edit_file(
    ctx: ToolContext,
    path: str,
    old_string: Annotated[str, Field(description="Exact text, whitespace included.")],
    new_string: str,
    replace_all: bool = False,
) -> str:
    """Replace exact text in a file. old_string must occur once unless replace_all: include
    enough lines around it to make it unique."""
    if not old_string:
        raise ToolError("old_string is empty; give the exact text to replace, or use write_file")
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; there is nothing to change")
    resolve_in_workdir(ctx.workdir, path, roots=ctx.roots)  # refuses a path leading outside
    target = write_target(ctx.workdir, path, roots=ctx.roots)
    count = await run_blocking(_edit, target, path, old_string, new_string, replace_all)
    noun = "occurrence" if count == 1 else "occurrences"
    return f"replaced {count} {noun} in {display_path(ctx.workdir, target.path)}"


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
            name = escape_name(entry.name)
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
    path: str = ".",
) -> str:
    """List a folder (hidden entries too; folders end in `/`)."""
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
