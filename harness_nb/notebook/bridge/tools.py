"""The tools that work on the notebook's cells through its page: ``notebook_read``,
``notebook_edit``, ``notebook_insert`` and ``notebook_run``.

They are offered only while the page that ran the running cell has the extension
(``NotebookBridge.offered``) and then take the place of ``notebook_history`` and
``propose_cell``. All four are ``watched_only``: no subagent that runs unwatched (in the
background, a map row, a teammate) gets them, even when its agent file names them — the
cell running then is not its own, and an edit's card would pass ``background_approvals``
by.

``notebook_edit`` asks through its own card, the diff in the cell (``Tool.asks_itself``):
when the permission hook would ask, the page shows the card (``ask: true``); when a rule
(or ``acceptEdits``) allows the edit, the page applies it at once (``ask: false``); deny
rules and plan mode refuse it as any call. The person's decision reaches the run's view as
``ApprovalDecided``. An edit of a cell that changed since this conversation's model read
it is refused as stale before anything is shown (``CellsSeen``, one per conversation); so
is one the person changed while the card waited (the page's ``stale``).

``notebook_run`` asks too, as ``run_python`` does, but only once it has read the cell: its
approval card shows the source that will run (``Tool.asks_itself`` again, on the run's
approval channel). Approved, it reads the cell again and runs exactly that source — or,
when the person changed the cell while the card waited, runs nothing and says so (the
safe one: neither code nobody approved nor outputs under a source they did not come
from). It runs in the kernel, not in the page: the agent's own cell holds the kernel, so
a cell the page executed would queue behind it (docs/notebook-bridge.md). The outputs go
to the page (``outputs``) and back to the model; a cell that raised is the notebook's
last error, for ``%fix`` (``CellHistory.keep``). **Accept and run** runs the same way,
without a second ask.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from ...core import ApprovalDecided, Event, ToolCall, ToolError
from ...core.secret import SECRETS
from ...engine import Limits, ParentContext
from ...engine.hook import ask_channel, person_reason
from ...tools import Tool, ToolContext, ToolOutput, tool
from ..kernel.credential_variable import learn_credentials
from ..kernel.history import CONTEXT_SOURCE_CHARS, CellError, CellHistory, clean, is_agent_cell
from ..kernel.tools import CODE_FILE, CodeRun, execute_code, user_variables
from .cells import MAX_CELLS, MAX_SOURCE, Notebook, NotebookCell, malformed, render
from .endpoint import DECISIONS, NotebookBridge

MAX_EXPLANATION = 2_000
MAX_CONVERSATIONS = 64  # whose reads of the notebook are kept (the least recently used goes)
T = TypeVar("T")


class CellsSeen:
    """What one conversation's model last read of the notebook: a digest of each cell's
    source by id, and the ids in order, so that an edit of a cell the person changed (or
    moved) since is refused as stale instead of overwriting their change. (Digests: a
    source may be 200,000 characters, and there are up to ``MAX_CELLS`` of them.)"""

    def __init__(self) -> None:
        self.sources: OrderedDict[str, bytes] = OrderedDict()
        self.order: list[str] | None = None

    def note(self, notebook: Notebook, start: int, end: int) -> None:
        """The model was shown cells ``start``..``end`` of ``notebook``."""
        self.order = [c.id for c in notebook.cells]
        for cell in notebook.cells[start : end + 1]:
            self.keep(cell.id, cell.source)

    def keep(self, cell_id: str, source: str) -> None:
        """The model knows ``cell_id`` holds ``source`` (it read, wrote or inserted it)."""
        self.sources.pop(cell_id, None)
        self.sources[cell_id] = _digest(source)
        while len(self.sources) > MAX_CELLS:
            self.sources.popitem(last=False)

    def inserted(self, cell_id: str, index: int, source: str) -> None:
        if self.order is not None:
            self.order.insert(min(max(index, 0), len(self.order)), cell_id)
        self.keep(cell_id, source)

    def stale(self, cell: NotebookCell) -> str | None:
        """Why an edit of ``cell`` would overwrite what the model has not seen, if it would."""
        if self.order is not None and (cell.index >= len(self.order) or self.order[cell.index] != cell.id):
            return f"the cells moved since you read them: cell {cell.index} is another cell now"
        known = self.sources.get(cell.id)
        if known is not None and known != _digest(cell.source):
            return f"the person changed cell {cell.index} since you read it"
        return None


def _digest(source: str) -> bytes:
    return hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class SeenByConversation:
    """A ``CellsSeen`` for each conversation (the calling run's session), so that "changed
    since you read it" is about what *this* model read: another agent's read of the same
    cell — a subagent's, a named agent's — does not make an edit by this one current."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, CellsSeen] = OrderedDict()

    def of(self, ctx: ToolContext) -> CellsSeen:
        """The reads of the conversation making the call ``ctx``."""
        key = ctx.parent.session_id if isinstance(ctx.parent, ParentContext) else ""
        seen = self._seen.pop(key, None) or CellsSeen()
        self._seen[key] = seen
        while len(self._seen) > MAX_CONVERSATIONS:
            self._seen.popitem(last=False)
        return seen


class _Decision:
    """The person's decision on a call that asks itself (``ToolContext.ask``), told to the
    run's view as ``ApprovalDecided`` once — also when the call ends before they decided
    (refused, interrupted: ``told``). A call that was not asked tells nothing (``sent``)."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.sent = ctx.ask is None

    def emit(self, event: Event) -> None:
        self.sent = True
        self.ctx.emit(event)

    def __call__(self, approved: bool, feedback: str = "", *, by_person: bool = False) -> None:
        if not self.sent:
            call, agent = self.ctx.call, self.ctx.agent
            self.emit(ApprovalDecided(call=call, approved=approved, feedback=feedback, by_person=by_person, agent=agent))

    async def told(self, work: Awaitable[T]) -> T:
        """``work``'s result; a refusal or an interrupt before a decision is told as one."""
        try:
            return await work
        except ToolError as exc:
            self(False, str(exc))
            raise
        except BaseException:  # interrupted: the card was withdrawn
            self(False, "interrupted")
            raise


def notebook_tools(
    bridge: NotebookBridge, shell: Any, *, history: CellHistory, approval_timeout: Callable[[], float]
) -> list[Tool]:
    """The four tools over ``bridge`` in the kernel of ``shell``; an edit's card waits
    ``approval_timeout()`` seconds for the person; a cell that raises is kept in
    ``history``."""
    reads = SeenByConversation()

    async def read() -> Notebook:
        notebook = await bridge.read()
        learn_credentials(shell.user_ns, user_variables(shell))  # their values are masked in what is shown
        return notebook

    def run(cell: NotebookCell, ctx: ToolContext) -> CodeRun:
        """Run ``cell``'s source in the kernel, send its outputs to the page and keep its
        error, if it raised, as the notebook's last."""
        _runnable(cell)
        limits = ctx.parent.limits if isinstance(ctx.parent, ParentContext) else Limits()
        try:
            code = shell.transform_cell(cell.source)  # magics and ! commands, as a cell runs them
        except Exception as exc:
            raise ToolError(f"cell {cell.index} could not be read as IPython input: {exc}") from None
        try:
            done = execute_code(shell.user_ns, code, shell=shell, timeout=limits.tool_timeout)
        finally:  # what it printed is scrubbed: the credentials it set are known by then
            learn_credentials(shell.user_ns, user_variables(shell))
        outputs = [_scrubbed(o) for o in done.cell_outputs]
        bridge.notify("outputs", {"cell": cell.id, "index": cell.index, "execution_count": None, "outputs": outputs})
        if done.raised is not None:
            named = ("Cell", f"[{cell.index}]")
            history.keep(cell.source, done.raised, code_name=lambda file: named if file == CODE_FILE else None)
        return done

    @tool(name="notebook_read", read_only=True, foreground_only=True, watched_only=True, usable=bridge.offered)
    async def notebook_read(ctx: ToolContext, start: int | None = None, end: int | None = None) -> str:
        """All cells (markdown, unrun too) with outputs, errors and which runs now.
        start/end: inclusive indices."""
        notebook = await read()
        first, last = start or 0, notebook.total - 1 if end is None else end
        text = render(notebook, first, last)
        reads.of(ctx).note(notebook, first, last)
        return text

    @tool(
        name="notebook_edit",
        foreground_only=True,
        watched_only=True,
        usable=bridge.offered,
        changes_files=False,
        asks_itself=True,
    )
    async def notebook_edit(
        ctx: ToolContext,
        cell: int,
        new_source: str,
        explanation: Annotated[str, Field(description="One line: why.")],
    ) -> str | ToolOutput:
        """Replace a cell's source (the person accepts the diff)."""
        decision = _Decision(ctx)
        return await decision.told(edit(ctx, cell, new_source, explanation, decision))

    async def edit(
        ctx: ToolContext, cell: int, new_source: str, explanation: str, decided: _Decision
    ) -> str | ToolOutput:
        """``notebook_edit``'s work; ``decided`` tells the run's view what the person did."""
        asked = ctx.ask is not None
        if len(new_source) > MAX_SOURCE or len(explanation) > MAX_EXPLANATION:
            raise ToolError(f"keep new_source under {MAX_SOURCE:,} and explanation under {MAX_EXPLANATION:,} characters")
        target = (await read()).cell(cell)
        _editable(target)
        seen = reads.of(ctx)
        stale = seen.stale(target)
        if stale is not None:
            raise ToolError(f"{stale}, so nothing was changed: notebook_read it again, then edit")
        if new_source == target.source:
            decided(True)
            return f"cell {cell} already holds that source: nothing changed"
        timeout = approval_timeout()
        request = {
            "cell": target.id,
            "index": target.index,
            "old_source": target.source,
            "new_source": new_source,
            "explanation": explanation,
            "agent": ctx.agent,
            "ask": asked,
        }
        late = f"nobody decided on the edit of cell {cell} within {timeout:g} s: nothing was changed"
        reply = await bridge.request("edit", request, timeout=timeout if asked else None, resend=asked, late=late)
        decision, reason = reply.get("decision"), person_reason(str(reply.get("reason") or ""))
        if decision not in DECISIONS:
            raise malformed(f"decision {str(decision)[:40]!r}")
        if decision == "stale":
            raise ToolError(
                f"cell {cell} changed before the person decided (they edited it), so nothing was changed: "
                "notebook_read it again, then edit"
            )
        if decision == "rejected":
            decided(False, reason, by_person=True)
            raise ToolError(_rejected(cell, reason))
        decided(True)
        seen.keep(target.id, new_source)
        if decision == "accepted" or target.kind != "code":
            how = "the person accepted it" if asked else "applied unasked, as a permission rule or mode allows"
            return f"cell {cell} now holds your source ({how}; not run)"
        ran = run(dataclasses.replace(target, source=new_source), ctx)
        if ran.error is not None:
            raise ToolError(f"the person accepted your source for cell {cell} and ran it; it failed:\n{ran.error}")
        output = ran.result()
        return ToolOutput(f"the person accepted and ran cell {cell}:\n{output.text}", output.images, output.displays)

    @tool(name="notebook_insert", read_only=True, foreground_only=True, watched_only=True, usable=bridge.offered)
    async def notebook_insert(
        ctx: ToolContext,
        position: int,
        source: str,
        kind: Literal["code", "markdown"] | None = None,
    ) -> str:
        """Add a cell at index position (0: top; the cell count: the end). Shown at once, not
        run."""
        if len(source) > MAX_SOURCE:
            raise ToolError(f"keep source under {MAX_SOURCE:,} characters")
        if position < 0:
            raise ToolError(f"position {position} is no index: 0 is the top, the cell count the end")
        kind = kind or "code"
        reply = await bridge.request("insert", {"index": position, "kind": kind, "source": source, "agent": ctx.agent})
        cell_id, index = reply.get("cell"), reply.get("index")
        if not isinstance(cell_id, str) or not 0 < len(cell_id) <= 100 or not isinstance(index, int) or index < 0:
            raise malformed("an insert without the new cell's id and index")
        reads.of(ctx).inserted(cell_id, index, source)
        return f"inserted a {kind} cell at index {index}, not run; any cells from index {index} on moved down by one"

    @tool(
        name="notebook_run",
        foreground_only=True,
        watched_only=True,
        usable=bridge.offered,
        asks_itself=True,
    )
    async def notebook_run(ctx: ToolContext, cell: int) -> ToolOutput:
        """Run a code cell: its outputs go into it and to you."""
        decision = _Decision(ctx)
        target = await decision.told(_ask_to_run(ctx, cell, decision))
        return run(target, ctx).result()

    async def _ask_to_run(ctx: ToolContext, index: int, decision: _Decision) -> NotebookCell:
        """The cell ``index`` to run: read; when the hooks ask, shown to the person with
        its source on the run's approval card, and read again once approved — refused as
        stale when it no longer holds the source the person approved."""
        cell = _runnable((await read()).cell(index))
        if ctx.ask is None:
            return cell
        channel = ctx.parent.approval if isinstance(ctx.parent, ParentContext) else None
        shown = ToolCall(id=ctx.call.id, name=ctx.call.name, arguments=json.dumps({"cell": index, "source": cell.source}))
        refused = await ask_channel(channel, ctx.call, ctx.ask, ctx.ask_risk, emit=decision.emit, agent=ctx.agent, shown=shown)
        if refused is not None:
            raise ToolError(refused.removeprefix("error: "))
        now = next((c for c in (await read()).cells if c.id == cell.id), None)
        if now is None or now.source != cell.source:
            raise ToolError(
                f"cell {index} changed while the person was asked to approve running it (they edited or deleted it), "
                "so nothing ran: notebook_read it, then notebook_run it again"
            )
        return now

    return [notebook_read, notebook_edit, notebook_insert, notebook_run]


def _runnable(cell: NotebookCell) -> NotebookCell:
    """``cell``, if ``notebook_run`` may run it."""
    if cell.kind != "code":
        raise ToolError(f"cell {cell.index} is a {cell.kind} cell: only code cells run")
    if cell.running or is_agent_cell(cell.source):
        raise ToolError(f"cell {cell.index} is a prompt to an agent: it is not run from here")
    if cell.cut:
        raise ToolError(f"cell {cell.index} is over {MAX_SOURCE:,} characters: it cannot be run from here")
    return cell


def _editable(cell: NotebookCell) -> None:
    if cell.running:
        raise ToolError(f"cell {cell.index} is running this prompt: it cannot change while it runs")
    if cell.cut:
        raise ToolError(f"cell {cell.index} is over {MAX_SOURCE:,} characters: it cannot be edited from here")


def _rejected(cell: int, reason: str) -> str:
    if reason:
        return (
            f'the person rejected the edit of cell {cell}. Their reason: "{reason}". Do not retry it unchanged: '
            "take their reason into account."
        )
    return (
        f"the person rejected the edit of cell {cell} (they gave no reason). Do not retry it unchanged: do it "
        "another way, or ask them what they want."
    )


def _scrubbed(output: dict[str, Any]) -> dict[str, Any]:
    """An nbformat output with the known secrets masked in its text (images go as they are)."""
    out = dict(output)
    if isinstance(out.get("text"), str):
        out["text"] = SECRETS.scrub(out["text"])
    if isinstance(out.get("evalue"), str):
        out["evalue"] = SECRETS.scrub(out["evalue"])
    if isinstance(out.get("traceback"), list):
        out["traceback"] = [SECRETS.scrub(str(line)) for line in out["traceback"]]
    if isinstance(out.get("data"), dict):
        out["data"] = {k: SECRETS.scrub(v) if k.startswith("text/") and isinstance(v, str) else v for k, v in out["data"].items()}
    return out


async def fix_by_edit(bridge: NotebookBridge, failure: CellError) -> str:
    """How ``%fix`` asks for its fix in a page with the extension: as an edit of the cell
    that failed, named by its index when the page's notebook shows it (by its execution
    count, else its source)."""
    try:
        notebook = await bridge.read()
    except ToolError:
        notebook = None
    cells = [c for c in notebook.cells if c.kind == "code"] if notebook is not None else []
    found = [c for c in cells if failure.count is not None and c.execution_count == failure.count]
    found = found or [c for c in cells if clean(c.source, CONTEXT_SOURCE_CHARS) == failure.source]
    where = f"cell {found[-1].index}" if found else "the cell that failed (notebook_read finds it)"
    return f"Propose the fix as one notebook_edit of {where}: the person reviews the diff there."
