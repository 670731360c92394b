"""glob and grep, called through ``invoke`` as the engine does."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import ToolCall
from harness_nb.tools import Tool, ToolContext, ToolOutcome, edit_file, glob, grep, invoke, ls, read_file, write_file
from harness_nb.tools import search as search_module


async def run(tool: Tool, workdir: Path, **args: Any) -> ToolOutcome:
    call = ToolCall(id="call-1", name=tool.name, arguments=json.dumps(args))
    return await invoke(tool, call, ToolContext(workdir=workdir, call=call))


def make_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


@pytest.fixture(autouse=True, params=["rg", "python"])
def search_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with ripgrep and again with the pure-Python fallback (as where the
    rg binary is missing): the output is the same."""
    if request.param == "python":
        monkeypatch.setattr(search_module, "find_rg", lambda: None)
    else:
        assert search_module.find_rg() is not None, "the ripgrep wheel should be installed"
    return str(request.param)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    make_tree(
        tmp_path,
        {
            "setup.py": "import os\n",
            "README.md": "# Title\nTODO: write docs\n",
            "src/app.py": "def main():\n    return 'todo later'\n",
            "src/util/helpers.py": "def helper():  # TODO\n    pass\n",
            "src/web/page.ts": "// TODO ts\n",
            "src/web/page.tsx": "export {}\n",
            ".git/config": "TODO in git\n",
            ".venv/lib/site.py": "TODO in venv\n",
            "node_modules/x/index.js": "TODO in deps\n",
            "src/__pycache__/app.cpython-311.pyc": b"\x00\x01TODO",
            ".harness_nb/sessions/s.jsonl": "TODO in sessions\n",
            "data/blob.bin": b"TODO\x00binary",
        },
    )
    return tmp_path


# glob


async def test_glob_double_star_finds_nested_files_sorted_by_path(tree: Path) -> None:
    outcome = await run(glob, tree, pattern="**/*.py")
    assert outcome.content == "setup.py\nsrc/app.py\nsrc/util/helpers.py"


async def test_glob_single_star_stays_in_one_folder(tree: Path) -> None:
    assert (await run(glob, tree, pattern="*.py")).content == "setup.py"
    assert (await run(glob, tree, pattern="src/*")).content == (
        "src/app.py\nsrc/util/\nsrc/web/"
    )


async def test_glob_results_are_relative_to_the_workdir(tree: Path) -> None:
    outcome = await run(glob, tree, pattern="*.py", path="src/util")
    assert outcome.content == "src/util/helpers.py"


async def test_glob_braces_and_sets(tree: Path) -> None:
    assert (await run(glob, tree, pattern="**/*.{ts,tsx}")).content == (
        "src/web/page.ts\nsrc/web/page.tsx"
    )
    assert (await run(glob, tree, pattern="**/[!a-m]*.py")).content == "setup.py"


async def test_glob_skips_ignored_folders(tree: Path) -> None:
    everything = (await run(glob, tree, pattern="**")).content.splitlines()
    assert "data/blob.bin" in everything
    for ignored in (".git", ".venv", "node_modules", "__pycache__", ".harness_nb"):
        assert not any(ignored in line for line in everything), ignored


async def test_glob_inside_an_ignored_folder_when_asked_for_it(tree: Path) -> None:
    assert (await run(glob, tree, pattern="*", path=".git")).content == ".git/config"


async def test_glob_caps_results_with_a_note(tmp_path: Path) -> None:
    for i in range(205):
        (tmp_path / f"f{i:03d}.txt").touch()
    lines = (await run(glob, tmp_path, pattern="*.txt")).content.splitlines()
    assert len(lines) == 201
    assert lines[0] == "f000.txt" and lines[199] == "f199.txt"
    assert lines[-1] == (
        "[showing 200 of 205 matches (first by path); narrow the pattern or the path to see "
        "the rest]"
    )


async def test_glob_no_match_and_missing_folder(tree: Path) -> None:
    assert (await run(glob, tree, pattern="**/*.rs")).content == "no files match '**/*.rs' in ."
    missing = await run(glob, tree, pattern="*", path="nope")
    assert missing.is_error and "folder not found: 'nope'" in missing.content


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("**/*.py", ["a.py", "x/y/a.py"], ["a.pyc", "x/a.py/"]),
        ("a/**/b", ["a/b", "a/x/y/b"], ["ab", "a/xb"]),
        ("src/**", ["src/a", "src/a/b"], ["src", "srcx/a"]),
        ("?.txt", ["a.txt"], ["ab.txt", "/.txt"]),
        ("[[]x].md", ["[x].md"], ["x].md"]),
        ("{a,b/{c,d}}.py", ["a.py", "b/c.py", "b/d.py"], ["b.py", "b/e.py"]),
        ("un{closed", ["un{closed"], ["unclosed"]),
        ("{**/*.py,*.md}", ["a.py", "x/y/a.py", "r.md"], ["x/r.md"]),
        ("{a,b}/**", ["a/x", "b/y/z"], ["c/x", "a"]),
        ("a.(py)+", ["a.(py)+"], ["a.py"]),
    ],
)
def test_compile_glob(pattern: str, matches: list[str], misses: list[str]) -> None:
    regex = search_module.compile_glob(pattern)
    for path in matches:
        assert regex.fullmatch(path), f"{pattern} should match {path}"
    for path in misses:
        assert not regex.fullmatch(path), f"{pattern} should not match {path}"


def test_compile_glob_does_not_multiply_braces() -> None:
    regex = search_module.compile_glob("{a,b}" * 40)
    assert regex.fullmatch("ab" * 20)
    assert len(regex.pattern) < 1000


async def test_glob_lists_symlinked_folders_without_entering_them(tmp_path: Path) -> None:
    make_tree(tmp_path, {"real/x.py": ""})
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    assert (await run(glob, tmp_path, pattern="**")).content == "alias/\nreal/\nreal/x.py"


# grep


async def test_grep_prints_path_line_text(tree: Path) -> None:
    outcome = await run(grep, tree, pattern="TODO")
    assert outcome.content == (
        "README.md:2: TODO: write docs\n"
        "src/util/helpers.py:1: def helper():  # TODO\n"
        "src/web/page.ts:1: // TODO ts"
    )


async def test_grep_ignore_case(tree: Path) -> None:
    outcome = await run(grep, tree, pattern="todo", path="src", ignore_case=True)
    assert outcome.content.splitlines() == [
        "src/app.py:2:     return 'todo later'",
        "src/util/helpers.py:1: def helper():  # TODO",
        "src/web/page.ts:1: // TODO ts",
    ]


async def test_grep_file_filter_by_name_and_by_path(tree: Path) -> None:
    by_name = await run(grep, tree, pattern="TODO|todo", glob="*.py")
    assert by_name.content == (
        "src/app.py:2:     return 'todo later'\nsrc/util/helpers.py:1: def helper():  # TODO"
    )
    by_path = await run(grep, tree, pattern="def", glob="src/*.py")
    assert by_path.content == "src/app.py:1: def main():"


async def test_grep_a_single_file(tree: Path) -> None:
    outcome = await run(grep, tree, pattern=r"^#", path="README.md")
    assert outcome.content == "README.md:1: # Title"


async def test_grep_skips_binary_files_and_ignored_folders(tree: Path) -> None:
    outcome = await run(grep, tree, pattern="TODO")
    for skipped in ("blob.bin", ".git", ".venv", "node_modules", "__pycache__", ".harness_nb"):
        assert skipped not in outcome.content
    explicit = await run(grep, tree, pattern="TODO", path=".git")
    assert explicit.content == ".git/config:1: TODO in git"


async def test_grep_invalid_regex_names_the_problem(tree: Path) -> None:
    outcome = await run(grep, tree, pattern="foo(")
    assert outcome.is_error
    assert outcome.content.startswith(
        "error: invalid regex 'foo(': missing ), unterminated subpattern at position 3"
    )
    assert "escape special characters" in outcome.content


async def test_grep_caps_results_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * 50)
    outcome = await run(grep, tmp_path, pattern="hit", max_results=10)
    lines = outcome.content.splitlines()
    assert lines[:10] == [f"many.txt:{i}: hit" for i in range(1, 11)]
    assert lines[10:] == [
        "[stopped at 10 matches; narrow the pattern, path or glob, or raise max_results]"
    ]
    exact = await run(grep, tmp_path, pattern="hit", max_results=50)
    assert len(exact.content.splitlines()) == 50 and "stopped" not in exact.content


async def test_grep_cuts_long_lines_and_reports_no_match(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("needle" + "z" * 1000 + "\n")
    outcome = await run(grep, tmp_path, pattern="needle")
    assert outcome.content == "wide.txt:1: needle" + "z" * 294 + "…"
    none = await run(grep, tmp_path, pattern="absent")
    assert none.content == "no matches for 'absent' in ."


async def test_grep_bad_arguments(tmp_path: Path) -> None:
    missing = await run(grep, tmp_path, pattern="x", path="nope")
    assert missing.content == "error: path not found: 'nope'; check the name with ls or glob"
    zero = await run(grep, tmp_path, pattern="x", max_results=0)
    assert zero.is_error and "max_results: Input should be greater than or equal to 1" in (
        zero.content
    )


async def test_search_walks_on_harness_nb_worker_threads(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: set[str] = set()

    class RecordingWalker(search_module.Walker):
        def __iter__(self) -> Any:
            threads.add(threading.current_thread().name)
            return super().__iter__()

    monkeypatch.setattr(search_module, "Walker", RecordingWalker)
    assert not (await run(grep, tree, pattern="TODO")).is_error
    assert not (await run(glob, tree, pattern="**")).is_error
    # Our own bounded pool, never the event loop's thread or its default executor.
    assert threads and all(name.startswith("harness_nb-io") for name in threads)


# names with control characters (issue 18, item 7)

HOSTILE_NAMES = {
    "red\x1b[31mALERT\x1b[0m.txt": "red\\x1b[31mALERT\\x1b[0m.txt",  # ANSI colour
    "title\x1b]0;pwned\x07.txt": "title\\x1b]0;pwned\\x07.txt",  # OSC: retitles a terminal
    "two\nlines.txt": "two\\x0alines.txt",  # fakes a line of the listing
    "csi\x9b2J.txt": "csi\\u009b2J.txt",  # C1: a one-character escape sequence
    "evil\u202etxt.exe": "evil\\u202etxt.exe",  # bidi override: shows as evilexe.txt
    "zero\u200bwidth.txt": "zero\\u200bwidth.txt",
    "bell\x07del\x7f.txt": "bell\\x07del\\x7f.txt",
}


@pytest.fixture
def hostile_names(tmp_path: Path) -> Path:
    for name in HOSTILE_NAMES:
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / name).write_text("needle\n")
    return tmp_path


async def test_names_with_control_characters_are_shown_escaped(hostile_names: Path) -> None:
    shown = sorted(f"in/{escaped}" for escaped in HOSTILE_NAMES.values())
    listing = (await run(ls, hostile_names, path="in")).content.splitlines()
    assert sorted(f"in/{line}" for line in listing) == shown
    assert sorted((await run(glob, hostile_names, pattern="**/*")).content.splitlines()) == ["in/", *shown]
    assert sorted((await run(grep, hostile_names, pattern="needle")).content.splitlines()) == [
        f"{name}:1: needle" for name in shown
    ]
    for outcome in (await run(ls, hostile_names, path="in"), await run(glob, hostile_names, pattern="**")):
        assert not any(c in outcome.content for c in "\x1b\x07\x9b\u202e\u200b\x7f")


async def test_a_name_shown_escaped_names_the_file(hostile_names: Path) -> None:
    """The model passes back what it saw: read, edit and write reach that file."""
    for name, escaped in HOSTILE_NAMES.items():
        path = f"in/{escaped}"
        assert (await run(read_file, hostile_names, path=path)).content == "     1\tneedle"
        edited = await run(edit_file, hostile_names, path=path, old_string="needle", new_string="pin")
        assert edited.content == f"replaced 1 occurrence in {path}"
        assert (await run(write_file, hostile_names, path=path, content="hay\n")).content == f"wrote 4 bytes to {path}"
        assert (hostile_names / "in" / name).read_text() == "hay\n"
    assert sorted(p.name for p in (hostile_names / "in").iterdir()) == sorted(HOSTILE_NAMES)
