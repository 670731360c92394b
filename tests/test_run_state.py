"""What a run or a queued background task needs is fixed when it is launched: settings
changed meanwhile (``configure``) reach only what is launched later, and no object a caller
handed in is changed. Real engines on the scripted model; gates prove the order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness_nb.core import ContextMeasured, ToolResultMessage
from harness_nb.engine import Answer, Approved, Question
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition, TaskStatus
from harness_nb.tools import ToolContext, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

TIMEOUT = 10


def call(name: str, **args: object) -> dict:
    return {"name": name, "arguments": args}


class Gate:
    """A read-only tool, ``wait_for_gate``, that holds its caller until ``open()``;
    ``entered`` is set once a call waits there."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

        @tool(read_only=True)
        async def wait_for_gate(ctx: ToolContext) -> str:
            """Wait until the test opens the gate."""
            self.entered.set()
            await self.gate.wait()
            return "open"

        self.tool = wait_for_gate

    async def reached(self) -> None:
        await asyncio.wait_for(self.entered.wait(), TIMEOUT)


def recording(asked: list[str]):
    async def channel(call, reason, risk):  # type: ignore[no-untyped-def]
        asked.append(reason)
        return Approved()

    return channel


def answering(asked: list[str]):
    async def channel(question: Question) -> Answer:
        asked.append(f"{question.agent}: {question.text}")
        return Answer.by_the_person("2023")

    return channel


def make(tmp_path: Path, provider: ScriptedProvider, **settings: object) -> Harness:
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, sandbox="off", checkpoints=False, **settings)
    OPEN.append(h)
    return h


def offered(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [spec.name for spec in request.tools]


async def test_a_task_queued_behind_max_background_runs_with_the_settings_of_its_launch(tmp_path):
    """The bug: the queued task was built when a slot freed, under the settings of that
    moment — another subagent budget, background approvals, approval policy and tool set."""
    holding = Gate()
    launch = [
        call("task", subagent_type="holder", prompt="hold", background=True),
        call("task", subagent_type="writer", prompt="write out.txt", background=True),
    ]
    provider = ScriptedProvider(
        {
            "main": [{"tool_calls": launch}, {"text": "both started"}],
            "holder": [{"tool_calls": [call("wait_for_gate")]}, {"text": "held"}],
            "writer": [{"tool_calls": [call("write_file", path="out.txt", content="x")]}, {"text": "wrote it"}],
        },
        model="m",
    )
    h = make(
        tmp_path,
        provider,
        extra_tools=[holding.tool],
        max_background=1,
        approval_policy="always",
        background_approvals="ask",
        prices={"m": {"input": 1_000, "output": 1_000}},
    )
    h.registry.register(SubAgentDefinition(name="holder", description="Holds.", tools=["wait_for_gate"]))
    h.registry.register(SubAgentDefinition(name="writer", description="Writes.", tools=["write_file"]))
    at_launch: list[str] = []
    await h.run("start both", approval=recording(at_launch))
    await holding.reached()
    assert h.tracker.get("bg-2").status is TaskStatus.QUEUED  # behind the holder's one slot

    later: list[str] = []
    h.configure(
        subagent_budget_usd=1e-9,  # would stop the writer before its first call
        background_approvals="deny",  # would deny its write without asking
        approval_policy="never",  # would let it write without asking
        tools=["read_file"],  # would take write_file away from it
    )
    h.approval = recording(later)  # would ask someone else
    holding.gate.set()
    entry = await h.tracker.wait("bg-2", TIMEOUT)

    assert entry.status is TaskStatus.COMPLETED, entry.outcome
    assert entry.outcome == "wrote it"
    assert (tmp_path / "out.txt").read_text() == "x"
    assert at_launch[-1] == "[writer] write_file changes files or state" and later == []
    (first, *_) = [r for r in provider.requests if r.agent == "writer"]
    assert "write_file" in offered(first)
    # what is launched from now on gets the new settings
    context = h.run_context()
    assert context.tools is not None and context.tools.names() == ["read_file"]
    assert (context.delegation.budget_usd, context.delegation.background_approvals) == (1e-9, "deny")


async def test_a_queued_background_task_asks_the_person_through_the_channel_of_its_launch(tmp_path):
    """``ask_person``'s channel is fixed at launch like the approval channel: a task that
    waits for a slot while the harness's channel and ``background_approvals`` change still
    asks where its launching run asked."""
    holding = Gate()
    launch = [
        call("task", subagent_type="holder", prompt="hold", background=True),
        call("task", subagent_type="asker", prompt="ask", background=True),
    ]
    provider = ScriptedProvider(
        {
            "main": [{"tool_calls": launch}, {"text": "both started"}],
            "holder": [{"tool_calls": [call("wait_for_gate")]}, {"text": "held"}],
            "asker": [{"tool_calls": [call("ask_person", question="Which year?")]}, {"text": "asked"}],
        }
    )
    h = make(tmp_path, provider, extra_tools=[holding.tool], max_background=1, background_approvals="ask")
    h.registry.register(SubAgentDefinition(name="holder", description="Holds.", tools=["wait_for_gate"]))
    h.registry.register(SubAgentDefinition(name="asker", description="Asks."))
    at_launch: list[str] = []
    await h.run("start both", ask=answering(at_launch))
    await holding.reached()
    assert h.tracker.get("bg-2").status is TaskStatus.QUEUED

    later: list[str] = []
    h.configure(background_approvals="deny")  # would take the tool away and answer "no one to ask"
    h.ask = answering(later)  # would ask someone else
    holding.gate.set()
    entry = await h.tracker.wait("bg-2", TIMEOUT)

    assert entry.status is TaskStatus.COMPLETED
    assert at_launch == ["asker: Which year?"] and later == []
    (first, second) = [r for r in provider.requests if r.agent == "asker"]
    assert "ask_person" in offered(first)
    assert [m.content for m in second.messages if isinstance(m, ToolResultMessage)] == ['The person answered: "2023"']


async def test_a_run_under_way_keeps_its_tools_and_hooks_when_settings_change(tmp_path):
    """The bug: ``apply`` changed in place the tool registry and hook list the running
    engine held, so the next turn of a run under way offered other tools under another
    policy."""
    holding = Gate()
    provider = ScriptedProvider(
        [
            {"tool_calls": [call("wait_for_gate")]},
            {"tool_calls": [call("write_file", path="out.txt", content="x")]},
            {"text": "written"},
            {"text": "the next run"},
        ]
    )
    asked: list[str] = []
    h = make(tmp_path, provider, extra_tools=[holding.tool], approval_policy="always", approval=recording(asked))
    run = asyncio.create_task(h.run("write out.txt"), name="test:run")
    await holding.reached()
    h.configure(approval_policy="never", tools=["read_file"])
    holding.gate.set()
    result = await asyncio.wait_for(run, TIMEOUT)

    assert result.final_text == "written"
    results = [m.content for m in result.messages if isinstance(m, ToolResultMessage)]
    assert results[1].startswith("wrote") and (tmp_path / "out.txt").read_text() == "x"
    assert asked == ["write_file changes files or state"]  # the run's own policy asked
    assert "write_file" in offered(provider.requests[1])
    await h.run("again")
    assert offered(provider.requests[3]) == ["read_file"]


async def test_a_provider_handed_in_is_not_changed_by_the_context_window_setting(tmp_path):
    provider = ScriptedProvider([{"text": "one"}, {"text": "two"}])
    h = make(tmp_path, provider, context_window=4_096)
    events: list[object] = []
    await h.run("first", on_event=events.append)
    h.configure(context_window=8_192)
    await h.run("second", on_event=events.append)

    assert provider.context_window is None
    assert [e.window for e in events if isinstance(e, ContextMeasured)] == [4_096, 8_192]
