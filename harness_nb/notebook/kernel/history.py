"""What the notebook has run, for the agent: the ``notebook_history`` tool, and the last
failed cell that ``%%agent --fix``, ``%fix`` and a prompt about "the error" carry — with
the columns and dtypes of the tables its failing line names, so that a ``KeyError`` on a
column can be fixed without a look first.

Sources come from IPython's own history (``In``) and values from ``Out``; IPython keeps no
exceptions we can use (its ``history_manager.exceptions`` holds coloured, unbounded
tracebacks), so ``CellHistory.after_cell`` — a ``post_run_cell`` hook registered when the
extension loads — keeps the last ``KEPT_ERRORS`` of them as bounded, scrubbed text. Errors
of cells run before ``%load_ext harness_nb`` are not known. A cell run without a history
entry (``store_history=False``: nbval runs every cell that way) is not in ``In`` and has no
number of its own, but its error is kept: it is still the person's code that failed.

The person's ``%%agent`` (``%fix``, ``%@name``, ``%team``) cells are shown in the history
marked as prompts, without their output (their answers are in the conversation), and are
never "the last failed cell": a run that ended in a ``UsageError`` is not code to fix.
"""

from __future__ import annotations

import re
import reprlib
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any

import IPython
from IPython.core.error import UsageError
from pydantic import Field

from ...core.secret import SECRETS
from ...tools import Tool, ToolContext, tool
from .table import TABLES_MAX_CHARS, named_tables

KEPT_ERRORS = 50
MAX_CELLS = 50  # the most cells one notebook_history call may ask for
SOURCE_CHARS = 1_500  # of one cell's source in the history
OUTPUT_CHARS = 800  # of one cell's Out[n]
TRACEBACK_CHARS = 4_000  # of one stored traceback
HISTORY_CHARS = 12_000  # of one notebook_history result
CONTEXT_SOURCE_CHARS = 4_000  # of the failed cell's source sent with a prompt

# "fix the error", "what caused this exception?", "explain that traceback", "my last failure"
REFERS_TO_ERROR = re.compile(
    r"\b(?:the|this|that|my)\s+(?:last\s+|latest\s+)?(?:error|exception|failure|traceback)s?\b", re.IGNORECASE
)
FIX_PROMPT = "Fix the last error: the failed cell and its traceback are below."
_AGENT_CELL = re.compile(r"^\s*%{1,2}(?:agent|fix|team|@[\w.-]+)(?:\s|$)")
_FILE = re.compile(r'File "([^"\n]+)",')
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_INTERRUPTS = ("KeyboardInterrupt", "CancelledError")
_IPYTHON = str(Path(IPython.__file__).parent)  # its frames sit above every cell's own


def clip_middle(text: str, limit: int) -> str:
    """``text`` in at most about ``limit`` characters: its start and its end (where a
    traceback names the error) around a note of what was left out."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit:,} characters not shown …]\n{text[-tail:]}"


def clean(text: str, limit: int) -> str:
    """Bounded, without ANSI colour codes and without known secrets."""
    return SECRETS.scrub(clip_middle(_ANSI.sub("", text), limit))


def is_agent_cell(source: str) -> bool:
    """Whether a cell is a prompt to an agent (``%%agent``, ``%fix``, ``%@name``, ``%team``)."""
    return _AGENT_CELL.match(source) is not None


def refers_to_error(prompt: str) -> bool:
    """Whether a prompt speaks of "the error" (``REFERS_TO_ERROR``)."""
    return REFERS_TO_ERROR.search(prompt) is not None


def format_error(
    exc: BaseException, *, code_name: Callable[[str], tuple[str, str] | None] | None = None, limit: int = TRACEBACK_CHARS
) -> str:
    """The traceback of an exception a cell raised, from the cell's own frame on (the
    frames above it, IPython's or the harness's, are dropped), bounded and scrubbed. A
    syntax error is its message and the line it points at. ``code_name`` (IPython's
    ``shell.compile.format_code_name``) turns a cell's file name into ``Cell In[8]``, as
    IPython shows it; a file it names is the cell's."""
    if isinstance(exc, SyntaxError):
        lines = traceback.format_exception_only(type(exc), exc)
    else:
        lines = traceback.format_exception(type(exc), exc, _from_the_cell(exc.__traceback__, code_name))
    text = "".join(lines).rstrip()
    if code_name is not None:

        def cell(found: re.Match[str]) -> str:
            named = code_name(found.group(1))
            return f"{named[0]} {named[1]}," if named else found.group(0)

        text = _FILE.sub(cell, text)
    return clean(text, limit)


def _from_the_cell(tb: TracebackType | None, code_name: Callable[[str], tuple[str, str] | None] | None) -> TracebackType | None:
    """``tb`` from its first frame in a file ``code_name`` names (the cell's); without one,
    from its first frame outside IPython."""
    first = tb
    while code_name is not None and first is not None:
        if code_name(first.tb_frame.f_code.co_filename) is not None:
            return first
        first = first.tb_next
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_IPYTHON):
        tb = tb.tb_next
    return tb


@dataclass(frozen=True)
class CellError:
    """A cell that raised: its number (``None`` for a cell run without a history entry),
    source and traceback (bounded, scrubbed), and the tables its failing line names with
    their columns and dtypes as they were when it failed (``table.named_tables``)."""

    count: int | None
    source: str
    ename: str
    traceback: str
    tables: str = ""

    @property
    def interrupted(self) -> bool:
        return self.ename in _INTERRUPTS


class CellHistory:
    """The cells of one shell as the agent sees them, and the errors they raised."""

    def __init__(self, shell: Any, *, kept: int = KEPT_ERRORS) -> None:
        self.shell = shell
        self.errors: deque[CellError] = deque(maxlen=kept)

    def after_cell(self, result: Any) -> None:
        """The ``post_run_cell`` hook: keep the error of a cell that raised."""
        if result is None:
            return
        exc = result.error_before_exec or result.error_in_exec
        source = result.info.raw_cell or ""
        if exc is None or is_agent_cell(source):
            return
        # Without a history entry, IPython's count is the one the next stored cell will get:
        # not this cell's number.
        count = result.execution_count if getattr(result.info, "store_history", False) else None
        self.keep(source, exc, count=count, code_name=getattr(getattr(self.shell, "compile", None), "format_code_name", None))

    def keep(
        self,
        source: str,
        exc: BaseException,
        *,
        count: int | None = None,
        code_name: Callable[[str], tuple[str, str] | None] | None = None,
    ) -> None:
        """Keep ``exc``, raised by the cell ``source`` (numbered ``count``), as the latest
        error: its traceback (``format_error``: ``code_name`` names the cell's files) and the
        tables its failing line names. A cell the person ran (``after_cell``), or one the
        agent ran for them (``notebook_run``): ``%fix`` fixes either."""
        text = format_error(exc, code_name=code_name)
        tables = "" if code_name is None else named_tables(exc.__traceback__, lambda name: code_name(name) is not None)
        source = clean(source, CONTEXT_SOURCE_CHARS)
        self.errors.append(CellError(count, source, type(exc).__name__, text, clean(tables, TABLES_MAX_CHARS)))

    def last_failure(self) -> CellError | None:
        """The latest cell that raised (an interrupt is not a failure)."""
        return next((e for e in reversed(self.errors) if not e.interrupted), None)

    def render(self, last: int = 10) -> str:
        """The last ``last`` executed cells, oldest first, within ``HISTORY_CHARS``."""
        history = getattr(self.shell, "history_manager", None)
        if history is None:
            return "(IPython keeps no history in this shell)"
        sources: list[str] = history.input_hist_raw
        errors = {e.count: e for e in self.errors if e.count is not None}
        blocks: list[str] = []
        used = 0
        counts = [n for n in range(len(sources) - 1, 0, -1) if sources[n].strip()]
        for n in counts[:last]:
            block = self._block(n, sources[n], history, errors.get(n))
            if blocks and used + len(block) > HISTORY_CHARS:
                break
            blocks.append(block)
            used += len(block)
        if not blocks:
            return "(no cells have run yet)"
        earlier = len(counts) - len(blocks)
        note = [f"({earlier} earlier cells not shown)"] if earlier else []
        return "\n\n".join([*note, *reversed(blocks)])

    def _block(self, n: int, source: str, history: Any, error: CellError | None) -> str:
        if is_agent_cell(source):
            return f"In [{n}] (a prompt to an agent; its answer is in the conversation):\n{clean(source, SOURCE_CHARS)}"
        head = f"In [{n}]" + (f" raised {error.ename}" if error is not None else "") + ":"
        parts = [head, clean(source, SOURCE_CHARS)]
        shown = _output_text(history, n)
        if shown is not None:
            parts.append(f"Out[{n}]:\n{clean(shown, OUTPUT_CHARS)}")
        if error is not None:
            parts.append(f"Traceback of In [{n}]:\n{clip_middle(error.traceback, TRACEBACK_CHARS)}")
        return "\n".join(parts)

    def prompt_with_error(self, prompt: str, *, fix: bool, fix_with: str = "") -> str:
        """``prompt`` with the last failed cell appended as a notebook-context block. With
        ``fix`` (``--fix``, ``%fix``) the prompt asks to fix it, and there must be one;
        ``fix_with`` says how (one sentence after ``FIX_PROMPT``)."""
        failure = self.last_failure()
        if failure is None:
            if fix:
                raise UsageError("no cell has failed since harness_nb was loaded: there is no error to fix")
            return prompt
        if fix:
            ask = f"{FIX_PROMPT} {fix_with}".rstrip()
            prompt = ask + (f"\n\n{prompt.strip()}" if prompt.strip() else "")
        return f"{prompt.rstrip()}\n\n{error_context(failure)}"


def error_context(failure: CellError) -> str:
    """The model-facing block for a failed cell: delimited, and marked as context the
    notebook added (not text the person typed)."""
    which = f", In [{failure.count}]" if failure.count is not None else " (run without a history number)"
    tables = f"--- the tables its failing line names, as they were ---\n{failure.tables}\n" if failure.tables else ""
    return (
        f"--- notebook context (added by harness_nb): the last cell that failed{which} ---\n"
        f"{failure.source.rstrip()}\n"
        f"--- its error ---\n"
        f"{failure.traceback}\n"
        f"{tables}"
        f"--- end of notebook context ---"
    )


_REPR = reprlib.Repr()  # keyword arguments only from Python 3.12
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 20, 20, 20, 20
_REPR.maxstring = _REPR.maxother = OUTPUT_CHARS


def _output_text(history: Any, n: int) -> str | None:
    """The text the person saw as ``Out[n]``: IPython's stored text/plain, else a bounded repr."""
    shown = getattr(history, "output_hist_reprs", {}).get(n)
    if isinstance(shown, str):
        return shown
    values = getattr(history, "output_hist", {})
    if n not in values:
        return None
    try:
        return _REPR.repr(values[n])
    except Exception as exc:  # a broken __repr__ must not break the tool
        return f"(repr failed: {type(exc).__name__})"


def notebook_history_tool(history: CellHistory, *, usable: Callable[[], bool] | None = None) -> Tool:
    """``notebook_history`` bound to ``history`` (offered while ``usable()``)."""

    @tool(name="notebook_history", read_only=True, usable=usable)
    async def notebook_history(
        ctx: ToolContext,
        last: Annotated[int, Field(ge=1, le=MAX_CELLS)] = 10,
    ) -> str:
        """The person's latest cells, oldest first: source, Out[n] and tracebacks (not
        printed text or plots)."""
        return history.render(last)

    return notebook_history
