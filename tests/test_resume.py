"""Long sessions, part 2 (issue #10, items 5 and 6): back to a conversation after a kernel
restart — also one that crashed mid-tool-call — and bounds on background work and on
what it injects."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest
from jupyter_client.provisioning import LocalProvisioner

from harness_nb import Harness
from harness_nb.core import AssistantMessage, ConfigError, ToolCall, ToolResultMessage, UserMessage
from harness_nb.engine.resume import UNFINISHED_RESULT, repair_history
from harness_nb.subagents import TaskStatus
from harness_nb.testing import ScriptedProvider
from harness_nb.tools import ToolContext, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from notebook_support import model_requests, notebook, result_text
from sandbox_support import kill_all, sleep_arg


def scripted(tmp_path: Path, script, **kw) -> tuple[Harness, ScriptedProvider]:
    provider = ScriptedProvider(script)
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, approval_policy="never", **kw)
    OPEN.append(h)
    return h, provider


def call(name: str, **args: object) -> dict:
    return {"name": name, "arguments": args}


# -- repairing a history ------------------------------------------------------------------------


def test_a_call_without_a_result_gets_an_error_result_in_its_place():
    calls = (ToolCall(id="a", name="grep"), ToolCall(id="b", name="bash"))
    history = [
        UserMessage(content="go"),
        AssistantMessage(content="", tool_calls=calls),
        ToolResultMessage(tool_call_id="a", name="grep", content="found"),
        # crash: b never finished; the next cell's prompt follows
        UserMessage(content="next"),
    ]
    repaired, count = repair_history(history)
    assert count == 1
    assert [(type(m).__name__, getattr(m, "tool_call_id", "")) for m in repaired] == [
        ("UserMessage", ""),
        ("AssistantMessage", ""),
        ("ToolResultMessage", "a"),
        ("ToolResultMessage", "b"),
        ("UserMessage", ""),
    ]
    assert repaired[3].is_error and repaired[3].content == UNFINISHED_RESULT
    assert repair_history(repaired) == (repaired, 0)  # a sound history is left alone


def test_a_result_that_answers_no_call_is_dropped():
    history = [UserMessage(content="go"), ToolResultMessage(tool_call_id="zz", name="x", content="stray")]
    assert repair_history(history) == ([UserMessage(content="go")], 1)


# -- resuming from Python ------------------------------------------------------------------------


async def test_a_new_harness_on_the_workdir_lists_and_resumes_the_conversation(tmp_path):
    first, _ = scripted(tmp_path, [{"text": "Hello.", "usage": {"input_tokens": 10, "output_tokens": 2}}, {"text": "Still here."}])
    await first.run("hi there")
    await first.run("are you there?")
    await first.aclose()

    second, provider = scripted(tmp_path, [{"text": "You said hi and asked if I was there."}])
    (summary,) = second.sessions()
    assert (summary.id, summary.first_prompt, summary.runs, summary.turns) == (first.session.id, "hi there", 2, 2)
    assert second.resume() == 4
    result = await second.run("what did I say?")
    assert result.final_text == "You said hi and asked if I was there."
    (request,) = provider.requests
    assert [(m.role, m.content) for m in request.messages] == [
        ("user", "hi there"),
        ("assistant", "Hello."),
        ("user", "are you there?"),
        ("assistant", "Still here."),
        ("user", "what did I say?"),
    ]
    # the resumed conversation goes on in the same transcript
    lines = (tmp_path / ".harness_nb/sessions" / f"{summary.id}.jsonl").read_text().splitlines()
    assert sum(json.loads(x)["type"] == "run_finished" for x in lines) == 3


async def test_resuming_an_unknown_session_names_the_ones_there_are(tmp_path):
    h, _ = scripted(tmp_path, [{"text": "x"}])
    with pytest.raises(ConfigError, match="no conversation to resume"):
        h.resume()
    await h.run("one")
    with pytest.raises(ConfigError, match=f"no session 'session-nope'.*{h.session.id}"):
        h.resume("session-nope")


# -- resuming in a real kernel after it was killed mid-tool-call ---------------------------------


@pytest.mark.kernel
async def test_resume_after_the_kernel_was_killed_in_the_middle_of_a_tool_call(tmp_path):
    duration = sleep_arg()
    first = {"agents": {"main": [{"tool_calls": [call("bash", command=f"sleep {duration}", timeout=3000)]}]}}
    second = {"agents": {"main": [{"text": "The job was cut off by the restart."}]}}
    sessions = tmp_path / ".harness_nb/sessions"
    try:
        async with notebook(tmp_path, first) as k:
            await k.run("%config HarnessNB.approval_policy = 'never'")
            k.execute("%%agent\nstart the long job")
            await k.wait_for(
                lambda: any('"tool_calls": [{' in p.read_text() for p in sessions.glob("*.jsonl")),
                what="the tool call in the transcript",
            )
            provisioner = k.km.provisioner
            assert isinstance(provisioner, LocalProvisioner) and provisioner.pid is not None
            os.kill(provisioner.pid, signal.SIGKILL)
        async with notebook(tmp_path, second) as k:
            listing = k.text(await k.run("%agent --sessions"))
            assert "start the long job" in listing
            assert "resumed session-" in k.text(await k.run("%agent --resume"))
            answer = await k.run("%%agent\nhow did the job go?")
            assert result_text(answer) == "The job was cut off by the restart."
            (request,) = await model_requests(k, "main")
            assert [m["role"] for m in request["messages"]] == ["user", "assistant", "tool", "user"]
            assert request["messages"][2]["content"] == UNFINISHED_RESULT
    finally:
        kill_all("sleep", duration)


# -- bounds -------------------------------------------------------------------------------------


async def test_background_subagents_beyond_the_limit_wait_queued(tmp_path):
    gates = {name: asyncio.Event() for name in ("j1", "j2", "j3")}

    @tool(read_only=True)
    async def hold(ctx: ToolContext, gate: str) -> str:
        """Wait for a gate."""
        await gates[gate].wait()
        return "open"

    h, _ = scripted(
        tmp_path,
        {
            "main": [
                {"tool_calls": [call("task", subagent_type="general-purpose", prompt=f"job {n}", background=True) for n in (1, 2, 3)]},
                {"text": "launched"},
            ],
            "general-purpose": [
                *({"match": f"job {n}", "tool_calls": [call("hold", gate=f"j{n}")]} for n in (1, 2, 3)),
                *({"match": f"job {n}", "text": f"job {n} done"} for n in (1, 2, 3)),
            ],
        },
        tools=[hold],
        max_background=2,
    )
    await h.run("go")
    await asyncio.sleep(0)  # let the launched tasks start
    states = [h.tracker.get(f"bg-{n}").status for n in (1, 2, 3)]
    assert states == [TaskStatus.RUNNING, TaskStatus.RUNNING, TaskStatus.QUEUED]
    gates["j1"].set()
    await h.tracker.wait("bg-1", timeout=10)
    async with asyncio.timeout(10):
        while h.tracker.get("bg-3").status is TaskStatus.QUEUED:
            await asyncio.sleep(0)
    gates["j2"].set()
    gates["j3"].set()
    for n in (1, 2, 3):  # the ids follow the calls (tools.CallOrder), however their checks raced
        assert (await h.tracker.wait(f"bg-{n}", timeout=10)).result == f"job {n} done"


async def test_a_queued_task_can_be_cancelled_before_it_starts(tmp_path):
    gate = asyncio.Event()

    @tool(read_only=True)
    async def hold(ctx: ToolContext) -> str:
        """Wait for the gate."""
        await gate.wait()
        return "open"

    h, provider = scripted(
        tmp_path,
        {"general-purpose": [{"match": "first", "tool_calls": [call("hold")]}, {"match": "first", "text": "done"}]},
        tools=[hold],
        max_background=1,
    )
    running = h.start_subagent("general-purpose", "first job")
    waiting = h.start_subagent("general-purpose", "second job")
    await asyncio.sleep(0)
    assert (running.status, waiting.status) == (TaskStatus.RUNNING, TaskStatus.QUEUED)
    waiting.cancel()
    gate.set()
    assert (await running).final_text == "done"
    assert waiting.status is TaskStatus.CANCELLED
    assert not [r for r in provider.requests if "second" in r.messages[0].content]


async def test_a_huge_background_result_is_injected_shortened_with_the_path_of_the_whole(tmp_path):
    """The task ends after the run that started it (a gate file holds it), so its result is
    injected into the next run's request."""
    big = "row " * 20_000  # 80,000 characters
    h, provider = scripted(
        tmp_path,
        {
            "main": [
                {"match": "start", "tool_calls": [call("task", subagent_type="general-purpose", prompt="dump", background=True)]},
                {"match": "start", "text": "started"},
                {"text": "seen"},
            ],
            "general-purpose": [
                {"tool_calls": [call("bash", command="until [ -e gate ]; do sleep 0.05; done")]},
                {"text": big},
            ],
        },
        offload_chars=5_000,
    )
    await h.run("start")
    (tmp_path / "gate").touch()
    await h.tracker.wait("bg-1", timeout=30)
    await h.run("next")
    injected = provider.requests[-1].messages[-1].content  # injected after the prompt
    assert injected.startswith('<background-task-completed id="bg-1"')
    assert len(injected) < 5_000 and "characters omitted" in injected
    (offloaded,) = (tmp_path / ".harness_nb/offload").glob("injected-*.txt")
    assert offloaded.read_text().count("row ") == 20_000
