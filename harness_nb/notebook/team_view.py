"""``TeamView``: the live roster of the teams — one collapsible area per teammate with its
recent activity and a text box to message it, and the team's message log.

One view per kernel; ``%team`` displays it (several displays of one widget stay in sync).
Updates are coalesced like a run view's. Its ``text/plain`` form is the roster table and
the recent messages as they were when it was displayed.
"""

from __future__ import annotations

import asyncio
import html
from collections import deque
from typing import Any

import ipywidgets as widgets

from ..core import Event, RunFinished, TextDelta, ToolCallStarted
from ..team import Message, RosterMember, TeamManager
from ..textview import preview
from .live import LiveBox, Scheduler

STATE_ICONS = {"working": "⏳", "idle": "💤", "exited": "■"}


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
    to = f" → {message.to}" if message.to else ""
    kind = "" if message.kind == "message" else f" [{message.kind}]"
    return f"{message.sender}{to}{kind}: {preview(message.text, 100)}"


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

    def render(self) -> str:
        lines = "".join(f"<div>{html.escape(line)}</div>" for line in self.log)
        return f"<div style='font-family:monospace;font-size:90%'>{lines or '<i>no activity yet</i>'}</div>"


class TeamView(LiveBox):
    """The live team view over a ``TeamManager``."""

    def __init__(self, manager: TeamManager, *, rate: float = 8.0, scheduler: Scheduler | None = None) -> None:
        self.manager = manager
        self.header = widgets.HTML()
        self.members = widgets.Accordion()
        self.messages = widgets.HTML()
        self._panels: dict[str, _MemberPanel] = {}
        self._log: deque[str] = deque(maxlen=30)
        self._sending: set[asyncio.Task[Any]] = set()
        children = [self.header, self.members, widgets.HTML("<b>messages</b>"), self.messages]
        super().__init__(children, rate=rate, scheduler=scheduler)
        for message in list(manager.message_log)[-30:]:
            self._log.append(message_line(message))
        manager.on_leader_message.append(self._on_leader_message)
        manager.on_event.append(self._on_event)
        self.flush()

    # ------------------------------------------------------------------ text forms
    def plain_text(self) -> str:
        log = "\n".join(self._log) or "(no messages yet)"
        return f"team view\n{roster_table(self.manager.roster())}\nmessages:\n{log}"

    # ------------------------------------------------------------------ events
    def _on_leader_message(self, message: Message) -> None:
        self._log.append(message_line(message))
        panel = self._panels.get(message.sender)
        if panel is not None:
            panel.log.append(f"→ team-lead: {preview(message.text, 100)}")
        self.mark()

    def _on_event(self, name: str, event: Event) -> None:
        panel = self._panel(name)
        if isinstance(event, ToolCallStarted):
            panel.log.append(f"→ {event.call.brief(80)}")
        elif isinstance(event, RunFinished):
            panel.log.append(f"✓ {preview(event.final_text, 100)}")
        elif isinstance(event, TextDelta):
            return
        self.mark()

    def note_sent(self, to: str, text: str) -> None:
        """Record a message the person sent (from ``%team send`` or the text box)."""
        self._log.append(f"team-lead → {to}: {preview(text, 100)}")
        self._panel(to).log.append(f"← team-lead: {preview(text, 100)}")
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
            panel.status.value = f"<span style='color:#c62828'>{html.escape(str(exc))}</span>"
            return
        panel.status.value = f"<i>{html.escape(receipt)}</i>"
        self.note_sent(panel.name, text)

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
        for index, member in enumerate(roster):
            icon = STATE_ICONS.get(member.state, "")
            usage = member.usage.tokens_label() + (f" · {cost}" if (cost := member.usage.cost_label()) else "")
            title = f"{icon} {member.name} ({member.agent}, {member.team}) · {member.state} · {usage}"
            if self.members.get_title(index) != title:
                self.members.set_title(index, title)
            panel = self._panels[member.name]
            rendered = panel.render()
            if panel.activity.value != rendered:
                panel.activity.value = rendered
        teams = sorted({m.team for m in roster}) or ["default"]
        self.header.value = f"<b>team view</b> · teams: {html.escape(', '.join(teams))} · {len(roster)} teammates"
        log = "".join(f"<div>{html.escape(line)}</div>" for line in self._log)
        self.messages.value = f"<div style='font-family:monospace;font-size:90%'>{log or '<i>no messages yet</i>'}</div>"

    def close(self) -> None:
        if self._on_leader_message in self.manager.on_leader_message:
            self.manager.on_leader_message.remove(self._on_leader_message)
        if self._on_event in self.manager.on_event:
            self.manager.on_event.remove(self._on_event)
        super().close()
