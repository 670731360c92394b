"""``MapView``: the live progress bar of ``%agent map`` (done / failed / running, tokens,
cost, ETA), paced like every live widget (``live.py``). Its ``text/plain`` form is one
stable line without times, for nbval and frontends without widgets; its static copy
(HTML, the bar drawn without a widget) stands in for it once the map has ended, so a
saved notebook keeps how the map went."""

from __future__ import annotations

import html

import ipywidgets as widgets

from ...core.media import STATIC_VIEW_CLOSE as MARK_CLOSE
from ...core.media import STATIC_VIEW_OPEN as MARK_OPEN
from ...core.usage import usd
from ...subagents.map_result import MapEstimate, MapProgress, MapResult
from .live import Scheduler, StaticCopyBox
from .theme import STYLE

# the widget's bar styles, as the static copy draws them
BAR_COLOURS = {
    "info": "var(--hnb-run, #0d47a1)",
    "success": "var(--hnb-ok, #1b5e20)",
    "warning": "var(--hnb-warn, #8a3c00)",
    "danger": "var(--hnb-err, #b71c1c)",
}


class MapView(StaticCopyBox):
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

    def finish(self, result: MapResult | MapEstimate) -> None:
        """Show how the map ended: every row done, some failed, or interrupted (an
        estimate: its sample run)."""
        if isinstance(result, MapEstimate):
            failed = sum(1 for row in result.sample if not row.ok)
            self.state = "estimated" if not failed else f"estimated, {failed:,} failed"
        elif result.interrupted:
            waiting = f", {result.waiting:,} rows waiting in vendor batches" if result.waiting else ""
            self.state = f"interrupted{waiting}"
        else:
            self.state = "done" if not result.failed else f"done, {result.failed:,} failed"
        self.mark()
        self.flush()

    def interrupted(self) -> None:
        """Show the map as interrupted (when there is no result to show)."""
        self.state = "interrupted"
        self.mark()
        self.flush()

    def render(self, dirty: set[str]) -> None:
        self.header.value = self._header_html()
        self.bar.max = self._rows()
        self.bar.value = self._finished()
        self.bar.bar_style = self._bar_style()
        self.line.value = self._line_html()

    def _finished(self) -> int:
        return self.progress.finished if self.progress is not None else 0

    def _rows(self) -> int:
        """The rows the bar spans: the progress's (an estimate's sample), else the map's."""
        return max(self.progress.total if self.progress is not None else self.total, 1)

    def _header_html(self) -> str:
        title = f" ({html.escape(self.title)})" if self.title else ""
        return f"<b>agent map</b>{title} · {html.escape(self.agent)} · {self.total:,} rows · {html.escape(self.state)}"

    def _line_html(self) -> str:
        line = self.progress.line() if self.progress is not None else "starting…"
        return f"<span style='font-variant-numeric: tabular-nums'>{html.escape(line)}</span>"

    def static_html(self) -> str:
        """The map as static HTML: the header, the bar as two boxes, the figures."""
        share = 100 * self._finished() / self._rows()
        colour = BAR_COLOURS[self._bar_style()]
        bar = (
            "<div style='background:var(--hnb-line, #e0e0e0);height:8px;border-radius:4px;margin:4px 0'>"
            f"<div style='width:{share:.1f}%;height:8px;border-radius:4px;background:{colour}'></div></div>"
        )
        return (
            f"{MARK_OPEN}{STYLE}<div class='hnb hnb-map hnb-static'><div>{self._header_html()}</div>"
            f"{bar}<div>{self._line_html()}</div></div>{MARK_CLOSE}"
        )

    def _bar_style(self) -> str:
        if self.state.startswith("interrupted"):
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
