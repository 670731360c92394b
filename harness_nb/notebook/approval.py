"""Approval cards: a tool call, the reason, Approve / Approve for this session / Deny, and
a box for the person's reason.

The buttons resolve an asyncio future and do nothing else (their callbacks run in the
context of the click's comm message, not the cell). The awaiting task then records the
decision on the card. A card that nobody answers denies the call after ``timeout``.
"Approve for this session" answers ``Approved(remember=rule)`` with the rule shown beside
it (``engine.session_rule``: this exact command or path, or the tool's name); the harness
keeps it, so the same call runs without a card for the rest of its life.

Deny answers ``Denied.by_the_person(reason)`` with what was typed into the reason box
beside it (optional; the model reads it verbatim in the tool result, cleaned and bounded
by ``engine.person_reason``). Enter in the box denies too: a reason is only ever asked for
a denial, and denying is the safe direction for a stray key. The card then reads
"Denied by you: <reason>".
"""

from __future__ import annotations

import asyncio
import html
import json

import ipywidgets as widgets

from ..core import ToolCall
from ..engine import Approved, Denied, session_rule
from .live import PlainTextBox

RISK_COLOURS = {"high": "#c62828", "medium": "#ef6c00", "low": "#2e7d32"}
REASON_PLACEHOLDER = "Reason (optional) — tells the agent why"


def _arguments(call: ToolCall) -> str:
    try:
        return json.dumps(call.parsed_arguments(), indent=2, ensure_ascii=False)[:2000]
    except ValueError:
        return call.arguments[:2000]


class ApprovalCard(PlainTextBox):
    """One pending approval: shows the call and waits for a click."""

    def __init__(self, call: ToolCall, reason: str, risk: str) -> None:
        self.call = call
        self.reason = reason
        self.risk = risk
        colour = RISK_COLOURS.get(risk, "#555")
        self.summary = widgets.HTML(
            f'<div style="border-left:4px solid {colour};padding-left:8px">'
            f"<b>Approve {html.escape(call.name)}?</b> "
            f'<span style="color:{colour}">{html.escape(reason)} · risk {html.escape(risk)}</span>'
            f"<pre style='margin:4px 0'>{html.escape(_arguments(call))}</pre></div>"
        )
        self.approve_button = widgets.Button(description="Approve", button_style="success", icon="check")
        self.deny_button = widgets.Button(description="Deny", button_style="danger", icon="times")
        self.rule = session_rule(call)
        self.session_button = widgets.Button(
            description="Approve for this session",
            icon="check-double",
            tooltip=f"Approve, and allow {self.rule} until the kernel stops" if self.rule else "",
            layout=widgets.Layout(width="auto"),
            disabled=self.rule is None,
        )
        self.session_rule_text = widgets.HTML(
            f"<code style='white-space:pre-wrap'>{html.escape(str(self.rule)[:2000])}</code>" if self.rule else ""
        )
        self.reason_box = widgets.Text(
            placeholder=REASON_PLACEHOLDER,
            layout=widgets.Layout(width="22em"),
        )
        self.status = widgets.HTML("")
        self._future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.approve_button.on_click(lambda _b: self._resolve("approve"))
        self.session_button.on_click(lambda _b: self._resolve("session"))
        self.deny_button.on_click(lambda _b: self._resolve("deny"))
        self.reason_box.on_msg(self._on_reason_message)
        # Deny and its reason box wrap onto the next line together, never apart
        deny = widgets.HBox([self.deny_button, self.reason_box])
        buttons = [self.approve_button, self.session_button, self.session_rule_text, deny, self.status]
        super().__init__([self.summary, widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap"))])

    def _on_reason_message(self, _box: widgets.Widget, content: dict[str, object], _buffers: object) -> None:
        """Enter in the reason box (the frontend's ``submit`` event) denies."""
        if isinstance(content, dict) and content.get("event") == "submit":
            self._resolve("deny")

    def _resolve(self, choice: str) -> None:
        if not self._future.done():
            self._future.set_result(choice)

    async def decision(self, timeout: float | None) -> Approved | Denied:
        """Wait for a click (or ``timeout`` seconds, then Denied) and show the outcome."""
        try:
            async with asyncio.timeout(timeout):
                choice = await self._future
            answer: Approved | Denied = (
                Approved(remember=self.rule)
                if choice == "session"
                else Approved() if choice == "approve" else Denied.by_the_person(self.reason_box.value)
            )
        except TimeoutError:
            answer = Denied(f"nobody answered within {timeout:g} s: denied")
        except asyncio.CancelledError:
            self.settle("interrupted")
            raise
        if isinstance(answer, Approved):
            self.settle(f"approved for this session: {answer.remember}" if answer.remember else "approved")
        elif answer.by_person:
            self.settle(f"Denied by you: {answer.feedback}" if answer.feedback else "Denied by you")
        else:
            self.settle(answer.feedback)
        return answer

    def settle(self, text: str) -> None:
        """Disable the buttons and the reason box and show what was decided."""
        self.approve_button.disabled = self.deny_button.disabled = self.session_button.disabled = True
        self.reason_box.disabled = True
        self.status.value = f"<i>{html.escape(text)}</i>"

    def plain_text(self) -> str:
        """``approval: <call> (<reason>)``: the card's ``text/plain`` form."""
        return f"approval: {self.call.brief(80)} ({self.reason})"
