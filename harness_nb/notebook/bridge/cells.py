"""The notebook as a page describes it (the reply to ``read``), checked and bounded, and as
the model reads it (``render``).

A page is untrusted: its reply is taken apart field by field, at most ``MAX_CELLS`` cells
and ``MAX_OUTPUTS`` outputs a cell, each string cut to its bound before anything else
looks at it; a field of the wrong type is one ``ToolError`` naming it. A cell's source is
kept whole up to ``MAX_SOURCE`` characters (an edit sends it back as ``old_source``); a
longer one is cut and marked, so it cannot be edited from here.

What the model reads is compact text, one block per cell::

    === [3] code · In [7] · error
    df["x"]
    --- output
    KeyError: 'x'

outputs as text (``text/plain``, streams, errors with their traceback; an image or HTML
by its kind), each cell's outputs within ``OUTPUT_CHARS`` and the whole within
``READ_CHARS``; sources and outputs pass ``kernel.history.clean`` (ANSI codes dropped,
known secrets masked).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ...core import ToolError
from ..kernel.history import clean

MAX_CELLS = 2_000  # of a notebook read
MAX_OUTPUTS = 50  # of one cell
MAX_SOURCE = 200_000  # of one cell's source, kept whole below this
MAX_OUTPUT_TEXT = 20_000  # of one output's text, before it is rendered
SOURCE_CHARS = 4_000  # of one cell's source as the model reads it
OUTPUT_CHARS = 2_000  # of one cell's outputs as the model reads them
READ_CHARS = 16_000  # of one notebook_read result
KINDS = ("code", "markdown", "raw")
OUTPUT_KINDS = ("stream", "display_data", "execute_result", "error", "update_display_data")


@dataclass(frozen=True)
class NotebookCell:
    """One cell as its page described it: its nbformat ``id``, position, kind, source
    (``cut``: longer than ``MAX_SOURCE``, so shortened), execution count, outputs as text,
    whether an error is among them, whether it is the cell running now, and the agent that
    inserted it."""

    id: str
    index: int
    kind: str
    source: str
    execution_count: int | None
    outputs: str
    failed: bool
    running: bool
    agent: str | None
    cut: bool = False


@dataclass(frozen=True)
class Notebook:
    """A page's notebook: its path and cells (``total``: how many it has, when more than
    ``MAX_CELLS`` were sent)."""

    path: str
    cells: tuple[NotebookCell, ...]
    total: int

    def cell(self, index: int) -> NotebookCell:
        """Cell ``index``; a ``ToolError`` naming the valid range when there is none."""
        if 0 <= index < len(self.cells):
            return self.cells[index]
        if not self.cells:
            raise ToolError("the notebook has no cells")
        if len(self.cells) <= index < self.total:
            raise ToolError(f"cell {index} is past the first {MAX_CELLS:,} cells, the most read from a page")
        raise ToolError(f"no cell {index}: the notebook has {self.total} cells (0–{self.total - 1})")


def malformed(what: str) -> ToolError:
    return ToolError(
        f"the notebook page sent a malformed reply ({what}); reload the page, or update harness_nb in the "
        "environment JupyterLab or Notebook 7 runs from"
    )


def _text(value: Any, limit: int, what: str) -> str:
    """A string field (nbformat also allows a list of strings), cut at ``limit``."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, list) and all(isinstance(part, str) for part in value[:10_000]):
        parts: list[str] = []
        used = 0
        for part in value[:10_000]:
            parts.append(part[: limit - used])
            used += len(parts[-1])
            if used >= limit:
                break
        return "".join(parts)
    raise malformed(f"{what} is not text")


def parse_notebook(reply: dict[str, Any]) -> Notebook:
    """The reply to ``read`` as a ``Notebook`` (see the module doc)."""
    cells = reply.get("cells")
    if not isinstance(cells, list):
        raise malformed("cells is not a list")
    path = reply.get("notebook")
    parsed = tuple(_cell(raw, n) for n, raw in enumerate(cells[:MAX_CELLS]))
    return Notebook(path[:1_000] if isinstance(path, str) else "", parsed, len(cells))


def _cell(raw: Any, position: int) -> NotebookCell:
    if not isinstance(raw, dict):
        raise malformed(f"cell {position} is not an object")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise malformed(f"cell {position} has kind {str(kind)[:20]!r}")
    cell_id = raw.get("id")
    if not isinstance(cell_id, str) or not 0 < len(cell_id) <= 100:
        raise malformed(f"cell {position} has no id")
    count = raw.get("execution_count")
    if not (count is None or (isinstance(count, int) and not isinstance(count, bool))):
        raise malformed(f"cell {position}'s execution_count is not a number")
    source = raw.get("source", "")
    cut = isinstance(source, str) and len(source) > MAX_SOURCE
    outputs = raw.get("outputs") or []
    if not isinstance(outputs, list):
        raise malformed(f"cell {position}'s outputs is not a list")
    texts = [_output_text(o, position) for o in outputs[:MAX_OUTPUTS]]
    if len(outputs) > MAX_OUTPUTS:
        texts.append(f"[{len(outputs) - MAX_OUTPUTS} more outputs]")
    agent = raw.get("agent")
    return NotebookCell(
        id=cell_id,
        index=position,
        kind=kind,
        source=_text(source, MAX_SOURCE, f"cell {position}'s source"),
        execution_count=count,
        outputs="\n".join(t for t in texts if t),
        failed=any(isinstance(o, dict) and o.get("output_type") == "error" for o in outputs[:MAX_OUTPUTS]),
        running=raw.get("running") is True,
        agent=agent[:100] if isinstance(agent, str) and agent else None,
        cut=cut,
    )


def _output_text(output: Any, position: int) -> str:
    """One nbformat output as the model reads it."""
    if not isinstance(output, dict) or output.get("output_type") not in OUTPUT_KINDS:
        raise malformed(f"an output of cell {position} is not an nbformat output")
    kind = output["output_type"]
    if kind == "stream":
        return _text(output.get("text", ""), MAX_OUTPUT_TEXT, f"a stream of cell {position}").rstrip("\n")
    if kind == "error":
        name = _text(output.get("ename", ""), 200, f"an error of cell {position}")
        value = _text(output.get("evalue", ""), 2_000, f"an error of cell {position}")
        frames = output.get("traceback")
        lines = [f[:4_000] for f in frames[:200] if isinstance(f, str)] if isinstance(frames, list) else []
        traceback = clean("\n".join(lines), MAX_OUTPUT_TEXT)  # without its colour codes
        last = f"{name}: {value}"
        return traceback if last in traceback[-2_000:] else f"{traceback}\n{last}".lstrip("\n")
    data = output.get("data")
    if not isinstance(data, dict):
        raise malformed(f"an output of cell {position} has no data")
    if "text/plain" in data:
        return _text(data["text/plain"], MAX_OUTPUT_TEXT, f"an output of cell {position}").rstrip("\n")
    kinds = [str(k)[:60] for k in itertools.islice(data, 5)]
    return f"[{', '.join(kinds)}]" if kinds else ""


def _header(cell: NotebookCell, running: int | None) -> str:
    parts = [f"=== [{cell.index}] {cell.kind}"]
    if cell.kind == "code":
        parts.append(f"In [{cell.execution_count}]" if cell.execution_count is not None else "not run")
    if cell.running:
        parts.append("running now (this prompt)" if running == cell.index else "running now")
    if cell.failed:
        parts.append("error")
    if cell.agent:
        parts.append(f"inserted by {cell.agent}")
    return " · ".join(parts)


def render(notebook: Notebook, start: int, end: int) -> str:
    """Cells ``start``..``end`` (both included) as the model reads them, within
    ``READ_CHARS``."""
    if not notebook.cells:
        return "(the notebook has no cells)"
    end = min(end, len(notebook.cells) - 1)
    if not 0 <= start <= end:
        raise ToolError(f"no cells {start}–{end}: the notebook has {notebook.total} cells (0–{notebook.total - 1})")
    running = next((c.index for c in notebook.cells if c.running), None)
    name = notebook.path or "the notebook"
    head = f"{name}: {notebook.total} cells" + (f"; cell {running} is running now" if running is not None else "")
    blocks: list[str] = []
    used = len(head)
    for cell in notebook.cells[start : end + 1]:
        source = clean(cell.source, SOURCE_CHARS) + ("\n[… cut: the cell is too long to edit here]" if cell.cut else "")
        block = [_header(cell, running), source]
        if cell.outputs:
            block += ["--- output", clean(cell.outputs, OUTPUT_CHARS)]
        text = "\n".join(block)
        if blocks and used + len(text) > READ_CHARS:
            blocks.append(f"[cells {cell.index}–{end} not shown: notebook_read start={cell.index}]")
            break
        blocks.append(text)
        used += len(text) + 1
    if notebook.total > len(notebook.cells) and end == len(notebook.cells) - 1:
        blocks.append(f"[{notebook.total - len(notebook.cells)} more cells not read: at most {MAX_CELLS}]")
    return "\n".join([head, *blocks])
