"""A run that keeps calling tools without getting anywhere (``engine/progress.py``), over the
scripted model: told once, then stopped, saying why, with the stop reason shown like the
other limit stops. The loop issue 23 measured (a tiny model whose server drops its tool
results: 50 turns, 47 of 50 calls distinct) is caught by the turns-without-text limit."""

from __future__ import annotations

from typing import Any

import pytest

from harness_nb.core import (
    AssistantMessage,
    ConfigError,
    MessagesInjected,
    RunFinished,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from harness_nb.engine import AgentEngine, Limits
from harness_nb.engine.limits import stop_label
from harness_nb.engine.progress import ProgressGuard
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.settings import RunSettings
from harness_nb.textview import TextView
from harness_nb.tools import ToolContext, ToolRegistry, tool

NOTE = "Note from the harness: "


@tool(read_only=True)
async def look(ctx: ToolContext, path: str) -> str:
    """Say what is at a path (always the same for one path)."""
    return f"{path}: nothing here"


def looking(*paths: str, text: str = "") -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": "look", "arguments": {"path": p}} for p in paths]}


async def run(script: list[dict[str, Any]], limits: Limits | None = None) -> tuple[Any, list[Any], ScriptedProvider]:
    provider = ScriptedProvider(script)
    engine = AgentEngine(provider, ToolRegistry([look]), limits=limits or Limits())
    events: list[Any] = []
    result = await engine.run("what is in the project?", on_event=events.append)
    return result, events, provider


def notes(events: list[Any]) -> list[str]:
    return [t for e in events if isinstance(e, MessagesInjected) for t in e.texts]


async def test_the_same_call_with_the_same_result_is_told_once_then_stopped() -> None:
    script = [looking("a")] * 3 + [looking("a")] * 3
    result, events, provider = await run(script)
    assert result.stop_reason == "max_repeated_calls" and result.turns == 4
    assert result.final_text == (
        "[stopped: no progress: look was called 4 times with the same arguments and the same result "
        "(max_repeated_calls = 3)]"
    )
    [told] = notes(events)  # once, after the third call
    assert told.startswith(NOTE + "you have called look with these same arguments 3 times")
    assert "The run stops if you repeat it again" in told
    # the model read the note: a user message after the third call's result
    fourth = provider.requests[3].messages
    assert isinstance(fourth[-1], UserMessage) and fourth[-1].content == told
    assert isinstance(fourth[-2], ToolResultMessage)
    assert stop_label(result.stop_reason) == "stopped: max_repeated_calls"


async def test_a_model_that_heeds_the_note_finishes_normally() -> None:
    script = [looking("a")] * 3 + [{"text": "There is nothing in a."}]
    result, events, _ = await run(script)
    assert (result.stop_reason, result.final_text) == ("end_turn", "There is nothing in a.")
    assert len(notes(events)) == 1


async def test_the_same_call_with_a_new_result_is_progress() -> None:
    answers = iter(range(100))

    @tool(read_only=True)
    async def clock(ctx: ToolContext) -> str:
        """The time."""
        return f"tick {next(answers)}"

    provider = ScriptedProvider([{"tool_calls": [{"name": "clock", "arguments": {}}]}] * 6 + [{"text": "done"}])
    engine = AgentEngine(provider, ToolRegistry([clock]))
    result = await engine.run("wait for six ticks")
    assert result.stop_reason == "end_turn" and result.tool_calls == 6


async def test_the_measured_loop_of_distinct_calls_is_stopped_by_turns_without_text() -> None:
    """Issue 23's run: every call different (a model that never sees a result invents a new
    path each time), no text at all, 50 turns until max_turns. Here: told at turn 25, stopped
    at 26."""
    script = [looking(f"file{i}.txt") for i in range(50)]
    result, events, provider = await run(script, Limits(max_turns=50))
    assert result.stop_reason == "max_turns_without_text" and result.turns == 26
    assert result.final_text == (
        "[stopped: no progress: 26 turns of tool calls without any text for the person (max_turns_without_text = 25)]"
    )
    [told] = notes(events)
    assert told.startswith(NOTE + "25 turns of tool calls in a row without a word for the person")
    assert len(provider.requests) == 26
    finished = [e for e in events if isinstance(e, RunFinished)]
    assert finished[0].stop_reason == "max_turns_without_text"


async def test_text_for_the_person_starts_the_count_again() -> None:
    script = [looking(f"f{i}") for i in range(20)] + [looking("g", text="Still looking: twenty files so far.")]
    script += [looking(f"h{i}") for i in range(20)] + [{"text": "Nothing anywhere."}]
    result, events, _ = await run(script)
    assert (result.stop_reason, result.turns) == ("end_turn", 42)
    assert notes(events) == []


async def test_answering_in_text_after_the_note_is_not_stopped() -> None:
    script = [looking(f"f{i}") for i in range(25)] + [looking("g", text="I have looked at 25 files; one more.")]
    script += [{"text": "Nothing anywhere."}]
    result, events, _ = await run(script)
    assert result.stop_reason == "end_turn" and len(notes(events)) == 1


@pytest.mark.parametrize("off", [0, None])
async def test_the_limits_can_be_turned_off(off: int | None) -> None:
    settings = RunSettings(max_repeated_calls=off, max_turns_without_text=off, max_turns=30)
    assert (settings.limits.max_repeated_calls, settings.limits.max_turns_without_text) == (None, None)
    result, events, _ = await run([looking("a")] * 40, settings.limits)
    assert result.stop_reason == "max_turns" and result.turns == 30 and notes(events) == []


def test_they_are_on_by_default_and_checked() -> None:
    limits = RunSettings().limits
    assert (limits.max_repeated_calls, limits.max_turns_without_text) == (3, 25)
    with pytest.raises(ConfigError, match="max_turns_without_text must be a whole number above 0"):
        RunSettings(max_turns_without_text=-1)
    with pytest.raises(ConfigError, match="max_repeated_calls must be a whole number above 0"):
        Limits(max_repeated_calls=1.5)  # type: ignore[arg-type]


def test_a_result_no_longer_in_the_conversation_may_be_asked_for_again() -> None:
    """Compaction replaces old results with stubs: asking again for one is not a repeat."""
    guard = ProgressGuard(Limits(max_repeated_calls=2))
    conversation: list[Any] = []

    def turn(keep_earlier: bool) -> str | None:
        call = ToolCall(id=f"c{len(conversation)}", name="look", arguments='{"path": "a"}')
        answer = AssistantMessage(content="", tool_calls=(call,))
        if not keep_earlier:
            conversation.clear()  # compacted away
        conversation.extend([answer, ToolResultMessage(tool_call_id=call.id, name="look", content="a: nothing")])
        return guard.after_tools(answer, conversation)

    assert turn(keep_earlier=True) is None
    assert turn(keep_earlier=False) is None  # the first result had gone
    assert turn(keep_earlier=True) is not None  # the second is still there: told


async def test_the_terminal_shows_the_note_and_the_stop() -> None:
    import io

    out = io.StringIO()
    provider = ScriptedProvider([looking("a")] * 4)
    engine = AgentEngine(provider, ToolRegistry([look]))
    await engine.run("look", on_event=TextView(out))
    text = out.getvalue()
    assert "⇢ Note from the harness: you have called look with these same arguments 3 times" in text
    assert "── stopped: max_repeated_calls · " in text
