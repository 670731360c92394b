"""``EffectsLine``: what one call did to the workdir, right under its tool line.

    ⟲ changed 2 files · deleted data/ (3 files) · [undo]
    ⚠ the command wrote .mcp.json, which only you may change: reverted

The ``undo`` button puts back that call's paths (``Harness.undo``) where they are still as
the call left them, then the line says what it did or which paths it left alone. The
button stays while the run view is the kernel's latest (``retire`` takes it away when the
next run starts: ``%agent --undo N`` still works); the static copy shows the line with its
checkpoint number instead of the button.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable

import ipywidgets as widgets

from ...core import EffectsRecorded
from ...core.secret import SECRETS
from .theme import STATE_COLORS

Undo = Callable[[int], "asyncio.Task[tuple[bool, str]]"]
"""Starts undoing checkpoint N; the task's result: (done, what it says)."""


class EffectsLine:
    """The effects of one call (an ``EffectsRecorded`` event), with an undo button when
    ``undo`` is given and the call left a checkpoint. ``on_change`` is told when the line
    changes after it was drawn (an undo finished)."""

    def __init__(
        self, event: EffectsRecorded, *, undo: Undo | None = None, on_change: Callable[[], None] = lambda: None
    ) -> None:
        self.event = event
        self.undo = undo
        self.on_change = on_change
        self.outcome = ""  # what the undo did, once it ran
        self.outcome_ok = True
        self.text = widgets.HTML(self.html())
        self.button = widgets.Button(
            description="undo",
            tooltip=f"put back what this call changed (checkpoint #{event.checkpoint})",
            layout=widgets.Layout(width="auto", height="1.7em"),
        )
        self.button.on_click(lambda _b: self._clicked())
        self.offered = undo is not None and event.checkpoint is not None
        self.widget = widgets.HBox([self.text, self.button] if self.offered else [self.text])
        self.widget.add_class("hnb-effects")
        self._task: asyncio.Task[tuple[bool, str]] | None = None

    def html(self, *, live: bool = True) -> str:
        """The line as HTML; ``live=False``: for the static copy (the checkpoint number
        where the button was)."""
        e = self.event
        lines = []
        if e.line:
            head = f"⟲ {html.escape(SECRETS.scrub(e.line))}"
            notes = []
            if e.overlapped:
                notes.append(f"while {', '.join(e.overlapped)} also ran")
            if e.lost:
                notes.append(f"cannot be undone: {', '.join(e.lost)}")
            if e.partial:
                notes.append(e.partial)
            if notes:
                head += f" <span class='hnb-muted'>({html.escape(SECRETS.scrub('; '.join(notes)))})</span>"
            if self.outcome:
                colour = STATE_COLORS["done" if self.outcome_ok else "failed"]
                head += f" · <span style='color:{colour}'>{html.escape(SECRETS.scrub(self.outcome))}</span>"
            elif not live and e.checkpoint is not None:
                head += f" · checkpoint #{e.checkpoint}"
            lines.append(head)
        if e.reverted:
            colour = STATE_COLORS["waiting"]
            lines.append(f"<span style='color:{colour}'>⚠ {html.escape(SECRETS.scrub(e.reverted))}</span>")
        if e.problem:
            colour = STATE_COLORS["failed"]
            lines.append(f"<span style='color:{colour}'>⚠ no checkpoint: {html.escape(e.problem)}</span>")
        return "<br>".join(f"<code>{line}</code>" for line in lines)

    def static_html(self) -> str:
        return self.html(live=False)

    def retire(self) -> None:
        """Take the button away (a newer run is the one to undo from now)."""
        if self.offered:
            self.offered = False
            self.widget.children = (self.text,)
            self.text.value = self.html(live=False)

    def _clicked(self) -> None:
        if not self.offered or self.undo is None or self.event.checkpoint is None or self._task is not None:
            return
        self.button.disabled = True
        self.button.description = "undoing…"
        self._task = self.undo(self.event.checkpoint)
        self._task.add_done_callback(self._undone)

    def _undone(self, task: asyncio.Task[tuple[bool, str]]) -> None:
        if task.cancelled():
            self.outcome, self.outcome_ok = "undo interrupted", False
        else:
            self.outcome_ok, self.outcome = task.result()
        self.offered = False
        self.widget.children = (self.text,)
        self.text.value = self.html()
        self.on_change()
