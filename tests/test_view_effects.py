"""The effects line of a run view without a kernel (widgets on a recording comm): right
under its tool line, with an undo button whose click starts the undo and shows what it
did; the static copy shows the checkpoint number instead of the button; a subagent's
effects on its progress line, a revert as a note; the terminal's lines."""

from __future__ import annotations

import asyncio
import io

import ipywidgets as widgets
import pytest

from harness_nb.core import EffectsRecorded, SubagentUpdate, ToolCall, ToolCallFinished, ToolCallStarted
from harness_nb.notebook.widgets.view import RunView
from harness_nb.testing.kernel_driver import visible_text as text
from harness_nb.textview import TextView
from widget_support import ManualClock, wire  # noqa: F401 - an autouse fixture

CALL = ToolCall(id="c1", name="bash", arguments='{"command": "find data -delete"}')
EFFECTS = EffectsRecorded(
    call=CALL,
    line="deleted data/ (3 files)",
    checkpoint=3,
    reverted="the command wrote .mcp.json, which only you may change: reverted",
)


def buttons(box: widgets.Widget) -> list[widgets.Button]:
    found = []
    for child in getattr(box, "children", ()):
        found += [child] if isinstance(child, widgets.Button) else buttons(child)
    return found


async def test_the_effects_line_sits_under_its_tool_line_and_its_undo_shows_what_it_did(wire):
    undone: list[int] = []

    def undo(number: int) -> asyncio.Task[tuple[bool, str]]:
        undone.append(number)

        async def work() -> tuple[bool, str]:
            return True, "undid checkpoint #3 (bash by main): brought back data/ (3 files)"

        return asyncio.get_running_loop().create_task(work())

    view = RunView("main", "m", scheduler=ManualClock(), undo=undo)
    settled: list[bool] = []
    view.when_settled = lambda: settled.append(view.settled)
    view(ToolCallStarted(call=CALL))
    view(EFFECTS)
    view(ToolCallFinished(call=CALL, result="(no output)\nexit code: 0\n\n[effects: deleted data/ (3 files) — …]"))
    view.finish("done")
    tool_line, effects = view.activity.children
    assert "[effects" not in tool_line.value, "the tool line leaves the effects to their own line"
    assert text(effects.children[0].value) == (
        "⟲ deleted data/ (3 files) ⚠ the command wrote .mcp.json, which only you may change: reverted"
    )
    (button,) = buttons(effects)
    assert button.description == "undo" and not view.settled, "a view offering undo stays live"
    assert "⟲ deleted data/ (3 files) · checkpoint #3" in text(view.static_html())

    wire.click(button)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert undone == [3]
    assert "· undid checkpoint #3 (bash by main): brought back data/ (3 files)" in text(effects.children[0].value)
    assert buttons(effects) == [] and view.settled and settled == [True]


def test_retiring_the_undo_leaves_the_number_to_undo_it_with(wire):
    view = RunView("main", "m", scheduler=ManualClock(), undo=lambda n: pytest.fail("not clicked"))
    view(ToolCallStarted(call=CALL))
    view(EffectsRecorded(call=CALL, line="created out.csv", checkpoint=1))
    view.finish("done")
    assert view.retire_undo() and not view.retire_undo(), "once"
    (_tool, effects) = view.activity.children
    assert buttons(effects) == [] and view.settled
    assert text(effects.children[0].value) == "⟲ created out.csv · checkpoint #1"


def test_a_view_without_undo_shows_the_line_alone(wire):
    view = RunView("main", "m", scheduler=ManualClock())
    view(ToolCallStarted(call=CALL))
    view(EffectsRecorded(call=CALL, line="created out.csv", checkpoint=1, lost=("big.bin (over the cap)",)))
    view.finish("done")
    (_tool, effects) = view.activity.children
    assert buttons(effects) == [] and view.settled
    assert text(effects.children[0].value) == "⟲ created out.csv (cannot be undone: big.bin (over the cap))"


def test_a_subagents_effects_show_on_its_line_and_a_revert_as_a_note(wire):
    clock = ManualClock()
    view = RunView("main", "m", scheduler=clock)
    view(SubagentUpdate(task_id="fg-1", agent="explore", event=ToolCallStarted(call=CALL, agent="explore")))
    view(SubagentUpdate(task_id="fg-1", agent="explore", event=EFFECTS.model_copy(update={"agent": "explore"})))
    clock.advance(1)
    line, note = view.activity.children
    assert "⟲ deleted data/ (3 files)" in text(line.value)
    assert text(note.value) == "⚠ explore: the command wrote .mcp.json, which only you may change: reverted"


def test_the_terminal_says_what_a_call_did_and_what_was_reverted():
    out = io.StringIO()
    view = TextView(out)
    view(ToolCallStarted(call=CALL))
    view(EFFECTS)
    assert out.getvalue().splitlines()[1:] == [
        "  ⟲ deleted data/ (3 files) (checkpoint #3: rewind or undo it)",
        "  ⚠ the command wrote .mcp.json, which only you may change: reverted",
    ]


def test_what_the_walk_could_not_see_is_said_in_the_view_and_the_terminal(wire):
    partial = "partly unknown: flood/ (walk stopped at 10,000 files per folder)"
    event = EffectsRecorded(call=CALL, line="created flood/", checkpoint=2, partial=partial)
    view = RunView("main", "m", scheduler=ManualClock())
    view(ToolCallStarted(call=CALL))
    view(event)
    view.finish("done")
    (_tool, effects) = view.activity.children
    assert text(effects.children[0].value) == f"⟲ created flood/ ({partial})"
    out = io.StringIO()
    TextView(out)(event)
    assert out.getvalue().splitlines() == [
        "  ⟲ created flood/ (checkpoint #2: rewind or undo it)",
        f"  ⚠ {partial}",
    ]
