"""``RunView``: the live widget of one agent run in one cell.

    header        state mark · agent · model · state · tokens · turns · elapsed · cost · gauge
    activity      in order: narration, tool lines (each approval card and what the call did
                  to the workdir, with an undo button, right below its own line), what
                  tools displayed, one line per subagent, notes — a muted block that folds
                  after the run behind "5 tool calls · 2.8 s ▸"
    stream        the answer being written, last (the finished answer is the cell's value)
    status        "waiting for the model…" with a spinner while nothing else moves
    completions   background results posted later into this cell

Updates are coalesced: events only mark parts dirty; at most ``rate`` refreshes a second
push them to the frontend, so a fast stream cannot flood the browser. While the run lives
the clock ticks once a second on the same scheduler (a test's hand-moved clock, or the
loop). The ``text/plain`` form is stable (what nbval compares and what a non-widget
frontend shows).
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import AsyncIterator, Callable
from typing import Any

import ipywidgets as widgets

from ...core import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetWarning,
    Compacted,
    CompactionStarted,
    ContextMeasured,
    EffectsRecorded,
    Event,
    MessagesInjected,
    RunFailed,
    RunFinished,
    ServerAdapted,
    SubagentUpdate,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    Usage,
)
from ...core.secret import SECRETS
from ...core.usage import plural
from ...engine import Answer, ApprovalChannel, Approved, AskChannel, Denied, Question
from ...engine.limits import stop_label
from ...subagents.render import read_task_forms
from ...textview import preview
from .approval import ApprovalCard, Card, PendingApprovals
from .live import Scheduler, StaticCopyBox, TimerHandle
from .question import QuestionCard
from .reply import MarkdownText
from .theme import STYLE, agent_color, agent_name, css_color, joined, state_label, state_mark
from .view_effects import EffectsLine, Undo
from .view_lines import SubLine, ToolLine, note_html, plain_error
from .view_static import markdown_html, outputs_html, page
from .wording import plain_injected

TICK_SECONDS = 1.0  # how often the clock of a live run moves
LIVE_STATES = ("running", "waiting")


def limit_state(stop_reason: str) -> str | None:
    """``stopped: <reason>`` when a run ended early (``engine.limits.stop_label``), else None."""
    label = stop_label(stop_reason)
    return None if label == "done" else label


def _markdown_output(text: str) -> tuple[dict[str, Any], ...]:
    if not text:
        return ()
    text = SECRETS.scrub(text)  # the last line of defence: widget state is saved in the .ipynb
    return ({"output_type": "display_data", "data": {"text/markdown": text, "text/plain": text}, "metadata": {}},)


def tool_outputs(event: ToolCallFinished) -> tuple[dict[str, Any], ...]:
    """The ``display_data`` outputs that show a finished tool call's displays in a cell, or
    its images when it made no displays. Text is scrubbed of secrets (widget state is saved
    in the .ipynb); images cannot be."""
    if event.displays:
        shown = [(d.data, d.metadata) for d in event.displays]
    else:
        shown = [({i.media_type: i.data, "text/plain": f"[{i.describe()}]"}, {}) for i in event.images]
    return tuple(
        {
            "output_type": "display_data",
            "data": {k: v if k.startswith("image/") and k != "image/svg+xml" else SECRETS.scrub(v) for k, v in data.items()},
            "metadata": dict(metadata),
        }
        for data, metadata in shown
    )


class RunView(StaticCopyBox):
    """The widget of one run. Feed it events with ``view(event)``. ``color_of`` gives an
    agent's ``color`` by name: its subagents' progress lines (and its own name, for a
    subagent's run) are drawn in it; agents without one get a palette colour by name.
    ``pending`` is the kernel's registry of waiting approval cards. ``undo`` starts undoing
    a call's effects (the undo button under its line; without it, no button);
    ``when_settled`` is told when a click leaves the view settled."""

    def __init__(
        self,
        agent: str,
        model: str,
        *,
        title: str = "",
        rate: float = 8.0,
        own_task: str | None = None,
        describe_task: Callable[[str], str] | None = None,
        color_of: Callable[[str], str | None] | None = None,
        scheduler: Scheduler | None = None,
        pending: PendingApprovals | None = None,
        undo: Undo | None = None,
    ) -> None:
        self.agent = agent
        self.undo = undo
        self.when_settled: Callable[[], None] | None = None
        self._effects: list[EffectsLine] = []
        self.color_of = color_of or (lambda _agent: None)
        self.model = model
        self.title = title
        self.own_task = own_task
        self.describe_task = describe_task or (lambda _tid: "")
        self.pending = pending
        self.state = "running"
        self.usage = Usage()
        self.style = widgets.HTML(STYLE)
        self.header = widgets.HTML()
        self.activity = widgets.VBox()
        self.toggle = widgets.Button(layout=widgets.Layout(width="auto", display="none"))
        self.exhibits = widgets.VBox()  # what tools displayed, kept in sight while the activity is folded
        self.stream = widgets.Output()
        self.status = widgets.HTML()
        self.completions = widgets.Output()
        self.cards: list[Card] = []  # approval and question cards, in the order they came
        self.expanded = True
        self.ended: float | None = None
        self._text = ""
        self._shown_text = ""
        self._tool_lines: dict[str, ToolLine] = {}
        self._subs: dict[str, SubLine] = {}
        self._asking: dict[str, widgets.Widget] = {}  # a subagent's call id → its line, while the call lasts
        self._items: list[widgets.Widget] = []  # the activity, in order (folded, the displays move out)
        self._static: dict[int, Callable[[], str]] = {}  # how each item reads in the static copy
        self._displays: list[widgets.Output] = []
        self._limit_stop: str | None = None
        self._background: set[str] = set()  # tasks it started in the background whose result is still to come
        self._tick: TimerHandle | None = None
        self._quiet_since = 0.0  # when the run last heard from the model or a tool
        self.context: ContextMeasured | None = None  # the gauge: how full the next request is
        self.toggle.on_click(lambda _b: self.set_expanded(not self.expanded))
        for widget, name in (
            (self.header, "hnb-header"),
            (self.activity, "hnb-activity"),
            (self.toggle, "hnb-toggle"),
            (self.status, "hnb-status"),
            (self.completions, "hnb-completions"),
        ):
            widget.add_class(name)
        children = [
            self.style, self.header, self.activity, self.toggle, self.exhibits, self.stream, self.status, self.completions,
        ]
        super().__init__(children, rate=rate, scheduler=scheduler)
        self.add_class("hnb")
        self.add_class("hnb-run")
        self.started = self._quiet_since = self.now()
        self.render({"header", "status"})  # drawn now, without counting as a paced refresh

    # ------------------------------------------------------------------ text forms
    def plain_text(self) -> str:
        """Stable one-line description (no timings): what nbval compares."""
        label = f" · {self.title}" if self.title else ""
        return f"agent run: {self.agent} · {self.model}{label}"

    def set_title(self, title: str) -> None:
        self.title = title
        self._dirty.add("header")
        self.flush()

    @property
    def live(self) -> bool:
        """The run itself is still going (running, or waiting for an approval)."""
        return self.state in LIVE_STATES

    # ------------------------------------------------------------------ events
    def __call__(self, event: Event) -> None:
        if isinstance(event, SubagentUpdate) and event.task_id != self.own_task:
            self._on_subagent(event)
            return
        if isinstance(event, SubagentUpdate):
            event = event.event
        if isinstance(event, TextDelta):
            self._text += event.text
            self._heard()
            self.mark("stream")
        elif isinstance(event, ToolCallStarted):
            self._freeze_narration()
            line = ToolLine(event.call)
            self._tool_lines[event.call.id] = line
            self._append(line.widget, lambda: line.html(live=False))
            self._draw(line)
        elif isinstance(event, ApprovalRequested):
            self._on_tool_line(event.call, awaiting=True)
        elif isinstance(event, ApprovalDecided):
            own = self._tool_lines.get(event.call.id)
            if own is not None:
                own.decided(event.approved, by_person=event.by_person, feedback=event.feedback)
                self._draw(own)
        elif isinstance(event, EffectsRecorded):
            self._on_effects(event)
        elif isinstance(event, ToolCallFinished):
            own = self._tool_lines.get(event.call.id)
            if own is not None:
                own.result, own.is_error, own.duration, own.awaiting = event.result, event.is_error, event.duration, False
                self._draw(own)
            self._show_outputs(event, own.widget if own is not None else None)
            self._background.update(f.id for f in read_task_forms(event.result) if f.state == "running" and f.id)
            self._heard()
        elif isinstance(event, TurnFinished):
            self.usage = event.usage
            self._heard()
            self.mark("header")
        elif isinstance(event, ContextMeasured):
            self.context = event
            self.mark("header")
        elif isinstance(event, CompactionStarted | Compacted):
            self._freeze_narration()
            self._add_note(f"⇣ {event.describe()}")
        elif isinstance(event, MessagesInjected):
            for text in event.texts:
                self._add_note(f"⇢ {plain_injected(text)}")
        elif isinstance(event, BudgetWarning):
            self._add_note(f"⚠ budget: {event.text()}")
        elif isinstance(event, ServerAdapted):
            self._add_note(f"⚠ {event.text}")
        elif isinstance(event, RunFinished):
            self.usage = event.usage
            self._limit_stop = limit_state(event.stop_reason)
            self.mark("header")
        elif isinstance(event, RunFailed):
            self.usage = event.usage
            if not event.interrupted:
                self._add_note(f"✗ {plain_error(event.error)}")
            self.mark("header")

    def _on_effects(self, event: EffectsRecorded) -> None:
        """What a call did, right under its line (and its card)."""
        line = EffectsLine(event, undo=self.undo, on_change=self._effects_changed)
        self._effects.append(line)
        own = self._tool_lines.get(event.call.id)
        self._insert_after(own.widget if own is not None else None, line.widget, line.static_html)
        self.mark("status")

    def _effects_changed(self) -> None:
        if self.settled and self.when_settled is not None:
            self.when_settled()

    def retire_undo(self) -> bool:
        """Take the undo buttons away (a newer run is the one to undo from):
        ``%agent --undo N`` still undoes what a line names. Whether there were any."""
        offered = [line for line in self._effects if line.offered]
        for line in offered:
            line.retire()
        return bool(offered)

    def _on_tool_line(self, call: ToolCall, *, awaiting: bool) -> None:
        line = self._tool_lines.get(call.id)
        if line is not None:
            line.awaiting = awaiting
            self._draw(line)

    def _on_subagent(self, update: SubagentUpdate) -> None:
        inner = update.event
        sub = self._subs.get(update.task_id)
        now = self.now()
        if sub is None:
            sub = SubLine(
                update.agent,
                self.describe_task(update.task_id),
                widgets.HTML(),
                started=now,
                color=agent_color(update.agent, self.color_of(update.agent)),
            )
            self._subs[update.task_id] = sub
            self._freeze_narration()
            self._append(sub.widget, lambda: sub.html(self.now(), live=False))
        if isinstance(inner, ToolCallStarted):
            sub.tools += 1
            sub.last = inner.call.brief(50)
            self._asking[inner.call.id] = sub.widget  # its approval or question card goes under this line
        elif isinstance(inner, ToolCallFinished):
            self._asking.pop(inner.call.id, None)
            return
        elif isinstance(inner, ApprovalRequested):
            sub.last = f"waiting for approval: {inner.call.name}"
            sub.state = "waiting"
            self._asking[inner.call.id] = sub.widget
        elif isinstance(inner, ApprovalDecided):
            sub.state = "running"
            verdict = "approved" if inner.approved else "denied by you" if inner.by_person else "denied"
            sub.last = f"{inner.call.name} {verdict}"
            self._asking.pop(inner.call.id, None)
        elif isinstance(inner, TurnFinished):
            sub.usage = inner.usage
        elif isinstance(inner, EffectsRecorded):
            if inner.line:
                sub.last = f"⟲ {inner.line}"
            if inner.reverted:
                self._add_note(f"⚠ {update.agent}: {inner.reverted}")
        elif isinstance(inner, Compacted):
            sub.last = inner.describe()
        elif isinstance(inner, BudgetWarning):
            sub.last = f"⚠ budget: {inner.text()}"
        elif isinstance(inner, ServerAdapted):  # said once for the whole process: not only on its line
            self._add_note(f"⚠ {inner.text}")
        elif isinstance(inner, RunFinished):
            stopped = limit_state(inner.stop_reason)
            sub.usage = inner.usage
            sub.finish(stopped or "done", stopped or "finished", now)
        elif isinstance(inner, RunFailed):
            sub.finish(
                "interrupted" if inner.interrupted else "failed",
                "interrupted" if inner.interrupted else preview(inner.error, 60),
                now,
            )
        else:
            return
        self.mark(f"sub:{update.task_id}")

    def _heard(self) -> None:
        self._quiet_since = self.now()
        self.mark("status")

    # ------------------------------------------------------------------ activity
    def _append(self, widget: widgets.Widget, static: Callable[[], str] | None = None) -> None:
        self._insert_after(None, widget, static)

    def _insert_after(
        self, anchor: widgets.Widget | None, widget: widgets.Widget, static: Callable[[], str] | None = None
    ) -> None:
        """Put ``widget`` right below ``anchor`` (and what was already put there), or last;
        ``static`` is how it reads in the static copy (an HTML widget: its value)."""
        items = self._items
        if anchor is None or anchor not in items:
            items.append(widget)
        else:
            at = items.index(anchor) + 1
            while at < len(items) and (items[at] in self.cards or items[at] in self._displays):
                at += 1
            items.insert(at, widget)
        if static is not None:
            self._static[id(widget)] = static
        self._show_activity()

    def _show_activity(self) -> None:
        shown = self._items if self.expanded else [w for w in self._items if w not in self._displays]
        self.activity.children = tuple(shown)
        self.exhibits.children = () if self.expanded else tuple(self._displays)

    def _draw(self, line: ToolLine) -> None:
        line.widget.value = line.html()
        self.mark("status")

    def _show_outputs(self, event: ToolCallFinished, line: widgets.Widget | None) -> None:
        """What the tool displayed (a DataFrame's HTML, a figure), or else the images of its
        result, in an Output right below its line."""
        outputs = tool_outputs(event)
        if not outputs:
            return
        out = widgets.Output()
        out.outputs = outputs
        self._displays.append(out)
        self._insert_after(line, out)

    def _add_note(self, text: str) -> None:
        note = widgets.HTML(note_html(text))
        self._append(note, lambda: note.value)

    def _freeze_narration(self) -> None:
        """Text streamed before a tool call becomes a line in the activity log."""
        text = self._text.strip()
        if text:
            out = widgets.Output()
            out.outputs = _markdown_output(text)
            out.add_class("hnb-narration")
            self._append(out, lambda: markdown_html(SECRETS.scrub(text)))
        self._text = ""
        self.mark("stream")

    def set_expanded(self, expanded: bool) -> None:
        """Open or fold the activity (the toggle under it does this). Folded, what tools
        displayed (a table, a figure) moves below the toggle, in sight."""
        self.expanded = expanded
        self.activity.layout.display = None if expanded else "none"
        self._show_activity()
        self.toggle.description = self.activity_summary() + (" ▾" if expanded else " ▸")

    def activity_summary(self) -> str:
        """``5 tool calls · 2 subagents · 2.8 s``: what the folded activity holds."""
        parts = [plural(len(self._tool_lines), "tool call")]
        if self._subs:
            parts.append(plural(len(self._subs), "subagent"))
        if not self._tool_lines and not self._subs:
            parts = ["activity"]
        parts.append(f"{self.elapsed():.1f} s")
        return " · ".join(parts)

    def elapsed(self) -> float:
        return (self.ended if self.ended is not None else self.now()) - self.started

    # ------------------------------------------------------------------ rendering
    def _header_html(self, *, live: bool = True) -> str:
        own = css_color(self.color_of(self.agent))
        name = agent_name(self.agent, own) if own else f"<b>{html.escape(self.agent)}</b>"
        title = f" — {html.escape(self.title)}" if self.title else ""
        cost = self.usage.cost_label()
        parts = [
            f"{state_mark(self.state, spin=live)} {name}{title}".strip(),
            f"<code>{html.escape(self.model)}</code>",
            state_label(self.state),
            self.usage.tokens_label(),
            plural(self.usage.turns, "turn"),
            f"{self.elapsed():.1f} s",
            html.escape(cost) if cost else "",
            html.escape(self.context.label()) if self.context is not None else "",
        ]
        return f"<div class='hnb'>{joined(parts)}</div>"

    def _status_html(self) -> str:
        if not self.live or self._text or any(line.open for line in self._tool_lines.values()) or self.cards_waiting():
            return ""
        if any(sub.live for sub in self._subs.values()):
            return ""
        quiet = self.now() - self._quiet_since
        waited = f" {quiet:.0f} s" if quiet >= 1 else ""
        return f"<span class='hnb hnb-muted'>{state_mark('running')} <i>waiting for the model…</i>{waited}</span>"

    def cards_waiting(self) -> list[Card]:
        return [card for card in self.cards if card.waiting]

    def render(self, dirty: set[str]) -> None:
        if "stream" in dirty and self._text != self._shown_text:
            self.stream.outputs = _markdown_output(self._text)
            self._shown_text = self._text
        ticked = "clock" in dirty
        if "header" in dirty or ticked:
            self.header.value = self._header_html()
        if "status" in dirty or "header" in dirty or ticked:
            status = self._status_html()
            if self.status.value != status:
                self.status.value = status
        now = self.now()
        for part in dirty:
            if part.startswith("sub:"):
                sub = self._subs.get(part[4:])
                if sub is not None:
                    sub.widget.value = sub.html(now)
        if ticked:
            for sub in self._subs.values():
                if sub.live:
                    sub.widget.value = sub.html(now)
        self._schedule_tick()

    def _schedule_tick(self) -> None:
        if self._tick is not None or not self.live:
            return
        pacer = self._pacer()
        if pacer is not None:
            self._tick = pacer.call_later(TICK_SECONDS, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        if self.live:
            self.mark("clock")

    # ------------------------------------------------------------------ static copy
    @property
    def settled(self) -> bool:
        """Nothing in the view moves any more: the run ended, no card waits, no subagent it
        shows is still going, no undo button is offered. Its static copy can then stand in
        for the widget."""
        if self.live or self.cards_waiting() or self._background or any(line.offered for line in self._effects):
            return False
        return not any(sub.live for sub in self._subs.values())

    def _item_html(self, widget: widgets.Widget) -> str:
        static = self._static.get(id(widget))
        if static is not None:
            return static()
        if isinstance(widget, Card):
            return widget.static_html()
        if isinstance(widget, widgets.Output):
            return outputs_html(widget.outputs)
        return str(getattr(widget, "value", ""))

    def static_html(self) -> str:
        """The run as static HTML (``view_static``): what a saved notebook shows where the
        widget cannot be drawn."""
        activity = [self._item_html(w) for w in self._items if w not in self._displays]
        exhibits = [outputs_html(out.outputs) for out in self._displays]
        completions = outputs_html(self.completions.outputs)
        tail = [outputs_html(_markdown_output(self._text))]
        if completions:
            tail.append(f"<div class='hnb-completions'>{completions}</div>")
        return page(STYLE, self._header_html(live=False), activity, self.activity_summary(), exhibits, tail)

    # ------------------------------------------------------------------ outcomes
    def finish(self, state: str) -> None:
        """Mark the run done / failed / interrupted, stop its clock, clear the streamed
        answer (the magic returns it as the cell's value instead) and fold the activity. A
        run whose own ``RunFinished`` said it stopped on a limit stays ``stopped: <limit>``
        when told it is done."""
        self.state = self._limit_stop if state == "done" and self._limit_stop else state
        self.ended = self.now()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        self._text = ""
        self._dirty.update({"stream", "header", "status"})
        self.flush()
        if self._items:
            self.toggle.layout.display = None
            self.set_expanded(bool(self.cards_waiting()))

    def show_usage(self, usage: Usage) -> None:
        """Show ``usage`` as the run's in the header (work outside a run's turns, such as a
        compaction's summary calls, reports its usage this way)."""
        self.usage = usage
        self.mark("header")

    def post_completion(self, markdown: str, *, usage: Usage | None = None, task_id: str | None = None) -> None:
        """Append a background result to this cell (from the task ``task_id`` that
        finished). ``usage`` is the launching run's usage now that the task has billed it:
        the header shows it."""
        self.completions.append_display_data(MarkdownText(SECRETS.scrub(markdown)))
        self._background.discard(task_id or "")
        if usage is not None:
            self.show_usage(usage)

    def approval_channel(self, *, timeout: float | None, unattended: str | None) -> ApprovalChannel:
        """An approval channel that asks in this view, with a card right below the call's
        line. With ``unattended`` set ('deny' or 'approve'), nobody can click: decide at
        once and say so."""

        async def ask(call: ToolCall, reason: str, risk: str) -> Approved | Denied:
            if unattended is not None:
                answer: Approved | Denied = (
                    Approved() if unattended == "approve" else Denied("no one can answer here (unattended run): denied")
                )
                verdict = "approved" if isinstance(answer, Approved) else "denied"
                self._add_note(f"approval for {call.brief(60)} ({reason}): {verdict} automatically (unattended run)")
                return answer
            card = ApprovalCard(call, reason, risk, pending=self.pending)
            async with self._waiting_on(card, call.id):
                return await card.decision(timeout)

        return ask

    def ask_channel(self, *, timeout: float | None) -> AskChannel:
        """An ask channel that asks in this view (``ask_person``): a question card right
        below the call's line (a subagent's: below its line, labelled with it), answered
        by a click on an option or a typed answer, or no answer after ``timeout``."""

        async def ask(question: Question) -> Answer:
            card = QuestionCard(question, pending=self.pending)
            async with self._waiting_on(card, question.call_id):
                return await card.answer(timeout)

        return ask

    @contextlib.asynccontextmanager
    async def _waiting_on(self, card: Card, call_id: str) -> AsyncIterator[None]:
        """Show ``card`` right below the line of call ``call_id`` (its own, or the line of
        the subagent making it), the activity open, the run ``waiting`` while it waits."""
        self.cards.append(card)
        own = self._tool_lines.get(call_id)
        self._insert_after(own.widget if own is not None else self._asking.get(call_id), card)
        if not self.expanded:
            self.set_expanded(True)
        previous, self.state = self.state, "waiting" if self.live else self.state
        self.mark("header")
        try:
            yield
        finally:
            if self.state == "waiting":
                self.state = previous if previous != "waiting" else "running"
            self.mark("header")
