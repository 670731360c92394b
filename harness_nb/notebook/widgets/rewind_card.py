"""``RewindCard``: what ``%agent --rewind`` would do, shown before it does it.

The card names the checkpoint and what going back changes (``brings back data/ (3 files)
· removes out.csv``), with the diff under it, and waits for Rewind or Cancel. Once
decided it folds to one line saying what was done; its static copy (``static_bundle``)
then stands in for it, so a saved notebook keeps the outcome.
"""

from __future__ import annotations

import asyncio
import html

import ipywidgets as widgets

from ...core.media import STATIC_VIEW_CLOSE as MARK_CLOSE
from ...core.media import STATIC_VIEW_OPEN as MARK_OPEN
from ...core.secret import SECRETS
from ...sandbox import Rewind
from .live import PlainTextBox
from .theme import STATE_COLORS, STYLE


class RewindCard(PlainTextBox):
    """The preview of a rewind (``preview``: its dry run), with Rewind / Cancel."""

    def __init__(self, preview: Rewind) -> None:
        self.preview = preview
        self.outcome = ""
        summary = SECRETS.scrub(preview.summary())
        diff = SECRETS.scrub(preview.diff)
        self.summary = widgets.HTML(
            f"<div class='hnb'><b>Rewind?</b> {html.escape(summary)}"
            + (f"<pre>{html.escape(diff)}</pre>" if diff else "")
            + "</div>"
        )
        self.rewind_button = widgets.Button(description="Rewind", button_style="danger", icon="undo")
        self.cancel_button = widgets.Button(description="Cancel", icon="times")
        self._future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.rewind_button.on_click(lambda _b: self._resolve(True))
        self.cancel_button.on_click(lambda _b: self._resolve(False))
        self.buttons = widgets.HBox([self.rewind_button, self.cancel_button])
        self.status = widgets.HTML("")
        self.style = widgets.HTML(STYLE)
        super().__init__([self.style, self.summary, self.buttons, self.status])
        self.add_class("hnb-card")
        self.add_class("hnb")
        self.layout.border_left = f"4px solid {STATE_COLORS['waiting']}"
        self.layout.padding = "2px 0 2px 8px"

    def _resolve(self, go: bool) -> None:
        if not self._future.done():
            self._future.set_result(go)

    async def decision(self, timeout: float | None) -> bool:
        """Whether the person clicked Rewind (within ``timeout`` seconds; else no)."""
        try:
            async with asyncio.timeout(timeout):
                return await self._future
        except TimeoutError:
            return False

    def settle(self, outcome: str, *, ok: bool = True) -> None:
        """Fold to one line: ``outcome``."""
        self.outcome = SECRETS.scrub(outcome)
        self.rewind_button.disabled = self.cancel_button.disabled = True
        colour = STATE_COLORS["done" if ok else "interrupted"]
        self.status.value = f"<span class='hnb' style='color:{colour}'>{html.escape(self.outcome)}</span>"
        self.children = (self.style, self.status)

    def static_bundle(self) -> dict[str, str]:
        """The card as decided, for a saved notebook."""
        body = self.status.value if self.outcome else self.summary.value
        page = f"{MARK_OPEN}{STYLE}<div class='hnb hnb-card hnb-static'>{body}</div>{MARK_CLOSE}"
        return {"text/plain": self.plain_text(), "text/html": page}

    def plain_text(self) -> str:
        if self.outcome:
            return self.outcome
        return f"rewind? {SECRETS.scrub(self.preview.summary())}\n{SECRETS.scrub(self.preview.diff)}".strip()
