"""send_message routing (teammate names, team-lead, task ids, unknown names), teammates'
own send_message, the lead's inbox reaching the main agent exactly once, team_create and
teammate names."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness_nb.core import ToolError, UnknownNameError, UserMessage
from harness_nb.team import TEAM_LEAD, Message
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


def send(to: str, message: str) -> dict[str, object]:
    return call("send_message", to=to, message=message)


async def test_the_leads_send_message_reaches_every_kind_of_recipient(tmp_path: Path) -> None:
    h, provider, gates = make_harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="wait", team_name="analysis", name="alice")]},
                {"tool_calls": [task(subagent_type="reader", prompt="background job", background=True)]},
                # held until alice and bg-1 wait at their gates, each past its first turn
                {"tool_calls": [call("gate", name="lead")]},
                {
                    "tool_calls": [
                        send("alice", "by name"),
                        send("tm-1", "by task id"),
                        send("bg-1", "steer"),
                        send("nobody", "hello?"),
                        send(TEAM_LEAD, "note to self"),
                    ]
                },
                {"text": "sent"},
            ],
            "alice": [*gated("a", "first"), {"text": "got by name"}, {"text": "got by id"}],
            "reader": gated("b", "background done"),
        },
    )
    run = asyncio.create_task(h.run("coordinate"))
    await gates.reached("a")
    await gates.reached("b")
    gates.open("lead")
    result = await run
    assert tool_results(result.messages)[3:] == [
        "delivered to alice (working); it reads it when its current turn ends",
        "delivered to alice (working); it reads it when its current turn ends",
        "delivered to bg-1 (reader); it reads it at its next turn",
        "error: unknown recipient 'nobody'; valid: alice, bg-1, team-lead",
        "error: you are team-lead: send messages to a teammate by name",
    ]
    t = teams(h)
    assert [(m.sender, m.text) for m in t.member("alice").mailbox.peek()] == [(TEAM_LEAD, "by name"), (TEAM_LEAD, "by task id")]
    assert h.tracker.get("bg-1").pending == ["steer"]
    gates.open("a")
    gates.open("b")
    await t.wait_idle("alice", turns=3, timeout=5)
    await h.tracker.wait("bg-1", 5)
    assert [user_texts(r.messages)[-1] for r in requests_of(provider, "alice")][2:] == [lead("by name"), lead("by task id")]
    assert requests_of(provider, "reader")[1].messages[-1] == UserMessage(content="steer")
    provider.assert_complete()


async def test_teammates_write_to_the_lead_and_their_own_team_only(tmp_path: Path) -> None:
    h, provider, _ = make_harness(
        tmp_path,
        {
            "bob": [{"text": "bob ready"}, {"text": "thanks alice"}],
            "carol": [{"text": "carol ready"}],
            "alice": [
                {
                    "tool_calls": [
                        send("bob", "hi bob"),
                        send("carol", "hi carol"),
                        send(TEAM_LEAD, "progress: half done"),
                        send("alice", "hi me"),
                    ]
                },
                {"text": "sent my messages"},
            ],
        },
    )
    t = teams(h)
    await t.spawn("reader", "stand by", team="analysis", name="bob")
    await t.spawn("reader", "stand by", team="ops", name="carol")
    await t.wait_idle("bob", turns=1, timeout=5)
    await t.wait_idle("carol", turns=1, timeout=5)
    await t.spawn("reader", "say hello", team="analysis", name="alice")
    await t.wait_idle("alice", turns=1, timeout=5)
    assert tool_results(requests_of(provider, "alice")[1].messages) == [
        "delivered to bob (idle); it reads it now",
        "error: unknown recipient 'carol'; valid: bob, team-lead",
        "delivered to team-lead; it reads it at its next turn",
        "error: unknown recipient 'alice'; valid: bob, team-lead",
    ]
    await t.wait_idle("bob", turns=2, timeout=5)
    assert user_texts(requests_of(provider, "bob")[1].messages)[-1] == (
        '<teammate-message from="alice">hi bob</teammate-message>'
    )
    to_lead = [(m.sender, m.kind, m.text) for m in t.inbox.mailbox.peek() if m.sender == "alice"]
    assert to_lead == [("alice", "message", "progress: half done"), ("alice", "idle_notification", "sent my messages")]
    with pytest.raises(UnknownNameError, match="unknown teammate .zed."):
        await t.send("bob", "spoofed", sender="zed")
    provider.assert_complete()


async def test_lead_messages_reach_the_next_main_turn_exactly_once_and_listeners_live(tmp_path: Path) -> None:
    h, provider, gates = make_harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="reader", prompt="analyse", team_name="analysis", name="alice")]},
                {"text": "alice started"},
                {"text": "noted alice's report"},
                {"text": "nothing new"},
            ],
            "alice": [
                {"tool_calls": [call("gate", name="g")]},
                {"tool_calls": [send(TEAM_LEAD, "halfway there")]},
                {"text": "all done: 42"},
            ],
        },
    )
    seen: list[Message] = []
    teams(h).on_leader_message.append(seen.append)
    await h.run("start a teammate")
    main = requests_of(provider, "main")
    assert not any("teammate-message" in text for r in main for text in user_texts(r.messages))
    gates.open("g")
    await teams(h).wait_idle("alice", turns=1, timeout=5)
    assert [(m.kind, m.text) for m in seen] == [("message", "halfway there"), ("idle_notification", "all done: 42")]
    assert [(m.sender, m.to, m.kind) for m in teams(h).message_log] == [
        (TEAM_LEAD, "alice", "message"),  # the spawn prompt
        ("alice", TEAM_LEAD, "message"),
        ("alice", TEAM_LEAD, "idle_notification"),
    ]
    await h.run("any news?")
    injected = (
        '<teammate-message from="alice">halfway there</teammate-message>\n\n'
        '<teammate-message from="alice" kind="idle_notification">alice finished its turn and is idle. '
        "Its last message:\nall done: 42</teammate-message>"
    )
    first_of_run_2 = requests_of(provider, "main")[2]
    assert first_of_run_2.messages[-2:] == [UserMessage(content="any news?"), UserMessage(content=injected)]
    await h.run("and now?")
    last = requests_of(provider, "main")[-1]
    assert user_texts(last.messages).count(injected) == 1  # in the history once, never injected again
    assert user_texts(last.messages)[-1] == "and now?"
    provider.assert_complete()


async def test_team_create_renames_the_empty_default_team_then_creates_teams(tmp_path: Path) -> None:
    h, provider, _ = make_harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [call("team_create", team_name="analysis")]},
                {"tool_calls": [call("team_create", team_name="analysis")]},
                {"tool_calls": [call("team_create", team_name="no spaces please")]},
                {"tool_calls": [call("team_create", team_name="ops")]},
                {"text": "teams ready"},
            ],
            "reader": [{"text": "in analysis"}],
        },
    )
    result = await h.run("set up teams")
    how = "add teammates with task(team_name={!r}, subagent_type=..., prompt=..., name=...)"
    outs = tool_results(result.messages)
    assert outs[0] == "the empty default team is now called 'analysis'; " + how.format("analysis")
    assert outs[1] == "team 'analysis' already exists; add teammates with task(team_name='analysis', ...)"
    assert outs[2].startswith("error: team name 'no spaces please' is not allowed")
    assert outs[3] == "created team 'ops'; " + how.format("ops")
    t = teams(h)
    assert list(t.registry.teams) == ["analysis", "ops"]
    member = await t.spawn("reader", "x")  # no team given: the (renamed) default team
    assert member.team == "analysis"
    assert (tmp_path / ".harness_nb/teams/ops/roster.json").is_file()
    await t.wait_idle("reader", turns=1, timeout=5)


async def test_team_create_keeps_a_default_team_that_has_teammates(tmp_path: Path) -> None:
    h, _, _ = make_harness(tmp_path, {"reader": [{"text": "hi"}]})
    t = teams(h)
    await t.spawn("reader", "x")
    assert t.create_team("later").startswith("created team 'later'")
    assert list(t.registry.teams) == ["default", "later"]
    await t.wait_idle("reader", turns=1, timeout=5)


async def test_teammate_names_are_made_unique_and_reserved_names_are_refused(tmp_path: Path) -> None:
    h, _, _ = make_harness(tmp_path, {"reader": [{"text": "one"}], "reader-2": [{"text": "two"}]})
    t = teams(h)
    first = await t.spawn("reader", "x")
    second = await t.spawn("reader", "y", team="other")
    assert (first.name, second.name) == ("reader", "reader-2")
    for bad in (TEAM_LEAD, "main", "bg-1", "tm-7", "../escape", "a b"):
        with pytest.raises(ToolError):
            await t.spawn("reader", "z", name=bad)
    assert [m.name for m in t.registry.members()] == ["reader", "reader-2"]
    await t.wait_idle("reader-2", turns=1, timeout=5)
