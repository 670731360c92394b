"""The lines of a run view's activity: one per tool call and one per subagent, each drawn
as HTML from what is known of it so far (the same HTML goes into the view's static copy).

A tool line reads ``→ read_file(path='a.csv') · running…``, then ``awaiting your
approval`` while its card waits, then ``✓ <plain preview> · 0.3 s`` with the whole result
one click away — or ``✗ Denied by you: <reason>``: what the model was told (its XML forms,
"Do not retry it unchanged") is never what the person reads (``wording``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import ipywidgets as widgets

from ...core import ToolCall, Usage
from ...core.secret import SECRETS
from ...core.usage import plural
from ...sandbox.checkpoints.checkpoint import without_effects
from ...textview import preview
from .theme import STATE_COLORS, agent_name, joined, nowrap, state_mark
from .wording import denial_words, plain_body, plain_result

RESULT_LIMIT = 4000  # characters of a result shown when its line is opened


@dataclass
class ToolLine:
    """One tool call of the run itself."""

    call: ToolCall
    widget: widgets.HTML = field(default_factory=widgets.HTML)
    result: str | None = None
    is_error: bool = False
    duration: float = 0.0
    awaiting: bool = False
    denial: str | None = None  # how the person reads the denial ("Denied by you: …")

    @property
    def open(self) -> bool:
        """Still running (or waiting for its approval)."""
        return self.result is None

    def html(self, *, live: bool = True) -> str:
        head = f"<code>→ {html.escape(SECRETS.scrub(self.call.brief(100)))}</code>"
        if self.result is None:
            if self.awaiting:
                colour = STATE_COLORS["waiting"]
                return f"{head} · <b style='color:{colour}'>● awaiting your approval</b>"
            spinner = state_mark("running", spin=live)
            return f"{head} · {spinner} <i>running…</i>"
        if self.denial is not None:
            colour = STATE_COLORS["failed"]
            return f"{head} · <span style='color:{colour};font-weight:bold'>✗</span> {html.escape(self.denial)}"
        result = SECRETS.scrub(without_effects(self.result))  # the effects have a line of their own
        mark = "✗" if self.is_error else "✓"
        colour = STATE_COLORS["failed" if self.is_error else "done"]
        figures = f" · {nowrap(f'{self.duration:.1f} s')}" if self.duration >= 0.05 else ""
        body = plain_body(result)
        return (
            f"<details><summary>{head} <span style='color:{colour};font-weight:bold'>{mark}</span> "
            f"<code>{html.escape(plain_result(result, 90))}</code>{figures}</summary>"
            f"<pre style='max-height:16em;overflow:auto'>{html.escape(body[:RESULT_LIMIT])}</pre></details>"
        )

    def decided(self, approved: bool, *, by_person: bool, feedback: str) -> None:
        self.awaiting = False
        if not approved:
            self.denial = denial_words(by_person, feedback.removesuffix(": denied"))


@dataclass
class SubLine:
    """Progress of one subagent (one task id), drawn as one line."""

    agent: str
    description: str
    widget: widgets.HTML
    started: float
    color: str
    tools: int = 0
    last: str = "starting"
    state: str = "running"
    usage: Usage = field(default_factory=Usage)
    ended: float | None = None

    @property
    def live(self) -> bool:
        return self.state in ("running", "waiting")

    def finish(self, state: str, last: str, now: float) -> None:
        self.state, self.last, self.ended = state, last, now

    def html(self, now: float, *, live: bool = True) -> str:
        elapsed = (self.ended if self.ended is not None else now) - self.started
        title = f" — {html.escape(self.description)}" if self.description else ""
        cost = self.usage.cost_label()
        figures = joined(
            [
                html.escape(SECRETS.scrub(self.last)),
                plural(self.tools, "tool"),
                self.usage.tokens_label(),
                f"{elapsed:.1f} s",
                html.escape(cost) if cost else "",
            ]
        )
        return (
            f"<div class='hnb-sub' style='border-left:3px solid {self.color};padding-left:6px'>"
            f"<code>{state_mark(self.state, spin=live)} {agent_name(self.agent, self.color)}{title} · {figures}</code></div>"
        )


def note_html(text: str) -> str:
    """A note in the activity (a compaction, a message put into the conversation)."""
    return f"<i>{html.escape(SECRETS.scrub(text))}</i>"


def plain_error(error: str) -> str:
    """A failed run's error as one line."""
    return preview(error, 160)
