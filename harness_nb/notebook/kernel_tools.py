"""Tools over the kernel's own namespace — the notebook's advantage over a terminal agent.

``list_variables`` and ``inspect_variable`` are read-only and never dump megabytes;
``run_python`` executes code in the user namespace (the danger hook always asks first).
``notebook_history`` (what ran, what failed) and ``propose_cell`` (code handed back as a new
cell, never run) live in ``history`` and ``proposal``.
"""

from __future__ import annotations

import ast
import contextlib
import io
import traceback
import types
from typing import Annotated, Any

from pydantic import Field

from ..core import ToolError
from ..tools import Tool, ToolContext, tool
from .history import CellHistory, notebook_history_tool
from .proposal import CellProposals, propose_cell_tool

MAX_CHARS = 4_000


def _clip(text: str, limit: int = MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit:,} more characters not shown]"


def _shape(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return "×".join(str(n) for n in shape)
    try:
        return f"len {len(value)}"
    except Exception:
        return ""


def _is_user_variable(name: str, value: Any, hidden: Any) -> bool:
    if name.startswith("_") or name in hidden:
        return False
    return not isinstance(value, types.ModuleType | types.FunctionType | type) and not callable(
        getattr(value, "__wrapped__", None)
    )


def describe(value: Any, rows: int = 5) -> str:
    """Type, shape and a bounded preview of ``value``."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    lines = [f"type: {kind}"]
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
            frame = head(rows)
            to_string = getattr(frame, "to_string", None)
            lines.append(f"head({rows}):\n" + (to_string(max_cols=20) if callable(to_string) else repr(frame)))
            nulls = getattr(value, "isna", None)
            if callable(nulls) and dtypes is not None:
                counts = nulls().sum()
                missing = {k: int(v) for k, v in counts.items() if int(v)}
                lines.append(f"missing values: {missing or 'none'}")
        except Exception as exc:  # a broken __repr__ must not break the tool
            lines.append(f"(head failed: {exc})")
    elif shape is not None:
        try:
            import numpy as np

            lines.append("values:\n" + np.array2string(np.asarray(value), threshold=50, edgeitems=3))
        except Exception:
            lines.append("values: " + repr(value)[:1000])
    elif isinstance(value, dict):
        lines.append(f"length: {len(value)}")
        items = list(value.items())[:rows * 4]
        lines.append("items:\n" + "\n".join(f"  {k!r}: {repr(v)[:200]}" for k, v in items))
    elif isinstance(value, list | tuple | set | frozenset):
        lines.append(f"length: {len(value)}")
        lines.append("first items: " + repr(list(value)[: rows * 4])[:2000])
    elif isinstance(value, str):
        lines.append(f"length: {len(value):,} characters")
        lines.append("text: " + repr(value[:1500]))
    else:
        lines.append("repr: " + repr(value)[:2000])
    return _clip("\n".join(lines))


def kernel_tools(shell: Any, *, history: CellHistory, proposals: CellProposals) -> list[Tool]:
    """The kernel tools bound to an IPython ``shell``: the three namespace tools, then
    ``notebook_history`` over ``history`` and ``propose_cell`` into ``proposals`` (both
    hooked to the shell's ``post_run_cell`` by the extension)."""

    @tool(name="list_variables", read_only=True)
    async def list_variables(ctx: ToolContext) -> str:
        """List the variables in the notebook's namespace: name, type and size (shape or length).
        Use inspect_variable to look at one in detail."""
        hidden = getattr(shell, "user_ns_hidden", {})
        rows = []
        for name, value in sorted(shell.user_ns.items()):
            if _is_user_variable(name, value, hidden):
                rows.append(f"{name}: {type(value).__name__} {_shape(value)}".rstrip())
        return _clip("\n".join(rows)) if rows else "(no variables yet)"

    @tool(name="inspect_variable", read_only=True)
    async def inspect_variable(
        ctx: ToolContext,
        name: Annotated[str, Field(description="The variable's name, e.g. df.")],
        rows: Annotated[int, Field(description="Rows or items to preview.", ge=1, le=50)] = 5,
    ) -> str:
        """Look at one variable: its type, shape and dtypes, the head of a DataFrame or the
        start of an array, length and a preview for others. Output is bounded."""
        if name not in shell.user_ns:
            known = [n for n, v in shell.user_ns.items() if _is_user_variable(n, v, getattr(shell, "user_ns_hidden", {}))]
            raise ToolError(f"no variable {name!r} in the notebook; variables: {', '.join(sorted(known)) or '(none)'}")
        return describe(shell.user_ns[name], rows)

    @tool(name="run_python")
    async def run_python(
        ctx: ToolContext,
        code: Annotated[str, Field(description="Python code to run in the notebook's namespace.")],
    ) -> str:
        """Run Python code in the notebook's namespace (variables persist, like a cell). Returns
        what it printed and the value of its last expression. Keep it short; it blocks the
        kernel while it runs."""
        return run_code(shell.user_ns, code)

    return [list_variables, inspect_variable, run_python, notebook_history_tool(history), propose_cell_tool(proposals)]


def run_code(namespace: dict[str, Any], code: str) -> str:
    """Execute ``code`` in ``namespace``; return its output and last expression's repr."""
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as exc:
        raise ToolError(f"syntax error on line {exc.lineno}: {exc.msg}") from None
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        tail = tree.body.pop()
        assert isinstance(tail, ast.Expr)
        last = ast.Expression(tail.value)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            exec(compile(tree, "<run_python>", "exec"), namespace)
            value = eval(compile(last, "<run_python>", "eval"), namespace) if last is not None else None
    except Exception as exc:
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        relevant = [f for f in frames if "<run_python>" in f or f is frames[-1]]
        raise ToolError(_clip(buffer.getvalue() + "".join(relevant).rstrip())) from None
    out = buffer.getvalue()
    if value is not None:
        out += ("" if not out or out.endswith("\n") else "\n") + repr(value)
    return _clip(out) if out else "(no output)"
