"""Tools over the kernel's own namespace — the notebook's advantage over a terminal agent.

``list_variables`` and ``inspect_variable`` are read-only, never dump megabytes and never show
a credential (``credential_variable``: a variable or mapping key named like one is masked);
``run_python`` executes code in the user namespace (the danger hook always asks first) and
captures what it shows: printed text, displays (a DataFrame as HTML for the cell, as text
for the model) and matplotlib figures as PNG images (``core.media``).
``notebook_history`` (what ran, what failed) and ``propose_cell`` (code handed back as a new
cell, never run) live in ``history`` and ``proposal``.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import linecache
import os
import sys
import traceback
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from IPython.utils.capture import capture_output
from pydantic import Field

from ...core import DisplayData, ImagePart, ToolError
from ...core.credential import is_credential_key
from ...core.imports import shielded_imports
from ...core.media import MAX_IMAGES
from ...engine import Limits, ParentContext
from ...tools import Tool, ToolContext, ToolOutput, tool
from .credential_variable import MASKED, MAX_NODES, learn_credentials, mask_text, masked, masked_frame
from .history import CellHistory, notebook_history_tool
from .proposal import CellProposals, propose_cell_tool
from .table import table_shape
from .watchdog import Stopped, TimedOut, Watchdog

MAX_CHARS = 4_000
CODE_FILE = "<run_python>"  # the file name of the code run_python and notebook_run run, in tracebacks
_OWN_FRAME = f'File "{CODE_FILE}"'
MAX_FIGURE_PIXELS = 4096 * 4096  # a figure larger than this is not drawn (time and memory)


def _clip(text: str, limit: int = MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit:,} more characters not shown]"


def size_text(value: Any) -> str:
    """A value's size in a few characters: its shape (``365×4``), else its length (``len 3``),
    else nothing (an object whose ``shape`` or ``len`` fails has none)."""
    try:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple):
            return "×".join(str(n) for n in shape)
        return f"len {len(value)}"
    except Exception:
        return ""


def _is_user_variable(name: str, value: Any, hidden: Any) -> bool:
    if name.startswith("_") or name in hidden:
        return False
    return not isinstance(value, types.ModuleType | types.FunctionType | type) and not callable(
        getattr(value, "__wrapped__", None)
    )


def user_variables(shell: Any) -> list[str]:
    """The names of the notebook's own variables, sorted."""
    hidden = getattr(shell, "user_ns_hidden", {})
    return sorted(n for n, v in list(shell.user_ns.items()) if _is_user_variable(n, v, hidden))


def describe(value: Any, rows: int = 5, name: str | None = None) -> str:
    """Type, shape and a bounded preview of ``value`` (the variable ``name``), credentials
    masked (``credential_variable``): all of it when ``name`` looks like one, else what sits
    under a credential name at any depth."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    lines = [f"type: {kind}"]
    if name is not None and is_credential_key(name):
        if isinstance(value, Mapping):
            lines.append(f"keys: {[k for k, _ in zip(value, range(rows * 4), strict=False)]!r}"[:2000])
        lines.append(f"value: {MASKED!r} (the name {name!r} looks like a credential: use it in code, do not print it)")
        return "\n".join(lines)
    shape = getattr(value, "shape", None)
    if shape is not None:
        lines.append(f"shape: {shape}")
    dtypes = getattr(value, "dtypes", None)
    dtype = getattr(value, "dtype", None)
    if dtypes is not None and hasattr(dtypes, "items"):
        lines.append("dtypes:\n" + "\n".join(f"  {k}: {v}" for k, v in list(dtypes.items())[:50]))
    elif dtype is not None:
        lines.append(f"dtype: {dtype}")
    head = getattr(value, "head", None)
    if callable(head) and shape is not None:
        try:
            frame = masked_frame(head(rows))
            to_string = getattr(frame, "to_string", None)
            wide = getattr(frame, "ndim", 2) == 2  # a Series prints one column
            shown = (to_string(max_cols=20) if wide else to_string()) if callable(to_string) else repr(frame)
            lines.append(f"head({rows}):\n" + shown)
            nulls = getattr(value, "isna", None)
            if callable(nulls) and wide:
                counts = nulls().sum()
                missing = {k: int(v) for k, v in counts.items() if int(v)}
                lines.append(f"missing values: {missing or 'none'}")
        except Exception as exc:  # a broken __repr__ must not break the tool
            lines.append(f"(head failed: {exc})")
    elif shape is not None:
        try:
            with shielded_imports():
                import numpy as np

            lines.append("values:\n" + np.array2string(np.asarray(value), threshold=50, edgeitems=3))
        except Exception:
            lines.append("values: " + repr(value)[:1000])
    elif isinstance(value, dict):
        lines.append(f"length: {len(value)}")
        items, budget = list(value.items())[: rows * 4], [MAX_NODES]
        lines.append("items:\n" + "\n".join(f"  {k!r}: {repr(masked(v, str(k), 0, budget))[:200]}" for k, v in items))
    elif isinstance(value, list | tuple | set | frozenset):
        lines.append(f"length: {len(value)}")
        lines.append("first items: " + repr(masked(list(value)[: rows * 4]))[:2000])
    elif isinstance(value, str):
        lines.append(f"length: {len(value):,} characters")
        lines.append("text: " + repr(value[:1500]))
    else:
        lines.append("repr: " + repr(masked(value))[:2000])
    return _clip(mask_text("\n".join(lines), value, name))


def kernel_tools(
    shell: Any, *, history: CellHistory, proposals: CellProposals, bridged: Callable[[], bool] = lambda: False
) -> list[Tool]:
    """The kernel tools bound to an IPython ``shell``: the three namespace tools, then
    ``notebook_history`` over ``history`` and ``propose_cell`` into ``proposals`` (both
    hooked to the shell's ``post_run_cell`` by the extension), offered while not
    ``bridged()`` (the page has the notebook extension, whose tools take their place)."""

    @tool(name="list_variables", read_only=True)
    async def list_variables(ctx: ToolContext) -> str:
        """List the notebook's variables: name, type, shape or length."""
        rows = []
        names = user_variables(shell)
        for name in names:
            value = shell.user_ns[name]
            size = "(value masked)" if is_credential_key(name) else size_text(value)
            rows.append(f"{name}: {type(value).__name__} {size}".rstrip())
        learn_credentials(shell.user_ns, names)
        return _clip("\n".join(rows)) if rows else "(no variables yet)"

    @tool(name="inspect_variable", read_only=True)
    async def inspect_variable(
        ctx: ToolContext,
        name: str,
        rows: Annotated[int, Field(description="Rows to preview.", ge=1, le=50)] = 5,
    ) -> str:
        """Look at a variable without running code: type, shape, dtypes, first rows, missing
        values."""
        if name not in shell.user_ns:
            known = user_variables(shell)
            raise ToolError(f"no variable {name!r} in the notebook; variables: {', '.join(known) or '(none)'}")
        learn_credentials(shell.user_ns, [name])
        return describe(shell.user_ns[name], rows, name)

    @tool(name="run_python", foreground_only=True)
    async def run_python(ctx: ToolContext, code: str) -> ToolOutput:
        """Run Python in the notebook's namespace, as an unseen cell: what it prints and
        displays, its last value, a status line; figures are shown to the person and you."""
        limits = ctx.parent.limits if isinstance(ctx.parent, ParentContext) else Limits()
        try:
            return run_code(shell.user_ns, code, shell=shell, timeout=limits.tool_timeout)
        finally:  # what it printed is scrubbed after this: the credentials it set are known by then
            learn_credentials(shell.user_ns, user_variables(shell))

    def unbridged() -> bool:
        return not bridged()

    history_tool = notebook_history_tool(history, usable=unbridged)
    return [list_variables, inspect_variable, run_python, history_tool, propose_cell_tool(proposals, usable=unbridged)]


@dataclass(frozen=True)
class CodeRun:
    """Code run in the notebook's namespace (``execute_code``): what the model reads —
    ``output``, or ``error`` when the code did not parse, raised or was stopped — and the
    same as a cell's nbformat outputs (``cell_outputs``: stream, display_data,
    execute_result, error), for a cell the agent runs (``notebook_run``). ``raised``: the
    exception the code raised (a syntax error too; not an interrupt), for the notebook's
    record of its last error (``CellHistory.keep``)."""

    output: ToolOutput | None
    error: ToolError | None = None
    cell_outputs: tuple[dict[str, Any], ...] = ()
    raised: BaseException | None = None

    def result(self) -> ToolOutput:
        """``output``; or ``error``, raised."""
        if self.error is not None:
            raise self.error
        assert self.output is not None
        return self.output


def run_code(namespace: dict[str, Any], code: str, *, shell: Any = None, timeout: float | None = None) -> ToolOutput:
    """Execute ``code`` in ``namespace``. The text is what it printed, the text form of
    what it displayed and its last expression's, then a status line: ``status: ok`` with the
    shape of each table it displayed (``_TableShapes``). The displays (shown in the cell)
    are what it displayed through IPython (captured from ``shell``'s display machinery), the
    rich form of its last value (a DataFrame's HTML) and each matplotlib figure it opened,
    drawn to PNG and closed; the images are the displays' images. A failure is a
    ``ToolError`` with the traceback and ``status: raised …`` (its figures are closed, not
    shown). Past ``timeout`` seconds the code is interrupted as the stop button does
    (``watchdog.py``): a ``ToolError`` saying so, with what it printed until then."""
    return execute_code(namespace, code, shell=shell, timeout=timeout).result()


def execute_code(namespace: dict[str, Any], code: str, *, shell: Any = None, timeout: float | None = None) -> CodeRun:
    """``run_code``'s run, with its failure as a value and its outputs as a cell's too."""
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as exc:
        error = ToolError(f"syntax error on line {exc.lineno}: {exc.msg}; nothing ran")
        return CodeRun(None, error, (_error_output("SyntaxError", str(error), []),), exc)
    with _noting_tables(shell) as tables:
        run = _run_tree(tree, code, namespace, shell, timeout, tables)
    if run.output is None:
        return run
    status = "status: ok" + (f" · displayed {', '.join(tables.seen)}" if tables.seen else "")
    output = ToolOutput(f"{run.output.text}\n{status}", run.output.images, run.output.displays)
    return dataclasses.replace(run, output=output)


def _run_tree(
    tree: ast.Module, source: str, namespace: dict[str, Any], shell: Any, timeout: float | None, tables: _TableShapes
) -> CodeRun:
    """``execute_code`` after parsing: the output without its status line."""
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        tail = tree.body.pop()
        assert isinstance(tail, ast.Expr)
        last = ast.Expression(tail.value)
    figures_before = _open_figures()
    # a traceback then shows the code's lines, as a cell's does
    linecache.cache[CODE_FILE] = (len(source), None, source.splitlines(keepends=True), CODE_FILE)
    buffer = io.StringIO()
    # capture_output takes what IPython's display() publishes (and plt.show() under the
    # inline backend); print() goes to our buffer, stdout and stderr in the order written.
    capture = contextlib.nullcontext() if shell is None else capture_output(stdout=False, stderr=False, display=True)
    cell_stderr = sys.stderr  # the cell's, taken before the code's output is redirected below
    watchdog = Watchdog(timeout, tell=lambda text: print(text, file=cell_stderr, flush=True))
    try:
        with watchdog, capture as captured, contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            with watchdog.armed(), no_bytecode():
                exec(compile(tree, CODE_FILE, "exec"), namespace)
                value = eval(compile(last, CODE_FILE, "eval"), namespace) if last is not None else None
    except (TimedOut, Stopped) as exc:
        _close(_new_figures(figures_before))
        printed = buffer.getvalue()
        stopped = _interrupted(exc, timeout, "", watchdog.stuck_for)
        error = ToolError(_clip(_interrupted(exc, timeout, printed, watchdog.stuck_for)))
        return CodeRun(None, error, (*_stream(printed), _error_output(type(exc).__name__, stopped, [])))
    except Exception as exc:
        _close(_new_figures(figures_before))
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        # the header, the code's own frames (not the harness's around them), the error
        relevant = [f for f in frames if f is frames[0] or f is frames[-1] or f.lstrip().startswith(_OWN_FRAME)]
        note = _timed_out(timeout, exc, watchdog.stuck_for) + "\n" if watchdog.fired else ""
        printed = buffer.getvalue()
        error = ToolError(f"{_clip(note + printed + ''.join(relevant).rstrip())}\n{_raised(exc)}")
        lines = _clip("".join(relevant).rstrip()).splitlines()
        outputs = (*_stream(printed), _error_output(type(exc).__name__, _clip(str(exc), 1_000), lines))
        return CodeRun(None, error, outputs, exc)
    printed = buffer.getvalue()
    texts = [printed.rstrip("\n")]
    cell = list(_stream(printed))
    displays: list[DisplayData] = []
    figures = _new_figures(figures_before)
    unimaged = {repr(f): f for f in tables.figures if all(f is not g for g in figures)}
    for output in getattr(captured, "outputs", ()):
        text = str(output.data.get("text/plain", ""))
        if set(output.data) == {"text/plain"} and text in unimaged:
            # plt.show() in the call that first imported pyplot: the inline backend is not
            # set up until the cell ends, so the figure was shown as text only; drawn below
            figures.append(unimaged.pop(text))
            continue
        texts.append(text)
        shown = DisplayData.bounded(output.data, output.metadata)
        if shown is not None:
            displays.append(shown)
        cell.append(_display_output("display_data", text, shown))
    if value is not None and _is_figure(value):
        if all(f is not value for f in figures):
            figures.append(value)
    elif value is not None:
        if shell is None and (shape := table_shape(value)):
            tables.seen.append(shape)
        text, shown = _value_display(value, shell)
        texts.append(text)
        if shown is not None:
            displays.append(shown)
        cell.append(_display_output("execute_result", text, shown))
    figure_displays, notes = _draw(figures)
    displays += figure_displays
    cell += [_display_output("display_data", str(d.data.get("text/plain", "")), d) for d in figure_displays]
    texts += [str(d.data.get("text/plain", "")) for d in figure_displays] + notes
    if watchdog.fired:  # it caught the interrupt and finished anyway
        notes.append(f"[the code was interrupted at the tool timeout ({timeout:g} s), caught it and went on]")
        notes.append(_stuck(watchdog.stuck_for))
        texts += notes[-2:]
    cell += _stream("\n".join(n for n in notes if n), "stderr")
    out = "\n".join(t for t in texts if t)
    images = tuple(image for d in displays if (image := d.image()) is not None)
    return CodeRun(ToolOutput(_clip(out) if out else "(no output)", images, tuple(displays)), None, tuple(cell))


def _stream(text: str, name: str = "stdout") -> tuple[dict[str, Any], ...]:
    """``text`` as a cell's stream output (none for no text)."""
    return ({"output_type": "stream", "name": name, "text": _clip(text)},) if text else ()


def _display_output(kind: str, text: str, shown: DisplayData | None) -> dict[str, Any]:
    """A ``display_data`` or ``execute_result`` output: the display's data, or its text."""
    data = dict(shown.data) if shown is not None else {"text/plain": _clip(text)}
    output: dict[str, Any] = {"output_type": kind, "data": data, "metadata": dict(shown.metadata) if shown else {}}
    if kind == "execute_result":
        output["execution_count"] = None  # run by the agent: no number of the kernel's history
    return output


def _error_output(name: str, message: str, lines: list[str]) -> dict[str, Any]:
    return {"output_type": "error", "ename": name, "evalue": message, "traceback": lines}


@contextlib.contextmanager
def no_bytecode() -> Iterator[None]:
    """While the model's code runs, neither it nor the processes it starts write ``.pyc``
    files (``PYTHONDONTWRITEBYTECODE``), as ``bash`` commands do not: one left in the
    workdir would run at the kernel's next import. The kernel's own setting comes back
    after."""
    was_env, was_flag = os.environ.get("PYTHONDONTWRITEBYTECODE"), sys.dont_write_bytecode
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = was_flag
        if was_env is None:
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            os.environ["PYTHONDONTWRITEBYTECODE"] = was_env


def _raised(exc: BaseException) -> str:
    """The status line of code that raised: the exception, and where, bounded."""
    message = " ".join(str(exc).split())
    message = message if len(message) <= 300 else message[:300] + "…"
    line = _where(exc)
    before = "; the lines before it ran" if line and not line.endswith(" 1") else ""
    return f"status: raised {type(exc).__name__}{': ' + message if message else ''}{line}{before}"


class _TableShapes:
    """A display formatter that formats nothing: while ``run_python`` runs it sits among
    IPython's formatters (``DisplayFormatter.formatters``, the registry IPython calls for
    every object it displays) and notes the shape of each table it is shown, and each figure, — through
    ``display(df)`` or as the last value — for the status line. Nothing else sees the
    object: the text and the HTML a cell shows are not parsed back."""

    format_type = "application/x.harness-nb.table-shape"

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.figures: list[Any] = []
        """The matplotlib figures displayed, which ``run_python`` draws itself when the
        display had no image of them."""

    def __call__(self, obj: Any) -> None:
        if _is_figure(obj):
            self.figures.append(obj)
            return
        shape = table_shape(obj)
        if shape:
            self.seen.append(shape)

    def lookup(self, obj: Any) -> Any:
        raise KeyError(type(obj))  # no printer of its own for any type: IPython asks this


@contextlib.contextmanager
def _noting_tables(shell: Any) -> Iterator[_TableShapes]:
    """A ``_TableShapes`` among ``shell``'s formatters for the block's duration."""
    noted = _TableShapes()
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not isinstance(formatters, dict):
        yield noted
        return
    formatters[noted.format_type] = noted
    try:
        yield noted
    finally:
        formatters.pop(noted.format_type, None)


def _interrupted(exc: KeyboardInterrupt, timeout: float | None, printed: str, stuck_for: float | None) -> str:
    if isinstance(exc, TimedOut):
        head = _timed_out(timeout, exc, stuck_for)
    else:
        head = f"run_python was interrupted{_where(exc)}: the person pressed stop."
    return f"{head}\nWhat it printed before:\n{printed.rstrip()}" if printed.strip() else head


def _timed_out(timeout: float | None, exc: BaseException, stuck_for: float | None = None) -> str:
    head = (
        f"run_python stopped: the code ran past the tool timeout ({timeout:g} s) and was interrupted"
        f"{_where(exc)}, as the stop button does; the variables it set before that are kept. Make it "
        "faster or run it in smaller steps, or ask the person to raise the limit "
        "(%config HarnessNB.tool_timeout = <seconds>)."
    )
    return f"{head} {_stuck(stuck_for)}".rstrip()


def _stuck(stuck_for: float | None) -> str:
    """What the model is told of code that did not answer the watchdog's interrupts."""
    if stuck_for is None:
        return ""
    return (
        f"The interrupts went unanswered for {stuck_for:.0f} s: the code was stuck in C code (a regular "
        "expression that backtracks, a long call into a C library), which no interrupt stops and which "
        "holds the kernel until it ends. Do not run it again as it is."
    )


def _where(exc: BaseException) -> str:
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == CODE_FILE]
    return f" at line {lines[-1]}" if lines else ""


def _value_display(value: Any, shell: Any) -> tuple[str, DisplayData | None]:
    """The text of a last expression's value for the model, and its rich form (HTML, an
    image) for the cell when it has one beyond text."""
    if shell is None:
        return repr(value), None
    try:
        data, metadata = shell.display_formatter.format(value)
    except Exception:  # a broken _repr_html_ must not lose the value's text
        return repr(value), None
    text = str(data.get("text/plain") or repr(value))
    if not set(data) - {"text/plain"}:
        return text, None
    return text, DisplayData.bounded(data, metadata)


def _pyplot() -> Any:
    """matplotlib.pyplot if the notebook uses it (never imported here: it is slow and may
    not be installed)."""
    return sys.modules.get("matplotlib.pyplot")


def _open_figures() -> set[int]:
    pyplot = _pyplot()
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def _new_figures(before: set[int]) -> list[Any]:
    """The matplotlib figures opened since ``before`` (figure numbers) and still open."""
    pyplot = _pyplot()
    if pyplot is None:
        return []
    with shielded_imports():
        from matplotlib._pylab_helpers import Gcf

    managers = [Gcf.get_fig_manager(n) for n in pyplot.get_fignums() if n not in before]
    return [m.canvas.figure for m in managers if m is not None]


def _is_figure(value: Any) -> bool:
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and isinstance(value, figure.Figure)


def _close(figures: list[Any]) -> None:
    pyplot = _pyplot()
    for fig in figures if pyplot is not None else ():
        pyplot.close(fig)


def _draw(figures: list[Any]) -> tuple[list[DisplayData], list[str]]:
    """Each figure drawn to PNG, as a display, and closed (so the inline backend does not
    show it again when the cell ends); notes on those not drawn. Bounded: at most
    ``MAX_IMAGES`` figures, each at most ``MAX_FIGURE_PIXELS``."""
    shown: list[DisplayData] = []
    notes: list[str] = []
    try:
        for n, fig in enumerate(figures):
            width, height = (int(x) for x in fig.get_size_inches() * fig.dpi)
            if n >= MAX_IMAGES:
                notes.append(f"[{len(figures) - n} more figures closed, not drawn: at most {MAX_IMAGES} per call]")
                break
            if width * height > MAX_FIGURE_PIXELS:
                notes.append(f"[a {width}×{height} figure was closed, not drawn: over {MAX_FIGURE_PIXELS:,} pixels]")
                continue
            buffer = io.BytesIO()
            try:
                fig.savefig(buffer, format="png", bbox_inches="tight")
            except Exception as exc:  # a figure that cannot draw must not lose the text
                notes.append(f"[a figure could not be drawn: {type(exc).__name__}: {exc}]")
                continue
            image = ImagePart.from_bytes(buffer.getvalue())
            display = DisplayData.bounded({"image/png": image.data, "text/plain": repr(fig)})
            if display is not None:
                shown.append(display)
    finally:
        _close(figures)
    return shown, notes
