"""Delegation end to end over the scripted model: every mode of `task`, narrowing and the
run-time deny, depth, approvals relayed / denied / asked, background delivery, the
coordination tools, failure isolation, usage roll-up and the Python API."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from harness_nb.core import (
    ApprovalRequested,
    HarnessError,
    SubagentUpdate,
    ToolCallStarted,
    ToolResultMessage,
    UnknownNameError,
    UserMessage,
)
from harness_nb.engine import Approved, Ask, Denied, Hook
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import BACKGROUND_DENIED, SubAgentDefinition, TaskStatus
from harness_nb.tools import ToolContext, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)


@tool(read_only=True)
async def read_file(ctx: ToolContext, path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {path}"


@tool
async def bash(ctx: ToolContext, command: str) -> str:
    """Run a command."""
    return f"ran {command}"


@tool
async def wait_a_bit(ctx: ToolContext, seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "waited"


class AskForBash(Hook):
    async def before_tool(self, call, ctx):
        return Ask("bash needs approval", "high") if call.name == "bash" else await super().before_tool(call, ctx)


def call(name: str, **args: object) -> dict:
    return {"name": name, "arguments": args}


def task(**args: object) -> dict:
    return call("task", **args)




def harness(tmp_path: Path, script, *, tools=(read_file, write_file, bash, wait_a_bit), **kw) -> tuple[Harness, ScriptedProvider]:
    provider = ScriptedProvider(script)
    h = Harness(
        provider,
        workdir=tmp_path,
        tools=list(tools),
        include_user_agents=False,
        approval_policy="never",
        **kw,
    )
    h.registry.register(
        SubAgentDefinition(name="reader", description="Reads files.", system_prompt="You read.", tools=["read_file"])
    )
    OPEN.append(h)
    return h, provider


def tool_results(messages) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


async def test_single_delegation_returns_the_childs_report_in_the_seed_format(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="Read a.txt and summarise", description="read a")]},
                {"text": "The file says hello."},
            ],
            "reader": [{"tool_calls": [call("read_file", path="a.txt")]}, {"text": "a.txt: hello"}],
        },
    )
    events = []
    result = await h.run("What is in a.txt?", on_event=events.append)
    provider.assert_complete()
    assert result.final_text == "The file says hello."
    assert tool_results(result.messages) == ['<task id="fg-1" state="completed"><task_result>a.txt: hello</task_result></task>']
    # the child saw only its prompt: no parent history, its own system prompt
    child_requests = [r for r in provider.requests if r.agent == "reader"]
    assert [m.content for m in child_requests[0].messages] == ["Read a.txt and summarise"]
    assert child_requests[0].system.startswith("You read.")
    assert str(tmp_path) in child_requests[0].system
    # child events reached the parent's stream, wrapped with task id and agent
    updates = [e for e in events if isinstance(e, SubagentUpdate)]
    assert updates and all(u.task_id == "fg-1" and u.agent == "reader" for u in updates)
    assert any(isinstance(u.event, ToolCallStarted) and u.event.call.name == "read_file" for u in updates)
    entry = h.tracker.get("fg-1")
    assert entry.status is TaskStatus.COMPLETED and entry.description == "read a"
    assert any("read_file" in line for line in entry.log)


async def test_subagent_never_gets_a_tool_its_parent_lacks(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [{"tool_calls": [task(subagent_type="writer", prompt="write")]}, {"text": "ok"}],
            "writer": [{"text": "done"}],
        },
        tools=(read_file,),  # the parent has no write_file and no bash
    )
    h.registry.register(
        SubAgentDefinition(name="writer", description="Writes.", tools=["read_file", "write_file", "bash", "task"])
    )
    await h.run("go")
    child = [r for r in provider.requests if r.agent == "writer"][0]
    assert [t.name for t in child.tools] == ["read_file"]
    # general-purpose inherits everything the parent has, minus coordination tools (it holds
    # ask_person, offered only to a run with an ask channel: test_ask_person.py)
    child = h._parts.runner.build(h.registry.get("general-purpose"), h.lead_context(), task_id="x", background=False)
    assert child.engine.tools.names() == ["read_file", "ask_person"]


async def test_a_child_calling_task_is_denied_at_run_time_even_if_injected(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [{"tool_calls": [task(subagent_type="reader", prompt="try to delegate")]}, {"text": "ok"}],
            "reader": [{"tool_calls": [task(subagent_type="reader", prompt="recurse")]}, {"text": "could not delegate"}],
        },
    )
    original_build = h._parts.runner.build

    def build_with_task_injected(*args, **kwargs):
        child = original_build(*args, **kwargs)
        child.engine.tools.add(h._parts.task_tool)  # simulate a bug that let `task` slip into the list
        return child

    h._parts.runner.build = build_with_task_injected  # type: ignore[method-assign]
    result = await h.run("go")
    child_engine_results = [
        r for r in provider.requests if r.agent == "reader"
    ][1].messages
    assert tool_results(child_engine_results) == [
        "error: denied: task: subagents cannot delegate or coordinate; do the work yourself"
    ]
    assert "could not delegate" in tool_results(result.messages)[0]
    assert len(h.tracker.list()) == 1  # no grandchild was ever started


async def test_depth_guard_refuses_a_spawn_beyond_max_depth(tmp_path):
    h, _ = harness(tmp_path, {"main": [{"text": "x"}]}, max_depth=1)
    child = h._parts.runner.build(h.registry.get("reader"), h.lead_context(), task_id="c1", background=False)
    assert child.engine.depth == 1
    grandparent = child.engine.parent_context(child.context)
    with pytest.raises(HarnessError, match="depth 2: the limit is max_depth=1"):
        h._parts.runner.build(h.registry.get("reader"), grandparent, task_id="c2", background=False)


async def test_foreground_approval_is_relayed_to_the_parents_channel(tmp_path):
    asked = []

    async def channel(call, reason, risk):
        asked.append((call.name, reason, risk))
        return Approved()

    h, provider = harness(
        tmp_path,
        {
            "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean up")]}, {"text": "ok"}],
            "general-purpose": [{"tool_calls": [call("bash", command="rm -rf build")]}, {"text": "cleaned"}],
        },
        hooks=[AskForBash()],
    )
    h.approval = channel
    events = []
    await h.run("go", on_event=events.append)
    assert asked == [("bash", "[general-purpose] bash needs approval", "high")]
    child = [r for r in provider.requests if r.agent == "general-purpose"][1]
    assert tool_results(child.messages) == ["ran rm -rf build"]
    wrapped = [e for e in events if isinstance(e, SubagentUpdate) and isinstance(e.event, ApprovalRequested)]
    assert len(wrapped) == 1


async def test_foreground_denial_reaches_the_child_as_feedback(tmp_path):
    async def channel(call, reason, risk):
        return Denied("not on my data")

    h, provider = harness(
        tmp_path,
        {
            "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean")]}, {"text": "ok"}],
            "general-purpose": [{"tool_calls": [call("bash", command="rm -rf data")]}, {"text": "denied, stopping"}],
        },
        hooks=[AskForBash()],
    )
    h.approval = channel
    await h.run("go")
    child = [r for r in provider.requests if r.agent == "general-purpose"][1]
    assert tool_results(child.messages) == ["error: the call was denied: not on my data. Do not retry it unchanged."]


async def test_background_approvals_fail_closed_by_default(tmp_path):
    asked = []

    async def channel(call, reason, risk):
        asked.append(call.name)
        return Approved()

    h, provider = harness(
        tmp_path,
        {
            "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean", background=True)]}, {"text": "started"}],
            "general-purpose": [{"tool_calls": [call("bash", command="rm -rf build")]}, {"text": "gave up"}],
        },
        hooks=[AskForBash()],
    )
    h.approval = channel
    result = await h.run("go")
    assert tool_results(result.messages) == ['<task id="bg-1" state="running"/>']
    entry = await h.tracker.wait("bg-1", 5)
    assert entry.status is TaskStatus.COMPLETED
    child = [r for r in provider.requests if r.agent == "general-purpose"][1]
    assert tool_results(child.messages) == [
        f"error: the call was denied: {BACKGROUND_DENIED}. Do not retry it unchanged."
    ]
    assert asked == []


async def test_background_approvals_ask_when_opted_in(tmp_path):
    asked = []

    async def channel(call, reason, risk):
        asked.append(reason)
        return Approved()

    h, provider = harness(
        tmp_path,
        {
            "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean", background=True)]}, {"text": "started"}],
            "general-purpose": [{"tool_calls": [call("bash", command="rm -rf build")]}, {"text": "cleaned"}],
        },
        hooks=[AskForBash()],
        background_approvals="ask",
    )
    h.approval = channel
    await h.run("go")
    await h.tracker.wait("bg-1", 5)
    assert asked == ["[general-purpose] bash needs approval"]
    child = [r for r in provider.requests if r.agent == "general-purpose"][1]
    assert tool_results(child.messages) == ["ran rm -rf build"]


async def test_background_ask_times_out_to_denied(tmp_path):
    async def never_answers(call, reason, risk):
        await asyncio.sleep(3600)

    h, provider = harness(
        tmp_path,
        {
            "main": [{"tool_calls": [task(subagent_type="general-purpose", prompt="clean", background=True)]}, {"text": "started"}],
            "general-purpose": [{"tool_calls": [call("bash", command="rm -rf x")]}, {"text": "timed out"}],
        },
        hooks=[AskForBash()],
        background_approvals="ask",
    )
    h._parts.runner.approval_timeout = 0.1
    h.approval = never_answers
    await h.run("go")
    await h.tracker.wait("bg-1", 5)
    child = [r for r in provider.requests if r.agent == "general-purpose"][1]
    assert "no answer within 0.1 s: denied" in tool_results(child.messages)[0]


def gated_reader(h: Harness) -> asyncio.Event:
    """Make ``reader`` wait at its first step until the returned gate opens: a test then
    decides whether its background result arrives during a run or between runs (a tool
    call's awaits let a quick task finish before the next turn)."""
    gate = asyncio.Event()

    @tool(read_only=True)
    async def wait_for_gate(ctx: ToolContext) -> str:
        """Wait until the test opens the gate."""
        await gate.wait()
        return "open"

    h.tool_pool.add(wait_for_gate)
    h.tools.add(wait_for_gate)
    h.registry.register(
        SubAgentDefinition(
            name="reader", description="Reads files.", system_prompt="You read.", tools=["read_file", "wait_for_gate"]
        )
    )
    return gate


async def test_background_results_are_delivered_once_into_the_next_prompt(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="read b", background=True)]},
                {"text": "started it"},
                {"text": "the background task said b"},
                {"text": "nothing new"},
            ],
            "reader": [{"tool_calls": [call("wait_for_gate")]}, {"text": "b is bananas"}],
        },
    )
    gate = gated_reader(h)
    await h.run("start")
    gate.set()
    await h.tracker.wait("bg-1", 5)
    await h.run("any news?")
    await h.run("and now?")
    main = [r for r in provider.requests if r.agent == "main"]
    injected = '<background-task-completed id="bg-1" agent="reader" status="completed">b is bananas</background-task-completed>'
    assert main[2].messages[-1] == UserMessage(content=injected)
    texts = [m.content for m in main[3].messages if isinstance(m, UserMessage)]
    assert texts.count(injected) == 1  # in the history once, never injected again
    assert texts[-1] == "and now?"


async def test_parallel_runs_concurrently_keeps_order_and_survives_a_failure(tmp_path):
    # alpha and gamma meet at a barrier that opens only once both are inside it, which a
    # sequential run never reaches (the timeout is the guard, not the assertion); alpha then
    # waits for gamma to end, so results arrive in the reverse of the order they are listed in
    both_running = asyncio.Barrier(2)

    @tool
    async def meet(ctx: ToolContext, who: str) -> str:
        """Wait for the other subagent."""
        await both_running.wait()
        if who == "alpha":
            await h.tracker.wait("fg-3")
        return f"{who} met"

    h, provider = harness(
        tmp_path,
        {
            "main": [
                {
                    "tool_calls": [
                        task(
                            tasks=[
                                {"subagent_type": "general-purpose", "prompt": "alpha"},
                                {"subagent_type": "general-purpose", "prompt": "beta"},
                                {"subagent_type": "general-purpose", "prompt": "gamma"},
                            ]
                        )
                    ]
                },
                {"text": "combined"},
            ],
            "general-purpose": [
                {"match": "alpha", "tool_calls": [call("meet", who="alpha")]},
                {"match": "alpha", "text": "A done"},
                {"match": "beta", "error": "model exploded"},
                {"match": "gamma", "tool_calls": [call("meet", who="gamma")]},
                {"match": "gamma", "text": "C done"},
            ],
        },
        tools=(meet,),
    )
    async with asyncio.timeout(10):
        result = await h.run("fan out")
    out = tool_results(result.messages)[0].splitlines()
    assert out[0] == '<task id="fg-1" state="completed"><task_result>A done</task_result></task>'
    assert out[1].startswith('<task id="fg-2" state="error">ProviderError')
    assert "model exploded" in out[1]
    assert out[2] == '<task id="fg-3" state="completed"><task_result>C done</task_result></task>'
    assert h.tracker.get("fg-2").status is TaskStatus.FAILED


async def test_parallel_concurrency_is_bounded(tmp_path):
    running = 0
    peak = 0

    def step(request):
        return {"tool_calls": [call("wait_a_bit", seconds=0.05)]} if len(request.messages) == 1 else {"text": "ok"}

    @tool
    async def wait_a_bit(ctx: ToolContext, seconds: float) -> str:
        """Sleep."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(seconds)
        running -= 1
        return "waited"

    h, _ = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(tasks=[{"subagent_type": "general-purpose", "prompt": f"t{i}"} for i in range(6)])]},
                {"text": "done"},
            ],
            "general-purpose": [step] * 12,
        },
        tools=(wait_a_bit,),
        max_concurrency=2,
    )
    await h.run("go")
    assert peak == 2
    assert len(h.tracker.list()) == 6


async def test_chain_substitutes_previous_and_stops_at_a_failing_step(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                {
                    "tool_calls": [
                        task(
                            chain=[
                                {"subagent_type": "reader", "prompt": "list the columns"},
                                {"subagent_type": "general-purpose", "prompt": "describe these: {previous}"},
                            ]
                        )
                    ]
                },
                {
                    "tool_calls": [
                        task(
                            chain=[
                                {"subagent_type": "reader", "prompt": "step one"},
                                {"subagent_type": "reader", "prompt": "step two {previous}"},
                                {"subagent_type": "reader", "prompt": "step three"},
                            ]
                        )
                    ]
                },
                {"text": "done"},
            ],
            "reader": [
                {"match": "columns", "text": "a, b, c"},
                {"match": "step one", "text": "one"},
                {"match": "step two", "error": "boom"},
            ],
            "general-purpose": [{"text": "three columns"}],
        },
    )
    result = await h.run("chain it")
    second = [r for r in provider.requests if r.agent == "general-purpose"][0]
    assert second.messages[0].content == "describe these: a, b, c"
    first_out, second_out = tool_results(result.messages)
    assert first_out == '<task id="fg-2" state="completed" steps="2"><task_result>three columns</task_result></task>'
    assert second_out.startswith('error: chain stopped at step 2 of 3 (reader): <task id="fg-4" state="error">')
    assert "boom" in second_out
    assert [r.messages[0].content for r in provider.requests if r.agent == "reader"][-1] == "step two one"


async def test_unknown_agent_gets_an_error_listing_the_valid_names(tmp_path):
    h, _ = harness(
        tmp_path,
        {"main": [{"tool_calls": [task(subagent_type="nobody", prompt="x")]}, {"text": "ok"}]},
    )
    result = await h.run("go")
    assert tool_results(result.messages) == [
        "error: unknown agent 'nobody'; valid: explore, general-purpose, reader"
    ]


async def test_task_schema_is_generated_from_the_registry(tmp_path):
    h, _ = harness(tmp_path, {"main": []})
    spec = h._parts.task_tool.spec()
    assert spec.parameters["properties"]["subagent_type"]["enum"] == ["explore", "general-purpose", "reader"]
    assert "- reader: Reads files." in spec.description
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "stats.md").write_text("---\nname: stats\ndescription: Computes statistics.\n---\nYou compute.\n")
    h.registry.reload()
    spec = h._parts.task_tool.spec()
    assert "stats" in spec.parameters["properties"]["subagent_type"]["enum"]
    assert "- stats: Computes statistics." in spec.description


async def test_task_output_blocks_returns_result_and_times_out_to_a_snapshot(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="slow", background=True)]},
                {"tool_calls": [call("task_output", task_id="bg-1", block=True, timeout=0.05)]},
                {"tool_calls": [call("task_output", task_id="bg-1", block=True, timeout=5)]},
                {"tool_calls": [call("task_output", task_id="bg-9")]},
                {"text": "done"},
                {"text": "quiet"},
            ],
            "reader": [{"text": "slow result", "delay": 0.3}],
        },
    )
    result = await h.run("go")
    outs = tool_results(result.messages)
    assert outs[1].startswith('<task id="bg-1" agent="reader" state="running"')
    assert outs[2] == '<task id="bg-1" state="completed"><task_result>slow result</task_result></task>'
    assert outs[3] == "error: unknown task id 'bg-9'; valid: bg-1"
    # read through task_output, so not injected again
    await h.run("anything?")
    last = [r for r in provider.requests if r.agent == "main"][-1]
    assert not any("background-task-completed" in getattr(m, "content", "") for m in last.messages)


async def test_task_stop_cancels_a_running_task_and_it_stays_cancelled(tmp_path):
    h, _ = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="general-purpose", prompt="long job", background=True)]},
                {"tool_calls": [call("task_stop", task_id="bg-1")]},
                {"tool_calls": [call("task_stop", task_id="bg-1")]},
                {"text": "stopped"},
            ],
            "general-purpose": [{"tool_calls": [call("wait_a_bit", seconds=30)]}, {"text": "never"}],
        },
    )
    result = await h.run("go")
    outs = tool_results(result.messages)
    assert outs[1] == "task bg-1 (general-purpose) cancelled"
    assert outs[2] == "task bg-1 already ended (cancelled)"
    entry = h.tracker.get("bg-1")
    await asyncio.sleep(0.05)
    assert entry.status is TaskStatus.CANCELLED and entry.task is not None and entry.task.cancelled()
    h.tracker.finish("bg-1", "late result")
    assert entry.status is TaskStatus.CANCELLED and entry.result is None


async def test_send_message_steers_a_running_background_subagent(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="general-purpose", prompt="analyse sales", background=True)]},
                # a little later, so the child is inside its first tool call
                {"tool_calls": [call("send_message", to="bg-1", message="only look at 2024")], "delay": 0.1},
                {"tool_calls": [call("send_message", to="bg-7", message="hello?")]},
                {"text": "steered"},
            ],
            "general-purpose": [
                {"tool_calls": [call("wait_a_bit", seconds=0.2)]},
                {"text": "2024 only: up 5%"},
            ],
        },
    )
    result = await h.run("go")
    outs = tool_results(result.messages)
    assert outs[1] == "delivered to bg-1 (general-purpose); it reads it at its next turn"
    assert outs[2] == "error: unknown recipient 'bg-7'; valid: bg-1"
    await h.tracker.wait("bg-1", 5)
    second = [r for r in provider.requests if r.agent == "general-purpose"][1]
    assert second.messages[-1] == UserMessage(content="only look at 2024")


async def test_a_crashing_background_subagent_is_failed_and_the_parent_carries_on(tmp_path):
    def crash(request):
        raise RuntimeError("segfault in the model")

    h, provider = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="x", background=True)]},
                {"text": "started"},
                {"text": "it failed, sorry"},
            ],
            "reader": [{"tool_calls": [call("wait_for_gate")]}, crash],
        },
    )
    gate = gated_reader(h)
    await h.run("go")
    gate.set()
    entry = await h.tracker.wait("bg-1", 5)
    assert entry.status is TaskStatus.FAILED
    assert entry.error == "RuntimeError: segfault in the model"
    result = await h.run("news?")
    assert result.final_text == "it failed, sorry"
    injected = [r for r in provider.requests if r.agent == "main"][-1].messages[-1]
    assert injected.content == (
        '<background-task-completed id="bg-1" agent="reader" status="failed">'
        "RuntimeError: segfault in the model</background-task-completed>"
    )


async def test_usage_rolls_up_from_children_and_shows_on_each_entry(tmp_path):
    u = {"input_tokens": 100, "output_tokens": 10}
    h, _ = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="x")], "usage": u},
                {"text": "ok", "usage": u},
            ],
            "reader": [{"tool_calls": [call("read_file", path="a")], "usage": u}, {"text": "r", "usage": u}],
        },
    )
    result = await h.run("go")
    child = h.tracker.get("fg-1").usage
    assert (child.input_tokens, child.turns, child.tool_calls) == (200, 2, 1)
    assert (result.usage.input_tokens, result.usage.turns, result.usage.tool_calls) == (400, 4, 2)


async def test_python_api_runs_a_subagent_directly(tmp_path):
    h, provider = harness(tmp_path, {"reader": [{"text": "direct answer"}]})
    events = []
    result = await h.run_subagent("reader", "what is up?", on_event=events.append)
    assert result.final_text == "direct answer" and result.agent == "reader"
    assert not [r for r in provider.requests if r.agent == "main"]  # the main model was bypassed
    assert events and not any(isinstance(e, SubagentUpdate) for e in events)
    with pytest.raises(UnknownNameError, match="valid: explore, general-purpose, reader"):
        await h.run_subagent("nope", "x")


async def test_python_api_background_handle_can_be_awaited_steered_and_cancelled(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "general-purpose": [{"tool_calls": [call("wait_a_bit", seconds=0.2)]}, {"text": "first done"}],
            "sleeper": [{"tool_calls": [call("wait_a_bit", seconds=30)]}],
        },
    )
    h.registry.register(SubAgentDefinition(name="sleeper", description="Sleeps.", tools=["wait_a_bit"]))
    handle = h.start_subagent("general-purpose", "first job")
    await asyncio.sleep(0.1)  # inside its first tool call now
    handle.send("also check the tests")
    result = await handle
    assert result.final_text == "first done"
    steered = [r for r in provider.requests if r.agent == "general-purpose"][1]
    assert steered.messages[-1] == UserMessage(content="also check the tests")
    other = h.start_subagent("sleeper", "second job")
    await asyncio.sleep(0.05)
    other.cancel()
    with pytest.raises(asyncio.CancelledError):
        await other.result()
    with pytest.raises(HarnessError, match="already ended"):
        other.send("late")
    await h.aclose()


async def test_fifty_background_tasks_finishing_in_random_order_are_each_delivered_once(tmp_path):
    rng = random.Random(7)
    delays = [rng.uniform(0, 0.2) for _ in range(50)]
    h, _ = harness(
        tmp_path,
        {"reader": [{"match": f"job-{i}:", "text": f"result {i}", "delay": d} for i, d in enumerate(delays)]},
    )
    handles = [h.start_subagent("reader", f"job-{i}:") for i in range(50)]
    delivered: list[str] = []
    while len(delivered) < 50:
        delivered += h.tracker.completion_texts()
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    delivered += h.tracker.completion_texts()
    assert len(delivered) == 50
    assert sorted(delivered) == sorted(
        f'<background-task-completed id="bg-{i + 1}" agent="reader" status="completed">result {i}</background-task-completed>'
        for i in range(50)
    )
    assert all(hd.done() for hd in handles)
    assert h.tracker.completion_texts() == []


async def test_a_result_awaited_from_python_still_reaches_the_main_agent(tmp_path):
    """Reading a background result yourself does not hide it from the main agent."""
    h, provider = harness(tmp_path, {"reader": [{"text": "found 3 CSVs"}], "main": [{"text": "noted"}]})
    handle = h.start_subagent("reader", "find the CSVs")
    assert (await handle).final_text == "found 3 CSVs"
    await h.run("anything new?")
    injected = [r for r in provider.requests if r.agent == "main"][0].messages[-1]
    assert injected.content == (
        '<background-task-completed id="bg-1" agent="reader" status="completed">found 3 CSVs</background-task-completed>'
    )


def _three_background_jobs() -> dict:
    jobs = [{"name": "task", "arguments": {"subagent_type": "general-purpose", "prompt": f"job {n}", "background": True}} for n in (1, 2, 3)]
    return {
        "main": [{"tool_calls": jobs}, {"text": "launched"}],
        "general-purpose": [{"match": f"job {n}", "text": f"job {n} done"} for n in (1, 2, 3)],
    }


class HoldJobOne(Hook):
    """Asks the person about the "job 1" call, and notes when the later calls' checks are
    done (this hook runs after the permission check)."""

    def __init__(self) -> None:
        self.checked: set[str] = set()
        self.others_checked = asyncio.Event()

    async def before_tool(self, call, ctx):
        prompt = json.loads(call.arguments or "{}").get("prompt", "")
        if prompt == "job 1":
            return Ask("the first job needs a look", "low")
        self.checked.add(prompt)
        if self.checked == {"job 2", "job 3"}:
            self.others_checked.set()
        return await super().before_tool(call, ctx)


async def test_task_ids_follow_the_order_of_the_calls_not_of_their_checks(tmp_path):
    """Three background task calls in one turn; the first one's check finishes last (it
    waits for the person). The ids still follow the calls: job 1 is bg-1."""
    hold = HoldJobOne()

    async def person(call, reason, risk):
        await hold.others_checked.wait()  # the other two are through their checks first
        for _ in range(20):
            await asyncio.sleep(0)  # and free to launch, were they not waiting their turn
        return Approved()

    h = Harness(ScriptedProvider(_three_background_jobs()), workdir=tmp_path, include_user_agents=False, sandbox="off", hooks=[hold])
    OPEN.append(h)
    await h.run("go", approval=person)
    prompts = {f"bg-{n}": (await h.tracker.wait(f"bg-{n}", timeout=10)).prompt for n in (1, 2, 3)}
    assert prompts == {"bg-1": "job 1", "bg-2": "job 2", "bg-3": "job 3"}


async def test_a_denied_task_call_holds_no_later_call_back(tmp_path):
    hold = HoldJobOne()

    async def person(call, reason, risk):
        await hold.others_checked.wait()
        return Denied("not that one")

    h = Harness(ScriptedProvider(_three_background_jobs()), workdir=tmp_path, include_user_agents=False, sandbox="off", hooks=[hold])
    OPEN.append(h)
    async with asyncio.timeout(20):  # a turn never passed would hang here
        await h.run("go", approval=person)
    prompts = {f"bg-{n}": (await h.tracker.wait(f"bg-{n}", timeout=10)).prompt for n in (1, 2)}
    assert prompts == {"bg-1": "job 2", "bg-2": "job 3"}, "the two allowed calls, in their order"
