"""AgentRegistry: built-ins, folder precedence, overrides, reload and unknown names."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness_nb.core import UnknownNameError
from harness_nb.subagents.definition import SubAgentDefinition
from harness_nb.subagents.registry import AgentOverride, AgentRegistry


def write_agent(folder: Path, name: str, description: str = "d", *, file: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (file or f"{name}.md")
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\nbody of {name}\n")
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    return workdir, home


def test_builtins_only(dirs: tuple[Path, Path]) -> None:
    workdir, home = dirs
    registry = AgentRegistry(workdir, home=home)

    assert registry.names() == ["explore", "general-purpose"]
    assert [d.name for d in registry.list()] == ["explore", "general-purpose"]
    assert registry.warnings == [] and registry.overrides == []
    general = registry.get("general-purpose")
    assert general.tools is None and general.source == "builtin"
    assert "file paths" in general.system_prompt
    explore = registry.get("explore")
    assert explore.tools == [
        "read_file", "glob", "grep", "ls", "list_variables", "inspect_variable"
    ]
    assert "never modify" in explore.system_prompt.lower()


def test_later_folders_replace_earlier_ones_and_log_it(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    workdir, home = dirs
    write_agent(home / ".harness_nb/agents", "shared", "user harness_nb")
    write_agent(home / ".claude/agents", "shared", "user claude")
    write_agent(workdir / "agents", "shared", "project agents")
    write_agent(workdir / ".claude/agents", "shared", "project claude")
    last = write_agent(workdir / ".harness_nb/agents", "shared", "project harness_nb")
    extra = write_agent(workdir / "more", "explore", "my explore")
    write_agent(home / ".claude/agents", "user-only")

    with caplog.at_level(logging.INFO, logger="harness_nb.subagents"):
        registry = AgentRegistry(workdir, home=home, extra_dirs=[workdir / "more"])

    assert registry.get("shared").description == "project harness_nb"
    assert registry.get("shared").source == str(last)
    assert registry.get("explore").source == str(extra)
    assert "user-only" in registry
    replaced = [(o.name, o.by) for o in registry.overrides]
    assert replaced == [
        ("shared", str(home / ".claude/agents/shared.md")),
        ("shared", str(workdir / "agents/shared.md")),
        ("shared", str(workdir / ".claude/agents/shared.md")),
        ("shared", str(last)),
        ("explore", str(extra)),
    ]
    assert registry.overrides[-1] == AgentOverride("explore", "builtin", str(extra))
    logged = [r for r in caplog.records if r.levelno == logging.INFO and "replaces" in r.message]
    assert [r.getMessage() for r in logged] == [str(o) for o in registry.overrides]


def test_user_folders_can_be_left_out(dirs: tuple[Path, Path]) -> None:
    workdir, home = dirs
    write_agent(home / ".claude/agents", "user-only")
    assert "user-only" not in AgentRegistry(workdir, home=home, include_user=False)


def test_home_as_workdir_reads_each_folder_once(dirs: tuple[Path, Path]) -> None:
    _, home = dirs
    write_agent(home / ".claude/agents", "mine")
    registry = AgentRegistry(home, home=home)
    assert "mine" in registry and registry.overrides == []


def test_unknown_name_lists_the_valid_ones(dirs: tuple[Path, Path]) -> None:
    workdir, home = dirs
    registry = AgentRegistry(workdir, home=home)
    with pytest.raises(UnknownNameError) as info:
        registry.get("explorer")
    assert str(info.value) == "unknown agent 'explorer'; valid: explore, general-purpose"
    assert info.value.valid == ["explore", "general-purpose"]


def test_bad_files_become_warnings_and_the_rest_loads(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    workdir, home = dirs
    (workdir / "agents").mkdir()
    (workdir / "agents/README.md").write_text("# Agents\n")
    (workdir / "agents/bad.md").write_text("---\n{name: bad,\n description: d\n\n---\n")
    write_agent(workdir / "agents", "good")
    (workdir / "agents/alias.md").write_text(
        "---\nname: alias\ndescription: d\nmodel: haiku\n---\n"
    )

    with caplog.at_level(logging.INFO, logger="harness_nb.subagents"):
        registry = AgentRegistry(workdir, home=home)

    assert {"good", "alias"} <= set(registry.names())
    assert registry.warnings[0] == (
        "agents/README.md: skipped: no frontmatter (an agent file starts with a '---' line)"
    )
    assert registry.warnings[1].startswith("agents/alias.md: model 'haiku' is a Claude Code alias")
    assert registry.warnings[2].startswith("agents/bad.md: skipped: invalid YAML at line 4: ")
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels[registry.warnings[0]] == logging.WARNING
    assert levels[registry.warnings[1]] == logging.INFO


def test_reload_picks_up_changes_and_bumps_version(dirs: tuple[Path, Path]) -> None:
    workdir, home = dirs
    registry = AgentRegistry(workdir, home=home)
    start = registry.version

    registry.reload()
    assert registry.version == start  # nothing changed

    path = write_agent(workdir / "agents", "new-one", "first")
    registry.reload()
    assert registry.get("new-one").description == "first"
    assert registry.version == start + 1

    write_agent(workdir / "agents", "new-one", "second")
    registry.reload()
    assert registry.get("new-one").description == "second"
    assert registry.version == start + 2

    path.unlink()
    registry.reload()
    assert "new-one" not in registry
    assert registry.version == start + 3


def test_registered_definitions_outrank_files_and_survive_reload(
    dirs: tuple[Path, Path],
) -> None:
    workdir, home = dirs
    write_agent(workdir / "agents", "helper", "from a file")
    registry = AgentRegistry(workdir, home=home)
    start = registry.version

    mine = SubAgentDefinition(name="helper", description="from code", source="notebook")
    registry.register(mine)
    registry.register(SubAgentDefinition(name="extra-one", description="also code"))
    assert registry.get("helper") is mine
    assert registry.version == start + 2
    from_file = str(workdir / "agents/helper.md")
    assert registry.overrides[-1] == AgentOverride("helper", from_file, "notebook")

    registry.reload()
    assert registry.get("helper") is mine
    assert "extra-one" in registry
    assert registry.version == start + 2
    assert len(registry) == 4
