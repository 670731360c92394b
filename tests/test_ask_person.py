"""``ask_person`` and the ask channel, over the scripted model: who is offered the tool and
whose channel a question reaches — the main agent, a foreground subagent (its parent's, the
question naming it), a background one (only with ``background_approvals="ask"``, timing
out), a map row (never) —, "no one to ask" at once where no one can answer, the bounds on
what the model asks and the cleaning of what the person answers, an interrupt while a
question waits, and the terminal's channel (a real CLI process on a pseudo-terminal).

The notebook's cards are tested in a real kernel: ``test_notebook_ask.py``."""

from __future__ import annotations

import asyncio
import os
import pty
import sys
from pathlib import Path

import pytest
import yaml

from harness_nb.core import ToolResultMessage
from harness_nb.engine import Answer, Question
from harness_nb.engine.ask import MAX_OPTIONS, NO_ONE_TO_ASK, QUESTION_LIMIT
from harness_nb.engine.engine import INTERRUPTED_RESULT
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import TaskStatus
from harness_nb.textview import terminal_reply
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

TIMEOUT = 10
NO_ONE = f"No answer ({NO_ONE_TO_ASK}). Go on with your own best judgement, and say in your reply what you assumed."


def call(name: str, **args: object) -> dict:
    return {"name": name, "arguments": args}


def ask(question: str, options: list[str] | None = None) -> dict:
    return call("ask_person", question=question, **({"options": options} if options is not None else {}))


def task(**args: object) -> dict:
    return call("task", **args)


class Person:
    """An ask channel that records each question and answers from a list (a typed answer,
    cleaned as a card's or the terminal's is)."""

    def __init__(self, *answers: str) -> None:
        self.asked: list[Question] = []
        self.answers = list(answers)

    async def __call__(self, question: Question) -> Answer:
        self.asked.append(question)
        return Answer.by_the_person(self.answers.pop(0))


def make(tmp_path: Path, script, **settings: object) -> tuple[Harness, ScriptedProvider]:
    provider = ScriptedProvider(script)
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, sandbox="off", checkpoints=False, **settings)
    OPEN.append(h)
    return h, provider


def offered(provider: ScriptedProvider, agent: str) -> list[list[str]]:
    """The tools each request of ``agent`` offered."""
    return [[spec.name for spec in r.tools] for r in provider.requests if r.agent == agent]


def results(provider: ScriptedProvider, agent: str) -> list[str]:
    """The tool results the last request of ``agent`` carried."""
    last = [r for r in provider.requests if r.agent == agent][-1]
    return [m.content for m in last.messages if isinstance(m, ToolResultMessage)]


async def test_the_main_agent_asks_through_its_runs_channel_and_reads_the_cleaned_answer(tmp_path):
    script = {"main": [{"tool_calls": [ask("Which year?\nThe data has two.", ["2023", "2024"])]}, {"text": "Used 2023."}]}
    h, provider = make(tmp_path, script)
    person = Person("\x1b[1m2023\x1b[0m,\nplease\u202e")  # escapes, a newline and a bidi override typed
    result = await h.run("summarise", ask=person)

    assert result.final_text == "Used 2023."
    (question,) = person.asked
    assert (question.text, question.options, question.agent) == ("Which year?\nThe data has two.", ("2023", "2024"), "main")
    assert question.call_id == result.messages[1].tool_calls[0].id  # type: ignore[union-attr]
    assert results(provider, "main") == ['The person answered: "2023, please"']
    assert all("ask_person" in tools for tools in offered(provider, "main"))


async def test_a_run_with_no_channel_is_not_offered_the_tool_and_a_call_anyway_gets_no_one_to_ask_at_once(tmp_path):
    script = [{"tool_calls": [ask("Which year?")]}, {"text": "Assumed 2024."}, {"text": "again"}]
    h, provider = make(tmp_path, script)
    await h.run("summarise")  # no channel: a plain Python run

    assert [("ask_person" in tools) for tools in offered(provider, "main")] == [False, False]
    assert results(provider, "main") == [NO_ONE]
    person = Person()
    h.ask = person  # the harness's channel: for the runs launched from now on
    await h.run("and now?")
    assert "ask_person" in offered(provider, "main")[-1] and person.asked == []


async def test_a_foreground_subagent_asks_in_its_parents_channel_named(tmp_path):
    script = {
        "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean the data")]}, {"text": "ok"}],
        "general-purpose": [{"tool_calls": [ask("Drop the rows with no date?", ["yes", "no"])]}, {"text": "kept them"}],
    }
    h, provider = make(tmp_path, script)
    person = Person("no")
    await h.run("go", ask=person)

    assert [(q.agent, q.text) for q in person.asked] == [("general-purpose", "Drop the rows with no date?")]
    assert results(provider, "general-purpose") == ['The person answered: "no"']
    assert "ask_person" in offered(provider, "general-purpose")[0]


async def test_a_background_subagent_is_not_offered_the_tool_by_default_and_is_answered_no_one_at_once(tmp_path):
    script = {
        "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean", background=True)]}, {"text": "started"}],
        "general-purpose": [{"tool_calls": [ask("Drop them?")]}, {"text": "kept them"}],
    }
    h, provider = make(tmp_path, script)
    person = Person()
    await h.run("go", ask=person)
    entry = await h.tracker.wait("bg-1", TIMEOUT)

    assert entry.status is TaskStatus.COMPLETED
    assert "ask_person" not in offered(provider, "general-purpose")[0]
    assert results(provider, "general-purpose") == [NO_ONE] and person.asked == []


async def test_a_background_subagent_asks_the_launching_run_with_background_approvals_ask(tmp_path):
    script = {
        "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean", background=True)]}, {"text": "started"}],
        "general-purpose": [{"tool_calls": [ask("Drop them?")]}, {"text": "dropped"}],
    }
    h, provider = make(tmp_path, script, background_approvals="ask")
    person = Person("yes, drop them")
    await h.run("go", ask=person)
    await h.tracker.wait("bg-1", TIMEOUT)

    assert [q.agent for q in person.asked] == ["general-purpose"]
    assert "ask_person" in offered(provider, "general-purpose")[0]
    assert results(provider, "general-purpose") == ['The person answered: "yes, drop them"']


async def test_a_background_question_nobody_answers_times_out(tmp_path):
    script = {
        "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean", background=True)]}, {"text": "started"}],
        "general-purpose": [{"tool_calls": [ask("Drop them?")]}, {"text": "kept them"}],
    }
    h, provider = make(tmp_path, script, background_approvals="ask")
    h._parts.runner.approval_timeout = 0.1
    cancelled = asyncio.Event()

    async def never_answers(question: Question) -> Answer:
        try:
            await asyncio.sleep(3600)
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    await h.run("go", ask=never_answers)
    await h.tracker.wait("bg-1", TIMEOUT)
    assert results(provider, "general-purpose") == [
        "No answer (no answer within 0.1 s). Go on with your own best judgement, and say in your reply what you assumed."
    ]
    assert cancelled.is_set(), "the question was withdrawn (a card folds)"


async def test_map_rows_are_never_offered_the_tool_and_never_ask(tmp_path):
    step = {"tool_calls": [ask("Which label?")]}
    h, provider = make(tmp_path, {"general-purpose": [step, {"text": "a"}, step, {"text": "b"}]})
    person = Person()
    h.ask = person
    result = await h.map("general-purpose", "label {value}", ["x", "y"], concurrency=1)

    assert result.texts == ["a", "b"] and person.asked == []
    assert not any("ask_person" in tools for tools in offered(provider, "general-purpose"))
    rows = [r for r in provider.requests if r.agent == "general-purpose"]
    assert [m.content for r in rows for m in r.messages if isinstance(m, ToolResultMessage)] == [NO_ONE, NO_ONE]


async def test_teammates_and_rows_get_a_channel_by_the_same_rule_as_background_subagents(tmp_path):
    """The runner's rule, read off the children it builds: a teammate (built as a
    background child) asks only with ``background_approvals="ask"``; a map row (an
    unwatched foreground child) never; a foreground child always."""
    h, _ = make(tmp_path, [{"text": "x"}])
    person = Person()
    definition = h.registry.get("general-purpose")
    runner = h._parts.runner
    parent = h.lead_context(ask=person)
    assert runner.build(definition, parent, task_id="fg-1", background=False).context.ask is person
    assert runner.build(definition, parent, task_id="bg-1", background=True).context.ask is None
    assert runner.build(definition, parent, task_id="row-1", background=False, watched=False).context.ask is None
    h.configure(background_approvals="ask")
    relayed = runner.build(definition, h.lead_context(ask=person), task_id="bg-2", background=True).context.ask
    assert relayed is not None and relayed is not person  # timed out after approval_timeout


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"question": "  \n\x1b[0m "}, "error: the question is empty: say what you want to know"),
        (
            {"question": "x" * (QUESTION_LIMIT + 1)},
            f"error: the question is {QUESTION_LIMIT + 1:,} characters; ask in at most {QUESTION_LIMIT:,} "
            "(say the background in your reply, not in the question)",
        ),
        (
            {"question": "Which?", "options": [str(n) for n in range(MAX_OPTIONS + 1)]},
            f"error: {MAX_OPTIONS + 1} options; give at most {MAX_OPTIONS} (the person can also type an answer)",
        ),
        (
            {"question": "Which?", "options": ["a", "b" * 81]},
            f"error: option {'b' * 40!r}… is 81 characters; keep each option to 80 (a button's label), the detail in "
            "the question",
        ),
    ],
)
async def test_a_question_past_its_bounds_is_refused_with_the_limit_and_nobody_is_asked(tmp_path, arguments, error):
    h, provider = make(tmp_path, [{"tool_calls": [call("ask_person", **arguments)]}, {"text": "ok"}])
    person = Person()
    await h.run("go", ask=person)
    assert results(provider, "main") == [error] and person.asked == []


async def test_what_the_person_is_shown_is_cleaned_and_masked(tmp_path, monkeypatch):
    key = "sk-proj-" + "A7b" * 14
    monkeypatch.setenv("OPENAI_API_KEY", key)
    question = "Use the key \x1b]8;;http://evil\x07" + key + "?\n\n  Or \u200bnot?"
    script = [{"tool_calls": [ask(question, ["yes", "yes", " no\x07 "])]}, {"text": "ok"}]
    h, _ = make(tmp_path, script)
    person = Person("no")
    await h.run("go", ask=person)
    (shown,) = person.asked
    assert key not in shown.text and shown.text.startswith("Use the key ") and shown.text.endswith("\n\nOr not?")
    assert shown.options == ("yes", "no")


async def test_an_interrupt_withdraws_the_question_and_the_call_gets_the_interrupted_result(tmp_path):
    h, _ = make(tmp_path, [{"tool_calls": [ask("Which year?")]}])
    asked = asyncio.Event()
    withdrawn = asyncio.Event()

    async def waits(question: Question) -> Answer:
        asked.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            withdrawn.set()
            raise
        raise AssertionError("unreachable")

    run = asyncio.create_task(h.run("go", ask=waits), name="test:run")
    await asyncio.wait_for(asked.wait(), TIMEOUT)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert withdrawn.is_set()
    assert h.session.messages[-1].content == INTERRUPTED_RESULT  # type: ignore[union-attr]


def test_a_line_typed_at_the_terminal_picks_an_option_by_number_or_is_the_answer():
    question = Question("Which year?", ("2023", "2024"))
    assert terminal_reply("2\n", question) == Answer("2024", by_person=True)
    assert terminal_reply("3", question) == Answer("3", by_person=True)  # no third option: the answer itself
    assert terminal_reply("the \x1b[31mnewer\x1b[0m one", question) == Answer("the newer one", by_person=True)
    assert terminal_reply("   ", question) == Answer("the person left the answer empty")


async def test_the_command_line_asks_on_its_terminal_and_the_model_reads_the_answer(tmp_path):
    """``python -m harness_nb run`` on a pseudo-terminal: the question and its numbered
    options are printed, a typed number picks one, and the model's next request carries
    it. (Without a terminal the tool is not offered: the other tests' plain runs.)"""
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {"tool_calls": [ask("Which year?", ["2023", "2024"])]},
                {"text": "Using 2024."},
            ]
        )
    )
    leader, follower = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "harness_nb", "run", "summarise", "--model", f"scripted/{script}",
        "--workdir", str(tmp_path), stdin=follower, stdout=follower, stderr=follower,
        env={**os.environ, "HARNESS_NB_SANDBOX": "off"},
    )
    os.close(follower)
    seen = b""
    loop = asyncio.get_running_loop()

    async def read_until(marker: bytes) -> None:
        nonlocal seen
        while marker not in seen:
            try:
                chunk = await asyncio.wait_for(loop.run_in_executor(None, os.read, leader, 4096), TIMEOUT)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert marker in seen, seen.decode(errors="replace")

    try:
        await read_until(b"(a number or your answer) > ")
        assert b"? Which year?\r\n  1. 2023\r\n  2. 2024" in seen
        os.write(leader, b"2\n")
        await read_until(b"Using 2024.")
        assert b'\xe2\x86\x90 ask_person: The person answered: "2024"' in seen  # the result line: what the model reads
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(leader)
