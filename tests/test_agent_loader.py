"""The agent-file loader against agent files shaped like real Claude Code projects.

``tests/agent_files/good`` holds files that must load (some with a note), ``bad`` holds
files that must be skipped with exactly one warning each.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness_nb.subagents.definition import SubAgentDefinition, normalize_tool_names
from harness_nb.subagents.loader import (
    LoadResult,
    load_agent_dir,
    load_agent_file,
    parse_agent_text,
)

FILES = Path(__file__).parent / "agent_files"
GOOD = FILES / "good"
BAD = FILES / "bad"
REPO_AGENTS = Path(__file__).parent.parent / "agents"

DEFAULTS: dict[str, Any] = {
    "tools": None,
    "disallowed_tools": [],
    "model": None,
    "max_turns": None,
    "skills": [],
    "background": False,
    "color": None,
    "extra": {},
}

# file -> (fields that differ from DEFAULTS, substrings of its one warning or None)
GOOD_CASES: dict[str, tuple[dict[str, Any], list[str] | None]] = {
    "comma-tools.md": (
        {
            "name": "code-searcher",
            "description": 'Finds where things are defined and used in the codebase. Use '
            'proactively when the user asks "where is X" or "what calls Y".',
            "tools": ["read_file", "grep", "glob"],
            "system_prompt": "You are a code search specialist. Locate definitions and "
            "usages quickly.\n\nReport each hit as `path:line` with one line of context.",
        },
        None,
    ),
    "yaml-list-tools.md": (
        {"name": "test-runner", "tools": ["read_file", "bash", "grep"]},
        None,
    ),
    "block-description.md": (
        {
            "name": "data-validator",
            "tools": ["read_file", "grep"],
            "color": "green",
            "description": (
                "Use this agent when a dataset has been loaded or transformed and needs "
                "checking.\nExamples:\n\n<example>\nContext: The user just merged two "
                'DataFrames.\nuser: "I merged orders with customers, can you check it?"\n'
                "assistant: \"I'll use the data-validator agent to check the merge for lost "
                'or duplicated rows."\n<commentary>\nA merge can silently duplicate rows, '
                "so validation is warranted.\n</commentary>\n</example>"
            ),
        },
        None,
    ),
    "quoted-escapes.md": (
        {
            "name": "sql-expert",
            "tools": ["read_file", "grep", "bash"],
            "description": (
                "Use this agent for writing and optimising SQL queries.\n\n<example>\n"
                'Context: The user has a slow query.\nuser: "This join takes forever"\n'
                'assistant: "Let me use the sql-expert agent to look at the query plan."\n'
                "</example>"
            ),
        },
        None,
    ),
    "crlf.md": (
        {
            "name": "crlf-agent",
            "description": "Written on Windows.\nTwo lines.",
            "tools": ["read_file", "grep"],
            "system_prompt": "Body line one.\nBody line two.",
        },
        None,
    ),
    "bom.md": (
        {"name": "bom-agent", "model": "anthropic/claude-sonnet-4-5", "system_prompt": "Hello."},
        None,
    ),
    "camel-case.md": (
        {
            "name": "safe-refactorer",
            "disallowed_tools": ["bash"],
            "max_turns": 25,
            "system_prompt": "Keep every public signature unchanged.\n\n"
            "Refactor in small steps and run the tests after each one.",
        },
        None,
    ),
    "snake-case.md": (
        {
            "name": "notebook-tidier",
            "tools": ["read_file", "edit_file", "write_file", "bash"],
            "disallowed_tools": ["bash"],
            "max_turns": 8,
        },
        None,
    ),
    "bash-patterns.md": (
        {"name": "git-historian", "tools": ["read_file", "grep", "bash"]},
        ["tools: Bash(git log:*), Bash(git blame:*), Bash(npm run test:*) allows the whole tool"],
    ),
    "multiedit.md": (
        {"name": "bulk-editor", "tools": ["read_file", "edit_file", "write_file", "glob"]},
        None,
    ),
    "model-sonnet.md": (
        {"name": "architect", "model": "sonnet"},
        ["model 'sonnet' is a Claude Code alias", "anthropic/claude-sonnet-4-5 when the main model", "parent's model"],
    ),
    "model-openai.md": (
        {"name": "fast-summariser", "model": "openai/gpt-4o", "tools": []},
        ["tools is an empty list, so this agent gets no tools"],
    ),
    "extra-keys.md": (
        {
            "name": "security-auditor",
            "tools": ["read_file", "grep", "glob"],
            "color": "red",
            "extra": {
                "category": "quality-security",
                "version": 1.2,
                "tags": ["security", "review"],
            },
        },
        ["unknown keys kept in extra: category, tags, version"],
    ),
    "lenient-colon.md": (
        {
            "name": "plot-helper",
            "description": "Use this agent when: the user asks for a chart, a plot or a "
            "figure of their data.",
            "tools": ["read_file", "bash"],
        },
        ["loaded leniently", "line 3", "mapping values are not allowed here"],
    ),
    "lenient-examples.md": (
        {"name": "python-pro", "model": "opus"},
        ["loaded leniently", "line 3", "model 'opus' is a Claude Code alias"],
    ),
    "lenient-multiline.md": (
        {
            "name": "feature-planner",
            "tools": ["read_file", "grep", "glob"],
            "color": "purple",
            "description": (
                "Use this agent to break a feature into steps. Examples:\n<example>\n"
                'Context: The user wants a new report.\nuser: "Add a monthly revenue report"'
                "\nassistant: \"I'll use the feature-planner agent to plan it.\"\n</example>"
            ),
        },
        ["loaded leniently", "line 3"],
    ),
    "nested/deep/nested-agent.md": ({"name": "nested-agent"}, None),
    "no-tools.md": ({"name": "generalist", "tools": None}, None),
    "max-turns.md": ({"name": "long-runner", "max_turns": 12, "background": True}, None),
    "skills.md": (
        {
            "name": "report-writer",
            "tools": ["read_file", "write_file"],
            "skills": ["house-style", "charts"],
        },
        None,
    ),
    "skills-list.md": (
        {"name": "stats-checker", "skills": ["statistics", "hypothesis-testing"]},
        None,
    ),
    "unknown-tools.md": (
        {"name": "web-researcher", "tools": []},
        ["dropped names harness_nb has no tool for: WebFetch, WebSearch", "gets no tools"],
    ),
    "mixed-unknown-tools.md": (
        {"name": "issue-filer", "tools": ["read_file", "mcp__github__create_issue"], "delegation": ["Task"]},
        ["no tool for: WebFetch, TodoWrite", "Task dropped: subagents never delegate"],
    ),
    "our-names.md": (
        {
            "name": "variable-inspector",
            "tools": ["list_variables", "inspect_variable", "read_file"],
        },
        None,
    ),
}

# file -> substrings of its one "skipped" warning
BAD_CASES: dict[str, list[str]] = {
    "README.md": ["no frontmatter"],
    "CLAUDE.md": ["no frontmatter"],
    "no-frontmatter.md": ["no frontmatter"],
    "unclosed.md": ["never closed"],
    "invalid-yaml.md": ["invalid YAML at line 4"],
    "bad-name-capitals.md": ["name 'CodeReviewer' must be lowercase letters, digits and hyphens"],
    "bad-name-underscore.md": ["name 'code_reviewer' must be"],
    "bad-name-spaces.md": ["name 'code reviewer' must be"],
    "missing-description.md": ["no description"],
    "missing-name.md": ["no name"],
    "list-frontmatter.md": ["frontmatter is a list, not a mapping"],
    "empty.md": ["empty file"],
    "bad-max-turns.md": ["max_turns", "valid integer"],
}


def test_every_fixture_file_has_a_case() -> None:
    on_disk = {p.relative_to(GOOD).as_posix() for p in GOOD.rglob("*.md")}
    assert on_disk == set(GOOD_CASES)
    assert {p.name for p in BAD.glob("*.md")} == set(BAD_CASES)
    assert len(GOOD_CASES) + len(BAD_CASES) >= 20


@pytest.mark.parametrize("relative", sorted(GOOD_CASES))
def test_good_file_loads_with_expected_fields(relative: str) -> None:
    expected, warning = GOOD_CASES[relative]
    result = load_agent_file(GOOD / relative, label=relative)

    assert len(result.definitions) == 1
    defn = result.definitions[0]
    got = defn.model_dump()
    for key, value in {**DEFAULTS, **expected}.items():
        assert got[key] == value, key
    assert defn.source == str(GOOD / relative)
    assert defn.description and "\r" not in defn.description + defn.system_prompt
    if warning is None:
        assert result.warnings == []
    else:
        assert len(result.warnings) == 1
        assert result.warnings[0].startswith(f"{relative}: ")
        for part in warning:
            assert part in result.warnings[0]


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_file_is_skipped_with_one_warning(name: str) -> None:
    result = load_agent_file(BAD / name, label=f"agents/{name}")

    assert result.definitions == []
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith(f"agents/{name}: skipped: ")
    for part in BAD_CASES[name]:
        assert part in result.warnings[0]


def test_loading_a_tree_continues_past_bad_files_in_sorted_order() -> None:
    result = load_agent_dir(FILES, label="agents")

    names = [d.name for d in result.definitions]
    # agent_files/fields: one agent per Claude Code field (test_agent_fields.py)
    fields = ["dispatcher", "misspelt", "odd-values", "plan-reviewer", "release-checker"]
    assert sorted(names) == sorted([*fields, *(expected["name"] for expected, _ in GOOD_CASES.values())])
    sources = [Path(d.source).relative_to(FILES).parts for d in result.definitions]
    assert sources == sorted(sources)
    skipped = [w for w in result.warnings if ": skipped: " in w]
    assert sorted(skipped) == sorted(
        w for name in BAD_CASES for w in result.warnings if w.startswith(f"agents/bad/{name}:")
    )
    assert len(skipped) == len(BAD_CASES)
    assert load_agent_dir(FILES, label="agents") == result  # deterministic


def test_huge_file_is_skipped_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.md"
    huge.write_text("---\nname: huge\ndescription: big\n---\n" + "x" * (1024 * 1024))
    (tmp_path / "ok.md").write_text("---\nname: ok\ndescription: fine\n---\n")

    result = load_agent_dir(tmp_path, label="agents")

    assert [d.name for d in result.definitions] == ["ok"]
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith("agents/huge.md: skipped: file is 1,048,")
    assert "1 MiB" in result.warnings[0]


def test_missing_folder_is_fine_and_a_file_is_not_a_folder(tmp_path: Path) -> None:
    assert load_agent_dir(tmp_path / "nope") == LoadResult()
    (tmp_path / "file").write_text("x")
    assert load_agent_dir(tmp_path / "file", label="x").warnings == ["x: skipped: not a folder"]


def test_hidden_folders_and_other_extensions_are_ignored(tmp_path: Path) -> None:
    agent = "---\nname: a\ndescription: d\n---\n"
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.md").write_text("not an agent")
    (tmp_path / "notes.txt").write_text("not an agent")
    (tmp_path / "a.md").write_text(agent)

    result = load_agent_dir(tmp_path)

    assert [d.name for d in result.definitions] == ["a"]
    assert result.warnings == []


def test_non_utf8_file_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "latin.md"
    path.write_bytes("---\nname: latin\ndescription: caf\xe9\n---\n".encode("latin-1"))
    result = load_agent_file(path, label="latin.md")
    assert result.definitions == []
    assert result.warnings == ["latin.md: skipped: not UTF-8 text (bad byte at offset 32)"]


def test_invalid_yaml_line_number_counts_leading_blank_lines() -> None:
    text = "\n\n---\nname: x\ntools: Read\n  bad: indent\ndescription: y\n---\n"
    result = parse_agent_text(text, source="f.md")
    # Line 6 of the file holds the stray indented mapping.
    assert result.warnings[0].startswith("f.md: ")
    assert "at line 6" in result.warnings[0]


@pytest.mark.parametrize(
    ("front", "reason"),
    [
        ("", "frontmatter is empty"),
        ("just a sentence", "frontmatter is a str, not a mapping"),
        ("name: x\ndescription: ''", "no description"),
        ("name: x\ndescription: y\nmaxTurns: 0", "max_turns: Input should be greater than"),
    ],
)
def test_frontmatter_problems(front: str, reason: str) -> None:
    result = parse_agent_text(f"---\n{front}\n---\nbody", source="f.md")
    assert result.definitions == []
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith("f.md: skipped: ")
    assert reason in result.warnings[0]


def test_lenient_reader_handles_lists_block_scalars_and_quotes() -> None:
    text = (
        "---\n"
        "name: lenient\n"
        "description: |\n"
        "  Use this agent when: things break.\n"
        "  user: keeps this line\n"
        "tools:\n"
        "  - Read\n"
        "  - Grep\n"
        "disallowedTools: [Bash, Write]\n"
        "model: 'openai/gpt-4o'\n"
        "background: true\n"
        "category: odd: value\n"
        "---\n"
        "Body.\n"
    )
    # Valid YAML except the last key: the lenient reader must still get everything right.
    result = parse_agent_text(text, source="f.md")

    (defn,) = result.definitions
    assert defn.description == "Use this agent when: things break.\nuser: keeps this line"
    assert defn.tools == ["read_file", "grep"]
    assert defn.disallowed_tools == ["bash", "write_file"]
    assert defn.model == "openai/gpt-4o"
    assert defn.background is True
    assert defn.extra == {"category": "odd: value"}
    assert defn.system_prompt == "Body."
    (warning,) = result.warnings
    assert "loaded leniently: invalid YAML at line 12" in warning
    assert "unknown keys kept in extra: category" in warning


def test_lenient_reader_turns_escaped_newlines_into_newlines() -> None:
    text = '---\nname: n\ndescription: "Use when: x.\\n<example>a</example>"\n---\n'
    # A quoted value with ": " inside is valid YAML; make it invalid with a second quote.
    text = text.replace('"Use', 'Use').replace('</example>"', "</example>")
    (defn,) = parse_agent_text(text, source="f.md").definitions
    assert defn.description == "Use when: x.\n<example>a</example>"


def test_lenient_reader_gives_up_without_name_and_description() -> None:
    text = "---\nname: x\n[description: broken\n---\n"
    result = parse_agent_text(text, source="f.md")
    assert result.definitions == []
    assert result.warnings == [
        "f.md: skipped: invalid YAML at line 3: expected <block end>, but found '['"
    ]


def test_lone_carriage_returns_and_bom_in_text() -> None:
    text = "\ufeff---\rname: mac\rdescription: old mac file\r---\rbody\r"
    (defn,) = parse_agent_text(text, source="f.md").definitions
    assert (defn.name, defn.description, defn.system_prompt) == ("mac", "old mac file", "body")


def test_numbers_and_model_spellings_are_read_as_text() -> None:
    text = "---\nname: 123\ndescription: d\ncolor: 0x1\nmodel: Inherit\n---\n"
    (defn,) = parse_agent_text(text, source="f.md").definitions
    assert (defn.name, defn.color, defn.model) == ("123", "1", None)


def test_shipped_example_agents_load_cleanly() -> None:
    result = load_agent_dir(REPO_AGENTS, label="agents")
    assert result.warnings == []
    by_name = {d.name: d for d in result.definitions}
    assert set(by_name) == {"code-reviewer", "data-explorer", "doc-writer"}
    read_only = {"read_file", "glob", "grep", "ls", "list_variables", "inspect_variable"}
    assert set(by_name["data-explorer"].tools or []) == read_only
    assert set(by_name["code-reviewer"].tools or []) == read_only | {"bash"}
    assert {"write_file", "edit_file"} <= set(by_name["doc-writer"].tools or [])
    for defn in result.definitions:
        assert len(defn.system_prompt) > 500


def test_copying_fixtures_elsewhere_keeps_results(tmp_path: Path) -> None:
    shutil.copytree(GOOD, tmp_path / "agents")
    here = load_agent_dir(tmp_path / "agents", label="agents")
    there = load_agent_dir(GOOD, label="agents")
    assert [d.name for d in here.definitions] == [d.name for d in there.definitions]
    assert here.warnings == there.warnings


# --- the model itself, for definitions built in code ---------------------------------


def test_model_accepts_camel_case_and_keeps_unknown_keys() -> None:
    defn = SubAgentDefinition.model_validate(
        {
            "name": "x",
            "description": " d ",
            "disallowedTools": "Bash(rm:*), Write",
            "maxTurns": "3",
            "systemPrompt": "  be brief  ",
            "flavour": "mint",
        }
    )
    assert defn.description == "d"
    assert defn.disallowed_tools == ["bash", "write_file"]
    assert defn.max_turns == 3
    assert defn.system_prompt == "be brief"
    assert defn.extra == {"flavour": "mint"}


def test_model_round_trips_without_widening_an_empty_allowlist() -> None:
    defn = SubAgentDefinition(name="x", description="d", tools=["WebFetch"])
    assert defn.tools == []
    assert SubAgentDefinition.model_validate(defn.model_dump()) == defn
    blank = SubAgentDefinition.model_validate({"name": "x", "description": "d", "tools": ""})
    assert blank.tools is None


def test_model_logs_dropped_tools_for_code_callers(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="harness_nb.subagents"):
        SubAgentDefinition(name="x", description="d", tools=["Read", "WebSearch"])
    assert "agent 'x': tools: dropped names harness_nb has no tool for: WebSearch" in caplog.text


def test_model_rejects_bad_names_and_empty_descriptions() -> None:
    with pytest.raises(ValidationError, match="must be lowercase letters"):
        SubAgentDefinition(name="-x", description="d")
    with pytest.raises(ValidationError, match="at least 1 character"):
        SubAgentDefinition(name="x", description="   ")


@pytest.mark.parametrize(
    ("raw", "names", "dropped"),
    [
        ("Read, Grep, Glob", ["read_file", "grep", "glob"], []),
        (["LS", "NotebookRead", "Read"], ["ls", "read_file"], []),
        ("Bash(git add, git commit:*), Read", ["bash", "read_file"], []),
        (["Task", "Agent(reviewer)", "Read"], ["read_file"], []),
        (["read_file, write_file", "my_tool"], ["read_file", "write_file", "my_tool"], []),
        (["WebFetch", "mcp__x__y", "Read File"], ["mcp__x__y"], ["WebFetch", "Read File"]),
        ("mcp__github__*, mcp__github, mcp__x__y z", ["mcp__github__*", "mcp__github"], ["mcp__x__y z"]),
        ("edit", ["edit_file"], []),
        (None, [], []),
    ],
)
def test_tool_name_mapping(raw: Any, names: list[str], dropped: list[str]) -> None:
    result = normalize_tool_names(raw)
    assert result.names == names
    assert result.dropped == dropped


@pytest.mark.parametrize(
    ("tools_lines", "expected"),
    [
        ("tools:", None),
        ("tools: []", []),
        ('tools: ["Read", "Grep"]', ["read_file", "grep"]),
        ("tools: [Read,\n  Grep]", ["read_file", "grep"]),
        ("tools: Read,\n  Bash(git add, git commit:*)", ["read_file", "bash"]),
        ("tools:\n  - 'Read'\n  - Glob", ["read_file", "glob"]),
    ],
)
def test_lenient_tool_lists(tools_lines: str, expected: list[str] | None) -> None:
    text = f"---\nname: t\ndescription: when: broken\n{tools_lines}\n---\n"
    result = parse_agent_text(text, source="f.md")
    (defn,) = result.definitions
    assert defn.tools == expected
    assert "loaded leniently" in result.warnings[0]


def test_patterns_on_unknown_tools_are_dropped_not_reduced() -> None:
    result = normalize_tool_names("WebFetch(domain:example.com), Read(./src/**)")
    assert (result.names, result.dropped) == (["read_file"], ["WebFetch(domain:example.com)"])
    assert result.patterns == ["Read(./src/**)"]


def test_disallowed_pattern_blocks_the_whole_tool_with_a_note() -> None:
    text = "---\nname: n\ndescription: d\ndisallowedTools: Bash(rm:*), WebFetch\n---\n"
    result = parse_agent_text(text, source="f.md")
    assert result.definitions[0].disallowed_tools == ["bash"]
    assert result.warnings == [
        "f.md: disallowed_tools: Bash(rm:*) blocks the whole tool "
        "(harness_nb does not enforce tool patterns)"
    ]
