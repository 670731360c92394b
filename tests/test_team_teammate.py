"""The teammate loop over the scripted model: spawning through `task`, idling and waking,
priority between waiting messages, the shutdown handshake, no delegation, usage, failures
and aclose."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from harness_nb.core import ToolCall
from harness_nb.engine import Allow, Deny
from harness_nb.subagents import SubAgentDefinition, TaskStatus
from harness_nb.team import TEAM_LEAD
from harness_nb.tools import ToolContext, tool
from team_support import (  # noqa: F401  (close_harnesses is an autouse fixture)
    call,
    close_harnesses,
    gated,
    lead,
    make_harness,
    requests_of,
    task,
    teams,
    tool_results,
    user_texts,
)


async def test_task_with_team_name_spawns_a_teammate_and_returns_at_once(tmp_path: Path) -> None:
    h, provider, gates = make_harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="count the rows", team_name="analysis", name="alice")]},
                {"text": "alice is on it"},
            ],
            "alice": gated("g", "there are 3 rows"),
        },
    )
    result = await h.run("get a teammate to count rows")
    assert tool_results(result.messages) == ['<teammate id="tm-1" name="alice" team="analysis" state="running"/>']
    await gates.reached("g")  # the run ended while alice is still mid-turn
    entry = h.tracker.get("tm-1")
    assert (entry.kind, entry.agent, entry.status, entry.member_state) == ("teammate", "reader", TaskStatus.RUNNING, "working")
    gates.open("g")
    record = await teams(h).wait_idle("alice", turns=1, timeout=5)
    assert (record.state, record.last_message, record.team) == ("idle", "there are 3 rows", "analysis")
    assert entry.member_state == "idle" and entry.status is TaskStatus.RUNNING
    assert any(line.startswith("idle: there are 3 rows") for line in entry.log)
    assert h.tracker.completion_texts() == []  # it reports through the mailbox, never as a completion
    first = requests_of(provider, "alice")[0]
    assert user_texts(first.messages) == [lead("count the rows")]
    assert first.system.startswith("You read.") and "'alice', a long-lived teammate in team 'analysis'" in first.system
    idle = teams(h).inbox.mailbox.peek()
    assert [(m.sender, m.kind, m.text) for m in idle] == [("alice", "idle_notification", "there are 3 rows")]
    provider.assert_complete()


async def test_a_teammate_idles_on_its_mailbox_and_wakes_on_a_message_with_its_history(tmp_path: Path) -> None:
    h, provider, _ = make_harness(
        tmp_path,
        {"alice": [{"text": "3 rows"}, {"text": "columns a and b"}]},
    )
    t = teams(h)
    events: list[tuple[str, str]] = []
    t.on_event.append(lambda name, event: events.append((name, event.kind)))
    member = await t.spawn("reader", "count rows", team="analysis", name="alice")
    await t.wait_idle("alice", turns=1, timeout=5)
    assert ("alice", "text_delta") in events and events[-1] == ("alice", "run_finished")
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(requests_of(provider, "alice")) == 1  # asleep: no polling, no extra model calls
    assert member.task is not None and not member.task.done()
    receipt = await t.send("alice", "now list the columns")
    assert receipt == "delivered to alice (idle); it reads it now"
    await t.wait_idle("alice", turns=2, timeout=5)
    second = requests_of(provider, "alice")[1]
    assert [(m.role, m.content) for m in second.messages] == [
        ("user", lead("count rows")),
        ("assistant", "3 rows"),
        ("user", lead("now list the columns")),
    ]
    assert t.roster()[0].last_message == "columns a and b"
    provider.assert_complete()


async def test_messages_waiting_after_a_turn_are_taken_most_urgent_first_one_per_turn(tmp_path: Path) -> None:
    h, provider, gates = make_harness(
        tmp_path,
        {
            "alice": [*gated("g", "first done"), {"text": "lead handled"}, {"text": "peer handled"}],
            "bob": [{"text": "bob here"}],
        },
    )
    t = teams(h)
    await t.spawn("reader", "start", team="analysis", name="alice")
    await t.spawn("reader", "hello", team="analysis", name="bob")
    await gates.reached("g")
    await t.send("alice", "from bob, sent first", sender="bob")
    await t.send("alice", "from the lead, sent second")
    gates.open("g")
    await t.wait_idle("alice", turns=3, timeout=5)
    prompts = [user_texts(r.messages)[-1] for r in requests_of(provider, "alice")]
    assert prompts[2:] == [
        lead("from the lead, sent second"),
        '<teammate-message from="bob">from bob, sent first</teammate-message>',
    ]
    provider.assert_complete()


async def test_the_shutdown_handshake_answers_the_requester_and_ends_the_loop(tmp_path: Path) -> None:
    h, provider, gates = make_harness(tmp_path, {"alice": gated("g", "done with the rows")})
    t = teams(h)
    member = await t.spawn("reader", "count rows", name="alice")
    await gates.reached("g")
    await t.send("alice", "also do the columns")  # queued before the shutdown ...
    assert await t.shutdown("alice") == "shutdown requested for alice; it answers when its current turn ends"
    gates.open("g")
    entry = await h.tracker.wait("tm-1", 5)
    assert entry.status is TaskStatus.COMPLETED and entry.result == "shut down on request"
    assert member.task is not None
    await asyncio.wait_for(member.task, 5)
    assert member.state == "exited" and entry.member_state == "exited"
    # ... but the shutdown came first: no further turn ran
    assert len(requests_of(provider, "alice")) == 2
    inbox = [(m.sender, m.kind, m.to) for m in t.inbox.mailbox.peek()]
    assert inbox == [("alice", "idle_notification", TEAM_LEAD), ("alice", "shutdown_response", TEAM_LEAD)]
    assert await t.shutdown("alice") == "alice is not running (exited)"
    assert h.tracker.completion_texts() == []
    provider.assert_complete()


async def test_teammates_cannot_delegate_or_manage_the_team(tmp_path: Path) -> None:
    h, provider, _ = make_harness(
        tmp_path,
        {
            "alice": [{"text": "looked"}],
            "bob": [
                {"tool_calls": [task(subagent_type="reader", prompt="recurse")]},
                {"tool_calls": [call("send_message", to=TEAM_LEAD, message="I could not delegate")]},
                {"text": "did it myself"},
            ],
        },
    )
    h.registry.register(SubAgentDefinition(name="everything", description="Inherits all tools."))
    coordination = {"task", "task_output", "task_stop", "team_create"}
    assert coordination <= set(h.tools.names())
    t = teams(h)
    await t.spawn("everything", "look around", name="alice")
    await t.wait_idle("alice", turns=1, timeout=5)
    specs = {s.name for s in requests_of(provider, "alice")[0].tools}
    assert specs == {"read_file", "gate", "send_message"}  # inherited tools + its own send_message

    original_build = h._parts.runner.build

    def build_with_task_injected(*args, **kwargs):  # type: ignore[no-untyped-def]
        child = original_build(*args, **kwargs)
        child.engine.tools.add(h._parts.task_tool)  # simulate a bug that let `task` slip into the list
        return child

    h._parts.runner.build = build_with_task_injected  # type: ignore[method-assign]
    await t.spawn("everything", "delegate this", name="bob")
    await t.wait_idle("bob", turns=1, timeout=5)
    second = requests_of(provider, "bob")[1]
    assert tool_results(second.messages) == [
        "error: denied: task: subagents cannot delegate or coordinate; do the work yourself"
    ]
    assert [e.kind for e in h.tracker.list()] == ["teammate", "teammate"]  # no subagent started
    assert [m.text for m in t.inbox.mailbox.peek() if m.sender == "bob"][0] == "I could not delegate"
    provider.assert_complete()


async def test_extra_tools_join_after_narrowing_and_escape_only_the_coordination_deny(tmp_path: Path) -> None:
    h, _, _ = make_harness(tmp_path, {})

    @tool(name="send_message", coordination=True)
    async def send_message(ctx: ToolContext, to: str, message: str) -> str:
        """Say something."""
        return "sent"

    narrow = SubAgentDefinition(name="narrow", description="Only reads.", tools=["read_file"])
    plain = h._parts.runner.build(narrow, h.lead_context(), task_id="a", background=True).engine
    extra = h._parts.runner.build(narrow, h.lead_context(), task_id="b", background=True, extra_tools=[send_message]).engine
    assert plain.tools.names() == ["read_file"]
    assert extra.tools.names() == ["read_file", "send_message"]

    async def decide(engine, name):  # type: ignore[no-untyped-def]
        # as if the tool had slipped into the child's list: the harness's own tool of that name
        tool = engine.tools.get(name) or h.tools.get(name)
        call = ToolCall(id="c", name=name)
        return await engine.hooks.before_tool(call, ToolContext(workdir=tmp_path, call=call, tool=tool))

    assert isinstance(await decide(plain, "send_message"), Deny)
    assert isinstance(await decide(extra, "send_message"), Allow)
    assert isinstance(await decide(extra, "task"), Deny)
    assert isinstance(await decide(extra, "task_stop"), Deny)


async def test_usage_accumulates_on_the_task_entry_and_the_roster(tmp_path: Path) -> None:
    u = {"input_tokens": 100, "output_tokens": 10}
    h, _, _ = make_harness(
        tmp_path,
        {"alice": [{"tool_calls": [call("read_file", path="a")], "usage": u}, {"text": "a", "usage": u}, {"text": "b", "usage": u}]},
    )
    t = teams(h)
    await t.spawn("reader", "read a", name="alice")
    await t.wait_idle("alice", turns=1, timeout=5)
    await t.send("alice", "again")
    await t.wait_idle("alice", turns=2, timeout=5)
    entry = h.tracker.get("tm-1")
    assert (entry.usage.input_tokens, entry.usage.output_tokens, entry.usage.turns, entry.usage.tool_calls) == (300, 30, 3, 1)
    [row] = t.roster()
    assert (row.tokens, row.turns) == (330, 2)
    on_disk = json.loads((tmp_path / ".harness_nb/teams/default/roster.json").read_text())
    assert on_disk["members"][0]["usage"]["input_tokens"] == 300


async def test_a_failing_turn_is_reported_to_the_lead_and_the_teammate_stays(tmp_path: Path) -> None:
    h, provider, _ = make_harness(tmp_path, {"alice": [{"error": "model overloaded"}, {"text": "recovered"}]})
    t = teams(h)
    await t.spawn("reader", "try", name="alice")
    record = await t.wait_idle("alice", turns=1, timeout=5)
    assert record.state == "idle"
    assert record.last_message.startswith("error: this turn failed: ProviderError")
    await t.send("alice", "try again")
    assert (await t.wait_idle("alice", turns=2, timeout=5)).last_message == "recovered"
    notes = [m.text for m in t.inbox.mailbox.peek()]
    assert "model overloaded" in notes[0] and notes[1] == "recovered"
    provider.assert_complete()


async def test_aclose_cancels_running_teammates_cleanly(tmp_path: Path) -> None:
    h, _, gates = make_harness(tmp_path, {"alice": gated("never", "unreachable"), "bob": [{"text": "idle now"}]})
    t = teams(h)
    alice = await t.spawn("reader", "wait forever", name="alice")
    bob = await t.spawn("reader", "say hi", name="bob")
    await gates.reached("never")
    await t.wait_idle("bob", turns=1, timeout=5)
    await h.aclose()
    assert alice.task is not None and alice.task.cancelled()
    assert bob.task is not None and bob.task.cancelled()
    assert [h.tracker.get(i).status for i in ("tm-1", "tm-2")] == [TaskStatus.CANCELLED, TaskStatus.CANCELLED]
    assert [m.state for m in (alice, bob)] == ["exited", "exited"]
    roster = json.loads((tmp_path / ".harness_nb/teams/default/roster.json").read_text())
    assert [m["state"] for m in roster["members"]] == ["exited", "exited"]


async def test_shutdown_with_wait_reports_the_exit(tmp_path):
    """``shutdown(wait=True)`` returns only after the handshake, and says so."""
    from team_support import make_harness

    h, _, _ = make_harness(tmp_path, {"alice": [{"text": "ready"}]})
    async with h:
        await h.teams.spawn("general-purpose", "get ready", name="alice")
        await h.teams.wait_idle("alice", timeout=10)
        receipt = await h.teams.shutdown("alice", wait=True, timeout=10)
        assert receipt == "alice has shut down (its roster entry and transcript are kept)"
        assert h.teams.member("alice").state == "exited"
