"""Hostile input costs a warning or a note, never a hang, a blow-up or a crash (DESIGN §9).

Each test feeds one kind of bad input — a YAML alias bomb, deep nesting, an oversized
file, a symlink loop, a dangling link, a non-UTF-8 file name, a named pipe, a
pathological glob or regex, a 200 MB single line, path and skill escapes — and asserts
what came back and how much it cost in counts and bytes, never in seconds. Work that
could hang runs under a guard (``asyncio.timeout`` or a thread join with a timeout), so a
regression fails the test instead of stalling the suite.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from harness_nb.core import (
    BLOCKING_WORKERS,
    ConfigError,
    ToolCall,
    ToolError,
    ToolResultMessage,
    UserMessage,
    json_line,
    run_blocking,
)
from harness_nb.core import blocking as blocking_module
from harness_nb.core.frontmatter import FRONTMATTER_MAX_BYTES, YAML_MAX_DEPTH
from harness_nb.engine import MemorySession, PromptBuilder
from harness_nb.engine.session import load_transcript
from harness_nb.harness import Harness
from harness_nb.providers import anthropic as anthropic_wire
from harness_nb.providers import openai as openai_wire
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.providers.wire import encode_body
from harness_nb.skills.skill import load_skill, skill_dirs
from harness_nb.subagents import load_agent_dir
from harness_nb.testing import FakeLLMServer
from harness_nb.tools import Tool, ToolContext, ToolOutcome, edit_file, glob, grep, invoke, ls, read_file, write_file
from harness_nb.tools import search as search_module
from harness_nb.tools import walker as walker_module
from harness_nb.tools.walker import WALK_MAX_DEPTH

GUARD = 60.0  # seconds: only a hang ever reaches it; nothing asserts on time
_T = TypeVar("_T")


async def run(tool: Tool, workdir: Path, **args: Any) -> ToolOutcome:
    call = ToolCall(id="call-1", name=tool.name, arguments=json.dumps(args))
    async with asyncio.timeout(GUARD):
        return await invoke(tool, call, ToolContext(workdir=workdir, call=call))


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
        "agents/bomb.md: skipped: YAML alias *a at line 5: aliases are not allowed in agent "
        "files (they can expand a few bytes into gigabytes); write the value out in full"
    ]
    assert peak < 2 * 1024 * 1024


def test_deep_nesting_is_refused_without_recursion(agents_dir: Path) -> None:
    (agents_dir / "deep.md").write_text(DEEP_NESTING)
    result = guarded(lambda: load_agent_dir(agents_dir, label="agents"))
    assert [d.name for d in result.definitions] == ["fine"]
    (warning,) = result.warnings
    assert warning.startswith(f"agents/deep.md: skipped: YAML nested more than {YAML_MAX_DEPTH} levels")
    assert "levels deep at line 4;" in warning, "the line of the file, where x: starts"


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


# the file tree: symlink loops, dangling links, named pipes


@pytest.fixture
def fifo_tree(tmp_path: Path) -> Iterator[Path]:
    """A tree with a named pipe in it. Teardown opens each pipe for writing once, so that a
    reader stuck on it (a regression) is released instead of holding a thread for ever."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("needle in a\n")
    (tmp_path / "sub" / "b.txt").write_text("needle in b\n")
    pipes = [tmp_path / "pipe", tmp_path / "sub" / "pipe.txt"]
    for pipe in pipes:
        os.mkfifo(pipe)
    yield tmp_path
    for pipe in pipes:
        try:
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # nobody was reading: as it should be


async def test_a_named_pipe_never_blocks_a_file_tool(fifo_tree: Path) -> None:
    listing = await run(ls, fifo_tree)
    assert listing.content == "a.txt\npipe  [named pipe, not read]\nsub/"
    found = await run(glob, fifo_tree, pattern="**/*")
    assert found.content.splitlines() == [
        "a.txt",
        "sub/",
        "sub/b.txt",
        "[skipped 2 entries no file tool reads: pipe (named pipe, not read), "
        "sub/pipe.txt (named pipe, not read)]",
    ]
    hits = await run(grep, fifo_tree, pattern="needle")
    assert hits.content.splitlines()[:2] == ["a.txt:1: needle in a", "sub/b.txt:1: needle in b"]
    assert hits.content.splitlines()[2].startswith("[skipped 2 entries no file tool reads: pipe")
    for tool, args in ((read_file, {"path": "pipe"}), (grep, {"pattern": "x", "path": "pipe"})):
        refused = await run(tool, fifo_tree, **args)
        assert refused.is_error and "'pipe' is not a regular file" in refused.content


async def test_a_write_or_edit_onto_a_named_pipe_is_refused_and_leaves_it_a_pipe(fifo_tree: Path) -> None:
    """``write_file`` used to replace the pipe with a regular file (issue 18, item 7)."""
    wrote = await run(write_file, fifo_tree, path="sub/pipe.txt", content="x")
    assert wrote.content == (
        "error: 'sub/pipe.txt' is a named pipe, not a regular file; the file tools write regular files only"
    )
    edited = await run(edit_file, fifo_tree, path="pipe", old_string="a", new_string="b")
    assert edited.is_error and "'pipe' is not a regular file" in edited.content
    assert stat.S_ISFIFO((fifo_tree / "sub" / "pipe.txt").lstat().st_mode)
    assert stat.S_ISFIFO((fifo_tree / "pipe").lstat().st_mode)
    assert sorted(p.name for p in (fifo_tree / "sub").iterdir()) == ["b.txt", "pipe.txt"]  # no temp file left


async def test_many_stuck_looking_calls_do_not_exhaust_the_workers(fifo_tree: Path) -> None:
    """Twenty reads of a pipe at once (the default pool died after six) and then a normal
    read: every one returns."""
    outcomes = await asyncio.gather(*(run(read_file, fifo_tree, path="pipe") for _ in range(20)))
    assert all(o.is_error for o in outcomes)
    assert (await run(read_file, fifo_tree, path="a.txt")).content == "     1\tneedle in a"


async def test_when_every_worker_is_stuck_a_call_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setattr(blocking_module, "STUCK_AFTER", 0.0)
    stuck = [asyncio.ensure_future(run_blocking(release.wait, GUARD)) for _ in range(BLOCKING_WORKERS)]
    try:
        async with asyncio.timeout(GUARD):
            while len(blocking_module._running) < BLOCKING_WORKERS:
                await asyncio.sleep(0.01)
        with pytest.raises(ToolError, match=f"all {BLOCKING_WORKERS} file workers have been stuck"):
            await run_blocking(len, "x")
    finally:
        release.set()
        await asyncio.gather(*stuck)
    assert await run_blocking(len, "xy") == 2


@pytest.fixture
def looped_tree(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("needle in a\n")
    (tmp_path / "sub" / "b.txt").write_text("needle in b\n")
    (tmp_path / "self").symlink_to(tmp_path / "self")
    (tmp_path / "sub" / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    return tmp_path


async def test_a_symlink_loop_and_a_dangling_link_hide_nothing_else(looped_tree: Path) -> None:
    assert (await run(ls, looped_tree)).content == "a.txt\nself  [symlink loop]\nsub/"
    assert (await run(ls, looped_tree, path="sub")).content == "b.txt\ndangling.txt  [broken symlink]"
    note = "[skipped 2 entries no file tool reads: self (symlink loop), sub/dangling.txt (broken symlink)]"
    assert (await run(glob, looped_tree, pattern="**")).content.splitlines() == ["a.txt", "sub/", "sub/b.txt", note]
    assert (await run(grep, looped_tree, pattern="needle")).content.splitlines() == [
        "a.txt:1: needle in a",
        "sub/b.txt:1: needle in b",
        note,
    ]
    # A pattern that does not match the bad entries does not mention them.
    assert (await run(glob, looped_tree, pattern="**/b.txt")).content == "sub/b.txt"
    refused = await run(read_file, looped_tree, path="self")
    assert refused.is_error and "cannot use path 'self'" in refused.content


@pytest.fixture
def deep_tree(tmp_path: Path) -> Iterator[Path]:
    """1,200 nested folders, deeper than Python's recursion limit; removed bottom up at the
    end (shutil.rmtree, and so pytest's own clean-up, would recurse too deep)."""
    folders = []
    deep = tmp_path
    for _ in range(1200):
        deep = deep / "d"
        os.mkdir(deep)
        folders.append(deep)
    (deep / "bottom.txt").write_text("needle at the bottom\n")
    yield tmp_path
    (deep / "bottom.txt").unlink()
    for folder in reversed(folders):
        folder.rmdir()


async def test_a_deep_tree_is_walked_without_recursion(deep_tree: Path) -> None:
    found = await run(glob, deep_tree, pattern="**/bottom.txt")
    assert found.content == "d/" * 1200 + "bottom.txt"
    hit = await run(grep, deep_tree, pattern="needle")
    assert hit.content == "d/" * 1200 + "bottom.txt:1: needle at the bottom"


@pytest.fixture
def very_deep_tree(tmp_path: Path) -> Iterator[Path]:
    """100 levels more than the walk goes down (``WALK_MAX_DEPTH``, 2,000) of nested folders
    ``a``, with ``target.txt`` at the bottom and ``a/near.txt`` near the top: made through
    folder descriptors (the path is longer than any path the system takes), removed by
    moving the second level up, once per level."""
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(WALK_MAX_DEPTH + 100):
        os.mkdir("a", dir_fd=fd)
        inner = os.open("a", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    with open(os.open("target.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as f:
        f.write("needle at the bottom\n")
    os.close(fd)
    (tmp_path / "a" / "near.txt").write_text("needle near the top\n")
    yield tmp_path
    (tmp_path / "a" / "near.txt").unlink()
    while (tmp_path / "a").exists():
        if (tmp_path / "a" / "a").exists():
            os.rename(tmp_path / "a" / "a", tmp_path / "next")
        else:
            (tmp_path / "a" / "target.txt").unlink()
        (tmp_path / "a").rmdir()
        if (tmp_path / "next").exists():
            os.rename(tmp_path / "next", tmp_path / "a")


async def test_a_walk_that_stops_at_its_depth_bound_says_so(very_deep_tree: Path) -> None:
    """It used to answer "no files match": the folders past about 4 KiB of path could not be
    read, and were left out without a word (issue 18, item 7)."""
    deep = "a/" * (WALK_MAX_DEPTH - 1) + "a"
    shown = f"{deep[:60]}…{deep[-59:]}"
    note = (
        f"[stopped at {WALK_MAX_DEPTH:,} folder levels: {shown}/ and any other folder that deep were not searched; "
        "give a deeper `path` to search below them]"
    )
    found = await run(glob, very_deep_tree, pattern="**/target.txt")
    assert found.content.splitlines() == ["no files match '**/target.txt' in the part of . searched", note]
    hits = await run(grep, very_deep_tree, pattern="needle")
    assert hits.content.splitlines() == ["a/near.txt:1: needle near the top", note]
    assert (await run(glob, very_deep_tree, pattern="a/*.txt")).content == "a/near.txt"  # a short walk: no note


async def test_a_walk_that_stops_at_its_count_bound_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walker_module, "WALK_MAX_ENTRIES", 30)
    for i in range(40):
        (tmp_path / f"f{i:02d}.txt").write_text("x\n")
    found = await run(glob, tmp_path, pattern="**/*.csv")
    assert found.content.splitlines() == [
        "no files match '**/*.csv' in the part of . searched",
        "[stopped after looking at 30 entries; narrow `path` to search the rest]",
    ]


async def test_a_folder_the_walk_cannot_read_is_named(tmp_path: Path) -> None:
    """Folders named with 250 bytes each: the 17th level's path is longer than the system
    takes, so that folder cannot be listed; the search says so instead of "no matches"."""
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(20):
        os.mkdir("x" * 250, dir_fd=fd)
        inner = os.open("x" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    first, note = (await run(grep, tmp_path, pattern="needle")).content.splitlines()
    assert first == "no matches for 'needle' in the part of . searched"
    assert note.startswith("[could not read 1 folder: xxx") and note.endswith(" (File name too long)]")


# non-UTF-8 names and control characters in names


@pytest.fixture
def latin_tree(tmp_path: Path) -> Path:
    os.mkdir(os.path.join(os.fsencode(tmp_path), b"dir\xe9"))
    for name in (b"caf\xff.txt", b"dir\xe9/inner.txt"):
        with open(os.path.join(os.fsencode(tmp_path), name), "wb") as f:
            f.write(b"needle here\n")
    return tmp_path


async def test_a_non_utf8_name_is_listed_globbed_grepped_and_read(latin_tree: Path) -> None:
    assert (await run(ls, latin_tree)).content == "caf\\xff.txt\ndir\\xe9/"
    assert (await run(glob, latin_tree, pattern="**/*.txt")).content == "caf\\xff.txt\ndir\\xe9/inner.txt"
    assert (await run(grep, latin_tree, pattern="needle")).content == (
        "caf\\xff.txt:1: needle here\ndir\\xe9/inner.txt:1: needle here"
    )
    # The model sends the name back as it saw it (or as a JSON \udcff escape): it names the file.
    assert (await run(read_file, latin_tree, path="caf\\xff.txt")).content == "     1\tneedle here"
    assert (await run(read_file, latin_tree, path="caf\udcff.txt")).content == "     1\tneedle here"
    assert (await run(ls, latin_tree, path="dir\\xe9")).content == "inner.txt"
    edited = await run(edit_file, latin_tree, path="dir\\xe9/inner.txt", old_string="here", new_string="there")
    assert edited.content == "replaced 1 occurrence in dir\\xe9/inner.txt"
    assert (latin_tree / os.fsdecode(b"dir\xe9/inner.txt")).read_bytes() == b"needle there\n"
    # An escape never spells a path: "\x2e\x2e" is not "..".
    missing = await run(read_file, latin_tree, path="\\x2e\\x2e/x")
    assert missing.is_error and "file not found" in missing.content


@pytest.mark.parametrize("api", ["openai-compatible", "anthropic"])
async def test_a_conversation_about_a_non_utf8_name_goes_on(latin_tree: Path, api: str) -> None:
    """Over real HTTP and a real wire format, with a transcript: the model lists the folder,
    reads the file by the escaped name it saw, and the conversation carries on for two
    more runs — one of them started by a prompt holding a lone surrogate."""
    steps = [
        {"tool_calls": [{"name": "ls", "arguments": {"path": "."}, "id": "c1"}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "caf\\xff.txt"}, "id": "c2"}]},
        {"text": "It says needle here."},
        {"text": "Still fine."},
        {"text": "And again."},
    ]
    async with FakeLLMServer(steps) as srv:
        base = srv.url + ("/v1" if api == "openai-compatible" else "")
        async with Harness(
            f"{api}/test-model", workdir=latin_tree, base_url=base, api_key="k", include_user_agents=False
        ) as h:
            first = await h.run("what is in the odd file?")
            second = await h.run("thanks")
            third = await h.run("and caf\udcff.txt?")
            transcript = h.session.transcript
    assert (first.final_text, second.final_text, third.final_text) == ("It says needle here.", "Still fine.", "And again.")
    results = [m.content for m in first.messages if isinstance(m, ToolResultMessage)]
    assert results == [".harness_nb/\ncaf\\xff.txt\ndir\\xe9/", "     1\tneedle here"]
    last_request = json.dumps(srv.requests[-1].body)
    assert "caf\\\\xff.txt" in last_request and "dir\\\\xe9/" in last_request
    assert transcript is not None
    saved = load_transcript(transcript)
    assert [m.content for m in saved if isinstance(m, UserMessage)] == [
        "what is in the odd file?",
        "thanks",
        "and caf\\xff.txt?",
    ]


# pathological patterns


async def test_a_pathological_glob_is_collapsed_and_bounded(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["a"] * 30)
    deep.mkdir(parents=True)
    (deep / "x").write_text("")
    many = "**/" * 60 + "x"
    assert len(search_module.compile_glob(many).pattern) == len(search_module.compile_glob("**/x").pattern)
    assert (await run(glob, tmp_path, pattern=many)).content == "a/" * 30 + "x"
    # Stars that cannot collapse: a time budget stops the match, with a clear error.
    (tmp_path / ("a" * 200)).write_text("")
    stars = "*a" * 40 + "*b"
    outcome = await run(glob, tmp_path, pattern=stars)
    assert outcome.content.startswith("no files match") or "took longer than" in outcome.content
    too_long = await run(glob, tmp_path, pattern="*" * 2000)
    assert too_long.is_error and "at most 1000 are accepted" in too_long.content


async def test_a_pathological_regex_is_linear_with_rg(tmp_path: Path) -> None:
    assert search_module.find_rg() is not None, "the ripgrep wheel installs rg beside python"
    (tmp_path / "long.txt").write_text("a" * 100_000 + "b\nfine aaa\n")
    outcome = await run(grep, tmp_path, pattern="(a+)+$")
    assert outcome.content == "long.txt:2: fine aaa"


async def test_without_rg_a_pathological_regex_times_out_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "find_rg", lambda: None)
    monkeypatch.setattr(search_module, "MATCH_BUDGET_SECONDS", 0.2)
    (tmp_path / "long.txt").write_text("fine aaa\n" + "a" * 100_000 + "b\n")
    outcome = await run(grep, tmp_path, pattern="(a+)+$")
    assert not outcome.is_error
    assert outcome.content.splitlines() == [
        "long.txt:1: fine aaa",
        "[stopped: the regex took longer than 0.2 s (some patterns, such as nested repeats like "
        "(a+)+, backtrack badly on long lines); simplify it]",
    ]


async def test_look_around_falls_back_to_python(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("foobar\nfoobaz\n")
    assert (await run(grep, tmp_path, pattern="foo(?=bar)")).content == "a.txt:1: foobar"
    assert (await run(grep, tmp_path, pattern=r"(o)\1")).content == "a.txt:1: foobar\na.txt:2: foobaz"


# a 200 MB single line


@pytest.fixture(scope="module")
def one_long_line(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """200 MB of text with no newline, alone in its folder (written a megabyte at a time,
    once for the module's tests, which only read it; removed after)."""
    path = tmp_path_factory.mktemp("long-line") / "minified.js"
    chunk = b"x" * (1024 * 1024)
    with path.open("wb") as f:
        for _ in range(200):
            f.write(chunk)
    yield path
    path.unlink()


def test_read_file_of_a_200_mb_line_holds_megabytes_not_hundreds(one_long_line: Path) -> None:
    def read() -> ToolOutcome:
        return asyncio.run(run(read_file, one_long_line.parent, path=one_long_line.name))

    outcome, peak = peak_bytes(lambda: guarded(read))
    assert outcome.content == f"     1\t{'x' * 2000}… [{200 * 1024 * 1024 - 2000} more chars on this line]"
    assert peak < 16 * 1024 * 1024  # it was 565 MB


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_grep_over_a_200_mb_line_stays_small(
    one_long_line: Path, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if engine == "python":
        monkeypatch.setattr(search_module, "find_rg", lambda: None)

    def search() -> ToolOutcome:
        return asyncio.run(run(grep, one_long_line.parent, pattern="^x+"))

    outcome, peak = peak_bytes(lambda: guarded(search))
    (line,) = outcome.content.splitlines()
    assert line.startswith("minified.js:1: xxxx") and line.endswith("…")
    assert len(line) == len("minified.js:1: ") + 300 + 1
    assert peak < 16 * 1024 * 1024


def test_edit_file_refuses_a_huge_file_without_reading_it(tmp_path: Path) -> None:
    with (tmp_path / "big.txt").open("wb") as f:
        f.write(b"old text\n")
        f.truncate(64 * 1024 * 1024)  # sparse: no disk

    def edit() -> ToolOutcome:
        return asyncio.run(run(edit_file, tmp_path, path="big.txt", old_string="old", new_string="new"))

    outcome, peak = peak_bytes(lambda: guarded(edit))
    assert outcome.is_error and "'big.txt' is over 32 MiB; edit_file rewrites files up to" in outcome.content
    assert peak < 4 * 1024 * 1024


# path escapes


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "link", "door/secret.txt"])
async def test_paths_out_of_the_workdir_are_refused(tmp_path: Path, path: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "link").symlink_to(outside / "secret.txt")
    (work / "door").symlink_to(outside, target_is_directory=True)
    outcome = await run(read_file, work, path=path)
    assert outcome.is_error and "is outside the working directory" in outcome.content
    assert "TOP SECRET" not in outcome.content


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
