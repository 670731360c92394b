"""``LiveBox``: the base of harness_nb's live widgets (run views, the team view).

Events only mark parts of a widget dirty; at most ``rate`` refreshes a second push them to
the frontend, so a fast stream cannot flood the browser. The ``text/plain`` form is
``plain_text()``: stable text that nbval compares and a non-widget frontend shows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ipywidgets as widgets


class LiveBox(widgets.VBox):
    """A VBox with coalesced refreshes. Subclasses implement ``render(dirty)`` and
    ``plain_text()``, and call ``mark(part)`` when something changed."""

    def __init__(self, children: list[widgets.Widget], *, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._dirty: set[str] = set()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._last_flush = 0.0
        super().__init__(children)

    def plain_text(self) -> str:
        raise NotImplementedError

    def render(self, dirty: set[str]) -> None:
        """Push the parts named in ``dirty`` to the widgets."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.plain_text()
        return bundle

    def __repr__(self) -> str:
        return self.plain_text()

    def mark(self, part: str = "all") -> None:
        """Note that ``part`` changed; a refresh follows within ``1 / rate`` seconds."""
        self._dirty.add(part)
        if self._flush_handle is not None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._last_flush + self.interval - loop.time())
        self._flush_handle = loop.call_later(delay, self.flush)

    def flush(self) -> None:
        """Refresh every dirty part now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        try:
            self._last_flush = asyncio.get_running_loop().time()
        except RuntimeError:  # no loop (a terminal or a test): nothing to pace
            pass
        dirty, self._dirty = self._dirty, set()
        self.render(dirty)
