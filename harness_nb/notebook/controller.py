"""``NotebookHarness``: the extension's state in one kernel — settings, the ``Harness``,
run views, and the routing of background completions back to the cells that launched
them."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import DisplayHandle, display

from ..core import ConfigError, HarnessError, SubagentUpdate
from ..core.imports import shielded_imports
from ..core.secret import SECRETS
from ..engine import AskChannel, RunResult, UsageAccount
from ..harness import Harness
from ..settings import RunSettings
from ..subagents import TaskEntry, TaskStatus, resolve_model
from ..subagents.map_handle import MapHandle
from ..subagents.map_options import MapBackendName, MapOptions
from ..subagents.map_result import MapEstimate, MapResult
from ..textview import TextView, terminal_approval, terminal_ask
from ..tools import Sandbox
from .bridge import NotebookBridge, fix_by_edit, notebook_tools
from .config import HarnessNB, config_line
from .kernel.history import CellHistory
from .kernel.proposal import CellProposals
from .kernel.queued_cells import QueuedCells
from .kernel.tools import kernel_tools
from .prompt import notebook_prompt
from .widgets.approval import Card, PendingApprovals, WaitingCards
from .widgets.map_view import MapView
from .widgets.reply import AgentReply, MarkdownText
from .widgets.rewind_card import RewindCard
from .widgets.view import RunView

TICK = 0.1  # seconds; keeps the loop waking so an interrupt is seen during an approval wait


def cell_error(exc: HarnessError) -> UsageError:
    """``exc`` as a cell's error: one line, no traceback, secrets masked, and the setting
    that fixes it (when one does) said as the ``%config`` line that works here."""
    return UsageError(SECRETS.scrub(exc.explained(config_line)))


class Pending:
    """What our magics return: an awaitable that the input transformer awaits. If it is not
    awaited (a call inside a ``def``), its repr says how to run it."""

    def __init__(self, coro: Coroutine[Any, Any, Any], label: str) -> None:
        self._coro = coro
        self.label = label
        self._awaited = False

    def __await__(self) -> Any:
        self._awaited = True
        return self._coro.__await__()

    def __repr__(self) -> str:
        return f"<{self.label}: not run yet — put the magic at the top level of a cell, or `await` this>"

    def __del__(self) -> None:
        # Never awaited: close it quietly instead of a "never awaited" RuntimeWarning. (Once
        # awaited, the awaiting frame holds the coroutine; this object may go first.)
        if not self._awaited:
            self._coro.close()


async def _value(value: Any) -> Any:
    return value


def done(value: Any = None, label: str = "harness_nb") -> Pending:
    """A ``Pending`` that just returns ``value`` (every branch of a magic returns one)."""
    return Pending(_value(value), label)


async def _ticker() -> None:
    while True:
        await asyncio.sleep(TICK)


INTERRUPTED_LINE = "Interrupted"


def shown_as_one_line(exc: BaseException, line: str = INTERRUPTED_LINE) -> None:
    """``exc``, which IPython will show as ``line`` alone instead of a traceback through
    asyncio and harness code (IPython asks an exception for ``_render_traceback_``). The
    exception itself is unchanged: a cancellation stays a ``CancelledError``, so the cell
    still fails and ``asyncio.timeout`` still sees its own cancellation."""
    setattr(exc, "_render_traceback_", lambda: [line])  # noqa: B010 - an instance attribute IPython looks up


async def with_ticker(awaitable: Awaitable[Any]) -> Any:
    """Await ``awaitable`` while a ticker keeps the kernel's loop waking up."""
    tick = asyncio.get_running_loop().create_task(_ticker(), name="harness_nb:ticker")
    try:
        return await awaitable
    finally:
        tick.cancel()


class NotebookHarness:
    """One per kernel: builds the ``Harness`` from the ``HarnessNB`` settings and runs it in
    cells with a live view."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.config = HarnessNB(parent=shell)
        self.config.tool_names = self.tool_names
        # what the notebook ran and failed, and cells proposed: fed by post_run_cell hooks
        # from the load on, so they know the cells run before the first %%agent
        self.history = CellHistory(shell)
        self.proposals = CellProposals(shell)
        self._harness: Harness | None = None
        self._harness_key: tuple[Any, ...] | None = None
        self._views: weakref.WeakValueDictionary[str, RunView] = weakref.WeakValueDictionary()
        self._posted: set[str] = set()  # background tasks whose result is in their cell
        # the usage account of the run each view showed: background work it launched bills it
        self._accounts: weakref.WeakKeyDictionary[RunView, UsageAccount] = weakref.WeakKeyDictionary()
        # the display of each view still drawn as a widget, to put its static copy in at the end
        self._handles: weakref.WeakKeyDictionary[RunView, DisplayHandle] = weakref.WeakKeyDictionary()
        # views of background runs that settled after their cell ended: their static copy is
        # published again from the next cell that starts or ends (see republish_settled)
        self._settled_late: dict[RunView, DisplayHandle] = {}
        self.pending = PendingApprovals(page=self.page)  # cards waiting, for %approvals and the next cell
        # ... and for a cell queued behind a busy one from a page that lost them (a reload)
        self.queued_cells = QueuedCells(getattr(shell, "kernel", None), self.pending, self.show_waiting)
        self._chores: set[asyncio.Task[Any]] = set()  # undos clicked in views: cancelled on close
        # the comm to the frontend extension (opened by the load): the notebook tools use it
        self.bridge = NotebookBridge(getattr(shell, "kernel", None), page=self.page)

    @property
    def widgets_enabled(self) -> bool:
        """Widgets need a kernel (terminal IPython has none): there we print text."""
        return getattr(self.shell, "kernel", None) is not None

    def harness(self) -> Harness:
        """The harness for the current settings: built again when the working directory,
        the kernel tools or a setting marked ``built`` (the sandbox, the agent folders, …)
        changes, as those are what it is built from; the others apply to the one there is."""
        return self._harness_with(keep_tools=False)

    def tool_names(self) -> list[str]:
        """Every tool the main agent could be offered here: what ``HarnessNB.tools`` may
        name. (Asked while a new value of that setting is being checked, so the harness is
        got without applying it.)"""
        return self._harness_with(keep_tools=True).tool_pool.names()

    def _harness_with(self, *, keep_tools: bool) -> Harness:
        """``harness()``; with ``keep_tools``, offering the tools it offers now."""
        c = self.config
        offered = self._harness.settings.tools if self._harness is not None else None  # None: every tool
        settings = c.run_settings(tools=offered) if keep_tools else c.run_settings()
        workdir = str(c.workdir or ".")
        key = (str(Path(workdir).expanduser().resolve()), c.kernel_tools, settings.built_values())
        if self._harness is not None and key == self._harness_key:
            self._harness.apply(settings)
            return self._harness
        if self._harness is not None:
            self._close_later(self._harness)
            self._harness = None
        try:
            harness = self._build(workdir, settings)
        except ConfigError as exc:  # e.g. a workdir that is gone, or the machine's own folder
            raise cell_error(exc) from None
        if harness.checkpointer is not None:  # IPython's history changes on its own
            harness.checkpointer.leave_out(Path(self.shell.profile_dir.location).parent)
        self._harness, self._harness_key = harness, key
        harness.tracker.listeners.append(self._on_task_change)
        return harness

    def _build(self, workdir: str, settings: RunSettings) -> Harness:
        """A new harness for ``settings`` (``ConfigError`` when they cannot work)."""
        box = settings.sandbox
        kernel = self.config.kernel_tools  # the notebook's prompt speaks of the kernel tools
        bridged = self.bridge.offered
        tools = [
            *kernel_tools(self.shell, history=self.history, proposals=self.proposals, bridged=bridged),
            *notebook_tools(
                self.bridge, self.shell, history=self.history, approval_timeout=lambda: self.config.approval_timeout
            ),
        ]
        return Harness(
            workdir=workdir,
            settings=settings,
            extra_tools=tools if kernel else [],
            sandbox=Sandbox.create(box.mode, network=box.network, hidden=_connection_file(), limits=box.limits),
            main_prompt=notebook_prompt(self.shell, bridged=bridged) if kernel else None,
        )

    def close(self) -> None:
        """Stop background work and close the comm to the pages (on unload)."""
        self.bridge.close()
        for chore in self._chores:
            chore.cancel()
        if self._harness is not None:
            self._close_later(self._harness)
            self._harness = None

    def _close_later(self, harness: Harness) -> None:
        try:
            asyncio.get_running_loop().create_task(harness.aclose(), name="harness_nb:close-old")
        except RuntimeError:
            pass

    # ------------------------------------------------------------------ views
    def request_id(self) -> str | None:
        """The id of the request being handled (the cell's execute request)."""
        return self._request_header("msg_id")

    def page(self) -> str | None:
        """The frontend page the current request came from: its client session id (a
        reloaded page, or a second tab, has a new one)."""
        return self._request_header("session")

    def _request_header(self, name: str) -> str | None:
        """A field of the current request's header; None outside a kernel."""
        kernel = getattr(self.shell, "kernel", None)
        try:
            value = kernel.get_parent("shell").get("header", {}).get(name) if kernel is not None else None
        except Exception:
            return None
        return value if isinstance(value, str) and value else None

    def cell_attributes(self) -> dict[str, str | int]:
        """What a traced run started from the current cell records of it (``tracing/``): the
        notebook's path (as the Jupyter server that started this kernel named it), the cell's
        execution count and its id (as the frontend sent it), each where known."""
        found: dict[str, str | int] = {}
        path = self.shell.user_ns.get("__session__")  # ipykernel sets it from JPY_SESSION_NAME
        if isinstance(path, str) and path:
            found["harness_nb.notebook.path"] = path
        running = getattr(getattr(self.shell, "displayhook", None), "exec_result", None)  # the cell's, while it runs
        count = getattr(running, "execution_count", None)
        numbered = getattr(getattr(running, "info", None), "store_history", False)  # it has an In[n] entry
        if isinstance(count, int) and numbered:
            found["harness_nb.notebook.execution_count"] = count
        kernel = getattr(self.shell, "kernel", None)
        try:
            cell = kernel.get_parent("shell").get("metadata", {}).get("cellId") if kernel is not None else None
        except Exception:
            cell = None
        if isinstance(cell, str) and cell:
            found["harness_nb.notebook.cell_id"] = cell
        return found

    def unattended(self) -> str | None:
        """The unattended decision when the frontend cannot answer: nbclient, nbval and
        papermill send ``allow_stdin=false``; JupyterLab and Notebook send true."""
        kernel = getattr(self.shell, "kernel", None)
        if kernel is None:
            return None
        try:
            parent = kernel.get_parent("shell")
        except Exception:
            return None
        if parent and parent.get("content", {}).get("allow_stdin") is False:
            return str(self.config.unattended_approvals)
        return None

    def new_view(self, agent: str, model: str, *, title: str = "", own_task: str | None = None) -> RunView | TextView:
        """Show a view for a run in the current cell and return it."""
        if not self.widgets_enabled:
            return TextView()
        harness = self._harness
        tracker = harness.tracker if harness is not None else None

        def describe(task_id: str) -> str:
            entry = tracker.find(task_id) if tracker is not None else None
            return entry.description if entry is not None else ""

        def color_of(name: str) -> str | None:
            registry = harness.registry if harness is not None else None
            return registry.get(name).color if registry is not None and name in registry else None

        for older in list(self._handles):  # undo buttons stay on the newest run's view only
            if older.retire_undo():
                self._publish(older)
        view = RunView(
            agent,
            model,
            title=title,
            rate=self.config.updates_per_second,
            own_task=own_task,
            describe_task=describe,
            color_of=color_of,
            pending=self.pending,
            undo=self.undo_from_view,
        )
        view.when_settled = lambda: self._publish(view)
        handle = display(view, display_id=True)
        if handle is not None:
            self._handles[view] = handle
        return view

    def undo_from_view(self, checkpoint: int) -> asyncio.Task[tuple[bool, str]]:
        """Undo the call of ``checkpoint`` (an undo button's click): a task this controller
        keeps (and cancels on close); its result is (done, what it did, in one line)."""
        task = asyncio.get_running_loop().create_task(self._undo(checkpoint), name=f"harness_nb:undo-{checkpoint}")
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)
        return task

    async def _undo(self, checkpoint: int) -> tuple[bool, str]:
        try:
            report = await self.harness().undo(checkpoint)
        except HarnessError as exc:
            return False, f"not undone: {exc}"
        failed = report.conflicts or (report.applied is not None and report.applied.failed)
        return not failed, SECRETS.scrub(report.summary())

    def _end(self, view: RunView | TextView, state: str) -> None:
        """End ``view``'s run and update its display in the cell: once the view is settled,
        its static copy alone (so a saved notebook shows the run where no widget can be
        drawn: reopened without its kernel, nbconvert, GitHub); until then the widget, with
        the static copy as it is now beside it."""
        if not isinstance(view, RunView):
            return
        view.finish(state)
        self._publish(view)

    def _publish(self, view: RunView) -> None:
        handle = self._handles.get(view)
        if handle is None:
            return
        if view.settled:
            handle.update(view.static_bundle(), raw=True)
            self._handles.pop(view, None)  # static for good: later changes cannot reach a saved copy
        else:
            handle.update(view)

    def show_waiting(self, cards: list[Card] | None = None) -> int:
        """Show again in this cell the approval and question cards still waiting (all, or
        ``cards``); returns how many, as copies (``Card.copy``). A page reloaded before the
        notebook was saved loses a card from its cell while the run still waits for it:
        this finds it again (``QueuedCells`` calls it for a cell queued behind a busy one)."""
        cards = list(self.pending) if cards is None else cards
        if cards and self.widgets_enabled:
            box = WaitingCards(cards)
            shown = display(box, display_id=True)
            if shown is not None:  # once all are decided, their static copy stands in for it
                box.when_settled = lambda: shown.update(box.static_bundle(), raw=True)
            self.pending.mark_seen(cards, self.page())
        return len(cards)

    def before_cell(self, info: Any) -> None:
        """``pre_run_cell``: a cell run while a card waits shows it (each card once this
        way; ``%approvals`` shows them all, any time)."""
        if (getattr(info, "raw_cell", "") or "").lstrip().startswith("%approvals"):
            return
        cards = self.pending.not_yet_reshown()
        self.pending.shown_by_hook.update(id(c) for c in cards)
        self.show_waiting(cards)

    def approval_for(self, view: RunView | TextView) -> Any:
        if isinstance(view, RunView):
            return view.approval_channel(timeout=self.config.approval_timeout, unattended=self.unattended())
        return terminal_approval()

    def ask_for(self, view: RunView | TextView) -> AskChannel | None:
        """The ask channel of a run shown in ``view``: question cards in it, or the terminal
        without widgets. None where no one can answer (an unattended run: nbclient, nbval,
        papermill): ``ask_person`` is then not offered, and answered "no one to ask"."""
        if not isinstance(view, RunView):
            return terminal_ask()
        if self.unattended() is not None:
            return None
        return view.ask_channel(timeout=self.config.approval_timeout)

    def _track(self, view: RunView | TextView) -> Callable[[Any], None]:
        """The view's event sink, also noting which background tasks it launched."""
        if not isinstance(view, RunView):
            return view

        def sink(event: Any) -> None:
            view(event)
            if isinstance(event, SubagentUpdate):  # the only events that bring task ids
                self._views.setdefault(event.task_id, view)

        return sink

    def _on_task_change(self, entry: TaskEntry) -> None:
        """Post a finished background task into the cell that launched it."""
        if not (entry.background and entry.done) or entry.id in self._posted:
            return
        view = self._views.get(entry.id)
        if view is None:
            return
        self._posted.add(entry.id)
        account = self._accounts.get(view)
        view.post_completion(completion_markdown(entry), usage=account.snapshot() if account else None, task_id=entry.id)
        if view.own_task == entry.id:
            view.finish("done" if entry.status is TaskStatus.COMPLETED else str(entry.status))
        if view.settled:
            handle = self._handles.get(view)
            self._publish(view)  # a live page applies it at once, by its display id
            if handle is not None:
                self._settled_late[view] = handle

    def republish_settled(self, *_: Any) -> None:
        """``pre_run_cell`` and ``post_run_cell``: publish again the static copies of
        background runs that settled since the last cell, now under the cell that runs.
        ipykernel 7.4 sends a background task's update as from the cell that launched it,
        which nbclient (nbconvert, run_notebook, papermill) has finished with and ignores;
        an update sent from the running cell is applied by display id to the launching
        cell's output, so a saved notebook keeps the finished run, not "running"."""
        settled, self._settled_late = self._settled_late, {}
        for view, handle in settled.items():
            handle.update(view.static_bundle(), raw=True)

    # ------------------------------------------------------------------ runs
    async def run_main(self, prompt: str, *, model: str | None, max_turns: int | None) -> AgentReply:
        h = self.harness()
        if not prompt.strip():
            raise UsageError("%%agent needs a prompt: write it in the cell body (or after %agent on the line)")
        view = self.new_view("main", model or h.model or "(no model)")
        run = h.run(
            prompt, on_event=self._track(view), model=model, max_turns=max_turns,
            approval=self.approval_for(view), ask=self.ask_for(view), trace_attributes=self.cell_attributes(),
        )
        return await self._foreground(view, run)

    async def run_direct(self, agent: str, prompt: str) -> AgentReply:
        h = self.harness()
        if not prompt.strip():
            raise UsageError(f"%@{agent} needs a prompt, e.g. %@{agent} summarise data.csv")
        definition = h.registry.get(agent)
        view = self.new_view(agent, self.model_of(definition.model))
        run = h.run_subagent(
            agent, prompt, on_event=self._track(view), approval=self.approval_for(view), ask=self.ask_for(view),
            trace_attributes=self.cell_attributes(),
        )
        return await self._foreground(view, run)

    async def fix_prompt(self, prompt: str) -> str:
        """``%fix`` / ``%%agent --fix``: ``prompt`` with the last failed cell and its
        traceback; in a page with the notebook extension, asking for the fix as an edit of
        that cell (``UsageError`` when no cell failed)."""
        failure = self.history.last_failure()
        how = ""
        if failure is not None and self.bridge.offered():
            how = await with_ticker(fix_by_edit(self.bridge, failure))
        return self.history.prompt_with_error(prompt, fix=True, fix_with=how)

    async def compact(self, *, model: str | None = None) -> MarkdownText:
        """``%agent --compact``: compact the conversation now, shown in a view of its own;
        returns what was done, as one line."""
        h = self.harness()
        view = self.new_view("main", model or h.model or "(no model)", title="compact")
        try:
            done = await with_ticker(h.compact(on_event=self._track(view), model=model))
        except asyncio.CancelledError as exc:
            self._end(view, "interrupted")
            shown_as_one_line(exc)
            raise
        except HarnessError as exc:
            self._end(view, "failed")
            raise cell_error(exc) from None
        if isinstance(view, RunView) and done.usage is not None:
            view.show_usage(done.usage)  # the summary calls: no turn of a run reports them
        self._end(view, "done")
        return MarkdownText(done.describe())

    async def rewind(self, checkpoint: int | str | None, *, yes: bool) -> None:
        """``%agent --rewind [N]``: show what going back to checkpoint ``checkpoint`` (the
        latest when ``None``) changes, then do it when the person clicks Rewind (``yes``:
        at once). Where no one can click (nbclient, a terminal), nothing is changed and the
        cell says how to rewind."""
        h = self.harness()
        try:
            preview = await h.rewind(checkpoint, dry_run=True)
        except HarnessError as exc:
            raise cell_error(exc) from None
        number = preview.checkpoint.number
        if not preview.changes and not preview.conflicts:
            print(f"the workdir is as it was at checkpoint #{number}: nothing to rewind")
            return
        if not yes and (self.unattended() is not None or not self.widgets_enabled):
            print(SECRETS.scrub(str(preview)))
            print(f"\nnothing was changed (no one can click here). To rewind, run  %agent --rewind {number} --yes")
            return
        card: RewindCard | None = None
        shown: DisplayHandle | None = None
        if not yes:
            card = RewindCard(preview)
            shown = display(card, display_id=True)
            go = await with_ticker(card.decision(self.config.approval_timeout))
            if not go:
                card.settle(f"cancelled: checkpoint #{number} was not restored, nothing was changed", ok=False)
                if shown is not None:
                    shown.update(card.static_bundle(), raw=True)
                return
        try:
            report = await h.rewind(number)
        except HarnessError as exc:
            raise cell_error(exc) from None
        if card is None:
            print(SECRETS.scrub(report.summary()))
            return
        card.settle(report.summary())
        if shown is not None:
            shown.update(card.static_bundle(), raw=True)

    async def undo(self, checkpoint: int | str) -> None:
        """``%agent --undo N``: put back what the call of checkpoint ``N`` changed, where
        it is still as that call left it (the same as the undo button of its line)."""
        try:
            report = await self.harness().undo(checkpoint)
        except HarnessError as exc:
            raise cell_error(exc) from None
        print(SECRETS.scrub(report.summary()))

    def model_of(self, requested: str | None) -> str:
        """The model a subagent asking for ``requested`` runs on, for its view's header."""
        main = self.harness().model
        return resolve_model(requested, main) if main else "(no model)"

    async def _foreground(self, view: RunView | TextView, run: Awaitable[RunResult]) -> AgentReply:
        """Await a run in a cell: the ticker keeps interrupts prompt; the view ends as done,
        failed or interrupted; a harness error is a ``UsageError`` (no traceback)."""
        try:
            result = await with_ticker(run)
        except asyncio.CancelledError as exc:
            self._end(view, "interrupted")
            shown_as_one_line(exc)
            raise
        except HarnessError as exc:
            self._end(view, "failed")
            raise cell_error(exc) from None
        self._end(view, "done")
        if isinstance(view, RunView) and result.account is not None:
            self._accounts[view] = result.account
        return AgentReply(result.final_text, usage=result.usage, result=result, task_id=result.task_id)

    async def run_map(
        self,
        agent: str,
        template: str,
        rows: Any,
        *,
        concurrency: int,
        retries: int,
        budget_usd: float | None,
        background: bool = False,
        output: str | None = None,
        resume: bool = False,
        estimate: bool = False,
        sample: int | None = None,
        batch: bool = False,
        batch_size: int | None = None,
        backend: MapBackendName = "kernel",
    ) -> MapResult | MapHandle | MapEstimate:
        """``%agent map``: ``agent`` over ``rows`` with a live progress bar in this cell
        (``background``: the cell returns at once and the bar keeps moving; the kernel is
        free for other cells; ``estimate``: a sample's bar, and the projection for all
        rows). Its rows run without asking: a call that would ask is denied (there is
        nobody to answer a thousand cards), so give the agent tools that need no approval,
        or allow rules. ``output``, ``resume``, ``sample``, ``batch_size`` and ``backend`` are
        ``MapOptions``'; ``batch``: ``mode="batch"`` (the vendor's batch API; the bar shows
        its batches' state)."""
        h = self.harness()
        try:
            h.registry.get(agent)
        except HarnessError as exc:
            raise cell_error(exc) from None
        rows = rows if hasattr(rows, "__len__") else list(rows)
        view = MapView(agent, len(rows), rate=self.config.updates_per_second) if self.widgets_enabled else None
        options = MapOptions(
            concurrency=concurrency,
            retries=retries,
            budget_usd=budget_usd,
            on_progress=view.update if view is not None else None,
            output=output,
            resume=resume,
            backend=backend,
        )
        if sample is not None:
            options["sample"] = sample
        if batch:
            options["mode"] = "batch"
        if batch_size is not None:
            options["batch_size"] = batch_size
        shown: DisplayHandle | None = None

        def finish(result: MapResult | MapEstimate | None) -> None:
            # the map has ended: its static copy stands in for the bar from now on
            assert view is not None
            if result is None:
                view.interrupted()
            else:
                view.finish(result)
            if shown is not None:
                shown.update(view.static_bundle(), raw=True)

        try:
            if background:
                handle = await h.start_map(agent, template, rows, **options)
            else:
                if view is not None:
                    if estimate:
                        view.set_title("estimate")
                    shown = display(view, display_id=True)
                run: Awaitable[MapResult | MapEstimate]
                if estimate:
                    run = h.map(agent, template, rows, estimate=True, **options)
                else:
                    run = h.map(agent, template, rows, **options)
                result = await with_ticker(run)
        except asyncio.CancelledError as exc:
            if view is not None:
                finish(h.last_map.result() if h.last_map is not None and not estimate else None)
            shown_as_one_line(exc)
            raise
        except HarnessError as exc:
            raise cell_error(exc) from None
        if not background:
            if view is not None:
                finish(result)
            return result
        if view is not None:
            view.set_title(f"background {handle.id}")
            shown = display(view, display_id=True)
            finished = handle.entry.task
            if finished is not None:
                finished.add_done_callback(lambda _task: finish(handle.result()))
        return handle

    def start_background(self, agent: str, prompt: str) -> str:
        """Start ``agent`` in the background from this cell; its progress and result land
        here. Returns the task id."""
        h = self.harness()
        if not prompt.strip():
            raise UsageError("a background run needs a prompt")
        try:
            definition = h.registry.get(agent)
        except HarnessError as exc:
            raise cell_error(exc) from None
        view = self.new_view(definition.name, self.model_of(definition.model), title="background")
        # the task does not run before this function returns, so no event is missed
        try:
            handle = h.start_subagent(
                definition.name, prompt, on_event=self._track(view), approval=self.approval_for(view),
                ask=self.ask_for(view), trace_attributes=self.cell_attributes(),
            )
        except HarnessError as exc:  # no model configured, say
            self._end(view, "failed")
            raise cell_error(exc) from None
        if isinstance(view, RunView):
            view.own_task = handle.id
            view.set_title(f"background {handle.id}")
            self._views[handle.id] = view
        return handle.id


def _connection_file() -> list[Path]:
    """The kernel's connection file (its key lets a process drive the kernel): hidden from
    sandboxed commands wherever it lies. None outside a kernel."""
    try:
        with shielded_imports():
            from ipykernel.connect import get_connection_file

        return [Path(get_connection_file())]
    except (ImportError, RuntimeError, OSError):
        return []


def completion_markdown(entry: TaskEntry) -> str:
    """How a finished background task is shown in its cell and by ``%task wait``."""
    return f"**{entry.id}** · {entry.agent} · {entry.status} · {entry.usage.summary()}\n\n{entry.outcome}"
