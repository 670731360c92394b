"""Two kernels on one workdir (issue #9, finding 8): rosters are merged under a file lock,
so neither drops the other's teammates, and spawning a name the other kernel uses never
deletes its live transcript. Two harnesses in one process stand for two kernels (each
team manager owns what it spawned); one test uses real processes for the lock itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness_nb.core import ToolError
from harness_nb.team.roster import RosterMember, RosterStore
from team_support import gated, make_harness, teams

TEAM_DIR = Path(".harness_nb/teams/analysis")


def roster_names(workdir: Path) -> list[str]:
    return [m["name"] for m in json.loads((workdir / TEAM_DIR / "roster.json").read_text())["members"]]


async def test_each_kernel_keeps_the_others_teammates_in_the_roster(tmp_path: Path) -> None:
    one, _, gates = make_harness(tmp_path, {"alice": gated("a", "alice done")})
    await teams(one).spawn("reader", "look", team="analysis", name="alice")
    await gates.reached("a")
    two, _, _ = make_harness(tmp_path, {"bob": [{"text": "bob done"}]})
    await teams(two).spawn("reader", "look too", team="analysis", name="bob")
    await teams(two).wait_idle("bob", turns=1, timeout=5)
    assert roster_names(tmp_path) == ["alice", "bob"]
    gates.open("a")  # alice's turn ends: kernel one rewrites its member, and must keep bob
    await teams(one).wait_idle("alice", turns=1, timeout=5)
    members = {m["name"]: m for m in json.loads((tmp_path / TEAM_DIR / "roster.json").read_text())["members"]}
    assert set(members) == {"alice", "bob"}
    assert (members["alice"]["last_message"], members["bob"]["last_message"]) == ("alice done", "bob done")


async def test_a_name_in_use_by_another_kernel_is_never_reused_nor_its_transcript_deleted(tmp_path: Path) -> None:
    one, _, gates = make_harness(tmp_path, {"alice": gated("a", "alice done")})
    await teams(one).spawn("reader", "original work", team="analysis", name="alice")
    await gates.reached("a")
    transcript = tmp_path / TEAM_DIR / "alice.jsonl"
    before = transcript.read_text()
    assert "original work" in before

    two, _, _ = make_harness(tmp_path, {"alice-2": [{"text": "second alice"}]})
    member = await teams(two).spawn("reader", "other work", team="analysis", name="alice")
    assert member.name == "alice-2"
    assert transcript.read_text() == before  # before: unlinked by the second kernel's spawn
    # the other kernel's alice is live: messaging it from here does not start a second one
    with pytest.raises(ToolError, match="alice is running in another kernel"):
        await teams(two).send("alice", "hello?")
    assert transcript.read_text() == before
    gates.open("a")
    await teams(one).wait_idle("alice", turns=1, timeout=5)


async def test_a_name_whose_transcript_exists_is_not_claimed(tmp_path: Path) -> None:
    (tmp_path / TEAM_DIR).mkdir(parents=True)
    orphan = tmp_path / TEAM_DIR / "alice.jsonl"
    orphan.write_text('{"type": "message"}\n')  # a roster entry lost, or a spawn not yet recorded
    h, _, _ = make_harness(tmp_path, {"alice-2": [{"text": "hi"}]})
    member = await teams(h).spawn("reader", "work", team="analysis", name="alice")
    assert member.name == "alice-2"
    assert orphan.read_text() == '{"type": "message"}\n'


def test_concurrent_writers_in_separate_processes_lose_no_member(tmp_path: Path) -> None:
    writer = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from harness_nb.team.roster import RosterMember, RosterStore
        store = RosterStore(Path(sys.argv[1]))
        me = sys.argv[2]
        for turn in range(40):
            record = RosterMember(name=me, team="analysis", agent="reader", task_id="tm-1", turns=turn)
            store.save("analysis", [record])
        """
    )
    folder = tmp_path / "teams"
    procs = [
        subprocess.Popen([sys.executable, "-c", writer, str(folder), name]) for name in ("alice", "bob", "carol")
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    roster = RosterStore(folder).load("analysis")
    assert roster is not None
    assert sorted((m.name, m.turns) for m in roster.members) == [("alice", 39), ("bob", 39), ("carol", 39)]


def test_save_replaces_only_the_writers_members(tmp_path: Path) -> None:
    store = RosterStore(tmp_path)
    store.save("t", [RosterMember(name="a", team="t", agent="x", task_id="tm-1")])
    store.save("t", [RosterMember(name="b", team="t", agent="x", task_id="tm-2")])
    store.save("t", [RosterMember(name="a", team="t", agent="x", task_id="tm-1", turns=3)])
    roster = store.load("t")
    assert roster is not None
    assert [(m.name, m.turns) for m in roster.members] == [("a", 3), ("b", 0)]  # join order kept
