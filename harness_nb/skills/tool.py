"""The ``skill`` tool: a skill's instructions, loaded when the model decides it needs them.

The system prompt lists only each skill's name and description (``SkillCatalog``);
``skill(name)`` returns the body of its ``SKILL.md``, its folder and a listing of the files
beside it, and ``skill(name, file=...)`` one of those files (a script, a reference), so a
skill's folder is readable even when it lies outside the working directory (``~/.claude/
skills``). Without a name it lists every skill. The tool is read-only: it never asks for
approval, and reads nothing outside the skill's own folder (symlinks resolved), only
regular UTF-8 files of at most ``SKILL_MAX_BYTES``.
"""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..core import ConfigError, ToolError, run_blocking
from ..tools import Tool, ToolContext, ToolRegistry
from .catalog import Skill, SkillCatalog
from .skill import read_skill_file, skill_name_problem

__all__ = ["RESOURCES_MAX_DEPTH", "RESOURCES_MAX_LISTED", "SkillTool", "catalog_of"]

RESOURCES_MAX_LISTED = 50
"""Most files of a skill's folder listed with its instructions."""
RESOURCES_MAX_DEPTH = 4
"""Deepest subfolder of a skill's folder that is listed."""
_WALK_MAX_ENTRIES = 2000  # entries looked at while listing, whatever the folder holds


class SkillParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("", description="As the Skills list names it.")
    file: str = Field("", description="Read this file of the skill instead, e.g. references/format.md.")


class SkillTool(Tool):
    """``skill``: load a skill from ``catalog`` (see the module docstring)."""

    name = "skill"
    description = (
        "Load a skill from the Skills list in the system prompt before a task it covers, then "
        "follow its instructions: you get them, its folder and its files."
    )
    Params = SkillParams
    read_only = True

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    def usable(self) -> bool:
        """Offered only when a skill is (the prompt lists them then)."""
        return bool(self.catalog.offered())

    async def run(self, params: Any, ctx: ToolContext) -> str:
        await run_blocking(self.catalog.refresh)
        if not params.name.strip():
            if params.file:
                raise ToolError("give the skill's name with file=")
            return self.catalog.listing()
        skill = self._find(params.name.strip())
        if params.file:
            return await run_blocking(_read_resource, skill, params.file)
        return await run_blocking(self._instructions, skill)

    def _find(self, name: str) -> Skill:
        """The offered skill ``name``, else a ``ToolError`` naming the closest ones."""
        if problem := skill_name_problem(name):
            raise ToolError(problem)
        skill = self.catalog.get(name)
        if skill is not None and skill.refused is not None:
            raise ToolError(f"skill {name!r} cannot be used: {skill.refused}")
        if skill is not None and not skill.model_invocable:
            raise ToolError(
                f"skill {name!r} is marked disable-model-invocation: only a person loads it; go on without it"
            )
        if skill is None:
            names = [s.name for s in self.catalog.offered()]
            if not names:
                raise ToolError(f"no skill named {name!r}: no skills are installed. {self.catalog.where()}")
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            shown = ", ".join(names[:30]) + (f" (and {len(names) - 30} more)" if len(names) > 30 else "")
            raise ToolError(f"no skill named {name!r}; {hint}skills: {shown}")
        return skill

    def _instructions(self, skill: Skill) -> str:
        """The skill's body, with its folder, ``allowed-tools`` and files around it."""
        parts = [f"# Skill {skill.name}", f"Folder: {self.catalog.shown(skill.folder)}"]
        if skill.allowed_tools:
            parts.append(
                "allowed-tools (for information: harness_nb approves no tool because a skill "
                f"names it): {' '.join(skill.allowed_tools)}"
            )
        parts.append(skill.body or "(this skill has no instructions beyond its files)")
        files, more = _resources(skill.folder)
        if files:
            listing = "\n".join(f"- {path} ({_size(size)})" for path, size in files)
            if more:
                listing += f"\n- … and {more} more"
            parts.append(
                f"Files of this skill (read one with skill(name={skill.name!r}, file=PATH)):\n{listing}"
            )
        return "\n\n".join(parts)


def catalog_of(tools: ToolRegistry | None) -> SkillCatalog | None:
    """The catalog behind the ``skill`` tool among ``tools``, if they hold one: an agent's
    prompt lists the skills exactly when it can load them."""
    found = tools.get("skill") if tools is not None else None
    return found.catalog if isinstance(found, SkillTool) else None


def _resources(folder: Path) -> tuple[list[tuple[str, int]], int]:
    """The regular files under ``folder`` other than ``SKILL.md`` (sorted, dot-names and
    symlinked folders skipped, at most ``RESOURCES_MAX_DEPTH`` deep), at most
    ``RESOURCES_MAX_LISTED`` of them with their sizes, and how many more there are."""
    files: list[tuple[str, int]] = []
    more = looked = 0
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack and looked < _WALK_MAX_ENTRIES:
        here, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            looked += 1
            if entry.name.startswith(".") or (depth == 0 and entry.name == "SKILL.md"):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and depth + 1 < RESOURCES_MAX_DEPTH:
                stack.append((Path(entry.path), depth + 1))
            elif stat.S_ISREG(st.st_mode):
                if len(files) < RESOURCES_MAX_LISTED:
                    files.append((Path(entry.path).relative_to(folder).as_posix(), st.st_size))
                else:
                    more += 1
    return sorted(files), more


def _read_resource(skill: Skill, file: str) -> str:
    """The text of ``file`` in ``skill``'s folder: confined to it (symlinks resolved), a
    regular UTF-8 file of bounded size, else a ``ToolError`` saying which it is not."""
    try:
        root = skill.folder.resolve(strict=True)
        target = (root / Path(file).expanduser()).resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ToolError(f"cannot use path {file!r}: {exc}") from None
    if not target.is_relative_to(root):
        raise ToolError(f"{file!r} is outside the folder of skill {skill.name!r}; give a path from its file list")
    if not target.is_file():
        files, _ = _resources(skill.folder)
        known = ", ".join(path for path, _ in files[:20]) or "(none)"
        raise ToolError(f"skill {skill.name!r} has no file {file!r}; its files: {known}")
    try:
        return read_skill_file(skill.name, target)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
