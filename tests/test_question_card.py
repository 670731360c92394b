"""Question cards without a kernel (``WidgetWire`` records what reaches the frontend; clicks
and typing arrive as the frontend's comm messages): where a run view puts ``ask_person``'s
card, answered by an option, by Send or Enter, folded to one line; an empty answer that
decides nothing; a copy shown again that answers the same question; a timeout and an
interrupt; a page that renames a button cannot change the answer. The real-kernel tests
are ``test_notebook_ask.py``."""

from __future__ import annotations

import asyncio

import pytest

from harness_nb.core import SubagentUpdate, ToolCall, ToolCallStarted
from harness_nb.engine import Answer, Question
from harness_nb.notebook.widgets.approval import ApprovalCard, PendingApprovals, WaitingCards
from harness_nb.notebook.widgets.question import QuestionCard
from harness_nb.notebook.widgets.view import RunView
from harness_nb.testing.kernel_driver import visible_text as text
from widget_support import ManualClock, WidgetWire, wire  # noqa: F401 - an autouse fixture

ASK_CALL = ToolCall(id="c1", name="ask_person", arguments='{"question": "Which year?"}')
YEAR = Question("Which year?", ("2023", "2024"), call_id="c1")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def card_in(view: RunView) -> QuestionCard:
    async with asyncio.timeout(5):
        while not view.cards:
            await asyncio.sleep(0)
    card = view.cards[-1]
    assert isinstance(card, QuestionCard)
    return card


async def test_the_card_sits_under_its_call_and_an_option_answers(wire: WidgetWire, clock: ManualClock) -> None:
    view = RunView("main", "m", scheduler=clock)
    view(ToolCallStarted(call=ASK_CALL))
    answer = asyncio.create_task(view.ask_channel(timeout=None)(YEAR), name="ask")
    card = await card_in(view)
    line = view._tool_lines["c1"].widget
    assert view.activity.children[:2] == (line, card), "right below the call's line"
    assert view.state == "waiting" and text(card.summary.value) == "? Which year?"
    assert [b.description for b in card.option_buttons] == ["2023", "2024"]

    wire.click(card.option_buttons[1])
    async with asyncio.timeout(5):
        assert await answer == Answer("2024", by_person=True)
    assert view.state == "running" and not view.cards_waiting()
    assert text(card.status.value) == "? Which year? → 2024 (by you)" and card.children == (card.status,)
    assert card.answer_box.disabled and all(b.disabled for b in card.option_buttons)
    assert text(wire.updates(card.status, "value")[-1]["value"]) == "? Which year? → 2024 (by you)"
    assert text(card.static_html()) == "? Which year? → 2024 (by you)"


async def test_a_subagents_question_sits_under_its_line_named(wire: WidgetWire, clock: ManualClock) -> None:
    view = RunView("main", "m", scheduler=clock)
    view(SubagentUpdate(task_id="fg-1", agent="explore", event=ToolCallStarted(call=ASK_CALL, agent="explore")))
    question = Question("Which year?", agent="explore", call_id="c1")
    asked = asyncio.create_task(view.ask_channel(timeout=None)(question), name="ask")
    card = await card_in(view)
    sub_line = view._subs["fg-1"].widget
    assert view.activity.children[:2] == (sub_line, card)
    assert text(card.summary.value) == "? [explore] Which year?" and card.plain_text() == "question: Which year? (explore)"
    wire.type_into(card.answer_box, "2023")
    wire.click(card.send_button)
    async with asyncio.timeout(5):
        assert await asked == Answer("2023", by_person=True)
    assert text(card.status.value) == "? [explore] Which year? → 2023 (by you)"


async def test_typed_text_is_sent_by_send_or_enter_cleaned_and_an_empty_one_decides_nothing(wire: WidgetWire) -> None:
    card = QuestionCard(Question("File name?"))
    waiting = asyncio.create_task(card.answer(None), name="answer")
    assert card.option_buttons == []
    wire.type_into(card.answer_box, "  \x1b[0m ")
    wire.click(card.send_button)
    wire.frontend(card.answer_box, {"method": "custom", "content": {"event": "submit"}})
    await asyncio.sleep(0)
    assert not waiting.done() and card.waiting, "nothing typed: still waiting"
    wire.type_into(card.answer_box, "sales_\x1b[1m2024\x1b[0m.csv\n\u202e")
    wire.frontend(card.answer_box, {"method": "custom", "content": {"event": "submit"}})  # Enter
    async with asyncio.timeout(5):
        assert await waiting == Answer("sales_2024.csv", by_person=True)


async def test_a_copy_shown_again_answers_the_same_question_and_both_fold(wire: WidgetWire) -> None:
    pending = PendingApprovals()
    approval = ApprovalCard(ToolCall(id="c0", name="bash", arguments='{"command": "rm -rf x"}'), "deletes", "high", pending=pending)
    card = QuestionCard(YEAR, pending=pending)
    waiting = asyncio.create_task(card.answer(None), name="answer")
    again = WaitingCards(list(pending))
    assert again.plain_text() == (
        "1 approval and 1 question waiting:\napproval: bash(command='rm -rf x') (deletes)\nquestion: Which year?"
    )
    (twin,) = [c for c in again.copies if isinstance(c, QuestionCard)]
    wire.click(twin.option_buttons[0])
    async with asyncio.timeout(5):
        assert await waiting == Answer("2023", by_person=True)
    assert text(twin.status.value) == text(card.status.value) == "? Which year? → 2023 (by you)"
    assert list(pending) == [approval], "the answered question no longer waits"


async def test_a_page_that_renames_a_button_cannot_change_the_answer(wire: WidgetWire) -> None:
    card = QuestionCard(YEAR)
    waiting = asyncio.create_task(card.answer(None), name="answer")
    wire.frontend(card.option_buttons[0], {"method": "update", "state": {"description": "delete everything"}, "buffer_paths": []})
    wire.click(card.option_buttons[0])
    async with asyncio.timeout(5):
        assert await waiting == Answer("2023", by_person=True)


async def test_no_answer_in_time_or_an_interrupt_folds_the_card_to_say_so(wire: WidgetWire) -> None:
    late = QuestionCard(YEAR)
    assert await late.answer(0.01) == Answer("no answer within 0.01 s")
    assert text(late.status.value) == "? Which year? → no answer within 0.01 s"

    cut = QuestionCard(YEAR)
    waiting = asyncio.create_task(cut.answer(None), name="answer")
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert text(cut.status.value) == "? Which year? → interrupted before you answered"
    assert cut.answer_box.disabled
