"""The live widgets without a kernel: coalesced refreshes under a hand-moved clock, what a
``RunView`` shows for each event, approval cards answered by their buttons, the team view's
per-teammate areas, background completions, and the stable ``text/plain`` forms.

Widgets are created under ``WidgetWire`` (a comm that records the messages they send), so a
test can say what reached the frontend, and clicks arrive as the frontend's comm messages.
The real-kernel tests (``test_notebook_*``) check the same widgets end to end.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from harness_nb.core import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetWarning,
    Compacted,
    CompactionStarted,
    ContextMeasured,
    DisplayData,
    MessagesInjected,
    RunFailed,
    RunFinished,
    ServerAdapted,
    SubagentUpdate,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    Usage,
)
from harness_nb.engine import Approved, Denied
from harness_nb.notebook.widgets.approval import ApprovalCard, PendingApprovals, WaitingCards
from harness_nb.notebook.widgets.live import LiveBox, Scheduler
from harness_nb.notebook.widgets.team_view import TeamView
from harness_nb.notebook.widgets.theme import AGENT_COLORS, PALETTE, STYLE, agent_color, agent_name, legible_color
from harness_nb.notebook.widgets.view import RunView
from harness_nb.notebook.widgets.view_static import MARK_CLOSE, MARK_OPEN
from harness_nb.testing.kernel_driver import visible_text as text
from team_support import (  # noqa: F401  (close_harnesses is an autouse fixture)
    call,
    close_harnesses,
    make_harness,
    teams,
)
from widget_support import ManualClock, WidgetWire, wire  # noqa: F401 - an autouse fixture


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def shell(tmp_path, monkeypatch) -> Iterator[InteractiveShell]:
    """The IPython shell whose display formatter ``Output.append_display_data`` uses; no
    history file, and gone again afterwards (``get_ipython()`` returns it while it exists)."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.enabled = False
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


class Recorder(LiveBox):
    """A LiveBox that notes each refresh and the parts it carried."""

    def __init__(self, *, rate: float = 4.0, scheduler: Scheduler | None = None) -> None:
        self.renders: list[set[str]] = []
        super().__init__([], rate=rate, scheduler=scheduler)

    def plain_text(self) -> str:
        return "recorder"

    def render(self, dirty: set[str]) -> None:
        self.renders.append(dirty)


def bash_call(command: str = "ls", call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name="bash", arguments=f'{{"command": "{command}"}}')


def sub(task_id: str, event, agent: str = "explore") -> SubagentUpdate:
    return SubagentUpdate(task_id=task_id, agent=agent, event=event)


def stream_texts(wire: WidgetWire, view: RunView, since: int = 0) -> list[str]:
    """The streamed text of each update of the view's stream sent after message ``since``."""
    texts = []
    for state in wire.updates(view.stream, "outputs", since=since):
        outputs = state["outputs"]
        texts.append(outputs[0]["data"]["text/plain"] if outputs else "")
    return texts


# ---------------------------------------------------------------------- coalescing


def test_marks_within_one_interval_make_one_refresh_carrying_every_part(clock):
    box = Recorder(rate=4, scheduler=clock)  # one refresh per 0.25 s
    box.flush()
    box.renders.clear()
    clock.advance(0.0625)
    for part in ("stream", "header", "stream", "sub:fg-1"):
        box.mark(part)
    assert clock.pending() == [1000.25], "one timer, due an interval after the last refresh"
    clock.advance(0.125)
    assert box.renders == []
    clock.advance(0.0625)
    assert box.renders == [{"stream", "header", "sub:fg-1"}]
    assert clock.pending() == []


def test_the_next_refresh_comes_only_when_the_clock_passes_the_interval(clock):
    box = Recorder(rate=4, scheduler=clock)
    box.mark("a")
    clock.advance(0)  # the first mark after a quiet spell refreshes at once
    assert box.renders == [{"a"}]
    box.mark("b")
    clock.advance(0.25 - 0.0625)
    assert box.renders == [{"a"}]
    clock.advance(0.0625)
    assert box.renders == [{"a"}, {"b"}]
    box.mark("c")  # straight after a refresh: wait a whole interval
    assert clock.pending() == [1000.5]
    clock.advance(10)
    assert box.renders == [{"a"}, {"b"}, {"c"}]
    box.mark("d")  # after a quiet spell: at once again
    assert clock.pending() == [1010.25]


def test_flush_refreshes_now_and_drops_the_pending_refresh(clock):
    box = Recorder(rate=4, scheduler=clock)
    box.flush()
    box.mark("stream")
    box.flush()
    assert box.renders == [set(), {"stream"}]
    clock.advance(1)
    assert box.renders == [set(), {"stream"}], "the cancelled timer did not refresh again"


def test_a_zero_rate_still_coalesces_marks_made_together(clock):
    box = Recorder(rate=0, scheduler=clock)
    box.flush()
    box.mark("a")
    box.mark("b")
    clock.advance(0)
    assert box.renders == [set(), {"a", "b"}]


async def test_by_default_the_running_loop_paces_the_refreshes():
    refreshed = asyncio.Event()

    class Signalling(Recorder):
        def render(self, dirty: set[str]) -> None:
            super().render(dirty)
            refreshed.set()

    box = Signalling(rate=1000)
    box.mark("a")
    box.mark("b")
    assert box.renders == [], "marking only schedules the refresh"
    async with asyncio.timeout(5):
        await refreshed.wait()
    assert box.renders == [{"a", "b"}]


def test_without_an_event_loop_a_mark_refreshes_at_once():
    box = Recorder(rate=4)
    box.mark("a")
    assert box.renders == [{"a"}]


# ---------------------------------------------------------------------- run view


def test_text_deltas_are_coalesced_into_the_stream(wire, clock):
    view = RunView("main", "scripted/model", rate=4, scheduler=clock)
    view(TextDelta(text="Hello"))
    clock.advance(0)
    assert stream_texts(wire, view) == ["Hello"]
    start = wire.count()
    for i in range(40):
        view(TextDelta(text=f" w{i}"))
    clock.advance(0.125)
    assert stream_texts(wire, view, since=start) == [], "nothing is sent before the interval ends"
    clock.advance(0.125)
    full = "Hello" + "".join(f" w{i}" for i in range(40))
    assert stream_texts(wire, view, since=start) == [full], "forty deltas, one message"
    assert view.stream.outputs[0]["data"]["text/markdown"] == full


def test_finish_clears_the_stream_and_marks_the_header(wire, clock):
    view = RunView("main", "scripted/model", rate=4, scheduler=clock)
    view(TextDelta(text="the answer"))
    view.finish("done")
    assert view.stream.outputs == ()
    assert text(view.header.value).startswith("✓ main · scripted/model · done · ")


def test_a_tool_call_line_shows_its_arguments_then_a_preview_of_the_result(clock):
    view = RunView("main", "m", scheduler=clock)
    view(TextDelta(text="Let me look."))
    call = ToolCall(id="c1", name="read_file", arguments='{"path": "data/a.csv"}')
    view(ToolCallStarted(call=call))
    narration, line = view.activity.children
    assert narration.outputs[0]["data"]["text/markdown"] == "Let me look.", "text before a call becomes narration"
    assert "→ read_file(path=&#x27;data/a.csv&#x27;)" in line.value and "running…" in line.value

    view(ToolCallFinished(call=call, result="id,name\n1,<b>x</b>\n"))
    assert len(view.activity.children) == 2, "the result lands on the call's own line"
    assert "→ read_file(path=&#x27;data/a.csv&#x27;)" in line.value
    assert "✓" in line.value and "<code>id,name …</code>" in line.value, "a one-line preview, marked as cut"
    assert "<pre" in line.value and "1,&lt;b&gt;x&lt;/b&gt;" in line.value, "the whole result, escaped"

    failing = ToolCall(id="c2", name="bash", arguments='{"command": "false"}')
    view(ToolCallStarted(call=failing))
    view(ToolCallFinished(call=failing, result="exit status 1", is_error=True))
    assert "✗" in view.activity.children[-1].value and "exit status 1" in view.activity.children[-1].value


def test_a_subagents_progress_line_and_its_own_run_are_drawn_in_its_colour(wire, clock):
    """An agent file's ``color`` colours its progress line in the parent's view and its name
    in the header of its own (``%@name``) run; what the frontend is sent says so."""
    colours = {"explore": "purple", "odd": "red; background: url(x)"}.get
    view = RunView("main", "m", rate=4, scheduler=clock, color_of=colours)
    view(sub("fg-1", ToolCallStarted(call=ToolCall(id="s1", name="glob", arguments='{"pattern": "*.csv"}'))))
    view(sub("fg-2", ToolCallStarted(call=ToolCall(id="s2", name="ls", arguments="{}")), agent="odd"))
    clock.advance(0)
    purple, odd = view.activity.children
    sent = [state["value"] for state in wire.updates(purple, "value")]
    assert any("color:#6a1b9a'>explore</b>" in value for value in sent)
    assert "border-left:3px solid #6a1b9a" in purple.value, "the line is marked in the colour too"
    # not a colour: never put into the style, the agent gets its palette colour instead
    assert "url(" not in odd.value and f"color:{legible_color(agent_color('odd'))}'>odd</b>" in odd.value
    own = RunView("explore", "m", rate=4, scheduler=clock, color_of=colours)
    assert "color:#6a1b9a'>explore</b>" in own.header.value
    plain = RunView("main", "m", rate=4, scheduler=clock, color_of=colours)
    assert "<b>main</b>" in plain.header.value, "an agent without a colour of its own is not painted"


def test_a_subagent_has_one_progress_line_updated_in_place(wire, clock):
    view = RunView("main", "m", rate=4, scheduler=clock, describe_task={"fg-1": "scan the data"}.get)
    view(sub("fg-1", ToolCallStarted(call=ToolCall(id="s1", name="glob", arguments='{"pattern": "*.csv"}'))))
    clock.advance(0)
    (line,) = view.activity.children
    assert text(line.value) == "explore — scan the data · glob(pattern='*.csv') · 1 tool · 0 tokens · 0.0 s"
    assert "hnb-spin" in line.value, "a running subagent spins (CSS, no emoji font needed)"

    clock.advance(1.5)
    view(sub("fg-1", ToolCallStarted(call=ToolCall(id="s2", name="grep", arguments='{"pattern": "TODO"}'))))
    view(sub("fg-1", TurnFinished(turn=1, usage=Usage(input_tokens=1000, output_tokens=234))))
    clock.advance(0)
    assert view.activity.children == (line,), "still one line"
    assert "grep(pattern='TODO') · 2 tools · 1,234 tokens · 1.5 s" in text(line.value)

    view(sub("fg-1", ApprovalRequested(call=bash_call(), reason="bash needs approval")))
    clock.advance(0.25)
    assert text(line.value).startswith("● explore") and "waiting for approval: bash" in line.value

    usage = Usage(input_tokens=1500, output_tokens=500)
    view(sub("fg-1", RunFinished(final_text="3 files", stop_reason="end_turn", usage=usage)))
    clock.advance(0.25)
    assert text(line.value) == "✓ explore — scan the data · finished · 2 tools · 2,000 tokens · 1.8 s", "ended at its RunFinished"
    values = [state["value"] for state in wire.updates(line, "value")]
    assert text(values[-1]) == text(line.value), "each refresh updated the same widget"
    clock.advance(5)
    assert text(line.value).endswith(" 1.8 s"), "a finished line's clock stops"

    view(sub("fg-2", RunFailed(error="ProviderError: boom", usage=Usage()), agent="general-purpose"))
    assert len(view.activity.children) == 2, "another task gets its own line"
    clock.advance(0.25)
    assert text(view.activity.children[1].value).startswith("✗ general-purpose · ProviderError: boom")


@pytest.mark.parametrize("limit", ["max_turns", "token_budget", "wall_time"])
def test_a_run_stopped_by_a_limit_shows_the_stop_even_when_told_done(clock, limit):
    view = RunView("main", "m", scheduler=clock)
    view(RunFinished(final_text="partial [stopped]", stop_reason=limit, usage=Usage(input_tokens=10, turns=3)))
    view.finish("done")  # what the controller says after every run that did not raise
    assert view.state == f"stopped: {limit}"
    assert text(view.header.value).startswith(f"! main · m · stopped: {limit} · ")
    assert "✓" not in view.header.value


def test_a_limit_stop_does_not_hide_a_later_failure_and_a_normal_end_is_done(clock):
    stopped = RunView("main", "m", scheduler=clock)
    stopped(RunFinished(final_text="", stop_reason="max_turns", usage=Usage()))
    stopped.finish("interrupted")
    assert stopped.state == "interrupted"

    normal = RunView("main", "m", scheduler=clock)
    normal(RunFinished(final_text="ok", stop_reason="end_turn", usage=Usage()))
    normal.finish("done")
    assert normal.state == "done" and text(normal.header.value).startswith("✓ main · m · done · ")


def test_a_background_view_keeps_the_limit_stop_of_its_own_task(clock):
    view = RunView("explore", "m", own_task="bg-1", scheduler=clock)
    view(sub("bg-1", RunFinished(final_text="", stop_reason="token_budget", usage=Usage(output_tokens=50))))
    assert view.activity.children == (), "its own task is the run, not a subagent line"
    view.finish("done")
    assert view.state == "stopped: token_budget"


def test_a_subagent_stopped_by_a_limit_says_so_on_its_line(clock):
    view = RunView("main", "m", scheduler=clock)
    view(sub("fg-1", RunFinished(final_text="", stop_reason="max_turns", usage=Usage(input_tokens=5))))
    clock.advance(0)
    (line,) = view.activity.children
    assert text(line.value).startswith("! explore · stopped: max_turns · ")


def test_usage_a_server_did_not_report_is_not_shown_as_zero_tokens(clock):
    view = RunView("main", "local/llama", scheduler=clock)
    view(TurnFinished(turn=1, usage=Usage(turns=1, unreported_calls=1)))
    view(sub("fg-1", TurnFinished(turn=1, usage=Usage(unreported_calls=2))))
    view.flush()
    assert " · usage not reported · 1 turn · " in text(view.header.value)
    assert "0 tokens" not in view.header.value
    (line,) = view.activity.children
    assert "usage not reported" in line.value and "0 tokens" not in line.value

    view(TurnFinished(turn=2, usage=Usage(input_tokens=10, output_tokens=5, turns=2, unreported_calls=1)))
    view.flush()
    assert " · ~15 tokens (1 call estimated) · 2 turns · " in text(view.header.value)
    view(TurnFinished(turn=3, usage=Usage(input_tokens=1_150, output_tokens=50, turns=3, unreported_calls=3)))
    view.flush()
    assert " · ~1,200 tokens (estimated) · 3 turns · " in text(view.header.value)


def test_what_was_learnt_of_a_server_is_a_note_in_the_view_also_from_a_subagent(clock):
    view = RunView("main", "openai-compatible/smol", scheduler=clock)
    said = "smol at http://127.0.0.1:8014/v1 sent an empty streamed answer; streaming is off for this server"
    view(ServerAdapted(model="openai-compatible/smol", text=said))
    view(sub("fg-1", ServerAdapted(model="openai-compatible/smol", text=said + " (a subagent)")))
    view.flush()
    shown = [text(child.value) for child in view.activity.children if hasattr(child, "value")]
    assert f"⚠ {said}" in shown and f"⚠ {said} (a subagent)" in shown


def test_the_header_shows_the_context_gauge_live(wire, clock):
    view = RunView("main", "openai/gpt-4o", rate=4, scheduler=clock)
    clock.advance(0)
    assert "context" not in view.header.value, "no gauge before the first measure"
    start = wire.count()
    view(ContextMeasured(tokens=78_000, window=128_000))
    clock.advance(0.25)
    assert text(view.header.value).endswith(" · context 61% of 128k")
    assert any("context 61% of 128k" in u["value"] for u in wire.updates(view.header, "value", since=start))
    view(ContextMeasured(tokens=12_345))
    clock.advance(0.25)
    assert text(view.header.value).endswith(" · context ~12k tokens"), "an unknown window: the tokens alone"
    view(sub("fg-1", ContextMeasured(tokens=9_000, window=10_000)))
    clock.advance(0.25)
    assert text(view.header.value).endswith(" · context ~12k tokens"), "a subagent's context is its own, not the run's"


def test_compaction_is_announced_before_and_reported_after(clock):
    view = RunView("main", "m", scheduler=clock)
    view(TextDelta(text="Reading."))
    view(CompactionStarted(reason="threshold", tokens=9_800, window=12_000))
    view(Compacted(reason="threshold", cleared=4, summarised=12, tokens_before=9_800, tokens_after=4_100, window=12_000))
    narration, before, after = view.activity.children
    assert narration.outputs[0]["data"]["text/markdown"] == "Reading."
    assert before.value == "<i>⇣ compacting the conversation (near the context limit): context 82% of 12k</i>"
    assert after.value == (
        "<i>⇣ compacted: 4 tool results cleared, 12 messages summarised · 9,800 → 4,100 tokens</i>"
    )
    view(sub("fg-1", Compacted(reason="context_length", cleared=1, summarised=0, tokens_before=50, tokens_after=20)))
    view.flush()
    assert "compacted: 1 tool result cleared · 50 → 20 tokens" in view.activity.children[-1].value


def test_the_header_and_subagent_lines_show_cost_where_it_is_known(clock):
    view = RunView("main", "anthropic/claude-sonnet-4-5", scheduler=clock)
    view(TurnFinished(turn=1, usage=Usage(input_tokens=10, turns=1)))
    view.flush()
    assert "$" not in view.header.value and "cost" not in view.header.value  # nothing priced: no figure
    view(TurnFinished(turn=2, usage=Usage(input_tokens=10, turns=2, cost=0.01234)))
    view(sub("fg-1", TurnFinished(turn=1, usage=Usage(output_tokens=3, cost=0.002, unpriced_calls=1))))
    view.flush()
    assert text(view.header.value).endswith(" s · $0.0123")
    (line,) = view.activity.children
    assert text(line.value).endswith("· $0.0020 (1 call unpriced)")


def test_a_budget_warning_is_noted_in_the_run_and_on_a_subagents_line(clock):
    view = RunView("main", "m", scheduler=clock)
    view(BudgetWarning(limit="budget_usd", spent=0.41, budget=0.5))
    view(sub("fg-1", BudgetWarning(limit="token_budget", spent=8_500, budget=10_000, agent="explore")))
    clock.advance(0)
    note, line = view.activity.children
    assert note.value == "<i>⚠ budget: used 82% of the $0.5000 budget ($0.4100)</i>"
    assert "⚠ budget: used 85% of the 10,000-token budget (8,500 tokens)" in line.value


def test_the_text_plain_form_is_stable(clock):
    view = RunView("main", "openai/gpt-4o-mini", scheduler=clock)
    first = view._repr_mimebundle_()["text/plain"]
    view(TextDelta(text="streaming"))
    view(TurnFinished(turn=1, usage=Usage(input_tokens=99)))
    view(ContextMeasured(tokens=99, window=128_000))
    clock.advance(12.5)
    view.finish("done")
    assert view._repr_mimebundle_()["text/plain"] == first == repr(view) == "agent run: main · openai/gpt-4o-mini"
    assert "application/vnd.jupyter.widget-view+json" in view._repr_mimebundle_()
    view.set_title("background bg-2")
    assert repr(view) == "agent run: main · openai/gpt-4o-mini · background bg-2"


def test_a_background_completion_is_posted_into_the_view(shell, clock):
    view = RunView("explore", "m", own_task="bg-1", scheduler=clock)
    view.post_completion("**bg-1** · explore · completed\n\nthe data has 3 rows")
    view.post_completion("**bg-2** · explore · failed\n\nboom")
    first, second = view.completions.outputs
    assert first["output_type"] == "display_data"
    assert first["data"]["text/markdown"] == "**bg-1** · explore · completed\n\nthe data has 3 rows"
    assert first["data"]["text/plain"] == first["data"]["text/markdown"], "readable where Markdown is not rendered"
    assert second["data"]["text/markdown"].endswith("boom")


def test_a_background_completion_shows_the_launching_runs_usage_with_the_task_billed(shell, clock):
    view = RunView("main", "m", scheduler=clock)
    view(TurnFinished(turn=1, usage=Usage(input_tokens=40, turns=1)))
    view.finish("done")
    assert " · 40 tokens · " in text(view.header.value)
    view.post_completion("**bg-1** · explore · completed\n\nrows: 3", usage=Usage(input_tokens=940, turns=3))
    clock.advance(1)
    assert " · 940 tokens · 3 turns · " in text(view.header.value)


# ---------------------------------------------------------------------- approvals


async def wait_for_card(view: RunView) -> ApprovalCard:
    async with asyncio.timeout(5):
        while not view.cards:
            await asyncio.sleep(0)
    card = view.cards[-1]
    assert isinstance(card, ApprovalCard)
    return card


async def ask_in_view(view: RunView, call: ToolCall, reason: str, risk: str) -> tuple[asyncio.Task, ApprovalCard]:
    """Ask through ``view``'s channel (no timeout): the pending answer and its card."""
    ask = view.approval_channel(timeout=None, unattended=None)
    answer = asyncio.create_task(ask(call, reason, risk), name="ask")
    return answer, await wait_for_card(view)


@pytest.mark.parametrize(
    ("button", "expected", "status"),
    [
        ("approve_button", Approved(), "✓ Approved by you: rm -rf build"),
        ("deny_button", Denied("", by_person=True), "✗ Denied by you: rm -rf build"),
    ],
)
async def test_an_approval_card_is_answered_by_its_buttons(wire, clock, button, expected, status):
    view = RunView("main", "m", scheduler=clock)
    ask = view.approval_channel(timeout=None, unattended=None)
    answer = asyncio.create_task(ask(bash_call("rm -rf build"), "bash needs approval", "high"), name="ask")
    card = await wait_for_card(view)
    assert "<b>Approve bash?</b>" in card.summary.value and "risk high" in text(card.summary.value)
    assert "&quot;command&quot;: &quot;rm -rf build&quot;" in card.summary.value, "the raw JSON, behind its toggle"
    view.flush()
    assert text(view.header.value).startswith("● main · m · waiting · ")
    assert not answer.done(), "only a click answers"

    wire.click(getattr(card, button))
    async with asyncio.timeout(5):
        assert await answer == expected
    assert card.approve_button.disabled and card.deny_button.disabled
    assert text(card.status.value) == status
    assert card.children == (card.status,), "a decided card is one line"
    view.flush()
    assert " · running · " in text(view.header.value), "the header goes back to running"
    wire.click(card.approve_button)  # a late click on a settled card changes nothing
    assert text(card.status.value) == status


async def test_a_reason_typed_into_the_card_goes_with_deny(wire, clock):
    view = RunView("main", "m", scheduler=clock)
    answer, card = await ask_in_view(view, bash_call("rm -rf data"), "bash needs approval", "high")
    assert card.reason_box.placeholder == "Reason (optional) — tells the agent why"
    (row,) = [c for c in card.children[1].children if card.deny_button in getattr(c, "children", ())]
    assert row.children == (card.deny_button, card.reason_box), "the box sits beside Deny, and wraps with it"

    wire.type_into(card.reason_box, "keep the raw data, it is the only copy")
    assert not answer.done(), "typing alone decides nothing"
    wire.click(card.deny_button)
    async with asyncio.timeout(5):
        assert await answer == Denied("keep the raw data, it is the only copy", by_person=True)
    assert card.reason_box.disabled and card.deny_button.disabled
    assert text(card.status.value) == "✗ Denied by you: keep the raw data, it is the only copy · rm -rf data"
    shown = wire.updates(card.status, "value")
    assert shown and "Denied by you: keep the raw data" in text(shown[-1]["value"]), "the frontend was told"
    assert wire.updates(card.reason_box, "disabled")[-1]["disabled"] is True


async def test_enter_in_the_reason_box_denies_with_the_reason(wire, clock):
    card = ApprovalCard(bash_call("rm -rf data"), "bash needs approval", "high")
    waiting = asyncio.create_task(card.decision(None), name="decision")
    wire.type_into(card.reason_box, "not today")
    wire.frontend(card.reason_box, {"method": "custom", "content": {"event": "submit"}})
    async with asyncio.timeout(5):
        assert await waiting == Denied("not today", by_person=True)
    assert text(card.status.value) == "✗ Denied by you: not today · rm -rf data"


async def test_a_long_or_escaped_reason_is_cleaned_and_bounded(wire, clock):
    card = ApprovalCard(bash_call("rm -rf data"), "bash needs approval", "high")
    waiting = asyncio.create_task(card.decision(None), name="decision")
    typed = "\x1b[31mstop\x1b[0m\nnow\u202e\x07 " + "x" * 2000
    wire.type_into(card.reason_box, typed)
    wire.click(card.deny_button)
    async with asyncio.timeout(5):
        answer = await waiting
    assert isinstance(answer, Denied) and answer.by_person
    assert answer.feedback.startswith("stop now x") and answer.feedback.endswith("…")
    assert len(answer.feedback) == 500
    assert not any(ord(c) < 32 or c == "\u202e" for c in answer.feedback)
    assert "\x1b" not in card.status.value


async def test_a_timeout_is_not_the_persons_denial_even_with_a_reason_typed(clock, wire):
    card = ApprovalCard(bash_call(), "bash needs approval", "high")
    wire.type_into(card.reason_box, "half-typed")
    answer = await card.decision(0.01)
    assert answer == Denied("nobody answered within 0.01 s: denied") and not answer.by_person
    assert card.reason_box.disabled


async def test_approve_for_this_session_answers_with_the_rule_the_card_shows(wire, clock):
    view = RunView("main", "m", scheduler=clock)
    answer, card = await ask_in_view(view, bash_call("git push origin main"), "uses the network", "medium")
    assert card.session_button.description == "Approve for this session"
    assert "<code" in card.session_rule_text.value and "Bash(git push origin main)" in card.session_rule_text.value
    assert "Bash(git push origin main)" in card.session_button.tooltip

    wire.click(card.session_button)
    async with asyncio.timeout(5):
        result = await answer
    assert isinstance(result, Approved) and str(result.remember) == "Bash(git push origin main)"
    assert card.approve_button.disabled and card.session_button.disabled and card.deny_button.disabled
    assert text(card.status.value) == (
        "✓ Approved for this session: git push origin main "
        "(Bash(git push origin main) runs without asking until the kernel stops)"
    )
    shown = wire.updates(card.status, "value")
    assert shown and "Approved for this session" in shown[-1]["value"], "the frontend was told"


async def test_a_call_with_unreadable_arguments_offers_no_session_rule():
    card = ApprovalCard(ToolCall(id="1", name="bash", arguments="{broken"), "bash needs approval", "high")
    assert card.rule is None and card.session_button.disabled and card.session_rule_text.value == ""


async def test_an_unanswered_approval_is_denied_after_the_timeout(clock):
    view = RunView("main", "m", scheduler=clock)
    ask = view.approval_channel(timeout=0.01, unattended=None)
    async with asyncio.timeout(5):
        answer = await ask(bash_call(), "bash needs approval", "medium")
    assert answer == Denied("nobody answered within 0.01 s: denied")
    (card,) = view.cards
    assert card.approve_button.disabled and text(card.status.value) == "✗ Denied: nobody answered within 0.01 s · ls"


async def test_an_interrupted_approval_settles_its_card_and_re_raises():
    card = ApprovalCard(bash_call(), "bash needs approval", "high")
    waiting = asyncio.create_task(card.decision(None), name="decision")
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert card.approve_button.disabled and text(card.status.value) == "■ Interrupted: before you decided · ls"


@pytest.mark.parametrize(
    ("policy", "expected", "verdict"),
    [("approve", Approved(), "approved"), ("deny", Denied("no one can answer here (unattended run): denied"), "denied")],
)
async def test_an_unattended_run_decides_at_once_and_says_so(clock, policy, expected, verdict):
    view = RunView("main", "m", scheduler=clock)
    ask = view.approval_channel(timeout=30, unattended=policy)
    assert await ask(bash_call("make"), "bash needs approval", "high") == expected
    assert view.cards == [], "no card that nobody could click"
    (note,) = view.activity.children
    assert f"approval for bash(command=&#x27;make&#x27;) (bash needs approval): {verdict} automatically" in note.value


async def test_an_approval_card_has_a_stable_text_plain_form():
    card = ApprovalCard(bash_call("ls -la"), "bash needs approval", "high")
    assert card._repr_mimebundle_()["text/plain"] == "approval: bash(command='ls -la') (bash needs approval)"
    assert repr(card) == "approval: bash(command='ls -la') (bash needs approval)"


# ---------------------------------------------------------------------- team view


TEAM_SCRIPT = {
    "alice": [
        {"tool_calls": [call("read_file", path="sales.csv")]},
        {"text": "sales.csv has 3 rows."},
        {"match": "columns", "text": "date, region, revenue."},
        {"match": "empty", "text": "no empty cells."},
    ],
    "bob": [{"text": "report.py sums revenue.", "usage": {"unreported_calls": 1}}],
}


async def test_the_team_view_has_an_area_per_teammate_and_the_message_log(tmp_path, wire, clock):
    h, _, _ = make_harness(tmp_path, TEAM_SCRIPT)
    manager = teams(h)
    view = TeamView(manager, scheduler=clock)
    assert view.members.children == ()
    assert view.plain_text() == "team view\nno teammates yet\nmessages:\n(no messages yet)"

    await manager.spawn("reader", "Count the rows of sales.csv.", team="analysis", name="alice")
    await manager.spawn("reader", "Read report.py.", team="analysis", name="bob")
    async with asyncio.timeout(10):
        await manager.wait_idle("alice", turns=1)
        await manager.wait_idle("bob", turns=1)
    clock.advance(1)

    alice, bob = view._panels["alice"], view._panels["bob"]
    assert view.members.children == (alice.widget, bob.widget)
    assert view.members.get_title(0).startswith("○ alice (reader, analysis) · idle · ")
    assert view.members.get_title(0).endswith(" tokens")
    assert view.members.get_title(1) == "○ bob (reader, analysis) · idle · usage not reported"
    assert "→ read_file(path=&#x27;sales.csv&#x27;)" in alice.activity.value
    assert "✓ sales.csv has 3 rows." in alice.activity.value
    assert "read_file" not in bob.activity.value and "✓ report.py sums revenue." in bob.activity.value
    assert "teams: analysis · 2 teammates" in view.header.value

    text = view.plain_text()
    assert text.startswith("team view\nname   team      agent   state  tokens              last message\n")
    assert "bob    analysis  reader  idle   usage not reported  report.py sums revenue." in text
    assert "alice → team-lead [idle_notification]: sales.csv has 3 rows." in text
    assert repr(view) == text


async def test_the_team_views_text_box_messages_its_teammate(tmp_path, wire, clock):
    h, _, _ = make_harness(tmp_path, TEAM_SCRIPT)
    manager = teams(h)
    view = TeamView(manager, scheduler=clock)
    await manager.spawn("reader", "Count the rows of sales.csv.", name="alice")
    async with asyncio.timeout(10):
        await manager.wait_idle("alice", turns=1)
    clock.advance(1)
    panel = view._panels["alice"]
    assert panel.box.placeholder == "message alice…"

    wire.click(panel.send)  # an empty box sends nothing
    wire.type_into(panel.box, "which columns?")
    wire.click(panel.send)
    assert panel.box.value == "", "the box is cleared at once"
    async with asyncio.timeout(10):
        await manager.wait_idle("alice", turns=2)
    clock.advance(1)
    shown = [u["value"] for u in wire.updates(panel.status, "value")]
    assert any("delivered to alice" in v for v in shown), "the receipt was shown"
    assert panel.status.value == "", "and cleared once alice acted on the message: no stale status"
    assert "← team-lead: which columns?" in panel.activity.value
    assert "✓ date, region, revenue." in panel.activity.value
    assert "team-lead → alice: which columns?" in view.plain_text()

    wire.type_into(panel.box, "any empty cells?")
    wire.frontend(panel.box, {"method": "custom", "content": {"event": "submit"}})  # Enter
    async with asyncio.timeout(10):
        await manager.wait_idle("alice", turns=3)
    clock.advance(1)
    assert "✓ no empty cells." in panel.activity.value
    view.close()
    assert view._on_event not in manager.on_event, "a closed view stops listening"


# ---------------------------------------------------------------------- reading the run view


EMOJI = ("⏳", "⏸", "💤")


def everything_sent(wire: WidgetWire) -> str:
    return "\n".join(str(m.data) for m in wire.messages)


def test_the_clock_ticks_while_the_run_lives_and_stops_when_it_ends(wire, clock):
    view = RunView("main", "m", rate=4, scheduler=clock)
    assert text(view.header.value).startswith("main · m · running · 0 tokens · 0 turns · 0.0 s")
    clock.advance(6)
    assert " · 6.0 s" in text(view.header.value), "no event for 6 s, and still the clock moved"
    clock.advance(0.5)
    view.finish("done")
    assert " · 6.5 s" in text(view.header.value)
    assert clock.pending() == [], "a finished run schedules nothing"
    clock.advance(10)
    assert " · 6.5 s" in text(view.header.value)


def test_waiting_for_the_model_shows_a_spinner_until_something_happens(wire, clock):
    view = RunView("main", "m", rate=4, scheduler=clock)
    assert "hnb-spin" in view.status.value and text(view.status.value) == "waiting for the model…"
    clock.advance(3)
    assert text(view.status.value) == "waiting for the model… 3 s"
    view(TextDelta(text="Looking"))
    clock.advance(0.25)
    assert view.status.value == "", "the first token ends the wait"
    call = bash_call("ls")
    view(ToolCallStarted(call=call))
    clock.advance(0.25)
    assert view.status.value == "", "a running tool is its own news"
    view(ToolCallFinished(call=call, result="a.csv"))
    clock.advance(0.25)
    assert text(view.status.value) == "waiting for the model…", "back to the model after the tool"
    view.finish("done")
    assert view.status.value == ""
    assert not any(e in everything_sent(wire) for e in EMOJI), "no glyph needs an emoji font"


def test_the_activity_is_in_order_and_the_answer_streams_below_it(clock):
    view = RunView("main", "m", scheduler=clock)
    view(TextDelta(text="First I list."))
    view(ToolCallStarted(call=bash_call("ls", "c1")))
    view(ToolCallFinished(call=bash_call("ls", "c1"), result="a.csv"))
    view(TextDelta(text="Then I count."))
    view(ToolCallStarted(call=bash_call("wc -l a.csv", "c2")))
    view(ToolCallFinished(call=bash_call("wc -l a.csv", "c2"), result="3 a.csv"))
    view(TextDelta(text="It has 3 lines."))
    view.flush()
    first, ls, second, wc = view.activity.children
    assert first.outputs[0]["data"]["text/markdown"] == "First I list." and "ls" in ls.value
    assert second.outputs[0]["data"]["text/markdown"] == "Then I count." and "wc -l a.csv" in wc.value
    assert view.stream.outputs[0]["data"]["text/markdown"] == "It has 3 lines."
    order = list(view.children)
    assert order.index(view.header) < order.index(view.activity) < order.index(view.stream), "the answer comes last"
    assert "hnb-activity" in view.activity._dom_classes, "a muted block, apart from the answer"


def test_the_activity_folds_after_the_run_and_opens_again_on_click(wire, clock):
    view = RunView("main", "m", scheduler=clock)
    plot = ToolCall(id="p", name="run_python", arguments='{"code": "plot()"}')
    for started in (bash_call("ls", "c1"), plot):
        view(ToolCallStarted(call=started))
    view(ToolCallFinished(call=bash_call("ls", "c1"), result="a.csv"))
    figure = DisplayData(data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    view(ToolCallFinished(call=plot, result="<Figure>", displays=(figure,)))
    assert view.toggle.layout.display == "none", "no fold while it runs"
    clock.advance(2.75)
    view.finish("done")
    assert view.activity.layout.display == "none"
    assert view.toggle.layout.display is None and view.toggle.description == "2 tool calls · 2.8 s ▸"
    (shown,) = view.exhibits.children
    assert shown.outputs[0]["data"]["image/png"] == "iVBORw0KGgo=", "what a tool displayed stays in sight"
    wire.click(view.toggle)
    assert view.activity.layout.display is None and view.toggle.description.endswith(" ▾")
    assert view.exhibits.children == (), "open, the figure is in its place in the activity"
    wire.click(view.toggle)
    assert view.activity.layout.display == "none"


async def test_each_card_sits_below_its_own_tool_line_which_says_it_awaits_approval(clock):
    view = RunView("main", "m", scheduler=clock)
    first, second = bash_call("rm -rf a", "c1"), bash_call("rm -rf b", "c2")
    view(ToolCallStarted(call=first))
    view(ToolCallStarted(call=second))
    view(ApprovalRequested(call=second, reason="recursive delete", risk="high"))
    answer, card = await ask_in_view(view, second, "recursive delete", "high")
    line_a, line_b, shown = view.activity.children
    assert shown is card, "the card is right below the line of its call"
    assert text(line_b.value).endswith("· ● awaiting your approval") and "running" not in line_b.value
    assert "running…" in line_a.value
    card.deny_button.click()
    denied = await answer
    view(ApprovalDecided(call=second, approved=False, feedback=denied.feedback, by_person=True))
    view(ToolCallFinished(call=second, result='error: the person denied this call (they gave no reason). Do not retry it unchanged: ...', is_error=True))
    assert text(line_b.value) == "→ bash(command='rm -rf b') · ✗ Denied by you"
    assert "Do not retry" not in line_b.value, "what the model is told is not what the person reads"


async def test_a_card_shows_the_call_as_code_and_keeps_the_raw_json_behind_a_toggle():
    shell = ApprovalCard(bash_call("rm -rf scratch && ls"), "recursive delete", "high")
    assert "<pre class='hnb-shell'>" in shell.summary.value
    assert "$ rm -rf scratch && ls" in text(shell.summary.value)
    assert "<details class='hnb-raw'><summary" in shell.summary.value and "raw arguments (JSON)" in shell.summary.value

    code = "import pandas as pd\n# the totals\ntotal = df['units'].sum()  # 'x'\nprint(total)\n"
    python = ApprovalCard(ToolCall(id="p", name="run_python", arguments=json.dumps({"code": code})), "runs code", "high")
    body, _, raw = python.summary.value.partition("<details")
    assert "<pre class='hnb-code'>" in body and "\\n" not in body, "real lines, not one JSON-escaped string"
    assert "\\n" in raw, "the JSON as sent is behind the toggle"
    assert "var(--jp-mirror-editor-keyword-color" in body and "var(--jp-mirror-editor-comment-color" in body
    assert "import pandas as pd" in text(body) and "# the totals" in text(body)

    write = ToolCall(id="w", name="write_file", arguments=json.dumps({"path": "notes.md", "content": "# Notes\n- one\n"}))
    card = ApprovalCard(write, "writes a file", "medium")
    assert "write notes.md" in text(card.summary.value) and "# Notes" in text(card.summary.value)

    edit = ToolCall(id="e", name="edit_file", arguments=json.dumps({"path": "a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"}))
    diff = ApprovalCard(edit, "edits a file", "medium").summary.value
    assert "<pre class='hnb-diff'>" in diff and "-x = 1" in text(diff) and "+x = 2" in text(diff)


def test_machine_forms_read_as_plain_lines(clock):
    view = RunView("main", "m", scheduler=clock)
    done = "<background-task-completed id=\"bg-1\" agent=\"explore\" status=\"completed\">3 files</background-task-completed>"
    idle = (
        '<teammate-message from="alice" kind="idle_notification">alice finished its turn and is idle. '
        "Its last message:\nsales.csv has 3 rows</teammate-message>"
    )
    view(MessagesInjected(texts=(done, idle)))
    first, second = view.activity.children
    assert text(first.value) == "⇢ bg-1 (explore) finished: 3 files"
    assert text(second.value) == "⇢ alice reported: sales.csv has 3 rows"

    delegate = ToolCall(id="t", name="task", arguments='{"subagent_type": "explore", "prompt": "count"}')
    view(ToolCallStarted(call=delegate))
    view(ToolCallFinished(call=delegate, result='<task id="fg-1" state="completed"><task_result>3 rows\nmore</task_result></task>'))
    line = view.activity.children[-1]
    assert "fg-1 finished: 3 rows …" in text(line.value) and "&lt;task" not in line.value
    background = ToolCall(id="b", name="task", arguments='{"run_in_background": true}')
    view(ToolCallStarted(call=background))
    view(ToolCallFinished(call=background, result='<task id="bg-2" state="running"/>'))
    assert "bg-2 started in the background" in text(view.activity.children[-1].value)
    spawn = ToolCall(id="s", name="task", arguments='{"name": "alice"}')
    view(ToolCallStarted(call=spawn))
    view(ToolCallFinished(call=spawn, result='<teammate id="tm-1" name="alice" team="review" state="running"/>'))
    assert "alice started as a teammate (tm-1, team review)" in text(view.activity.children[-1].value)
    assert "&lt;" not in "".join(c.value for c in view.activity.children if isinstance(c, type(line)))


def test_subagent_lines_keep_figures_whole_and_each_agent_its_colour(clock):
    view = RunView("main", "m", scheduler=clock)
    view(sub("fg-1", TurnFinished(turn=1, usage=Usage(input_tokens=1000, output_tokens=234))))
    view(sub("fg-2", ToolCallStarted(call=bash_call()), agent="reviewer"))
    view.flush()
    explore, reviewer = view.activity.children
    assert "<span class='hnb-nw' style='white-space:nowrap'>1,234 tokens</span>" in explore.value
    assert agent_color("explore") != agent_color("reviewer") or PALETTE, "a palette colour per name"
    assert agent_color("explore") == agent_color("explore") and agent_color("explore") in PALETTE
    assert f"--hnb-agent:{agent_color('explore')}" in explore.value
    assert f"--hnb-agent:{agent_color('reviewer')}" in reviewer.value


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_state_colours_reach_4_5_to_1_on_light_and_dark_backgrounds():
    light, _, dark = STYLE.partition('body[data-jp-theme-light="false"]')
    for block, background in ((light, "#ffffff"), (dark, "#111111")):
        for name in ("run", "ok", "warn", "err"):
            colour = re.search(rf"--hnb-{name}: (#[0-9a-f]{{6}})", block)
            assert colour, name
            assert _contrast(colour.group(1), background) >= 4.5, (name, colour.group(1), background)


def test_every_agent_colour_is_legible_as_a_name_on_a_white_notebook():
    """Claude Code's yellow and orange (and any #rrggbb a file sets) are darkened just
    enough to read; a colour that reads already is kept as the file says."""
    for colour in [*AGENT_COLORS.values(), *PALETTE, "#ffff00", "#fff", "#0f0"]:
        text_colour = legible_color(colour)
        full = text_colour if len(text_colour) == 7 else "#" + "".join(c * 2 for c in text_colour[1:])
        assert _contrast(full, "#ffffff") >= 4.5, (colour, text_colour)
    assert legible_color(AGENT_COLORS["purple"]) == AGENT_COLORS["purple"]
    assert legible_color(AGENT_COLORS["yellow"]) != AGENT_COLORS["yellow"]
    yellow = agent_name("checker", AGENT_COLORS["yellow"])
    assert f"--hnb-agent:{AGENT_COLORS['yellow']};" in yellow, "the pure colour stays for the dark theme's mix"
    assert f"color:{legible_color(AGENT_COLORS['yellow'])}'" in yellow
    assert legible_color("red; background: url(x)") == "red; background: url(x)", "only hex is reshaded"


def test_tables_are_left_aligned_and_task_show_has_the_whole_prompt(tmp_path):
    from harness_nb.notebook.magics.agent import TaskTable, task_details
    from harness_nb.subagents import TaskTracker

    tracker = TaskTracker()
    prompt = "Count the rows of sales.csv.\n\nThen say which columns are empty — every one of them, please."
    entry = tracker.start("subagent", "explore", prompt, description="count rows")
    html_table = TaskTable([entry])._repr_html_()
    assert "text-align:left" in html_table and "<td style='text-align:left" in html_table
    shown = task_details(entry)
    assert "> Count the rows of sales.csv.\n>\n> Then say which columns are empty — every one of them, please." in shown


async def test_the_team_view_fills_in_what_teammates_did_before_it_existed(tmp_path, wire, clock):
    h, _, _ = make_harness(tmp_path, TEAM_SCRIPT)
    manager = teams(h)
    await manager.spawn("reader", "Count the rows of sales.csv.", team="analysis", name="alice")
    async with asyncio.timeout(10):
        await manager.wait_idle("alice", turns=1)
    view = TeamView(manager, scheduler=clock)  # made after alice's first turn
    alice = view._panels["alice"]
    lines = [text(div) for div in re.findall(r"<div>.*?</div>", alice.activity.value)]
    assert lines == [
        "← team-lead: Count the rows of sales.csv.",
        "→ read_file(path='sales.csv')",
        "✓ sales.csv has 3 rows.",
    ], "backfilled in order, the answer once"
    assert "no activity yet" not in alice.activity.value
    assert "alice reported: sales.csv has 3 rows." in text(view.messages.value)
    assert "[idle_notification]" not in view.messages.value, "the log reads in words"
    assert "<td style='text-align:left" in view.roster.value and "alice" in text(view.roster.value)
    assert not any(e in everything_sent(wire) for e in EMOJI)


# ---------------------------------------------------------------------- the static copy


async def test_a_finished_run_has_a_static_copy_of_everything_it_showed(shell, wire, clock):
    view = RunView("main", "scripted/m", scheduler=clock, pending=PendingApprovals())
    assert view._repr_mimebundle_()["text/html"].startswith(MARK_OPEN), "the bundle carries it from the start"
    view(TextDelta(text="Cleaning up."))
    rm = bash_call("rm -rf build", "c1")
    view(ToolCallStarted(call=rm))
    answer, card = await ask_in_view(view, rm, "recursive delete", "high")
    assert not view.settled, "a card waits"
    wire.click(card.approve_button)
    await answer
    view(ToolCallFinished(call=rm, result="(no output)\nexit code: 0"))
    plot = ToolCall(id="p", name="run_python", arguments='{"code": "plot()"}')
    view(ToolCallStarted(call=plot))
    figure = DisplayData(data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    view(ToolCallFinished(call=plot, result="<Figure>", displays=(figure,)))
    view(sub("fg-1", RunFinished(final_text="3 files", stop_reason="end_turn", usage=Usage(output_tokens=9))))
    view(TurnFinished(turn=2, usage=Usage(input_tokens=100, output_tokens=20, turns=2)))
    clock.advance(2)
    view.finish("done")
    view.post_completion("**bg-9** · explore · completed\n\nthe data has 3 rows")
    assert view.settled

    page = view.static_html()
    assert page.startswith(MARK_OPEN) and page.endswith(MARK_CLOSE)
    read = text(page)
    assert read.startswith("✓ main · scripted/m · done · 120 tokens · 2 turns · 2.0 s")
    assert "3 tool calls" not in read and "2 tool calls · 1 subagent · 2.0 s" in read, "the fold's summary"
    assert "<details class='hnb-activity-static'>" in page, "folded, as the live view ends"
    assert "Cleaning up." in read and "→ bash(command='rm -rf build') ✓ (no output)" in read
    assert "✓ Approved by you: rm -rf build" in read, "the decided card, as its one line"
    assert "✓ explore · finished · 0 tools · 9 tokens" in read
    assert "<img src='data:image/png;base64,iVBORw0KGgo='" in page, "what the tool displayed"
    assert page.index("<img") > page.index("</details>"), "in sight below the fold"
    assert "the data has 3 rows" in read, "background results posted into the view"
    assert "<strong>bg-9</strong>" in page, "their Markdown rendered"
    view.post_completion("**bg-8** · done\n\n<img src=x onerror=alert(1)>")
    assert "<img src=x" not in view.static_html(), "HTML inside an answer's Markdown stays text"
    assert "class='hnb-spin'" not in page and "<script" not in page, "nothing moves in a saved copy"
    bundle = view.static_bundle()
    assert set(bundle) == {"text/plain", "text/html"} and bundle["text/plain"] == "agent run: main · scripted/m"


def test_a_run_that_started_background_work_settles_only_when_its_result_is_in(shell, clock):
    view = RunView("main", "m", scheduler=clock)
    delegate = ToolCall(id="t", name="task", arguments='{"run_in_background": true}')
    view(ToolCallStarted(call=delegate))
    view(ToolCallFinished(call=delegate, result='<task id="bg-1" state="running"/>'))
    view.finish("done")
    assert not view.settled, "bg-1's result is still to land here: the widget must stay"
    view.post_completion("**bg-1** · explore · completed\n\nok", task_id="bg-1")
    assert view.settled


def widget_ids(box: Any) -> set[str]:
    """``box`` and every widget below it."""
    found = {box.model_id}
    for child in getattr(box, "children", ()):
        found |= widget_ids(child)
    return found


async def test_waiting_cards_are_kept_until_decided_and_can_be_shown_again(wire, clock):
    pending = PendingApprovals()
    view = RunView("main", "m", scheduler=clock, pending=pending)
    answer, card = await ask_in_view(view, bash_call("rm -rf data"), "recursive delete", "high")
    assert list(pending) == [card]
    again = WaitingCards(list(pending))
    (twin,) = [c for c in again.children if isinstance(c, ApprovalCard)]
    assert not widget_ids(twin) & widget_ids(card), "a copy of new widgets: a reloaded page may not know the card's"
    assert again.plain_text() == "1 approval waiting:\napproval: bash(command='rm -rf data') (recursive delete)"
    wire.click(twin.approve_button)  # the copy answers the card's call
    assert await answer == Approved()
    assert list(pending) == [], "a decided card is no longer waiting"
    assert text(twin.status.value) == text(card.status.value) == "✓ Approved by you: rm -rf data", "both fold"
    assert twin.approve_button.disabled and twin.children == (twin.status,)


async def test_a_reason_typed_into_a_copy_goes_with_its_deny(wire, clock):
    card = ApprovalCard(bash_call("rm -rf data"), "bash needs approval", "high")
    waiting = asyncio.create_task(card.decision(None), name="decision")
    twin = card.copy()
    wire.type_into(card.reason_box, "typed into the other copy")
    wire.type_into(twin.reason_box, "keep it")
    wire.click(twin.deny_button)
    async with asyncio.timeout(5):
        assert await waiting == Denied("keep it", by_person=True)
    assert text(twin.status.value) == "✗ Denied by you: keep it · rm -rf data"
    assert twin.reason_box.disabled
