"""Question cards: ``ask_person``'s question in the running cell — the question (labelled
with the subagent that asks, when one does), one button per option, and a box for a typed
answer with Send (Enter in the box sends too). Answered, the card folds to one line:
"? Which year? → 2023 (by you)".

As on approval cards (``approval.py``) the buttons only resolve a future; the task that
awaits it records the answer on the card. A card nobody answers gives "no answer within
N s" after ``timeout``; an interrupt folds it to "interrupted before you answered". While it
waits it is kept in the kernel's ``PendingApprovals``, so a page reload that lost it shows
it again (``%approvals``, the next cell run, a queued cell) as a copy that answers the same
question.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable

import ipywidgets as widgets

from ...engine import Answer, Question
from ...engine.hook import person_reason
from .approval import Card, PendingApprovals
from .theme import STATE_COLORS

ANSWER_PLACEHOLDER = "Your answer — Enter sends it"
SHORT_QUESTION = 100  # characters of the question in the folded line


class QuestionCard(Card):
    """One question waiting for the person. ``pending``: the registry it is kept in while
    it waits; ``on_settled`` is told once it folds; ``answers``: the future a copy shares
    with the card it copies."""

    kind = "question"

    def __init__(
        self,
        question: Question,
        *,
        pending: PendingApprovals | None = None,
        on_settled: Callable[[Card], None] | None = None,
        answers: asyncio.Future[str] | None = None,
    ) -> None:
        self.question = question
        colour = STATE_COLORS["waiting"]
        summary = widgets.HTML(
            f"<div class='hnb'><b style='color:{colour}'>?</b> {self._asker_html()}"
            f"<span style='white-space:pre-wrap'>{html.escape(question.text)}</span></div>"
        )
        self.option_buttons = [
            widgets.Button(description=option, tooltip=option, layout=widgets.Layout(width="auto"))
            for option in question.options
        ]
        self.answer_box = widgets.Text(placeholder=ANSWER_PLACEHOLDER, layout=widgets.Layout(width="24em"))
        self.send_button = widgets.Button(description="Send", button_style="primary", icon="paper-plane")
        self._future = answers if answers is not None else asyncio.get_running_loop().create_future()
        self.copies: list[QuestionCard] = []
        for option, button in zip(question.options, self.option_buttons, strict=True):
            button.on_click(lambda _b, option=option: self._resolve(option))  # not the label: the page may change it
        self.send_button.on_click(lambda _b: self._resolve(self.answer_box.value))
        self.answer_box.on_msg(self._on_box_message)
        typed = widgets.HBox([self.answer_box, self.send_button])  # the box and its button wrap together
        super().__init__(summary, [*self.option_buttons, typed], colour=colour, pending=pending, on_settled=on_settled)

    def _asker_html(self) -> str:
        agent = self.question.agent
        return "" if agent == "main" else f"<b>[{html.escape(agent)}]</b> "

    def _on_box_message(self, _box: widgets.Widget, content: dict[str, object], _buffers: object) -> None:
        """Enter in the box (the frontend's ``submit`` event) sends what it holds."""
        if isinstance(content, dict) and content.get("event") == "submit":
            self._resolve(self.answer_box.value)

    def _resolve(self, text: str) -> None:
        """Answer with ``text`` (a click on an option, or what was typed); an empty answer
        is no answer, and the card keeps waiting."""
        if person_reason(text) and not self._future.done():
            self._future.set_result(text)

    def copy(self, on_settled: Callable[[Card], None] | None = None) -> QuestionCard:
        twin = QuestionCard(self.question, answers=self._future, on_settled=on_settled)
        self.copies.append(twin)
        return twin

    async def answer(self, timeout: float | None) -> Answer:
        """Wait for an answer (or ``timeout`` seconds, then none) and fold to it."""
        try:
            async with asyncio.timeout(timeout):
                typed = await self._future
        except TimeoutError:
            none = Answer(f"no answer within {timeout:g} s")
            self.settle(none.text, state="failed")
            return none
        except asyncio.CancelledError:
            self.settle("interrupted before you answered", state="interrupted")
            raise
        answer = Answer.by_the_person(typed)
        self.settle(answer.text, by_you=True)
        return answer

    def settle(self, answered: str, *, by_you: bool = False, state: str = "done") -> None:
        """Fold to one line: the question, then ``answered`` (the answer ``by_you``, or
        why there is none); ``state`` (done, failed, interrupted) colours it."""
        for widget in (*self.option_buttons, self.send_button, self.answer_box):
            widget.disabled = True
        shown = _shortened(self.question.text)
        who = " <span class='hnb-muted'>(by you)</span>" if by_you else ""
        said = f"<b>{html.escape(answered)}</b>" if by_you else html.escape(answered)
        line = (
            f"<span class='hnb'><span style='color:{STATE_COLORS[state]};font-weight:bold'>?</span> "
            f"{self._asker_html()}{html.escape(shown)} → {said}{who}</span>"
        )
        self.fold(f"{shown} → {answered}" + (" (by you)" if by_you else ""), line, state)
        for twin in self.copies:
            twin.settle(answered, by_you=by_you, state=state)

    def plain_text(self) -> str:
        """``question: <question> (<agent>)``: the card's ``text/plain`` form."""
        asker = "" if self.question.agent == "main" else f" ({self.question.agent})"
        return f"question: {_shortened(self.question.text)}{asker}"


def _shortened(text: str) -> str:
    """The question on one line, at most ``SHORT_QUESTION`` characters (cut with "…")."""
    line = " ".join(text.split())
    return line if len(line) <= SHORT_QUESTION else line[: SHORT_QUESTION - 1].rstrip() + "…"
