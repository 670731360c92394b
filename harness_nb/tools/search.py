"""Search tools: ``glob`` (find files by name) and ``grep`` (find lines by regex).

Both walk the tree with ``Walker`` on harness_nb's worker threads (a tree can be huge
and the event loop is the notebook kernel's); the walk is bounded, skips what no file
tool opens (pipes, devices, symlink loops, broken links) with a note, and lists results
in path order, so the same tree always gives the same text — a recorded session replays
byte for byte. A cancelled call sets a stop flag so the thread ends soon too.

Matching is bounded in time as well. Glob patterns are matched with the ``regex`` module
under a time budget, after runs of ``**/`` are collapsed. ``grep`` hands the files to
ripgrep (linear-time matching, see ``ripgrep.py``); where rg is missing, or refuses the
pattern (look-around, back-references), the ``regex`` module searches under a time budget
and says so when the budget runs out.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import Field

from ..core import ToolError, escape_name, open_regular, run_blocking
from .base import ToolContext, tool
from .files import looks_binary
from .path import display_path, resolve_in_workdir
from .ripgrep import RgPatternError, find_rg, rg_search
from .walker import IGNORED_DIRS, Entry, Walker, walk_note

__all__ = ["IGNORED_DIRS", "compile_glob", "glob", "grep"]

GLOB_MAX_RESULTS = 200
"""Most paths ``glob`` lists."""
GREP_LINE_MAX_CHARS = 300
"""Longer matching lines are cut in ``grep`` output."""
PATTERN_MAX_CHARS = 1000
"""Longest glob pattern accepted."""
MATCH_BUDGET_SECONDS = 10.0
"""Most time one glob, or one grep without rg, spends matching before it stops and says so."""
FALLBACK_LINE_MAX_BYTES = 1024 * 1024
"""Without rg, a longer line is searched in its first this-many bytes only."""

_SNIFF_BYTES = 8192
_T = TypeVar("_T")
# The pieces of a translated glob that repeat harmlessly in a pattern but not in a regex.
_ANY_FOLDERS, _ANYTHING, _IN_NAME = "(?:.*/)?", ".*", "[^/]*"


async def _in_thread(work: Callable[[threading.Event], _T]) -> _T:
    """Run ``work(stop)`` on a worker thread; if the caller is cancelled, set ``stop`` so
    the thread stops walking instead of finishing a search nobody will read."""
    stop = threading.Event()
    try:
        return await run_blocking(work, stop)
    except asyncio.CancelledError:
        stop.set()
        raise


class _Budget:
    """Seconds left for matching, shared by every match of one call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left


def _translate(pattern: str) -> str:
    """A glob pattern as a regex over ``/``-separated relative paths.

    ``*`` and ``?`` stay within one path segment; ``**/`` matches zero or more folders
    and a final ``**`` everything below; ``[abc]`` / ``[!abc]`` are sets; ``{a,b}`` are
    alternatives (translated to a regex group, so many braces cannot multiply into
    millions of patterns). An unmatched brace is a literal character. Repeats that mean
    nothing more (``**/**/``, ``a**b``) are written once: each extra one would multiply
    the work of a failing match.
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
                    if not out or out[-1] not in (_ANY_FOLDERS, _ANYTHING):
                        out.append(_ANY_FOLDERS)
                    i += 3
                    continue
                if after == "" or (groups and after in ",}"):
                    if out and out[-1] == _ANY_FOLDERS:
                        out.pop()  # "**/**" is "**"
                    out.append(_ANYTHING)
                    i += 2
                    continue
        if ch == "*":
            if not out or out[-1] != _IN_NAME:
                out.append(_IN_NAME)
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


def compile_glob(pattern: str) -> Any:
    """A ``regex`` pattern that fully matches the relative paths ``pattern`` selects
    (match it with a ``timeout``: see ``MATCH_BUDGET_SECONDS``)."""
    if len(pattern) > PATTERN_MAX_CHARS:
        raise ToolError(
            f"glob pattern is {len(pattern):,} characters; at most {PATTERN_MAX_CHARS} are "
            "accepted — use a shorter pattern and put the folder in `path`"
        )
    import regex  # at the first pattern, not when harness_nb is imported

    try:
        return regex.compile(_translate(pattern))
    except regex.error as exc:  # e.g. a brace pair cut in half by a [set]
        raise ToolError(f"cannot understand glob pattern {pattern!r}: {exc}") from None


def _too_slow(what: str, budget: _Budget) -> ToolError:
    return ToolError(
        f"{what} took longer than {budget.seconds:g} s to match and was stopped; use fewer "
        "wildcards (one `**/` already matches any number of folders) or a narrower `path`"
    )


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


def _shown(base: Path, root: Path) -> Callable[[str], str]:
    """How an entry's path relative to ``base`` is shown: relative to ``root``, escaped.
    (One ``display_path`` for the base, not one per entry: that resolves every time.)"""
    prefix = display_path(root, base)
    if prefix == ".":
        return escape_name
    return lambda rel: f"{prefix}/{escape_name(rel)}"


def _glob(base: Path, root: Path, pattern: str, stop: threading.Event) -> tuple[list[str], str, bool]:
    """Matching paths in path order, a note on what was skipped (or ``""``), and whether the
    walk stopped short of the whole tree."""
    compiled = compile_glob(pattern)
    shown = _shown(base, root)
    budget = _Budget(MATCH_BUDGET_SECONDS)
    walker = Walker(base, stop=stop, max_depth=_max_depth(pattern))
    found: list[str] = []
    skipped: list[Entry] = []
    try:
        for entry in walker:
            if compiled.fullmatch(entry.rel, timeout=budget.left()) is None:
                continue
            if entry.kind == "skip":
                skipped.append(entry)
            else:
                found.append(shown(entry.rel) + ("/" if entry.kind == "dir" else ""))
    except TimeoutError:
        raise _too_slow(f"glob pattern {pattern!r}", budget) from None
    return found, walk_note(walker, skipped), walker.stopped_short


def _nothing(what: str, where: str, short: bool) -> str:
    """The first line of a search that found nothing: where it looked, and whether that was
    all of it (a walk stopped short says "in the part of … searched", the note says why)."""
    return f"{what} in the part of {where} searched" if short else f"{what} in {where}"


@tool(read_only=True)
async def glob(
    ctx: ToolContext,
    pattern: Annotated[str, Field(description="e.g. `**/*.csv`; `*.py` looks in `path` only.")],
    path: Annotated[str, Field(description="Folder to search.")] = ".",
) -> str:
    """Find files by name: `**/` any folders deep, `{a,b}` alternatives. Skips .git, .venv,
    node_modules, __pycache__."""
    _check_relative(pattern, "pattern")
    base = resolve_in_workdir(ctx.workdir, path)
    if not base.is_dir():
        raise ToolError(f"folder not found: {path!r}; check the name with ls")
    root = ctx.workdir.resolve()
    found, note, short = await _in_thread(lambda stop: _glob(base, root, pattern, stop))
    lines = found
    if len(found) > GLOB_MAX_RESULTS:
        lines = [
            *found[:GLOB_MAX_RESULTS],
            f"[showing {GLOB_MAX_RESULTS} of {len(found)} matches (first by path); "
            "narrow the pattern or the path to see the rest]",
        ]
    elif not found:
        lines = [_nothing(f"no files match {pattern!r}", display_path(root, base), short)]
    return "\n".join([*lines, note] if note else lines)


# grep


def _compile_regex(pattern: str, ignore_case: bool) -> Any:
    """``pattern`` compiled with the ``regex`` module; a pattern Python's ``re`` rejects is
    refused with ``re``'s message (the one the model knows), unless ``regex`` takes it."""
    import regex

    flags = regex.IGNORECASE if ignore_case else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "possible nested set" and such
        try:
            re.compile(pattern, flags)
            problem = None
        except re.error as exc:
            problem = exc
        try:
            return regex.compile(pattern, flags)
        except regex.error as exc:
            raise ToolError(
                f"invalid regex {pattern!r}: {problem or exc}; it is a Python regex, so escape "
                "special characters such as ( [ . * with a backslash"
            ) from None


def _grep_files(
    base: Path, root: Path, file_filter: str | None, stop: threading.Event
) -> tuple[list[str], str, bool]:
    """The files to search (relative to ``root``, in path order), a note on the entries
    skipped, and whether the walk stopped short of the whole tree."""
    if base.is_file():
        return [base.relative_to(root).as_posix()], "", False
    name_only = file_filter is not None and "/" not in file_filter
    filter_regex = compile_glob(file_filter) if file_filter else None
    budget = _Budget(MATCH_BUDGET_SECONDS)
    walker = Walker(base, stop=stop)
    files: list[str] = []
    skipped: list[Entry] = []
    try:
        for entry in walker:
            if entry.kind == "dir":
                continue
            if filter_regex is not None:
                target = entry.path.name if name_only else entry.rel
                if filter_regex.fullmatch(target, timeout=budget.left()) is None:
                    continue
            if entry.kind == "skip":
                skipped.append(entry)
            # A symlink inside the tree may lead out of it: never read through one.
            elif not entry.link or entry.path.resolve().is_relative_to(root):
                files.append(entry.path.relative_to(root).as_posix())
    except TimeoutError:
        raise _too_slow(f"glob {file_filter!r}", budget) from None
    return files, walk_note(walker, skipped), walker.stopped_short


def _python_grep_file(
    p: Path, shown: str, compiled: Any, out: list[str], limit: int, budget: _Budget
) -> None:
    """Append ``path:line: text`` for matching lines of ``p``. Binary and unreadable files
    are skipped silently: a search over a tree should report what it can read."""
    try:
        with open_regular(p) as f:
            if looks_binary(f.read(_SNIFF_BYTES)):
                return
            f.seek(0)
            number = 0
            while raw := f.readline(FALLBACK_LINE_MAX_BYTES):
                number += 1
                if not raw.endswith(b"\n"):
                    # The rest of an over-long line is read past, never held.
                    while (rest := f.readline(FALLBACK_LINE_MAX_BYTES)) and not rest.endswith(
                        b"\n"
                    ):
                        pass
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if compiled.search(line, timeout=budget.left()):
                    if len(line) > GREP_LINE_MAX_CHARS:
                        line = line[:GREP_LINE_MAX_CHARS] + "…"
                    out.append(f"{shown}:{number}: {line}")
                    if len(out) >= limit:
                        return
    except TimeoutError:
        raise  # the budget ran out (TimeoutError is an OSError: keep it from the next line)
    except OSError:
        return


def _python_grep(
    root: Path, files: list[str], compiled: Any, limit: int, stop: threading.Event
) -> tuple[list[str], str]:
    """Without rg: the ``regex`` module, line by line, under ``MATCH_BUDGET_SECONDS``."""
    budget = _Budget(MATCH_BUDGET_SECONDS)
    out: list[str] = []
    try:
        for rel in files:
            if stop.is_set() or len(out) >= limit:
                break
            _python_grep_file(root / rel, escape_name(rel), compiled, out, limit, budget)
    except TimeoutError:
        return out, (
            f"[stopped: the regex took longer than {budget.seconds:g} s (some patterns, such as "
            "nested repeats like (a+)+, backtrack badly on long lines); simplify it]"
        )
    return out, ""


def _runs(files: list[str]) -> list[list[str]]:
    """``files`` cut into runs, in order: names rg reports cleanly, and single names holding
    a newline (rg's output is one line per match, so such a name would break it apart)."""
    runs: list[list[str]] = []
    for name in files:
        if "\n" in name or not runs or "\n" in runs[-1][0]:
            runs.append([name])
        else:
            runs[-1].append(name)
    return runs


async def _search(
    root: Path, files: list[str], pattern: str, compiled: Any, ignore_case: bool, limit: int
) -> tuple[list[str], str]:
    rg = find_rg()
    if rg is not None:
        try:
            found: list[str] = []
            for run in _runs(files):
                left = limit - len(found)
                if left <= 0:
                    break
                if "\n" in run[0]:
                    # awaited within this iteration, so the lambda sees this run's values
                    found += (await _in_thread(lambda stop: _python_grep(root, run, compiled, left, stop)))[0]  # noqa: B023
                    continue
                found += await rg_search(
                    rg, pattern, run, cwd=root, ignore_case=ignore_case, limit=left, text_max=GREP_LINE_MAX_CHARS
                )
            return found, ""
        except RgPatternError:
            pass  # a Python-only construct (look-around, back-reference): the fallback has it
    return await _in_thread(lambda stop: _python_grep(root, files, compiled, limit, stop))


@tool(read_only=True)
async def grep(
    ctx: ToolContext,
    pattern: Annotated[str, Field(description="A Python regex.")],
    path: Annotated[str, Field(description="File or folder to search.")] = ".",
    glob: Annotated[str | None, Field(description="Only files matching, e.g. `*.py`.")] = None,
    ignore_case: bool = False,
    max_results: Annotated[int, Field(ge=1, le=2000)] = 100,
) -> str:
    """Search file contents; prints `path:line: text` per match. Skips binary files, .git,
    .venv, node_modules."""
    compiled = _compile_regex(pattern, ignore_case)
    if glob is not None:
        _check_relative(glob, "glob")
    base = resolve_in_workdir(ctx.workdir, path)
    if not base.exists():
        raise ToolError(f"path not found: {path!r}; check the name with ls or glob")
    if not base.is_dir() and not base.is_file():
        raise ToolError(f"{path!r} is not a regular file (a device, pipe or socket); grep reads files")
    root = ctx.workdir.resolve()
    files, note, short = await _in_thread(lambda stop: _grep_files(base, root, glob, stop))
    # Ask for one more than wanted: its presence is how we know the list was cut.
    out, stopped = await _search(root, files, pattern, compiled, ignore_case, max_results + 1)
    notes = [n for n in (stopped, note) if n]
    where = display_path(root, base)
    if not out:
        return "\n".join([_nothing(f"no matches for {pattern!r}", where, short), *notes])
    if len(out) > max_results:
        out = [
            *out[:max_results],
            f"[stopped at {max_results} matches; narrow the pattern, path or glob, "
            "or raise max_results]",
        ]
    return "\n".join([*out, *notes])
