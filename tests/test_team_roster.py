"""Rosters and transcripts on disk, and revival: after the teammate exited, and after a
restart (a new harness over the same folder), with its history intact."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from harness_nb.core import AssistantMessage, UserMessage
from harness_nb.engine.session import load_transcript
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import TaskStatus
from harness_nb.team import RosterStore
from team_support import (  # noqa: F401  (close_harnesses is an autouse fixture)
    call,
    close_harnesses,
    lead,
    make_harness,
    requests_of,
    teams,
    tool_results,
    user_texts,
)

TEAM_DIR = Path(".harness_nb/teams/analysis")


async def test_the_roster_and_the_transcript_are_written_as_the_teammate_changes(tmp_path: Path) -> None:
    h, _, _ = make_harness(tmp_path, {"alice": [{"text": "3 rows", "usage": {"input_tokens": 40, "output_tokens": 2}}]})
    t = teams(h)
    await t.spawn("reader", "count rows", team="analysis", name="alice")
    roster = json.loads((tmp_path / TEAM_DIR / "roster.json").read_text())
    assert roster["team"] == "analysis"
    assert {k: roster["members"][0][k] for k in ("name", "agent", "task_id", "state", "prompt")} == {
        "name": "alice",
        "agent": "reader",
        "task_id": "tm-1",
        "state": "working",
        "prompt": "count rows",
    }
    await t.wait_idle("alice", turns=1, timeout=5)
    [member] = json.loads((tmp_path / TEAM_DIR / "roster.json").read_text())["members"]
    assert (member["state"], member["last_message"], member["turns"], member["usage"]["input_tokens"]) == ("idle", "3 rows", 1, 40)
    # no temporary files left behind, and the lock lives beside the folder, not in it
    assert sorted(p.name for p in (tmp_path / TEAM_DIR).iterdir()) == ["alice.jsonl", "roster.json"]
    assert load_transcript(tmp_path / TEAM_DIR / "alice.jsonl") == [
        UserMessage(content=lead("count rows")),
        AssistantMessage(content="3 rows"),
    ]
    [row] = t.roster("analysis")
    assert (row.name, row.agent, row.state, row.last_message, row.tokens) == ("alice", "reader", "idle", "3 rows", 42)


async def test_a_message_to_a_teammate_that_exited_revives_it_with_its_history(tmp_path: Path) -> None:
    h, provider, _ = make_harness(
        tmp_path, {"alice": [{"text": "3 rows"}, {"text": "and 2 columns"}]}
    )
    t = teams(h)
    await t.spawn("reader", "count rows", team="analysis", name="alice")
    await t.wait_idle("alice", turns=1, timeout=5)
    await t.shutdown("alice", wait=True, timeout=5)
    assert t.member("alice").state == "exited"
    receipt = await t.send("alice", "count the columns too")
    assert receipt == "alice had exited: revived it as tm-2 with your message as its next prompt"
    await t.wait_idle("alice", turns=2, timeout=5)
    revived = requests_of(provider, "alice")[1]
    assert [(m.role, m.content) for m in revived.messages] == [
        ("user", lead("count rows")),
        ("assistant", "3 rows"),
        ("user", lead("count the columns too")),
    ]
    entry = h.tracker.get("tm-2")
    assert (entry.kind, entry.status, entry.member) == ("teammate", TaskStatus.RUNNING, "alice")
    assert h.tracker.get("tm-1").status is TaskStatus.COMPLETED
    [row] = t.roster()
    assert (row.task_id, row.state, row.turns, row.last_message) == ("tm-2", "idle", 2, "and 2 columns")
    provider.assert_complete()


async def test_after_a_restart_a_message_revives_the_teammate_from_disk(tmp_path: Path) -> None:
    first, provider1, _ = make_harness(
        tmp_path, {"alice": [{"tool_calls": [call("read_file", path="data.csv")]}, {"text": "data.csv has 3 rows"}]}
    )
    await teams(first).spawn("reader", "count rows in data.csv", team="analysis", name="alice")
    await teams(first).wait_idle("alice", turns=1, timeout=5)
    old_history = requests_of(provider1, "alice")[-1].messages
    await first.aclose()  # the kernel goes away

    provider2 = ScriptedProvider(
        {
            "main": [{"tool_calls": [call("send_message", to="alice", message="how many columns?")]}, {"text": "asked"}],
            "alice": [{"text": "2 columns"}],
        }
    )
    second, _, _ = make_harness(tmp_path, None, provider=provider2)
    t = teams(second)
    [row] = t.roster()
    assert (row.name, row.team, row.state, row.last_message, row.task_id) == ("alice", "analysis", "exited", "data.csv has 3 rows", "tm-1")
    result = await second.run("ask alice about the columns")
    assert tool_results(result.messages) == [
        "alice had exited: revived it as tm-2 with your message as its next prompt"
    ]
    await t.wait_idle("alice", turns=2, timeout=5)
    [revived] = requests_of(provider2, "alice")
    assert revived.messages == [
        *old_history,  # prompt, the read_file call and its result
        AssistantMessage(content="data.csv has 3 rows"),
        UserMessage(content=lead("how many columns?")),
    ]
    assert len(old_history) == 3 and user_texts(revived.messages)[0] == lead("count rows in data.csv")
    assert "'alice', a long-lived teammate in team 'analysis'" in revived.system
    assert [m.name for m in t.registry.members()] == ["alice"]
    assert (await t.spawn("reader", "another")).name == "reader"  # fresh names still unique
    provider2.assert_complete()


async def test_an_unreadable_roster_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / ".harness_nb/teams/broken"
    broken.mkdir(parents=True)
    (broken / "roster.json").write_text("{not json")
    RosterStore(tmp_path / ".harness_nb/teams").save("fine", [])
    with caplog.at_level(logging.WARNING, logger="harness_nb.team"):
        h, _, _ = make_harness(tmp_path, {})
    assert list(teams(h).registry.teams) == ["default", "fine"]
    assert any("broken/roster.json cannot be read" in r.getMessage() for r in caplog.records)
