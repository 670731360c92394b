"""``TeamView``: the live roster of the teams — a table of teammates, one collapsible area
per teammate with its activity and a text box to message it, and the team's messages.

One view per kernel; ``%team`` displays it (several displays of one widget stay in sync).
A view made after teammates have worked fills each area from what the tracker logged of
them and the team's message log, so it never says "no activity yet" beside a teammate that
has answered. Messages read in words ("alice reported: …", "alice → bob: …"), each answer
once. Updates are coalesced like a run view's. Its ``text/plain`` form is the roster table
and the recent messages as they were when it was displayed.
"""

from __future__ import annotations

import asyncio
import html
from collections import deque
from collections.abc import Iterable
from typing import Any

import ipywidgets as widgets

from ...core import Event, RunFinished, ToolCallStarted
from ...core.usage import plural
from ...team import Message, RosterMember, TeamManager
from ...team.mailbox import TEAM_LEAD
from ...textview import preview
from .live import LiveBox, Scheduler
from .theme import STATE_COLORS, STYLE, table

# Accordion titles are plain text: glyphs from basic fonts, no emoji
STATE_MARKS = {"working": "◐", "idle": "○", "exited": "■"}
_STATE_COLORS = {"working": STATE_COLORS["running"], "idle": STATE_COLORS["done"], "exited": STATE_COLORS["interrupted"]}


def roster_table(members: list[RosterMember]) -> str:
    """The roster as aligned plain text."""
    if not members:
        return "no teammates yet"
    head = ("name", "team", "agent", "state", "tokens", "last message")
    rows = [head] + [
        # the column head already says "tokens": "1,565", or "usage not reported"
        (m.name, m.team, m.agent, m.state, m.usage.tokens_label().removesuffix(" tokens"), preview(m.last_message, 60))
        for m in members
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows
    ).rstrip()


def message_line(message: Message) -> str:
    """A message in the ``text/plain`` log (kept stable: nbval compares it)."""
    to = f" → {message.to}" if message.to else ""
    kind = "" if message.kind == "message" else f" [{message.kind}]"
    return f"{message.sender}{to}{kind}: {preview(message.text, 100)}"


def message_words(message: Message) -> str:
    """A message as the person reads it: ``alice reported: …`` for the answer that ends a
    turn, ``team-lead → alice: …`` for a message."""
    text = preview(message.text, 100)
    if message.kind == "idle_notification":
        return f"{message.sender} reported: {text}"
    if message.kind == "shutdown_request":
        return f"{message.sender} asked {message.to} to shut down"
    if message.kind == "shutdown_response":
        return f"{message.sender} shut down"
    return f"{message.sender} → {message.to}: {text}" if message.to else f"{message.sender}: {text}"


class _MemberPanel:
    """The collapsible area of one teammate."""

    def __init__(self, view: TeamView, name: str) -> None:
        self.name = name
        self.log: deque[str] = deque(maxlen=40)
        self.activity = widgets.HTML()
        self.box = widgets.Text(placeholder=f"message {name}…", layout=widgets.Layout(width="70%"))
        self.send = widgets.Button(description="Send", icon="paper-plane")
        self.status = widgets.HTML()
        self.send.on_click(lambda _b: view.send_from_box(self))
        self.box.on_msg(lambda _box, content, _buffers: self._on_box_message(view, content))
        self.widget = widgets.VBox([self.activity, widgets.HBox([self.box, self.send, self.status])])

    def _on_box_message(self, view: TeamView, content: dict[str, Any]) -> None:
        # Enter in the box arrives as a "submit" message (Text.on_submit is deprecated)
        if content.get("event") == "submit":
            view.send_from_box(self)

    def backfill(self, progress: Iterable[str], messages: list[Message]) -> None:
        """What the teammate did before the view existed, in order: its task's progress log
        (tool calls; each "working" line is the next message it received, each "idle" line
        the next answer it gave) with those messages' text in full."""
        received = iter([m for m in messages if m.to == self.name])
        answers = iter([m for m in messages if m.sender == self.name and m.kind == "idle_notification"])
        for line in progress:
            if line.startswith("working: "):
                got = next(received, None)
                self.log.append(f"← {got.sender}: {preview(got.text, 100)}" if got else f"← {line[9:]}")
            elif line.startswith("idle: "):
                answer = next(answers, None)
                self.log.append(f"✓ {preview(answer.text, 100) if answer else line[6:]}")
            elif not line.startswith(("turn ", "finished (")):
                self.log.append(f"→ {line}")

    def render(self) -> str:
        lines = "".join(f"<div>{html.escape(line)}</div>" for line in self.log)
        return f"<div class='hnb' style='font-family:monospace;font-size:90%'>{lines or '<i>no activity yet</i>'}</div>"


class TeamView(LiveBox):
    """The live team view over a ``TeamManager``."""

    def __init__(self, manager: TeamManager, *, rate: float = 8.0, scheduler: Scheduler | None = None) -> None:
        self.manager = manager
        self.header = widgets.HTML()
        self.roster = widgets.HTML()
        self.members = widgets.Accordion()
        self.messages = widgets.HTML()
        self._panels: dict[str, _MemberPanel] = {}
        self._log: deque[str] = deque(maxlen=30)  # the text/plain form's lines
        self._words: deque[str] = deque(maxlen=30)  # the same messages as the person reads them
        self._sending: set[asyncio.Task[Any]] = set()
        children = [widgets.HTML(STYLE), self.header, self.roster, self.members, widgets.HTML("<b>messages</b>"), self.messages]
        super().__init__(children, rate=rate, scheduler=scheduler)
        self.add_class("hnb")
        logged = list(manager.message_log)
        for message in logged[-30:]:
            self._log.append(message_line(message))
            self._words.append(message_words(message))
        for member in manager.roster():
            entry = manager.tracker.find(member.task_id)
            self._panel(member.name).backfill(entry.log if entry is not None else (), logged)
        manager.on_message.append(self._on_message)
        manager.on_event.append(self._on_event)
        self.flush()

    # ------------------------------------------------------------------ text forms
    def plain_text(self) -> str:
        log = "\n".join(self._log) or "(no messages yet)"
        return f"team view\n{roster_table(self.manager.roster())}\nmessages:\n{log}"

    # ------------------------------------------------------------------ events
    def _on_message(self, message: Message) -> None:
        self._log.append(message_line(message))
        self._words.append(message_words(message))
        sender = self._panels.get(message.sender)
        if message.to and message.to != TEAM_LEAD:
            self._panel(message.to).log.append(f"← {message.sender}: {preview(message.text, 100)}")
        if sender is not None and message.kind == "message":
            # an answer that ends a turn is already the panel's ✓ line: listed once
            sender.log.append(f"→ {message.to}: {preview(message.text, 100)}")
        self.mark()

    def _on_event(self, name: str, event: Event) -> None:
        panel = self._panel(name)
        if isinstance(event, ToolCallStarted):
            panel.log.append(f"→ {event.call.brief(80)}")
        elif isinstance(event, RunFinished):
            panel.log.append(f"✓ {preview(event.final_text, 100)}")
        else:
            return
        panel.status.value = ""  # "delivered to …" is stale once the teammate acts on it
        self.mark()

    def note_sent(self, to: str, text: str) -> None:
        """A message the person sent (``%team send`` or the text box): the manager's log
        already carries it to the view; this only refreshes."""
        self.mark()

    def send_from_box(self, panel: _MemberPanel) -> None:
        """The Send button: only schedule the delivery (the callback runs in the click's
        context, not a cell's)."""
        text = panel.box.value.strip()
        if not text:
            return
        panel.box.value = ""
        task = asyncio.get_running_loop().create_task(self._deliver(panel, text), name=f"team-send:{panel.name}")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _deliver(self, panel: _MemberPanel, text: str) -> None:
        try:
            receipt = await self.manager.send(panel.name, text)
        except Exception as exc:  # shown in the panel; the person can correct and resend
            panel.status.value = f"<span style='color:{STATE_COLORS['failed']}'>{html.escape(str(exc))}</span>"
            return
        panel.status.value = f"<i>{html.escape(receipt)}</i>"
        self.mark()

    # ------------------------------------------------------------------ rendering
    def _panel(self, name: str) -> _MemberPanel:
        panel = self._panels.get(name)
        if panel is None:
            panel = self._panels[name] = _MemberPanel(self, name)
            self.members.children = (*self.members.children, panel.widget)
        return panel

    def render(self, dirty: set[str]) -> None:
        """Push the current roster, panels and message log to the frontend."""
        roster = self.manager.roster()
        for member in roster:
            self._panel(member.name)
        rows = []
        for index, member in enumerate(roster):
            usage = member.usage.tokens_label() + (f" · {cost}" if (cost := member.usage.cost_label()) else "")
            mark = STATE_MARKS.get(member.state, "")
            title = f"{mark} {member.name} ({member.agent}, {member.team}) · {member.state} · {usage}"
            if self.members.get_title(index) != title:
                self.members.set_title(index, title)
            panel = self._panels[member.name]
            rendered = panel.render()
            if panel.activity.value != rendered:
                panel.activity.value = rendered
            colour = _STATE_COLORS.get(member.state, "inherit")
            rows.append(
                [
                    f"<b>{html.escape(member.name)}</b>",
                    html.escape(member.team),
                    html.escape(member.agent),
                    f"<span style='color:{colour};font-weight:600'>{mark} {html.escape(member.state)}</span>",
                    f"<span style='white-space:nowrap'>{html.escape(usage)}</span>",
                    html.escape(preview(member.last_message, 80)),
                ]
            )
        teams = sorted({m.team for m in roster}) or ["default"]
        self.header.value = f"<b>team view</b> · teams: {html.escape(', '.join(teams))} · {plural(len(roster), 'teammate')}"
        self.roster.value = table(["name", "team", "agent", "state", "usage", "last message"], rows) if rows else ""
        log = "".join(f"<div>{html.escape(line)}</div>" for line in self._words)
        self.messages.value = f"<div style='font-family:monospace;font-size:90%'>{log or '<i>no messages yet</i>'}</div>"

    def close(self) -> None:
        if self._on_message in self.manager.on_message:
            self.manager.on_message.remove(self._on_message)
        if self._on_event in self.manager.on_event:
            self.manager.on_event.remove(self._on_event)
        super().close()
