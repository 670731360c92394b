"""Skill names, skill folders and the preload of a skill into an agent's system prompt.

Skills come in two forms. The Agent Skills form (agentskills.io) is a folder
``<name>/SKILL.md`` with YAML frontmatter (``name``, ``description``, ...) and resource
files beside it; ``catalog.SkillCatalog`` discovers those and the ``skill`` tool
loads them on demand. harness_nb's own older form is a single ``<name>.md`` of plain
Markdown, found only when preloaded. A skill is preloaded when an agent file names it
(``skills: [csv-cleaning]``) or it is passed to the harness (``Harness(skills=[...])``):
``load_skill`` reads ``<folder>/<name>/SKILL.md`` or ``<folder>/<name>.md`` from the
first of ``skill_dirs`` that holds one and returns its body, frontmatter removed.

Agent and skill files are untrusted data (one can arrive with a cloned repository, or be
written by the model), so a skill name is confined to the skill folders:
``skill_name_problem`` refuses names with ``/``, ``\\``, ``..`` or a drive, and
``load_skill`` reads a file only when its real path (symlinks resolved) is inside the
folder it was found in, only when it is a regular file, and at most ``SKILL_MAX_BYTES``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from ..core import ConfigError, read_regular
from ..core.frontmatter import split_frontmatter

__all__ = [
    "SKILL_FOLDERS",
    "SKILL_MAX_BYTES",
    "SkillSource",
    "load_skill",
    "read_skill_file",
    "skill_dirs",
    "skill_name_problem",
]

SkillSource = Literal["project", "user"]
"""Where a skill folder is: under the working directory, or under the home folder."""

SKILL_MAX_BYTES = 256 * 1024
"""Largest skill file read into a prompt."""
_NAME_MAX_CHARS = 128
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


SKILL_FOLDERS: tuple[tuple[SkillSource, str, bool], ...] = (
    ("project", ".claude/skills", True),
    ("project", ".harness_nb/skills", True),
    ("project", "skills", False),
    ("user", ".claude/skills", True),
    ("user", ".harness_nb/skills", True),
)
"""The skill folders, first wins: (under the workdir or the home folder, the path there,
whether the catalog lists its ``<name>/SKILL.md`` skills). ``skills/`` is harness_nb's own
older folder, searched only for preloads."""


def skill_dirs(workdir: Path, home: Path | None = None) -> list[Path]:
    """Folders searched for ``<name>/SKILL.md`` or ``<name>.md`` skill files to preload,
    first wins: the project's before the user's (``home``, by default the home folder)."""
    home = home or Path.home()
    return [(workdir if source == "project" else home) / sub for source, sub, _listed in SKILL_FOLDERS]


def skill_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a skill (``None`` when it can). A skill name is a plain
    name such as ``csv-cleaning``, never a path."""
    if not isinstance(name, str) or not name.strip():
        return "a skill name cannot be empty"
    shown = repr(name[:_NAME_MAX_CHARS])
    if len(name) > _NAME_MAX_CHARS:
        return f"skill name {shown}… is longer than {_NAME_MAX_CHARS} characters"
    if "/" in name or "\\" in name or ":" in name or ".." in name:
        return (
            f"skill name {shown} is a path; a skill is named by its folder (or file) in a "
            "skill folder (e.g. 'csv-cleaning' for .claude/skills/csv-cleaning/SKILL.md), "
            "with no '/', '\\', '..' or drive"
        )
    if _CONTROL.search(name):
        return f"skill name {shown} holds control characters"
    return None


def load_skill(name: str, folders: Sequence[Path]) -> str | None:
    """The body of skill ``name`` (its text without frontmatter) from the first folder
    holding it, or ``None``. In each folder ``<name>/SKILL.md`` comes before ``<name>.md``,
    so a preload reads the same file the catalog lists.

    ``ConfigError`` when ``name`` is not a plain name (see ``skill_name_problem``) or the
    file found cannot be used: its real path is outside its folder (a symlink out), it is
    not a regular file, over ``SKILL_MAX_BYTES`` or not UTF-8.
    """
    problem = skill_name_problem(name)
    if problem:
        raise ConfigError(problem)
    for folder in folders:
        for candidate in (folder / name / "SKILL.md", folder / f"{name}.md"):
            if not candidate.is_file():
                continue
            try:
                real = candidate.resolve(strict=True)
                inside = real.is_relative_to(folder.resolve(strict=True))
            except (OSError, RuntimeError):
                continue
            if not inside:
                raise ConfigError(
                    f"skill {name!r}: {candidate} leads outside its folder {folder} "
                    f"(to {real}); skills are read only from inside the skill folders"
                )
            _front, body = split_frontmatter(read_skill_file(name, candidate))
            return body
    return None


def read_skill_file(name: str, path: Path) -> str:
    """The text of ``path``, a file of skill ``name``: a regular file of at most
    ``SKILL_MAX_BYTES`` of UTF-8, else ``ConfigError`` saying which of those it is not."""
    try:
        data = read_regular(path, SKILL_MAX_BYTES)
    except OSError as exc:
        reason = exc.strerror or (exc.args[0] if exc.args else exc)  # a FIFO's has no strerror
        raise ConfigError(f"skill {name!r}: cannot read {path}: {reason}") from None
    if len(data) > SKILL_MAX_BYTES:
        raise ConfigError(
            f"skill {name!r}: {path} is over {SKILL_MAX_BYTES // 1024} KiB; a skill's text "
            "goes into the model's context, so keep it short (long material goes in files "
            "beside SKILL.md, read when needed)"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"skill {name!r}: {path} is not UTF-8 text (bad byte at offset {exc.start})"
        ) from None
