"""Search tools: ``glob`` (find files by name) and ``grep`` (find lines by regex).

Both walk the tree in a worker thread, because a tree can be huge and the event loop is
the notebook kernel's; a cancelled call sets a stop flag so the thread ends soon too.
Both skip the folders in ``IGNORED_DIRS`` (below the starting folder) and list results
in path order, so the same tree always gives the same text — a recorded session replays
byte for byte.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import Field

from ..core import ToolError
from .base import ToolContext, tool
from .files import looks_binary
from .path import display_path, resolve_in_workdir

IGNORED_DIRS = frozenset({".git", "__pycache__", ".harness_nb", "node_modules", ".venv"})
"""Folders never searched: version control, caches, dependencies, harness_nb's own files."""
GLOB_MAX_RESULTS = 200
"""Most paths ``glob`` lists."""
GREP_LINE_MAX_CHARS = 300
"""Longer matching lines are cut in ``grep`` output."""

_SNIFF_BYTES = 8192
_T = TypeVar("_T")


async def _in_thread(work: Callable[[threading.Event], _T]) -> _T:
    """Run ``work(stop)`` in a thread; if the caller is cancelled, set ``stop`` so the
    thread stops walking instead of finishing a search nobody will read."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(work, stop)
    except asyncio.CancelledError:
        stop.set()
        raise


def _walk(
    folder: Path, stop: threading.Event, max_depth: int | None = None, depth: int = 1
) -> Iterator[tuple[Path, bool]]:
    """Yield ``(path, is_dir)`` for everything below ``folder``, depth first in name order
    (so the output is sorted by path), skipping ``IGNORED_DIRS``, listing symlinked
    folders without entering them, and going at most ``max_depth`` levels down."""
    try:
        with os.scandir(folder) as it:
            entries = sorted((e.name, e.is_dir(), e.is_symlink()) for e in it)
    except OSError:
        return  # an unreadable folder is skipped, as in any search over a tree
    for name, is_dir, is_link in entries:
        if stop.is_set():
            return
        if is_dir and name in IGNORED_DIRS:
            continue
        path = folder / name
        yield path, is_dir
        if is_dir and not is_link and (max_depth is None or depth < max_depth):
            yield from _walk(path, stop, max_depth, depth + 1)


def _translate(pattern: str) -> str:
    """A glob pattern as a regex over ``/``-separated relative paths.

    ``*`` and ``?`` stay within one path segment; ``**/`` matches zero or more folders
    and a final ``**`` everything below; ``[abc]`` / ``[!abc]`` are sets; ``{a,b}`` are
    alternatives (translated to a regex group, so many braces cannot multiply into
    millions of patterns). An unmatched brace is a literal character.
    """
    pairs: dict[int, int] = {}
    opened: list[int] = []
    for i, ch in enumerate(pattern):
        if ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            pairs[opened.pop()] = i
    closers = set(pairs.values())
    out: list[str] = []
    groups = 0  # alternative groups currently open
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if pattern.startswith("**", i):
            before = pattern[i - 1] if i else "/"
            after = pattern[i + 2] if i + 2 < n else ""
            if before == "/" or (groups and before in "{,"):
                if after == "/":
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                if after == "" or (groups and after in ",}"):
                    out.append(".*")
                    i += 2
                    continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body[:1] in ("!", "^")
            # Escape all but "-" so the set means what it says in glob terms (and never
            # forms a regex nested set like "[[]").
            members = body[1:] if negate else body
            inner = "".join(c if c == "-" else re.escape(c) for c in members)
            out.append(("[^" if negate else "[") + inner + "]")
            i = end + 1
            continue
        elif ch == "{" and i in pairs:
            out.append("(?:")
            groups += 1
        elif ch == "}" and i in closers:
            out.append(")")
            groups -= 1
        elif ch == "," and groups:
            out.append("|")
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex that fully matches the relative paths ``pattern`` selects."""
    try:
        return re.compile(_translate(pattern))
    except re.error as exc:  # e.g. a brace pair cut in half by a [set]
        raise ToolError(f"cannot understand glob pattern {pattern!r}: {exc}") from None


def _max_depth(pattern: str) -> int | None:
    """How many folder levels a pattern can reach (``None`` when it holds ``**``). With
    ``{a,b/c}`` alternatives this counts every ``/``: too deep is only slower, never wrong."""
    return None if "**" in pattern else pattern.count("/") + 1


def _check_relative(pattern: str, what: str) -> None:
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError(
            f"{what} {pattern!r} must be relative to `path` and stay below it; "
            "put the folder in `path` and the file pattern in the pattern"
        )


def _glob(base: Path, root: Path, pattern: str, stop: threading.Event) -> list[str]:
    regex = compile_glob(pattern)
    found: list[str] = []
    for p, is_dir in _walk(base, stop, _max_depth(pattern)):
        if regex.fullmatch(p.relative_to(base).as_posix()):
            found.append(display_path(root, p) + ("/" if is_dir else ""))
    return found  # already in path order: _walk goes depth first by name


@tool(read_only=True)
async def glob(
    ctx: ToolContext,
    pattern: Annotated[
        str,
        Field(description="Glob pattern relative to `path`, e.g. `**/*.py` or `src/*.{ts,tsx}`."),
    ],
    path: Annotated[
        str, Field(description="The folder to search in, relative to the working directory.")
    ] = ".",
) -> str:
    """Find files and folders by name with a glob pattern.

    `*` matches within one folder name, `**/` any number of folders (so `*.py` looks only
    in `path` itself while `**/*.py` looks everywhere below it), `?` one character,
    `[abc]` a set, `{a,b}` alternatives. Hidden files are included; the folders .git,
    __pycache__, .harness_nb, node_modules and .venv are skipped. Results are paths
    relative to the working directory, sorted by path, folders ending in `/`, at most
    200 of them.
    """
    _check_relative(pattern, "pattern")
    base = resolve_in_workdir(ctx.workdir, path)
    if not base.is_dir():
        raise ToolError(f"folder not found: {path!r}; check the name with ls")
    root = ctx.workdir.resolve()
    found = await _in_thread(lambda stop: _glob(base, root, pattern, stop))
    if not found:
        return f"no files match {pattern!r} in {display_path(root, base)}"
    if len(found) > GLOB_MAX_RESULTS:
        return "\n".join(
            [
                *found[:GLOB_MAX_RESULTS],
                f"[showing {GLOB_MAX_RESULTS} of {len(found)} matches (first by path); "
                "narrow the pattern or the path to see the rest]",
            ]
        )
    return "\n".join(found)


def _grep_file(
    p: Path, shown: str, regex: re.Pattern[str], out: list[str], limit: int
) -> None:
    """Append ``path:line: text`` for each matching line of ``p`` to ``out`` (up to
    ``limit`` entries). Binary and unreadable files are skipped silently: a search
    over a tree should report what it can read."""
    try:
        with p.open("rb") as f:
            if looks_binary(f.read(_SNIFF_BYTES)):
                return
            f.seek(0)
            for number, raw in enumerate(f, 1):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if regex.search(line):
                    if len(line) > GREP_LINE_MAX_CHARS:
                        line = line[:GREP_LINE_MAX_CHARS] + "…"
                    out.append(f"{shown}:{number}: {line}")
                    if len(out) >= limit:
                        return
    except OSError:
        return


def _grep(
    base: Path,
    root: Path,
    regex: re.Pattern[str],
    file_filter: str | None,
    limit: int,
    stop: threading.Event,
) -> list[str]:
    """Matching lines, at most ``limit``; one more than asked means "there are more"."""
    if base.is_file():
        files: Iterator[Path] = iter([base])
    else:
        name_only = file_filter is not None and "/" not in file_filter
        filter_regex = compile_glob(file_filter) if file_filter else None

        def wanted(p: Path) -> bool:
            if filter_regex is None:
                return True
            target = p.name if name_only else p.relative_to(base).as_posix()
            return filter_regex.fullmatch(target) is not None

        files = (p for p, is_dir in _walk(base, stop) if not is_dir and wanted(p))
    out: list[str] = []
    for p in files:
        if stop.is_set() or len(out) >= limit:
            break
        # A symlink inside the tree may lead out of it: never read through one.
        if p.is_symlink() and not p.resolve().is_relative_to(root):
            continue
        _grep_file(p, display_path(root, p), regex, out, limit)
    return out


@tool(read_only=True)
async def grep(
    ctx: ToolContext,
    pattern: Annotated[
        str, Field(description="Python regular expression to search for, e.g. `def \\w+_test`.")
    ],
    path: Annotated[
        str, Field(description="File or folder to search, relative to the working directory.")
    ] = ".",
    glob: Annotated[
        str | None,
        Field(
            description="Only search files matching this glob: `*.py` matches file names "
            "at any depth, a pattern with `/` matches paths relative to `path`."
        ),
    ] = None,
    ignore_case: Annotated[bool, Field(description="Match regardless of case.")] = False,
    max_results: Annotated[
        int, Field(ge=1, le=2000, description="Most matching lines to return.")
    ] = 100,
) -> str:
    """Search file contents with a Python regular expression, line by line.

    Prints one `path:line: text` per matching line, paths relative to the working
    directory, files in path order. Binary files and the folders .git, __pycache__,
    .harness_nb, node_modules and .venv are skipped. Escape regex characters such as
    `( [ . *` with a backslash to match them literally.
    """
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(
            f"invalid regex {pattern!r}: {exc}; it is a Python regex, so escape special "
            "characters such as ( [ . * with a backslash"
        ) from None
    if glob is not None:
        _check_relative(glob, "glob")
    base = resolve_in_workdir(ctx.workdir, path)
    if not base.exists():
        raise ToolError(f"path not found: {path!r}; check the name with ls or glob")
    root = ctx.workdir.resolve()
    # Ask for one more than wanted: its presence is how we know the list was cut.
    out = await _in_thread(lambda stop: _grep(base, root, regex, glob, max_results + 1, stop))
    where = display_path(root, base)
    if not out:
        return f"no matches for {pattern!r} in {where}"
    if len(out) > max_results:
        return "\n".join(
            [
                *out[:max_results],
                f"[stopped at {max_results} matches; narrow the pattern, path or glob, "
                "or raise max_results]",
            ]
        )
    return "\n".join(out)
