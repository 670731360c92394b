"""``MapView``: the live progress bar of ``%agent map`` (done / failed / running, tokens,
cost, ETA), paced like every live widget (``live.py``). Its ``text/plain`` form is one
stable line without times, for nbval and frontends without widgets."""

from __future__ import annotations

import html

import ipywidgets as widgets

from ..core.usage import usd
from ..subagents.agent_map import MapProgress, MapResult
from .live import LiveBox, Scheduler


class MapView(LiveBox):
    """The progress of one map of ``agent`` over ``total`` rows."""

    def __init__(self, agent: str, total: int, *, rate: float = 4.0, scheduler: Scheduler | None = None) -> None:
        self.agent = agent
        self.total = total
        self.title = ""
        self.state = "running"
        self.progress: MapProgress | None = None
        self.header = widgets.HTML()
        self.bar = widgets.IntProgress(value=0, min=0, max=max(total, 1), layout=widgets.Layout(width="100%"))
        self.line = widgets.HTML()
        super().__init__([self.header, self.bar, self.line], rate=rate, scheduler=scheduler)
        self.add_class("harness-nb-map")
        self.flush()

    def set_title(self, title: str) -> None:
        """A label after "agent map" (``background bg-3``)."""
        self.title = title
        self.mark()

    def update(self, progress: MapProgress) -> None:
        """Show ``progress`` (the map's ``on_progress``)."""
        self.progress = progress
        self.mark()

    def finish(self, result: MapResult) -> None:
        """Show how the map ended: every row done, some failed, or interrupted."""
        if result.interrupted:
            self.state = "interrupted"
        else:
            self.state = "done" if not result.failed else f"done, {result.failed:,} failed"
        self.mark()
        self.flush()

    def render(self, dirty: set[str]) -> None:
        p = self.progress
        finished = p.finished if p is not None else 0
        title = f" ({html.escape(self.title)})" if self.title else ""
        self.header.value = (
            f"<b>agent map</b>{title} · {html.escape(self.agent)} · {self.total:,} rows · {html.escape(self.state)}"
        )
        self.bar.value = finished
        self.bar.bar_style = self._bar_style()
        self.line.value = f"<span style='font-variant-numeric: tabular-nums'>{html.escape(p.line() if p else 'starting…')}</span>"

    def _bar_style(self) -> str:
        if self.state == "interrupted":
            return "danger"
        if self.progress is not None and self.progress.failed:
            return "warning"
        return "info" if self.state == "running" else "success"

    def plain_text(self) -> str:
        p = self.progress
        if p is None:
            return f"agent map: {self.agent} · {self.total:,} rows · {self.state}"
        done = f"{p.finished:,}/{p.total:,}" + (f" · {p.failed:,} failed" if p.failed else "")
        cost = f" · {usd(p.usage.cost)}" if p.usage.cost is not None else ""
        return f"agent map: {self.agent} · {done} · {p.usage.tokens_label()}{cost} · {self.state}"
