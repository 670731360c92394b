"""Approval cards: a tool call, the reason, Approve / Deny buttons.

The buttons resolve an asyncio future and do nothing else (their callbacks run in the
context of the click's comm message, not the cell). The awaiting task then records the
decision on the card. A card that nobody answers denies the call after ``timeout``.
"""

from __future__ import annotations

import asyncio
import html
import json

import ipywidgets as widgets

from ..core import ToolCall
from ..engine import Approved, Denied
from .live import PlainTextBox

RISK_COLOURS = {"high": "#c62828", "medium": "#ef6c00", "low": "#2e7d32"}


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
        self.status = widgets.HTML("")
        self._future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.approve_button.on_click(lambda _b: self._resolve(True))
        self.deny_button.on_click(lambda _b: self._resolve(False))
        super().__init__([self.summary, widgets.HBox([self.approve_button, self.deny_button, self.status])])

    def _resolve(self, approved: bool) -> None:
        if not self._future.done():
            self._future.set_result(approved)

    async def decision(self, timeout: float | None) -> Approved | Denied:
        """Wait for a click (or ``timeout`` seconds, then Denied) and show the outcome."""
        try:
            async with asyncio.timeout(timeout):
                approved = await self._future
            answer: Approved | Denied = Approved() if approved else Denied("denied by the person")
        except TimeoutError:
            answer = Denied(f"nobody answered within {timeout:g} s: denied")
        except asyncio.CancelledError:
            self.settle("interrupted")
            raise
        self.settle("approved" if isinstance(answer, Approved) else answer.feedback)
        return answer

    def settle(self, text: str) -> None:
        """Disable the buttons and show what was decided."""
        self.approve_button.disabled = self.deny_button.disabled = True
        self.status.value = f"<i>{html.escape(text)}</i>"

    def plain_text(self) -> str:
        """``approval: <call> (<reason>)``: the card's ``text/plain`` form."""
        return f"approval: {self.call.brief(80)} ({self.reason})"
