"""Plain-text rendering of run events: what a terminal, a log or the command line shows.

``TextView`` turns the event stream into readable lines: the answer text as it streams,
one line per tool call and result, one line per subagent step (indented under it), and
approvals. Used by ``python -m harness_nb`` and by terminal IPython (no widgets there),
which ask for approvals (``terminal_approval``) and answers to ``ask_person``
(``terminal_ask``) on the terminal.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TextIO

from .core import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetWarning,
    Compacted,
    CompactionStarted,
    EffectsRecorded,
    Event,
    MessagesInjected,
    RunFailed,
    RunFinished,
    RunStarted,
    ServerAdapted,
    SubagentUpdate,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
)
from .core.secret import SECRETS
from .engine import Answer, ApprovalChannel, Approved, AskChannel, Denied, Question
from .engine.limits import stop_label


def terminal_approval(*, auto_yes: bool = False) -> ApprovalChannel:
    """An approval channel that asks on the terminal (``y`` approves; anything else denies,
    see ``terminal_answer`` for the reason). Without a terminal to ask on, it denies —
    unless ``auto_yes``, which approves everything."""

    async def ask(call: ToolCall, reason: str, risk: str) -> Approved | Denied:
        if auto_yes:
            return Approved()
        if not sys.stdin.isatty():
            return Denied("no terminal to ask: denied (use --yes to approve)")
        # input() blocks; in a thread the loop (and background tasks) keep running
        prompt = f"Allow {call.brief(80)}? ({reason}, risk {risk}) [y / N / n <reason>] "
        return terminal_answer(await asyncio.to_thread(input, prompt))

    return ask


def terminal_ask() -> AskChannel | None:
    """An ask channel that asks on the terminal (see ``terminal_reply``), or ``None`` when
    stdin is no terminal: then no one can answer, and ``ask_person`` is not offered."""
    if not sys.stdin.isatty():
        return None

    async def ask(question: Question) -> Answer:
        who = "" if question.agent == "main" else f"[{question.agent}] "
        choices = "".join(f"\n  {n}. {option}" for n, option in enumerate(question.options, 1))
        how = "a number or your answer" if question.options else "your answer"
        prompt = f"? {who}{question.text}{choices}\n({how}) > "
        try:  # input() blocks; in a thread the loop (and background tasks) keep running
            return terminal_reply(await asyncio.to_thread(input, prompt), question)
        except EOFError:
            return Answer("the person closed the input without answering")

    return ask


def terminal_reply(text: str, question: Question) -> Answer:
    """What a line typed at the terminal answers ``question``: a number picks that option;
    anything else is the person's answer as typed (cleaned); an empty line is none."""
    picked = text.strip()
    if picked.isdigit() and 1 <= int(picked) <= len(question.options):
        return Answer.by_the_person(question.options[int(picked) - 1])
    answer = Answer.by_the_person(text)
    return answer if answer.text else Answer("the person left the answer empty")


_NO = re.compile(r"(?i)\s*no?\b[\s:,.;—-]*")


def terminal_answer(text: str) -> Approved | Denied:
    """What a line typed at the terminal answers: ``y`` / ``yes`` approve; anything else is
    the person's denial, and the text is their reason, after a leading ``n`` / ``no``
    (``n because the data is raw``, ``no: keep it``; a bare ``n`` or Enter gives none)."""
    if text.strip().lower() in {"y", "yes"}:
        return Approved()
    match = _NO.match(text)
    return Denied.by_the_person(text[match.end() :] if match else text)


def preview(text: str, width: int = 100) -> str:
    """The first line of ``text``, at most ``width`` characters, with a marker if cut."""
    lines = text.strip().splitlines() or [""]
    first = lines[0]
    more = len(lines) > 1 or len(first) > width
    return (first[: width - 1] + "…") if len(first) > width else first + (" …" if more else "")


class TextView:
    """Writes a run's events to ``out`` as text. ``show_text`` streams the answer."""

    def __init__(self, out: TextIO | None = None, *, show_text: bool = True) -> None:
        self.out = out or sys.stdout
        self.show_text = show_text
        self._mid_line = False

    def __call__(self, event: Event) -> None:
        self.render(event, indent="")

    def _line(self, text: str) -> None:
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False
        self.out.write(SECRETS.scrub(text) + "\n")
        self.out.flush()

    def render(self, event: Event, indent: str) -> None:
        if isinstance(event, SubagentUpdate):
            inner = event.event
            if isinstance(inner, TextDelta | RunStarted | MessagesInjected):
                return
            if isinstance(inner, RunFinished):
                self._line(f"{indent}  ↳ {event.agent} [{event.task_id}] {stop_label(inner.stop_reason)} · {inner.usage.summary()}")
                return
            self.render(inner, indent=f"{indent}  ↳ {event.agent} [{event.task_id}] ")
            return
        if isinstance(event, TextDelta):
            if self.show_text and not indent:
                # a key split over two chunks slips by here; the answer itself is scrubbed
                self.out.write(SECRETS.scrub(event.text))
                self.out.flush()
                self._mid_line = not event.text.endswith("\n")
        elif isinstance(event, ToolCallStarted):
            self._line(f"{indent}→ {event.call.brief(90)}")
        elif isinstance(event, ToolCallFinished):
            mark = "✗" if event.is_error else "←"
            self._line(f"{indent}{mark} {event.call.name}: {preview(event.result)}")
            for image in event.images:  # a terminal cannot show them; say they were there
                self._line(f"{indent}  [{image.describe()}]")
        elif isinstance(event, EffectsRecorded):
            if event.line:
                undo = f" (checkpoint #{event.checkpoint}: rewind or undo it)" if event.checkpoint is not None else ""
                self._line(f"{indent}  ⟲ {event.line}{undo}")
            if event.partial:
                self._line(f"{indent}  ⚠ {event.partial}")
            if event.reverted:
                self._line(f"{indent}  ⚠ {event.reverted}")
            if event.problem:
                self._line(f"{indent}  ⚠ no checkpoint: {event.problem}")
        elif isinstance(event, ApprovalRequested):
            self._line(f"{indent}? approval needed for {event.call.brief(90)} ({event.reason}, risk {event.risk})")
        elif isinstance(event, ApprovalDecided):
            verdict = "approved" if event.approved else "denied by you" if event.by_person else "denied"
            verdict += f" ({event.feedback})" if event.feedback and not event.approved else ""
            self._line(f"{indent}  {verdict}: {event.call.name}")
        elif isinstance(event, MessagesInjected):
            for text in event.texts:
                self._line(f"{indent}⇢ {preview(text)}")
        elif isinstance(event, CompactionStarted | Compacted):
            self._line(f"{indent}⇣ {event.describe()}")
        elif isinstance(event, BudgetWarning):
            self._line(f"{indent}⚠ budget: {event.text()}")
        elif isinstance(event, ServerAdapted):
            self._line(f"{indent}⚠ {event.text}")
        elif isinstance(event, RunFinished):
            self._line(f"{indent}── {stop_label(event.stop_reason)} · {event.usage.summary()}")
        elif isinstance(event, RunFailed):
            self._line(f"{indent}── {'interrupted' if event.interrupted else 'failed: ' + event.error}")
