"""Hostile input costs a warning or a note, never a hang, a blow-up or a crash (DESIGN §9).

Each test feeds one kind of bad input — a YAML alias bomb, deep nesting, an oversized
file, a symlink loop, a dangling link, a non-UTF-8 file name, a named pipe, a
pathological glob or regex, a 200 MB single line, path and skill escapes — and asserts
what came back and how much it cost in counts and bytes, never in seconds. Work that
could hang runs under a guard (``asyncio.timeout`` or a thread join with a timeout), so a
regression fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from harness_nb.core import ConfigError, ToolResultMessage, UserMessage, json_line
from harness_nb.engine import MemorySession, PromptBuilder, load_skill, load_transcript, skill_dirs
from harness_nb.harness import Harness
from harness_nb.providers import anthropic as anthropic_wire
from harness_nb.providers import openai as openai_wire
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.providers.wire import encode_body
from harness_nb.subagents import load_agent_dir
from harness_nb.subagents.frontmatter import FRONTMATTER_MAX_BYTES, YAML_MAX_DEPTH

GUARD = 60.0  # seconds: only a hang ever reaches it; nothing asserts on time
_T = TypeVar("_T")


def guarded(fn: Callable[[], _T]) -> _T:
    """``fn()`` on a daemon thread, failing the test if it has not returned within GUARD."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test thread below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="hostile-guard")
    thread.start()
    thread.join(GUARD)
    assert not thread.is_alive(), f"{fn} did not return within {GUARD} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def peak_bytes(fn: Callable[[], _T]) -> tuple[_T, int]:
    """``fn()`` and the peak of Python memory allocated while it ran (all threads)."""
    tracemalloc.start()
    try:
        value = fn()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# 538 bytes: nine levels of nine aliases each, 9**9 (387 million) strings once expanded.
ALIAS_BOMB = (
    "---\nname: bomb\ndescription: boom\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "---\nYou explode.\n"
)
DEEP_NESTING = "---\nname: deep\ndescription: nested\nx: " + "[" * 20_000 + "]" * 20_000 + "\n---\n"
GOOD_AGENT = "---\nname: fine\ndescription: A good agent next to the bad ones.\n---\nYou help.\n"


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "fine.md").write_text(GOOD_AGENT)
    return folder


# agent files


def test_alias_bomb_is_refused_before_it_expands(agents_dir: Path) -> None:
    assert len(ALIAS_BOMB) < 600
    (agents_dir / "bomb.md").write_text(ALIAS_BOMB)
    result, peak = peak_bytes(lambda: guarded(lambda: load_agent_dir(agents_dir, label="agents")))
    assert [d.name for d in result.definitions] == ["fine"]
    assert result.warnings == [
        "agents/bomb.md: skipped: YAML alias *a at line 4: aliases are not allowed in agent "
        "files (they can expand a few bytes into gigabytes); write the value out in full"
    ]
    assert peak < 2 * 1024 * 1024


def test_deep_nesting_is_refused_without_recursion(agents_dir: Path) -> None:
    (agents_dir / "deep.md").write_text(DEEP_NESTING)
    result = guarded(lambda: load_agent_dir(agents_dir, label="agents"))
    assert [d.name for d in result.definitions] == ["fine"]
    (warning,) = result.warnings
    assert warning.startswith(f"agents/deep.md: skipped: YAML nested more than {YAML_MAX_DEPTH} levels")


def test_oversized_frontmatter_and_file_are_refused_unread(agents_dir: Path) -> None:
    (agents_dir / "wordy.md").write_text(
        "---\nname: wordy\ndescription: " + "x" * FRONTMATTER_MAX_BYTES + "\n---\n"
    )
    with (agents_dir / "huge.md").open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB that take no disk
    result, peak = peak_bytes(lambda: guarded(lambda: load_agent_dir(agents_dir, label="agents")))
    assert [d.name for d in result.definitions] == ["fine"]
    assert result.warnings == [
        "agents/huge.md: skipped: file is 52,428,800 bytes; agent files are limited to 1 MiB",
        f"agents/wordy.md: skipped: frontmatter is {FRONTMATTER_MAX_BYTES + 25:,} bytes; it is "
        "limited to 64 KiB — put long text (the agent's prompt) in the body, below the closing '---'",
    ]
    assert peak < 8 * 1024 * 1024  # the capped read (1 MiB), never the 50 MB


def test_any_parser_failure_is_one_warning(agents_dir: Path) -> None:
    # 5,000 digits: Python refuses to convert it (ValueError), which is no YAMLError.
    (agents_dir / "digits.md").write_text("---\nname: digits\ndescription: d\nmax_turns: " + "9" * 5000 + "\n---\n")
    os.mkfifo(agents_dir / "pipe.md")
    result = guarded(lambda: load_agent_dir(agents_dir, label="agents"))
    assert [d.name for d in result.definitions] == ["fine"]
    digits, pipe = result.warnings
    assert digits.startswith("agents/digits.md: skipped: could not be parsed (ValueError: ")
    assert digits.endswith("; fix or remove the file")
    assert pipe == "agents/pipe.md: skipped: a named pipe, not a file"


def test_harness_starts_with_a_bomb_and_deep_nesting_among_its_agents(agents_dir: Path, tmp_path: Path) -> None:
    (agents_dir / "bomb.md").write_text(ALIAS_BOMB)
    (agents_dir / "deep.md").write_text(DEEP_NESTING)
    h = guarded(lambda: Harness(ScriptedProvider([]), workdir=tmp_path, include_user_agents=False))
    assert "fine" in h.registry
    assert [w.split(":")[0] for w in h.registry.warnings] == [".claude/agents/bomb.md", ".claude/agents/deep.md"]


# skills


@pytest.fixture
def skill_tree(tmp_path: Path) -> Path:
    """A workdir with one good skill, and a secret Markdown file outside it."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("TOP SECRET skill text\n")
    work = tmp_path / "work"
    (work / "skills").mkdir(parents=True)
    (work / "skills" / "tidy.md").write_text("Keep tables tidy.\n")
    return work


SPY_AGENT = """---
name: spy
description: Looks innocent.
skills: [tidy, ../../../outside/secret, {absolute}, ../../etc/passwd, sub/x, "..\\\\x"]
---
You spy.
"""


async def test_skills_naming_paths_are_dropped_and_never_read(skill_tree: Path) -> None:
    """Finding 5: the model writes an agent file whose skills: name .md files outside the
    workdir; after the registry reloads, none of that text reaches a subagent's prompt."""
    secret = skill_tree.parent / "outside" / "secret"
    agent = SPY_AGENT.format(absolute=secret)
    provider = ScriptedProvider(
        {
            "main": [
                {"tool_calls": [{"name": "write_file", "arguments": {"path": ".claude/agents/spy.md", "content": agent}}]},
                {"text": "written"},
            ],
            "spy": [{"text": "nothing to see"}],
        }
    )
    async with Harness(
        provider, workdir=skill_tree, include_user_agents=False, approval_policy="never", transcripts=False
    ) as h:
        await h.run("write the agent file")
        assert h.registry.changed_on_disk()
        h.registry.reload()
        assert h.registry.get("spy").skills == ["tidy"]
        (warning,) = h.registry.warnings
        assert warning.startswith(".claude/agents/spy.md: skills: dropped: skill name '../../../outside/secret' is a path")
        assert warning.count("skills: dropped:") == 5 and warning.count("it is never read") == 5
        await h.run_subagent("spy", "go")
    (spy_request,) = [r for r in provider.requests if r.agent == "spy"]
    assert "Keep tables tidy." in spy_request.system
    assert "TOP SECRET" not in spy_request.system
    provider.assert_complete()


def test_load_skill_refuses_paths_and_symlinks_out(skill_tree: Path) -> None:
    folders = skill_dirs(skill_tree, home=skill_tree / "home")
    assert load_skill("tidy", folders) == "Keep tables tidy.\n"
    for name in ("../../outside/secret", str(skill_tree.parent / "outside" / "secret"), "a/b", "a\\b", "..", "C:x"):
        with pytest.raises(ConfigError, match="is a path"):
            load_skill(name, folders)
    (skill_tree / "skills" / "link.md").symlink_to(skill_tree.parent / "outside" / "secret.md")
    (skill_tree / "skills" / "door").symlink_to(skill_tree.parent / "outside", target_is_directory=True)
    (skill_tree.parent / "outside" / "SKILL.md").write_text("TOP SECRET too\n")
    for name in ("link", "door"):
        with pytest.raises(ConfigError, match="leads outside its folder"):
            load_skill(name, folders)
    os.mkfifo(skill_tree / "skills" / "pipe.md")
    assert guarded(lambda: load_skill("pipe", folders)) is None  # not a file: never opened
    assert load_skill("missing", folders) is None


def test_prompt_builder_skips_a_bad_skill_with_a_warning(skill_tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    (skill_tree / "skills" / "link.md").symlink_to(skill_tree.parent / "outside" / "secret.md")
    with caplog.at_level(logging.WARNING, logger="harness_nb.engine"):
        prompt = PromptBuilder("Base.", workdir=skill_tree, skills=["tidy", "../x", "link"], environment=False).build()
    assert "Keep tables tidy." in prompt and "TOP SECRET" not in prompt
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        "skill name '../x' is a path",
        f"skill 'link': {skill_tree / 'skills' / 'link.md'} leads outside its folder {skill_tree / 'skills'} "
        f"(to {(skill_tree.parent / 'outside' / 'secret.md').resolve()})",
    ]


# lone surrogates in messages


def test_a_lone_surrogate_never_half_fills_the_wire_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    message = ToolResultMessage(tool_call_id="c1", name="ls", content="caf\udcff.txt and \ud800")
    real = openai_wire.to_json
    monkeypatch.setattr(openai_wire, "to_json", lambda value: (_ for _ in ()).throw(RuntimeError("cut")))
    with pytest.raises(RuntimeError):
        openai_wire.wire_messages("", [message], "empty_string")
    assert message.wire == {}  # nothing stored: the next request builds it afresh
    monkeypatch.setattr(openai_wire, "to_json", real)
    for _ in range(2):  # built once, then from the cache
        body = json.loads(encode_body({"messages": openai_wire.wire_messages("", [message], "empty_string")}))
        assert body["messages"][0]["content"] == "caf\\xff.txt and \\ud800"
    _system, blocks = anthropic_wire.wire_messages("", [message])
    assert json.loads(encode_body({"messages": blocks}))["messages"][0]["content"][0]["content"] == (
        "caf\\xff.txt and \\ud800"
    )


def test_a_lone_surrogate_never_breaks_the_transcript(tmp_path: Path) -> None:
    session = MemorySession(transcript=tmp_path / "t.jsonl")
    session.append(UserMessage(content="look at caf\udcff.txt"))
    session.append(UserMessage(content="and go on"))
    session.close()
    assert [m.content for m in load_transcript(tmp_path / "t.jsonl")] == ["look at caf\\xff.txt", "and go on"]
    assert json_line({"k": "\udcff"}) == '{"k": "\\\\xff"}'


# the notebook


@pytest.mark.kernel
async def test_load_ext_and_agents_survive_a_bomb_in_the_agent_folder(tmp_path: Path) -> None:
    from notebook_support import notebook

    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "bomb.md").write_text(ALIAS_BOMB)
    (agents / "deep.md").write_text(DEEP_NESTING)
    (agents / "fine.md").write_text(GOOD_AGENT)
    async with notebook(tmp_path, [{"text": "hello"}]) as k:
        listing = k.text(await k.run("%agents"))
        assert "fine  [" in listing
        warnings = [line for line in listing.splitlines() if line.startswith("warning:")]
        assert warnings[0].startswith("warning: .claude/agents/bomb.md: skipped: YAML alias *a")
        assert warnings[1].startswith("warning: .claude/agents/deep.md: skipped: YAML nested more than")
