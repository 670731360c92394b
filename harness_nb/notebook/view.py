"""``RunView``: the live widget of one agent run in one cell.

    header        agent · model · state · tokens · turns · elapsed · cost · context gauge
    stream        the current answer, rendered as Markdown while it streams
    activity      narration, tool calls (arguments, result preview, what they displayed:
                  a DataFrame's HTML, a figure), one line per subagent
    approvals     Approve / Deny cards
    completions   background results posted later into this cell

Updates are coalesced: events only mark parts dirty; at most ``rate`` refreshes a second
push them to the frontend, so a fast stream cannot flood the browser. The ``text/plain``
form is stable (what nbval compares and what a non-widget frontend shows).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets

from ..core import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetWarning,
    Compacted,
    CompactionStarted,
    ContextMeasured,
    Event,
    MessagesInjected,
    RunFailed,
    RunFinished,
    SubagentUpdate,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    Usage,
)
from ..core.secret import SECRETS
from ..core.usage import plural
from ..engine import ApprovalChannel, Approved, Denied, stop_label
from ..textview import preview
from .approval import ApprovalCard
from .live import LiveBox, Scheduler
from .reply import MarkdownText

STATE_ICONS = {
    "running": "⏳",
    "done": "✓",
    "failed": "✗",
    "interrupted": "■",
    "waiting": "⏸",
    "stopped": "⚠",  # ended early: a limit, an answer cut at max_tokens (engine.EARLY_STOPS)
}


def state_icon(state: str) -> str:
    """The icon of ``state``; ``stopped: max_turns`` has the icon of ``stopped``."""
    return STATE_ICONS.get(state.partition(":")[0], "")


def limit_state(stop_reason: str) -> str | None:
    """``stopped: <reason>`` when a run ended early (``engine.stop_label``), else None."""
    label = stop_label(stop_reason)
    return None if label == "done" else label


# Claude Code's agent colours, as CSS; an agent file's ``color`` is one of these or #rrggbb.
AGENT_COLORS = {
    "red": "#c62828",
    "orange": "#ef6c00",
    "yellow": "#f9a825",
    "green": "#2e7d32",
    "cyan": "#00838f",
    "blue": "#1565c0",
    "purple": "#6a1b9a",
    "magenta": "#ad1457",
    "pink": "#d81b60",
    "gray": "#616161",
    "grey": "#616161",
    "white": "#9e9e9e",  # white on a white notebook would hide the name
}
_HEX_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}){1,2}$")


def css_color(color: str | None) -> str | None:
    """The CSS colour for an agent file's ``color`` (a Claude Code colour name or
    ``#rrggbb``), ``None`` for anything else: the value comes from a file and goes into a
    ``style`` attribute, so only these forms ever reach it."""
    if not color:
        return None
    text = color.strip()
    return AGENT_COLORS.get(text.lower()) or (text if _HEX_COLOR.match(text) else None)


def _name_html(name: str, color: str | None) -> str:
    style = f" style='color:{color}'" if color else ""
    return f"<b{style}>{html.escape(name)}</b>"


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


@dataclass
class _SubLine:
    """Progress of one subagent (one task id), drawn as one line."""

    agent: str
    description: str
    widget: widgets.HTML
    started: float
    tools: int = 0
    last: str = "starting"
    state: str = "running"
    usage: Usage = field(default_factory=Usage)
    color: str | None = None  # CSS, from the agent's ``color`` (``css_color``)

    def render(self, now: float) -> str:
        icon = state_icon(self.state)
        title = f" — {html.escape(self.description)}" if self.description else ""
        cost = self.usage.cost_label()
        return (
            f"<code>{icon} {_name_html(self.agent, self.color)}{title} · {html.escape(SECRETS.scrub(self.last))} · "
            f"{plural(self.tools, 'tool')} · {self.usage.tokens_label()} · {now - self.started:.1f} s"
            f"{' · ' + html.escape(cost) if cost else ''}</code>"
        )


class RunView(LiveBox):
    """The widget of one run. Feed it events with ``view(event)``. ``color_of`` gives an
    agent's ``color`` by name: its subagents' progress lines (and its own name, for a
    subagent's run) are drawn in it."""

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
    ) -> None:
        self.agent = agent
        self.color_of = color_of or (lambda _agent: None)
        self.model = model
        self.title = title
        self.own_task = own_task
        self.describe_task = describe_task or (lambda _tid: "")
        self.state = "running"
        self.usage = Usage()
        self.header = widgets.HTML()
        self.stream = widgets.Output()
        self.activity = widgets.VBox()
        self.approvals = widgets.VBox()
        self.completions = widgets.Output()
        self._text = ""
        self._shown_text = ""
        self._tool_lines: dict[str, tuple[widgets.HTML, ToolCall]] = {}
        self._subs: dict[str, _SubLine] = {}
        self._limit_stop: str | None = None
        self.context: ContextMeasured | None = None  # the gauge: how full the next request is
        children = [self.header, self.stream, self.activity, self.approvals, self.completions]
        super().__init__(children, rate=rate, scheduler=scheduler)
        self.started = self.now()
        self._render_header()

    # ------------------------------------------------------------------ text forms
    def plain_text(self) -> str:
        """Stable one-line description (no timings): what nbval compares."""
        label = f" · {self.title}" if self.title else ""
        return f"agent run: {self.agent} · {self.model}{label}"

    def set_title(self, title: str) -> None:
        self.title = title
        self._dirty.add("header")
        self.flush()

    # ------------------------------------------------------------------ events
    def __call__(self, event: Event) -> None:
        if isinstance(event, SubagentUpdate) and event.task_id != self.own_task:
            self._on_subagent(event)
            return
        if isinstance(event, SubagentUpdate):
            event = event.event
        if isinstance(event, TextDelta):
            self._text += event.text
            self.mark("stream")
        elif isinstance(event, ToolCallStarted):
            self._freeze_narration()
            line = widgets.HTML(self._tool_html(event.call, None, False))
            self._tool_lines[event.call.id] = (line, event.call)
            self.activity.children = (*self.activity.children, line)
        elif isinstance(event, ToolCallFinished):
            entry = self._tool_lines.get(event.call.id)
            if entry is not None:
                entry[0].value = self._tool_html(event.call, event.result, event.is_error)
            self._show_outputs(event, entry[0] if entry is not None else None)
        elif isinstance(event, TurnFinished):
            self.usage = event.usage
            self.mark("header")
        elif isinstance(event, ContextMeasured):
            self.context = event
            self.mark("header")
        elif isinstance(event, CompactionStarted | Compacted):
            self._freeze_narration()
            self._add_note(f"⇣ {event.describe()}")
        elif isinstance(event, MessagesInjected):
            for text in event.texts:
                self._add_note(f"⇢ {preview(text, 140)}")
        elif isinstance(event, BudgetWarning):
            self._add_note(f"⚠ budget: {event.text()}")
        elif isinstance(event, RunFinished):
            self.usage = event.usage
            self._limit_stop = limit_state(event.stop_reason)
            self.mark("header")
        elif isinstance(event, RunFailed):
            self.usage = event.usage
            self.mark("header")

    def _on_subagent(self, update: SubagentUpdate) -> None:
        inner = update.event
        sub = self._subs.get(update.task_id)
        if sub is None:
            sub = _SubLine(
                update.agent,
                self.describe_task(update.task_id),
                widgets.HTML(),
                started=self.now(),
                color=css_color(self.color_of(update.agent)),
            )
            self._subs[update.task_id] = sub
            self._freeze_narration()
            self.activity.children = (*self.activity.children, sub.widget)
        if isinstance(inner, ToolCallStarted):
            sub.tools += 1
            sub.last = inner.call.brief(50)
        elif isinstance(inner, ApprovalRequested):
            sub.last = f"waiting for approval: {inner.call.name}"
            sub.state = "waiting"
        elif isinstance(inner, ApprovalDecided):
            sub.state = "running"
            verdict = "approved" if inner.approved else "denied by you" if inner.by_person else "denied"
            sub.last = f"{inner.call.name} {verdict}"
        elif isinstance(inner, TurnFinished):
            sub.usage = inner.usage
        elif isinstance(inner, Compacted):
            sub.last = inner.describe()
        elif isinstance(inner, BudgetWarning):
            sub.last = f"⚠ budget: {inner.text()}"
        elif isinstance(inner, RunFinished):
            stopped = limit_state(inner.stop_reason)
            sub.state, sub.last, sub.usage = stopped or "done", stopped or "finished", inner.usage
        elif isinstance(inner, RunFailed):
            sub.state = "interrupted" if inner.interrupted else "failed"
            sub.last = "interrupted" if inner.interrupted else preview(inner.error, 60)
        else:
            return
        self.mark(f"sub:{update.task_id}")

    # ------------------------------------------------------------------ rendering
    def _tool_html(self, call: ToolCall, result: str | None, is_error: bool) -> str:
        head = html.escape(SECRETS.scrub(call.brief(100)))
        if result is None:
            return f"<code>→ {head}</code> <i>running…</i>"
        result = SECRETS.scrub(result)
        mark = "✗" if is_error else "✓"
        colour = "#c62828" if is_error else "#2e7d32"
        return (
            f"<details><summary><code>→ {head}</code> <span style='color:{colour}'>{mark}</span> "
            f"<code>{html.escape(preview(result, 90))}</code></summary>"
            f"<pre style='max-height:16em;overflow:auto'>{html.escape(result[:4000])}</pre></details>"
        )

    def _render_header(self) -> None:
        icon = state_icon(self.state)
        elapsed = self.now() - self.started
        title = f" — {html.escape(self.title)}" if self.title else ""
        gauge = f" · {html.escape(self.context.label())}" if self.context is not None else ""
        cost = f" · {html.escape(label)}" if (label := self.usage.cost_label()) else ""
        color = css_color(self.color_of(self.agent))
        agent = f"<span style='color:{color}'>{html.escape(self.agent)}</span>" if color else html.escape(self.agent)
        self.header.value = (
            f"<b>{icon} {agent}</b>{title} · <code>{html.escape(self.model)}</code> · "
            f"{html.escape(self.state)} · {self.usage.tokens_label()} · {plural(self.usage.turns, 'turn')} · "
            f"{elapsed:.1f} s{cost}{gauge}"
        )

    def _show_outputs(self, event: ToolCallFinished, line: widgets.Widget | None) -> None:
        """What the tool displayed (a DataFrame's HTML, a figure), or else the images of its
        result, in an Output right below its line in the activity log."""
        outputs = tool_outputs(event)
        if not outputs:
            return
        out = widgets.Output()
        out.outputs = outputs
        children = list(self.activity.children)
        at = children.index(line) + 1 if line in children else len(children)
        self.activity.children = (*children[:at], out, *children[at:])

    def _add_note(self, text: str) -> None:
        note = widgets.HTML(f"<i>{html.escape(SECRETS.scrub(text))}</i>")
        self.activity.children = (*self.activity.children, note)

    def _freeze_narration(self) -> None:
        """Text streamed before a tool call becomes a line in the activity log."""
        text = self._text.strip()
        if text:
            out = widgets.Output()
            out.outputs = _markdown_output(text)
            self.activity.children = (*self.activity.children, out)
        self._text = ""
        self.mark("stream")

    def render(self, dirty: set[str]) -> None:
        if "stream" in dirty and self._text != self._shown_text:
            self.stream.outputs = _markdown_output(self._text)
            self._shown_text = self._text
        if "header" in dirty:
            self._render_header()
        now = self.now()
        for part in dirty:
            if part.startswith("sub:"):
                sub = self._subs.get(part[4:])
                if sub is not None:
                    sub.widget.value = sub.render(now)

    # ------------------------------------------------------------------ outcomes
    def finish(self, state: str) -> None:
        """Mark the run done / failed / interrupted and clear the streamed answer (the magic
        returns it as the cell's value instead). A run whose own ``RunFinished`` said it
        stopped on a limit stays ``stopped: <limit>`` when told it is done."""
        self.state = self._limit_stop if state == "done" and self._limit_stop else state
        self._text = ""
        self._dirty.update({"stream", "header"})
        self.flush()

    def post_completion(self, markdown: str, *, usage: Usage | None = None) -> None:
        """Append a background result to this cell (from the task that finished). ``usage``
        is the launching run's usage now that the task has billed it: the header shows it."""
        self.completions.append_display_data(MarkdownText(SECRETS.scrub(markdown)))
        if usage is not None:
            self.usage = usage
            self.mark("header")

    def approval_channel(self, *, timeout: float | None, unattended: str | None) -> ApprovalChannel:
        """An approval channel that asks in this view. With ``unattended`` set ('deny' or
        'approve'), nobody can click: decide at once and say so."""

        async def ask(call: ToolCall, reason: str, risk: str) -> Approved | Denied:
            if unattended is not None:
                answer: Approved | Denied = (
                    Approved() if unattended == "approve" else Denied("no one can answer here (unattended run): denied")
                )
                verdict = "approved" if isinstance(answer, Approved) else "denied"
                self._add_note(f"approval for {call.brief(60)} ({reason}): {verdict} automatically (unattended run)")
                return answer
            card = ApprovalCard(call, reason, risk)
            self.approvals.children = (*self.approvals.children, card)
            previous, self.state = self.state, "waiting"
            self.mark("header")
            try:
                return await card.decision(timeout)
            finally:
                self.state = previous if previous != "waiting" else "running"
                self.mark("header")

        return ask
