"""read_file, write_file, edit_file and ls, called through ``invoke`` as the engine does."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import ToolCall
from harness_nb.core import fs as fs_module
from harness_nb.tools import (
    READ_ONLY_TOOLS,
    Tool,
    ToolContext,
    ToolOutcome,
    ToolRegistry,
    builtin_tools,
    edit_file,
    invoke,
    ls,
    read_file,
    tool,
    write_file,
)
from harness_nb.tools import files as files_module


async def run(tool: Tool, workdir: Path, **args: Any) -> ToolOutcome:
    call = ToolCall(id="call-1", name=tool.name, arguments=json.dumps(args))
    return await invoke(tool, call, ToolContext(workdir=workdir, call=call))


def numbered(first: int, lines: list[str]) -> str:
    return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(lines, first))


# read_file


async def test_read_numbers_lines_like_cat_n(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n  beta\n\tgamma\n")
    outcome = await run(read_file, tmp_path, path="a.txt")
    assert not outcome.is_error
    assert outcome.content == "     1\talpha\n     2\t  beta\n     3\t\tgamma"


async def test_read_last_line_without_newline_counts(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo")
    assert (await run(read_file, tmp_path, path="a.txt")).content == numbered(1, ["one", "two"])


async def test_read_line_range_notes_what_was_shown(tmp_path: Path) -> None:
    """The part the model asked for (its own offset and limit) is "lines A–B of N", never
    "truncated": nothing was cut that it did not choose to leave out."""
    lines = [f"line {i}" for i in range(1, 11)]
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n")
    outcome = await run(read_file, tmp_path, path="a.txt", offset=3, limit=4)
    assert outcome.content == numbered(3, lines[2:6]) + "\n[lines 3–6 of 10]"
    tail = await run(read_file, tmp_path, path="a.txt", offset=8)
    assert tail.content == numbered(8, lines[7:]) + "\n[lines 8–10 of 10]"
    whole = await run(read_file, tmp_path, path="a.txt", limit=10)
    assert whole.content == numbered(1, lines)
    beyond = await run(read_file, tmp_path, path="a.txt", offset=9, limit=50)
    assert beyond.content == numbered(9, lines[8:]) + "\n[lines 9–10 of 10]"


async def test_read_says_truncated_when_its_own_bound_cut_a_limit_the_model_set(tmp_path: Path) -> None:
    # 400 lines of 1000 chars: the model asks for 350, the 256 KiB cap stops it first
    (tmp_path / "wide.txt").write_text(("x" * 1000 + "\n") * 400)
    outcome = await run(read_file, tmp_path, path="wide.txt", limit=350)
    assert "[truncated: showing lines 1–" in outcome.content and outcome.content.endswith("of 400; use offset/limit to read more]")


async def test_read_caps_lines_by_default(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    outcome = await run(read_file, tmp_path, path="big.txt")
    body = outcome.content.splitlines()
    assert len(body) == 2001
    assert body[1999] == "  2000\t2000"
    assert body[-1] == "[truncated: showing lines 1–2000 of 2500; use offset/limit to read more]"


async def test_read_caps_characters(tmp_path: Path) -> None:
    # 400 lines of 1000 chars: 400 KB, over the 256 KiB cap long before the line cap.
    (tmp_path / "wide.txt").write_text(("x" * 1000 + "\n") * 400)
    outcome = await run(read_file, tmp_path, path="wide.txt")
    assert len(outcome.content) <= files_module.READ_MAX_CHARS + 200
    assert outcome.content.endswith("of 400; use offset/limit to read more]")
    assert "[truncated: showing lines 1–" in outcome.content


async def test_read_cuts_a_very_long_line(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("y" * 5000)
    outcome = await run(read_file, tmp_path, path="min.js")
    assert outcome.content == f"     1\t{'y' * 2000}… [3000 more chars on this line]"


async def test_read_refuses_binary_files(tmp_path: Path) -> None:
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    outcome = await run(read_file, tmp_path, path="img.png")
    assert outcome.is_error
    assert "'img.png' is a binary file (16 bytes); read_file shows text only" in outcome.content


async def test_read_shows_invalid_utf8_with_replacement(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    assert (await run(read_file, tmp_path, path="latin.txt")).content == "     1\tcaf\ufffd"


async def test_read_missing_file_suggests_ls_or_glob(tmp_path: Path) -> None:
    outcome = await run(read_file, tmp_path, path="nope/x.py")
    assert outcome.is_error
    assert outcome.content == "error: file not found: 'nope/x.py'; check the name with ls or glob"


async def test_read_folder_and_past_end_and_empty(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "two.txt").write_text("1\n2\n")
    (tmp_path / "empty.txt").write_text("")
    folder = await run(read_file, tmp_path, path="d")
    assert folder.is_error and "'d' is a folder, not a file; use ls" in folder.content
    past = await run(read_file, tmp_path, path="two.txt", offset=5)
    assert past.is_error
    assert "offset 5 is past the end of 'two.txt', which has 2 lines" in past.content
    assert (await run(read_file, tmp_path, path="empty.txt")).content == "(empty file: empty.txt)"


async def test_read_and_edit_refuse_a_named_pipe_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    for outcome in (
        await run(read_file, tmp_path, path="pipe"),
        await run(edit_file, tmp_path, path="pipe", old_string="a", new_string="b"),
    ):
        assert outcome.content == "error: 'pipe' is not a regular file (a device, pipe or socket): only regular files are read"


# bad arguments become readable outcomes


async def test_non_json_arguments_are_an_error_outcome(tmp_path: Path) -> None:
    call = ToolCall(id="c", name="read_file", arguments='{"path": "a.txt"')
    outcome = await invoke(read_file, call, ToolContext(workdir=tmp_path, call=call))
    assert outcome.is_error
    assert outcome.content.startswith("error: arguments are not valid JSON")
    assert "Send the arguments as one JSON object" in outcome.content


async def test_arguments_the_json_module_reads_reach_the_tool_as_it_reads_them(tmp_path: Path) -> None:
    """Arguments are checked in one step when pydantic's JSON reader takes them; what only
    the two-step path takes (a lone surrogate escape, as a non-UTF-8 file name makes; empty
    arguments for a tool without required ones) still runs, with the values it gave."""

    @tool
    async def echo(ctx: ToolContext, text: str = "(none)") -> str:
        """Say the text back."""
        return ascii(text)

    for arguments, expected in (
        ('{"text": "\\ud800x"}', "'\\ud800x'"),
        ('{"text": "abc"}', "'abc'"),
        ("", "'(none)'"),
        ("  ", "'(none)'"),
    ):
        call = ToolCall(id="c", name="echo", arguments=arguments)
        outcome = await invoke(echo, call, ToolContext(workdir=tmp_path, call=call))
        assert (outcome.is_error, outcome.content) == (False, expected), arguments


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "error: bad arguments for read_file: path: Field required"),
        ({"path": "a", "limit": 0}, "limit: Input should be greater than or equal to 1"),
        ({"path": "a", "offset": "x"}, "offset: Input should be a valid integer"),
        ({"path": "a", "lines": 3}, "lines: Extra inputs are not permitted; call it again with arguments its schema allows (path, offset, limit)"),
    ],
)
async def test_schema_failures_are_error_outcomes(
    tmp_path: Path, args: dict[str, Any], expected: str
) -> None:
    outcome = await run(read_file, tmp_path, **args)
    assert outcome.is_error
    assert expected in outcome.content


# write_file


async def test_write_creates_parent_folders(tmp_path: Path) -> None:
    outcome = await run(write_file, tmp_path, path="a/b/c.txt", content="héllo\n")
    assert outcome.content == "wrote 7 bytes to a/b/c.txt"
    assert (tmp_path / "a" / "b" / "c.txt").read_text(encoding="utf-8") == "héllo\n"


async def test_write_replaces_and_keeps_mode_and_leaves_no_temp_file(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("old")
    script.chmod(0o755)
    outcome = await run(write_file, tmp_path, path="run.sh", content="new")
    assert outcome.content == "wrote 3 bytes to run.sh"
    assert script.read_text() == "new"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


async def test_write_is_atomic_when_the_final_rename_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "data.txt"
    target.write_text("original")
    seen: list[str] = []

    def failing_replace(src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
        with open(os.open(src, os.O_RDONLY, dir_fd=src_dir_fd)) as written:
            seen.append(written.read())  # the full new content was written first
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fs_module.os, "replace", failing_replace)
    outcome = await run(write_file, tmp_path, path="data.txt", content="replacement")
    assert outcome.is_error
    assert outcome.content == "error: cannot write 'data.txt': No space left on device"
    assert seen == ["replacement"]
    assert target.read_text() == "original"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt"]


async def test_write_to_a_folder_or_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f.txt").write_text("x")
    folder = await run(write_file, tmp_path, path="d", content="x")
    assert folder.content == "error: 'd' is a folder; give a file path to write to"
    under = await run(write_file, tmp_path, path="f.txt/inner.txt", content="x")
    assert under.is_error and under.content.startswith("error: cannot write 'f.txt/inner.txt'")


# edit_file


async def test_edit_replaces_one_exact_occurrence(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    outcome = await run(
        edit_file, tmp_path, path="m.py", old_string="    return 1", new_string="    return 2"
    )
    assert outcome.content == "replaced 1 occurrence in m.py"
    assert (tmp_path / "m.py").read_text() == "def f():\n    return 2\n"


async def test_edit_missing_text_says_to_read_first(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    outcome = await run(edit_file, tmp_path, path="m.py", old_string="x =  1", new_string="x = 2")
    assert outcome.is_error
    assert outcome.content == (
        "error: old_string not found in 'm.py'; read the file first and copy the exact text, "
        "including whitespace"
    )
    assert (tmp_path / "m.py").read_text() == "x = 1\n"


async def test_edit_ambiguous_text_is_refused_unless_replace_all(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("a = 0\nb = 0\nc = 0\n")
    outcome = await run(edit_file, tmp_path, path="m.py", old_string="= 0", new_string="= 1")
    assert outcome.is_error
    assert "old_string found 3 times in 'm.py'; add surrounding lines to make it unique" in (
        outcome.content
    )
    assert "or set replace_all" in outcome.content
    assert (tmp_path / "m.py").read_text() == "a = 0\nb = 0\nc = 0\n"
    outcome = await run(
        edit_file, tmp_path, path="m.py", old_string="= 0", new_string="= 1", replace_all=True
    )
    assert outcome.content == "replaced 3 occurrences in m.py"
    assert (tmp_path / "m.py").read_text() == "a = 1\nb = 1\nc = 1\n"


async def test_edit_refuses_no_op_and_empty_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x\n")
    same = await run(edit_file, tmp_path, path="m.py", old_string="x", new_string="x")
    assert same.content == (
        "error: old_string and new_string are the same; there is nothing to change"
    )
    empty = await run(edit_file, tmp_path, path="m.py", old_string="", new_string="y")
    assert empty.is_error and "old_string is empty" in empty.content
    missing = await run(edit_file, tmp_path, path="n.py", old_string="x", new_string="y")
    assert missing.content == "error: file not found: 'n.py'; to create a new file use write_file"


async def test_edit_refuses_non_utf8_and_binary_without_touching_them(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9 x\n")
    (tmp_path / "blob.bin").write_bytes(b"x\x00y")
    latin = await run(edit_file, tmp_path, path="latin.txt", old_string="x", new_string="y")
    assert latin.is_error and "'latin.txt' is not UTF-8 text" in latin.content
    assert (tmp_path / "latin.txt").read_bytes() == b"caf\xe9 x\n"
    blob = await run(edit_file, tmp_path, path="blob.bin", old_string="x", new_string="z")
    assert blob.is_error and "'blob.bin' is a binary file" in blob.content
    assert (tmp_path / "blob.bin").read_bytes() == b"x\x00y"


# ls


async def test_ls_sorts_marks_folders_and_hides_nothing(tmp_path: Path) -> None:
    for name in ("b.txt", "A.md", ".env"):
        (tmp_path / name).write_text("")
    for name in ("src", ".git"):
        (tmp_path / name).mkdir()
    outcome = await run(ls, tmp_path)
    assert outcome.content == ".env\n.git/\nA.md\nb.txt\nsrc/"
    (tmp_path / "src" / "m.py").write_text("")
    assert (await run(ls, tmp_path, path="src")).content == "m.py"


async def test_ls_caps_long_listings(tmp_path: Path) -> None:
    for i in range(510):
        (tmp_path / f"f{i:04d}").touch()
    lines = (await run(ls, tmp_path)).content.splitlines()
    assert len(lines) == 501
    assert lines[499] == "f0499"
    assert lines[-1] == (
        "[… 10 more entries not shown (510 in total); use glob with a pattern to narrow the "
        "listing]"
    )


async def test_ls_errors_and_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("")
    (tmp_path / "empty").mkdir()
    assert (await run(ls, tmp_path, path="empty")).content == "(empty folder: empty)"
    on_file = await run(ls, tmp_path, path="f.txt")
    assert on_file.content == "error: 'f.txt' is a file, not a folder; use read_file to read it"
    missing = await run(ls, tmp_path, path="nope")
    assert missing.is_error and "folder not found: 'nope'" in missing.content


# builtin set


def test_builtin_tools_are_fresh_complete_and_flagged() -> None:
    first, second = builtin_tools(), builtin_tools()
    names = [t.name for t in first]
    assert names == ["read_file", "write_file", "edit_file", "ls", "glob", "grep", "bash"]
    assert all(a is not b for a, b in zip(first, second, strict=True))
    assert sorted(t.name for t in first if t.read_only) == sorted(READ_ONLY_TOOLS)
    registry = ToolRegistry(first)
    for spec in registry.specs():
        assert spec.description and "\n" not in spec.description and spec.parameters["type"] == "object"
        assert "additionalProperties" not in spec.parameters and "title" not in spec.parameters
        for name, prop in spec.parameters["properties"].items():
            assert "title" not in prop and "anyOf" not in prop, f"{spec.name}.{name}: {prop}"
    # every schema goes with every call: the seven together stay small
    sent = len(json.dumps([s.model_dump() for s in registry.specs()], separators=(",", ":")))
    assert sent <= 3_200, sent


def test_a_schema_is_made_once_per_model_and_every_tool_owns_its_copy() -> None:
    """Every harness makes its own built-in tools over the same argument models, so a
    model's schema is made once; yet each tool gets a schema of its own (changing one
    leaves the next harness's intact), and a tool over another model gets that model's."""
    from harness_nb.tools import tool

    first = {t.name: t for t in builtin_tools()}
    second = {t.name: t for t in builtin_tools()}
    assert first["read_file"] is not second["read_file"] and first["read_file"].Params is second["read_file"].Params
    one, two = first["read_file"].spec().parameters, second["read_file"].spec().parameters
    assert one == two and one is not two
    one["properties"].clear()
    assert two["properties"] and second["read_file"].spec().parameters["properties"]

    @tool(name="probe")
    async def probe_a(ctx: ToolContext, path: str) -> str:
        """Probe a path."""
        return path

    @tool(name="probe")
    async def probe_b(ctx: ToolContext, count: int = 1) -> str:
        """Probe a count."""
        return str(count)

    assert list(probe_a.spec().parameters["properties"]) == ["path"]
    assert list(probe_b.spec().parameters["properties"]) == ["count"]


def test_tools_made_from_one_closure_share_its_arguments_model_unless_their_defaults_differ() -> None:
    """Each harness makes its coordination tools from closures of its own: the same code
    with the same annotations and defaults makes one model, and a closure whose default
    differs gets a model of its own."""
    from harness_nb.tools import tool

    def made(limit: int) -> Any:
        @tool(name="pick")
        async def pick(ctx: ToolContext, kind: str, count: int = limit) -> str:
            """Pick some."""
            return f"{kind} {count}"

        return pick

    one, again, other = made(3), made(3), made(5)
    assert one is not again and one.Params is again.Params
    assert other.Params is not one.Params
    assert (one.Params(kind="a").count, other.Params(kind="a").count) == (3, 5)
