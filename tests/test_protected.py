"""The one list of paths only the person may change (``sandbox/protected.py``): each row of
its table, at the depths it covers, and the look-alikes it must leave alone."""

from __future__ import annotations

import pytest

from harness_nb.sandbox import protection


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        (".claude/settings.local.json", "agents"),
        (".claude/agents/x.md", "agents"),
        (".harness_nb/settings.json", "agents"),
        ("agents/reviewer.md", "agents"),
        ("skills/plot/SKILL.md", "agents"),
        (".mcp.json", "mcp"),
        (".git", "git"),
        (".git/config", "git"),
        (".git/config.worktree", "git"),
        (".git/commondir", "git"),
        (".git/hooks/pre-commit", "git"),
        (".git/modules/vendored/config", "git"),
        (".git/modules/vendored/hooks/post-checkout", "git"),
        ("vendor/lib/.git/config", "git"),
        ("vendor/lib/.git", "git"),
        ("sitecustomize.py", "startup"),
        ("src/pkg/usercustomize.py", "startup"),
        ("venv/lib/python3.11/site-packages/evil.pth", "startup"),
        (".envrc", "startup"),
        ("ipython_kernel_config.py", "startup"),
        ("jupyter_server_config.json", "startup"),
        ("AGENTS.md", "instructions"),
        ("docs/CLAUDE.md", "instructions"),
        (".env", "credentials"),
        (".env.production", "credentials"),
        ("deploy/prod.env", "credentials"),
        ("a/b/c/d/e/f/g/h/i/.env", "credentials"),
    ],
)
def test_protected_paths(rel: str, kind: str) -> None:
    found = protection(rel)
    assert found is not None, rel
    assert found.kind == kind


@pytest.mark.parametrize(
    "rel",
    [
        "data/keep.csv",
        "notebook.ipynb",
        "src/agents.py",  # a file named like a protected folder, not inside it
        "sub/.mcp.json",  # only the top-level one names servers
        "sub/ipython_config.py",  # read from the current folder only
        ".git/objects/ab/cdef",
        ".git/refs/heads/main",
        ".git/index",
        ".gitignore",
        "environment.yml",
        "README.md",
        "claude.md.bak",
        "",
        "../outside/.env",
    ],
)
def test_ordinary_paths_are_not_protected(rel: str) -> None:
    assert protection(rel) is None


def test_agent_folders_given_to_the_harness_are_protected() -> None:
    assert protection("team/agents/lead.md") is None
    found = protection("team/agents/lead.md", folders=["team/agents"])
    assert found is not None and found.kind == "agents"
    assert protection("team/agents-old/lead.md", folders=["team/agents"]) is None
