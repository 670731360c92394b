"""Approval cards: a tool call, the reason, Approve / Approve for this session / Deny, and
a box for the person's reason.

The call is shown as the person reads it (``highlight.call_body``: a shell block for
``bash``, highlighted code for ``run_python`` and ``write_file``, a diff for
``edit_file``), with the raw JSON behind a toggle. Once decided, the card collapses to one
line: "✓ Approved by you: `rm -rf scratch`", "✗ Denied by you: <reason> · `rm -rf data`".

The buttons resolve an asyncio future and do nothing else (their callbacks run in the
context of the click's comm message, not the cell). The awaiting task then records the
decision on the card. A card that nobody answers denies the call after ``timeout``.
"Approve for this session" answers ``Approved(remember=rule)`` with the rule shown beside
it (``permissions.rule.session_rule``: this exact command or path, or the tool's name);
the harness keeps it, so the same call runs without a card for the rest of its life.

Deny answers ``Denied.by_the_person(reason)`` with what was typed into the reason box
beside it (optional; the model reads it verbatim in the tool result, cleaned and bounded
by ``engine.hook.person_reason``). Enter in the box denies too: a reason is only ever
asked for a denial, and denying is the safe direction for a stray key.

``PendingApprovals`` keeps the cards still waiting — approval cards and every other
``Card`` that waits for the person (``ask_person``'s question cards, ``question.py``) —,
so a card lost from the page (a reload before the notebook was saved) can be shown again
(``%approvals``, and the next cell run): as a copy made of new widgets — a reloaded page
may not have got back the widgets made before it loaded — that answers the same call, and
folds to the decision with the card it copies whichever was clicked. ``PendingApprovals``
also notes which
pages (client sessions) were shown each card, so a cell queued from a page that never saw
it gets it at once, even while the kernel is busy with the run that asks
(``queued_cells``).
"""

from __future__ import annotations

import asyncio
import html
from collections import Counter
from collections.abc import Callable, Iterator

import ipywidgets as widgets

from ...core import ToolCall
from ...core.media import STATIC_VIEW_CLOSE as MARK_CLOSE
from ...core.media import STATIC_VIEW_OPEN as MARK_OPEN
from ...core.usage import plural
from ...engine import Approved, Denied
from ...permissions.rule import session_rule
from .highlight import call_body, call_subject
from .live import PlainTextBox
from .theme import STATE_COLORS, STYLE

RISK_COLOURS = {"high": "var(--hnb-err, #b71c1c)", "medium": "var(--hnb-warn, #8a3c00)", "low": "var(--hnb-ok, #1b5e20)"}
REASON_PLACEHOLDER = "Reason (optional) — tells the agent why"


class Card(PlainTextBox):
    """A card that waits for the person in a cell, as ``PendingApprovals`` keeps it and
    ``WaitingCards`` shows it again: the ``summary`` of what is asked, a row of
    ``buttons``, and the ``status`` line it folds to once decided (``fold``). Its
    ``kind`` ("approval", "question") names it in the line above cards shown again;
    ``outcome`` is the decided line as text (empty while it waits). ``pending``: the
    registry it is kept in while it waits; ``on_settled`` is told once it folds."""

    kind = "card"

    def __init__(
        self,
        summary: widgets.HTML,
        buttons: list[widgets.Widget],
        *,
        colour: str,
        pending: PendingApprovals | None,
        on_settled: Callable[[Card], None] | None,
    ) -> None:
        self.summary = summary
        self.status = widgets.HTML("")
        self.pending = pending
        self.on_settled = on_settled
        self.outcome = ""
        self.outcome_state = ""  # done / failed / interrupted: the colour of that line
        self._colour = colour  # while it waits
        self.buttons = widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap"))
        super().__init__([self.summary, self.buttons, self.status])
        self.add_class("hnb-card")
        self.add_class("hnb")
        self.layout.border_left = f"4px solid {colour}"
        self.layout.padding = "2px 0 2px 8px"
        if pending is not None:
            pending.add(self)

    @property
    def waiting(self) -> bool:
        return not self.outcome

    def fold(self, outcome: str, line: str, state: str) -> None:
        """Collapse to the one ``line`` (HTML) saying ``outcome``, coloured for ``state``;
        leave the registry and tell ``on_settled``."""
        self.outcome, self.outcome_state = outcome, state
        self.status.value = line
        self.children = (self.status,)
        self.layout.border_left = f"4px solid {STATE_COLORS[state]}"
        if self.pending is not None:
            self.pending.discard(self)
        if self.on_settled is not None:
            self.on_settled(self)

    def copy(self, on_settled: Callable[[Card], None] | None = None) -> Card:
        """The same card made of new widgets, answering what this one answers and folding
        when it does (then telling ``on_settled``)."""
        raise NotImplementedError

    def static_html(self) -> str:
        """The card in a static copy: the one decided line, or what it asks while it
        waits, marked in its colour as the widget is."""
        colour = STATE_COLORS[self.outcome_state] if self.outcome else self._colour
        shown = self.status.value if self.outcome else self.summary.value
        return f"<div class='hnb-card' style='border-left-color:{colour}'>{shown}</div>"


class PendingApprovals:
    """The cards waiting for a decision, oldest first (one registry per kernel).

    ``page`` names the frontend page (client session) of the request being handled, or
    None: a card counts as seen by the page whose cell was running when it appeared."""

    def __init__(self, page: Callable[[], str | None] = lambda: None) -> None:
        self._cards: dict[int, Card] = {}
        self._seen_by: dict[int, set[str]] = {}
        self.shown_by_hook: set[int] = set()
        # the cards shown to a cell while it queued (QueuedCells), by its request's id: when
        # that cell is %approvals and runs, it need not show them twice
        self._shown_in: dict[str, set[int]] = {}
        self.page = page

    def add(self, card: Card) -> None:
        self._cards[id(card)] = card
        self._seen_by[id(card)] = set()
        self.mark_seen([card], self.page())

    def discard(self, card: Card) -> None:
        self._cards.pop(id(card), None)
        self._seen_by.pop(id(card), None)
        self.shown_by_hook.discard(id(card))

    def mark_seen(self, cards: list[Card], page: str | None) -> None:
        """Note that ``page`` was shown ``cards`` (None: an unknown page, noted nowhere)."""
        if page:
            for card in cards:
                self._seen_by.get(id(card), set()).add(page)

    def shown_in(self, request: str, cards: list[Card]) -> None:
        """Note that the cell of ``request`` (an execute request's id) shows ``cards``."""
        self._shown_in.setdefault(request, set()).update(id(c) for c in cards)
        while len(self._shown_in) > 64:  # cells that never ran (their page closed) are forgotten
            del self._shown_in[next(iter(self._shown_in))]

    def take_shown_in(self, request: str | None) -> set[int]:
        """The ids of the cards the cell of ``request`` shows already (forgotten then)."""
        return self._shown_in.pop(request, set()) if request else set()

    def not_seen_by(self, page: str) -> list[Card]:
        """The waiting cards ``page`` was never shown."""
        return [c for c in self if page not in self._seen_by.get(id(c), ())]

    def __iter__(self) -> Iterator[Card]:
        return iter(list(self._cards.values()))

    def __len__(self) -> int:
        return len(self._cards)

    def not_yet_reshown(self) -> list[Card]:
        """The waiting cards the next-cell hook has not shown again yet (it shows each once)."""
        return [c for c in self if id(c) not in self.shown_by_hook]


class ApprovalCard(Card):
    """One pending approval: shows the call and waits for a click. ``pending``: the
    registry it is kept in while it waits; ``on_settled`` is told the outcome line."""

    kind = "approval"

    def __init__(
        self,
        call: ToolCall,
        reason: str,
        risk: str,
        *,
        pending: PendingApprovals | None = None,
        on_settled: Callable[[Card], None] | None = None,
        answers: asyncio.Future[tuple[str, str]] | None = None,
    ) -> None:
        self.call = call
        self.reason = reason
        self.risk = risk
        colour = RISK_COLOURS.get(risk, RISK_COLOURS["medium"])
        summary = widgets.HTML(
            f"<div class='hnb'><b>Approve {html.escape(call.name)}?</b> "
            f"<span>{html.escape(reason)}</span> · "
            f"<span style='white-space:nowrap'>risk <b style='color:{colour}'>{html.escape(risk)}</b></span>"
            f"{call_body(call)}</div>"
        )
        self.approve_button = widgets.Button(description="Approve", button_style="success", icon="check")
        self.deny_button = widgets.Button(description="Deny", button_style="danger", icon="times")
        self.rule = session_rule(call)
        self.session_button = widgets.Button(
            description="Approve for this session",
            icon="check-double",
            tooltip=f"Approve, and allow {self.rule} until the kernel stops" if self.rule else "",
            layout=widgets.Layout(width="auto"),
            disabled=self.rule is None,
        )
        self.session_rule_text = widgets.HTML(
            f"<code style='white-space:pre-wrap'>{html.escape(str(self.rule)[:2000])}</code>" if self.rule else ""
        )
        self.reason_box = widgets.Text(
            placeholder=REASON_PLACEHOLDER,
            layout=widgets.Layout(width="22em"),
        )
        # the button pressed and the reason typed beside it; a copy shares its card's
        self._future = answers if answers is not None else asyncio.get_running_loop().create_future()
        self.copies: list[ApprovalCard] = []
        self.approve_button.on_click(lambda _b: self._resolve("approve"))
        self.session_button.on_click(lambda _b: self._resolve("session"))
        self.deny_button.on_click(lambda _b: self._resolve("deny"))
        self.reason_box.on_msg(self._on_reason_message)
        # Deny and its reason box wrap onto the next line together, never apart
        deny = widgets.HBox([self.deny_button, self.reason_box])
        buttons = [self.approve_button, self.session_button, self.session_rule_text, deny]
        super().__init__(summary, buttons, colour=colour, pending=pending, on_settled=on_settled)

    def _on_reason_message(self, _box: widgets.Widget, content: dict[str, object], _buffers: object) -> None:
        """Enter in the reason box (the frontend's ``submit`` event) denies."""
        if isinstance(content, dict) and content.get("event") == "submit":
            self._resolve("deny")

    def _resolve(self, choice: str) -> None:
        if not self._future.done():
            self._future.set_result((choice, self.reason_box.value))

    def copy(self, on_settled: Callable[[Card], None] | None = None) -> ApprovalCard:
        """The same card made of new widgets, for showing it again: its buttons answer this
        card's call, and it folds to the decision when this card does (then tells
        ``on_settled``)."""
        twin = ApprovalCard(self.call, self.reason, self.risk, answers=self._future, on_settled=on_settled)
        self.copies.append(twin)
        return twin

    async def decision(self, timeout: float | None) -> Approved | Denied:
        """Wait for a click (or ``timeout`` seconds, then Denied) and show the outcome."""
        try:
            async with asyncio.timeout(timeout):
                choice, typed = await self._future
            answer: Approved | Denied = (
                Approved(remember=self.rule)
                if choice == "session"
                else Approved() if choice == "approve" else Denied.by_the_person(typed)
            )
        except TimeoutError:
            answer = Denied(f"nobody answered within {timeout:g} s: denied")
            self.settle("Denied", f"nobody answered within {timeout:g} s", state="failed")
            return answer
        except asyncio.CancelledError:
            self.settle("Interrupted", "before you decided", state="interrupted")
            raise
        if isinstance(answer, Approved) and answer.remember:
            self.settle("Approved for this session", note=f"{answer.remember} runs without asking until the kernel stops")
        elif isinstance(answer, Approved):
            self.settle("Approved by you")
        elif answer.by_person:
            self.settle("Denied by you", answer.feedback, state="failed")
        else:
            self.settle("Denied", answer.feedback, state="failed")
        return answer

    def settle(self, head: str, reason: str = "", *, note: str = "", state: str = "done") -> None:
        """Disable the buttons and the reason box, and collapse the card to one line saying
        what was decided: ``head`` ("Approved by you"), the ``reason`` given, a ``note``
        after the call; ``state`` (done, failed or interrupted) gives its mark and colour."""
        self.approve_button.disabled = self.deny_button.disabled = self.session_button.disabled = True
        self.reason_box.disabled = True
        mark = {"done": "✓", "failed": "✗", "interrupted": "■"}[state]
        said = f": {html.escape(reason)} ·" if reason else ":"
        tail = f" <span class='hnb-muted'>({html.escape(note)})</span>" if note else ""
        line = (
            f"<span class='hnb'><span style='color:{STATE_COLORS[state]};font-weight:bold'>{mark}</span> "
            f"<b>{html.escape(head)}</b>{said} <code>{html.escape(call_subject(self.call))}</code>{tail}</span>"
        )
        self.fold(f"{head}: {reason}" if reason else head, line, state)
        for twin in self.copies:
            twin.settle(head, reason, note=note, state=state)

    def plain_text(self) -> str:
        """``approval: <call> (<reason>)``: the card's ``text/plain`` form."""
        return f"approval: {self.call.brief(80)} ({self.reason})"


class WaitingCards(PlainTextBox):
    """Waiting cards shown again, under a line saying how many wait: a copy of each
    (``ApprovalCard.copy``), so a click on either answers the call and both fold to the
    decision. Once every one is decided, ``when_settled`` is told: nothing here can
    change any more, so its static copy (``static_bundle``) can stand in for the widget,
    and a saved notebook keeps the decisions."""

    def __init__(self, cards: list[Card]) -> None:
        self.cards = cards
        self.when_settled: Callable[[], None] | None = None
        self.copies = [card.copy(on_settled=self._card_settled) for card in cards]
        head = widgets.HTML(
            f"<span class='hnb'><b style='color:{STATE_COLORS['waiting']}'>●</b> "
            f"<b>{counted(cards)} waiting</b> (shown again: a click here answers the run that asked)</span>"
        )
        super().__init__([widgets.HTML(STYLE), head, *self.copies])
        self.add_class("hnb")
        self.add_class("hnb-waiting")

    @property
    def settled(self) -> bool:
        return not any(copy.waiting for copy in self.copies)

    def _card_settled(self, _copy: Card) -> None:
        if self.settled and self.when_settled is not None:
            self.when_settled()

    def static_bundle(self) -> dict[str, str]:
        """The decided cards as static HTML, under the ``text/plain`` they were shown with."""
        lines = "".join(copy.static_html() for copy in self.copies)
        head = f"<span class='hnb'><b>{counted(self.cards)} shown again</b></span>"
        page = f"{MARK_OPEN}{STYLE}<div class='hnb hnb-waiting hnb-static'>{head}{lines}</div>{MARK_CLOSE}"
        return {"text/plain": self.plain_text(), "text/html": page}

    def plain_text(self) -> str:
        return "\n".join([f"{counted(self.cards)} waiting:", *(c.plain_text() for c in self.cards)])


def counted(cards: list[Card]) -> str:
    """``1 approval``, ``2 questions``, ``1 approval and 1 question``: ``cards`` by kind."""
    kinds = Counter(card.kind for card in cards)
    return " and ".join(plural(n, kind) for kind, n in kinds.items()) or "no card"
