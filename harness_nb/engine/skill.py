"""Skills: Markdown files of instructions preloaded into an agent's system prompt.

A skill is named in an agent file (``skills: [csv-cleaning]``) or passed to the harness,
and read from ``<folder>/<name>.md`` or ``<folder>/<name>/SKILL.md`` in the first of
``skill_dirs`` that holds it. Agent files are untrusted data (one can arrive with a
cloned repository, or be written by the model), so a skill name is confined to the skill
folders: ``skill_name_problem`` refuses names with ``/``, ``\\``, ``..`` or a drive, and
``load_skill`` reads a file only when its real path (symlinks resolved) is inside the
folder it was found in, only when it is a regular file, and at most ``SKILL_MAX_BYTES``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..core import ConfigError, read_regular

__all__ = ["SKILL_MAX_BYTES", "load_skill", "skill_dirs", "skill_name_problem"]

SKILL_MAX_BYTES = 256 * 1024
"""Largest skill file read into a prompt."""
_NAME_MAX_CHARS = 128
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def skill_dirs(workdir: Path, home: Path | None = None) -> list[Path]:
    """Folders searched for ``<name>.md`` or ``<name>/SKILL.md`` skill files, first wins."""
    home = home or Path.home()
    return [
        workdir / ".harness_nb" / "skills",
        workdir / "skills",
        workdir / ".claude" / "skills",
        home / ".harness_nb" / "skills",
        home / ".claude" / "skills",
    ]


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
            f"skill name {shown} is a path; a skill is named by its file name in a skill "
            "folder (e.g. 'csv-cleaning' for skills/csv-cleaning.md), with no '/', '\\', "
            "'..' or drive"
        )
    if _CONTROL.search(name):
        return f"skill name {shown} holds control characters"
    return None


def load_skill(name: str, folders: Sequence[Path]) -> str | None:
    """The text of skill ``name`` from the first folder holding it, or ``None``.

    ``ConfigError`` when ``name`` is not a plain name (see ``skill_name_problem``) or the
    file found cannot be used: its real path is outside its folder (a symlink out), it is
    not a regular file, over ``SKILL_MAX_BYTES`` or not UTF-8.
    """
    problem = skill_name_problem(name)
    if problem:
        raise ConfigError(problem)
    for folder in folders:
        for candidate in (folder / f"{name}.md", folder / name / "SKILL.md"):
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
            return _read(name, candidate)
    return None


def _read(name: str, path: Path) -> str:
    try:
        data = read_regular(path, SKILL_MAX_BYTES)
    except OSError as exc:
        raise ConfigError(f"skill {name!r}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > SKILL_MAX_BYTES:
        raise ConfigError(
            f"skill {name!r}: {path} is over {SKILL_MAX_BYTES // 1024} KiB; a skill is "
            "preloaded into every prompt, so keep it short"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"skill {name!r}: {path} is not UTF-8 text (bad byte at offset {exc.start})"
        ) from None
