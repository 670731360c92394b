"""``LiveBox``: the base of harness_nb's live widgets (run views, the team view).

Events only mark parts of a widget dirty; at most ``rate`` refreshes a second push them to
the frontend, so a fast stream cannot flood the browser. The ``text/plain`` form is
``plain_text()``: stable text that nbval compares and a non-widget frontend shows.

The pacing reads time from a ``Scheduler``: the running event loop unless one is injected
(tests pass a clock they advance by hand, so coalescing is proven without waiting).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

import ipywidgets as widgets


class TimerHandle(Protocol):
    """What ``Scheduler.call_later`` returns (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """A clock and a timer: the two methods of ``asyncio.AbstractEventLoop`` pacing needs."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], object], /) -> TimerHandle: ...


class PlainTextBox(widgets.VBox):
    """A VBox whose ``text/plain`` form and ``repr`` are ``plain_text()``."""

    def plain_text(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.plain_text()
        return bundle

    def __repr__(self) -> str:
        return self.plain_text()


class LiveBox(PlainTextBox):
    """A VBox with coalesced refreshes. Subclasses implement ``render(dirty)`` and
    ``plain_text()``, and call ``mark(part)`` when something changed."""

    def __init__(self, children: list[widgets.Widget], *, rate: float, scheduler: Scheduler | None = None) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._scheduler = scheduler
        self._dirty: set[str] = set()
        self._flush_handle: TimerHandle | None = None
        self._last_flush = float("-inf")
        super().__init__(children)

    def _pacer(self) -> Scheduler | None:
        if self._scheduler is not None:
            return self._scheduler
        try:
            return asyncio.get_running_loop()
        except RuntimeError:  # no loop (a terminal or a script): nothing to pace
            return None

    def now(self) -> float:
        """The view's clock, for elapsed times (asyncio's loop clock is ``time.monotonic``)."""
        pacer = self._pacer()
        return pacer.time() if pacer is not None else time.monotonic()

    def render(self, dirty: set[str]) -> None:
        """Push the parts named in ``dirty`` to the widgets."""
        raise NotImplementedError

    def mark(self, part: str = "all") -> None:
        """Note that ``part`` changed; a refresh follows within ``1 / rate`` seconds of the
        previous one (at once after a quiet spell), carrying every part marked until then."""
        self._dirty.add(part)
        if self._flush_handle is not None:
            return
        pacer = self._pacer()
        if pacer is None:
            self.flush()
            return
        delay = max(0.0, self._last_flush + self.interval - pacer.time())
        self._flush_handle = pacer.call_later(delay, self.flush)

    def flush(self) -> None:
        """Refresh every dirty part now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        pacer = self._pacer()
        if pacer is not None:
            self._last_flush = pacer.time()
        dirty, self._dirty = self._dirty, set()
        self.render(dirty)


class StaticCopyBox(LiveBox):
    """A live box with a static copy of itself (``static_html``, implemented by the
    subclass): the copy rides beside the widget in the bundle it is shown with, and
    ``static_bundle()`` stands in for the widget once nothing in it moves any more (the
    caller updates the display with it). Both keep the ``text/plain`` it was first shown
    with: an update never changes what nbval compares, and a view whose title changes
    later (a background run's task id) keeps its line."""

    _first_plain: str | None = None

    def static_html(self) -> str:
        raise NotImplementedError

    def static_bundle(self) -> dict[str, str]:
        return {"text/plain": self._first_plain or self.plain_text(), "text/html": self.static_html()}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/html"] = self.static_html()
        if self._first_plain is None:
            self._first_plain = bundle["text/plain"]
        bundle["text/plain"] = self._first_plain
        return bundle
