"""Path confinement: no file tool reaches outside the working directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import PathEscapeError, ToolCall, ToolError
from harness_nb.tools import (
    Tool,
    ToolContext,
    ToolOutcome,
    edit_file,
    glob,
    grep,
    invoke,
    ls,
    read_file,
    resolve_in_workdir,
    write_file,
)


async def run(tool: Tool, workdir: Path, **args: Any) -> ToolOutcome:
    call = ToolCall(id="call-1", name=tool.name, arguments=json.dumps(args))
    return await invoke(tool, call, ToolContext(workdir=workdir, call=call))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A workdir with a secret file beside it (outside) to try to reach."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET\n")
    w = tmp_path / "work"
    w.mkdir()
    (w / "a").mkdir()
    (w / "b.txt").write_text("inside\n")
    return w


def assert_escape(outcome: ToolOutcome, path: str) -> None:
    assert outcome.is_error
    assert f"error: path {path!r} is outside the working directory" in outcome.content
    assert "use a path inside it" in outcome.content


# resolve_in_workdir itself


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "../../etc/passwd", "a/../../x"])
def test_dotdot_escapes_are_refused(work: Path, path: str) -> None:
    with pytest.raises(PathEscapeError) as info:
        resolve_in_workdir(work, path)
    assert str(info.value) == (
        f"path {path!r} is outside the working directory {work.resolve()}; use a path inside it"
    )


def test_absolute_path_outside_is_refused(work: Path) -> None:
    with pytest.raises(PathEscapeError, match="'/etc/passwd' is outside the working directory"):
        resolve_in_workdir(work, "/etc/passwd")


def test_home_shorthand_is_judged_as_the_home_folder(work: Path) -> None:
    with pytest.raises(PathEscapeError):
        resolve_in_workdir(work, "~/.ssh/id_rsa")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("b.txt", "b.txt"),
        ("a/../b.txt", "b.txt"),
        ("./a/new/file.txt", "a/new/file.txt"),
        (".", ""),
    ],
)
def test_paths_inside_resolve_under_the_workdir(work: Path, path: str, expected: str) -> None:
    assert resolve_in_workdir(work, path) == (work.resolve() / expected)


def test_absolute_path_inside_is_allowed(work: Path) -> None:
    assert resolve_in_workdir(work, str(work / "b.txt")) == work.resolve() / "b.txt"


def test_symlink_to_a_file_outside_is_refused(work: Path) -> None:
    (work / "link").symlink_to(work.parent / "outside" / "secret.txt")
    with pytest.raises(PathEscapeError):
        resolve_in_workdir(work, "link")


def test_symlink_inside_pointing_inside_is_allowed(work: Path) -> None:
    (work / "alias").symlink_to(work / "b.txt")
    assert resolve_in_workdir(work, "alias") == work.resolve() / "b.txt"


def test_nul_byte_and_symlink_loop_give_tool_errors(work: Path) -> None:
    with pytest.raises(ToolError, match="cannot use path"):
        resolve_in_workdir(work, "bad\x00name")
    (work / "loop").symlink_to(work / "loop")
    with pytest.raises(ToolError, match="cannot use path 'loop/x'"):
        resolve_in_workdir(work, "loop/x")


# through the tools


async def test_read_through_symlink_to_outside_is_refused(work: Path) -> None:
    (work / "link").symlink_to(work.parent / "outside" / "secret.txt")
    outcome = await run(read_file, work, path="link")
    assert_escape(outcome, "link")
    assert "TOP SECRET" not in outcome.content


async def test_write_through_symlink_to_outside_is_refused(work: Path) -> None:
    target = work.parent / "outside" / "secret.txt"
    (work / "link").symlink_to(target)
    assert_escape(await run(write_file, work, path="link", content="pwned"), "link")
    assert target.read_text() == "TOP SECRET\n"


async def test_write_through_dangling_symlink_to_outside_is_refused(work: Path) -> None:
    target = work.parent / "outside" / "new.txt"
    (work / "dangling").symlink_to(target)
    assert_escape(await run(write_file, work, path="dangling", content="x"), "dangling")
    assert not target.exists()


async def test_symlinked_folder_leading_outside_is_refused(work: Path) -> None:
    (work / "door").symlink_to(work.parent / "outside", target_is_directory=True)
    assert_escape(await run(read_file, work, path="door/secret.txt"), "door/secret.txt")
    assert_escape(await run(write_file, work, path="door/new.txt", content="x"), "door/new.txt")
    assert_escape(await run(ls, work, path="door"), "door")
    assert not (work.parent / "outside" / "new.txt").exists()


async def test_a_write_never_goes_through_a_symlink_inside_the_workdir(work: Path) -> None:
    """The path written is the path the permission hook judged: a symlink on the way (a
    folder or the file itself) is refused with where it leads, and nothing is written."""
    (work / ".claude").mkdir()
    (work / "d").symlink_to(".claude", target_is_directory=True)
    (work / "alias.txt").symlink_to("b.txt")
    through_folder = await run(write_file, work, path="d/settings.local.json", content="{}")
    assert through_folder.content == (
        "error: cannot write 'd/settings.local.json': 'd' is a symlink, and the file tools never write "
        "through one; write the file where it leads ('.claude/settings.local.json') instead"
    )
    onto_link = await run(write_file, work, path="alias.txt", content="x")
    assert onto_link.content == (
        "error: cannot write 'alias.txt': 'alias.txt' is a symlink, and the file tools never write "
        "through one; write the file where it leads ('b.txt') instead"
    )
    edited = await run(edit_file, work, path="d/x.md", old_string="a", new_string="b")
    assert edited.is_error and "'d' is a symlink" in edited.content
    assert list((work / ".claude").iterdir()) == []
    assert (work / "b.txt").read_text() == "inside\n" and (work / "alias.txt").is_symlink()
    # reading through one inside the workdir still works: a read is judged where it lands
    assert (await run(read_file, work, path="alias.txt")).content == "     1\tinside"


async def test_every_file_tool_refuses_dotdot(work: Path) -> None:
    assert_escape(await run(read_file, work, path="../../etc/passwd"), "../../etc/passwd")
    assert_escape(await run(read_file, work, path="/etc/passwd"), "/etc/passwd")
    assert_escape(await run(write_file, work, path="../x.txt", content="x"), "../x.txt")
    outcome = await run(
        edit_file, work, path="../outside/secret.txt", old_string="TOP", new_string="x"
    )
    assert_escape(outcome, "../outside/secret.txt")
    assert_escape(await run(ls, work, path=".."), "..")
    assert_escape(await run(glob, work, pattern="*", path=".."), "..")
    assert_escape(await run(grep, work, pattern="SECRET", path="../outside"), "../outside")
    assert not (work.parent / "x.txt").exists()
    assert (work.parent / "outside" / "secret.txt").read_text() == "TOP SECRET\n"


async def test_glob_patterns_cannot_climb_out(work: Path) -> None:
    for pattern in ("../*", "/etc/*", "a/../../outside/*"):
        outcome = await run(glob, work, pattern=pattern)
        assert outcome.is_error
        assert "must be relative to `path` and stay below it" in outcome.content


async def test_grep_does_not_read_through_symlinks_leading_outside(work: Path) -> None:
    (work / "leak.txt").symlink_to(work.parent / "outside" / "secret.txt")
    (work / "door").symlink_to(work.parent / "outside", target_is_directory=True)
    (work / "ok.txt").write_text("SECRET word inside\n")
    outcome = await run(grep, work, pattern="SECRET")
    assert outcome.content == "ok.txt:1: SECRET word inside"


async def test_allowed_paths_work_through_the_tools(work: Path) -> None:
    outcome = await run(read_file, work, path=str(work / "b.txt"))
    assert outcome.content == "     1\tinside"
    outcome = await run(write_file, work, path="a/../c.txt", content="hello")
    assert outcome.content == "wrote 5 bytes to c.txt"
    assert (work / "c.txt").read_text() == "hello"
