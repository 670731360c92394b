"""System prompts: the agent's own prompt, the working directory, the environment and any
preloaded skills, assembled once per engine."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..core import ConfigError
from ..core.environment import current_environment_line
from .skill import load_skill, skill_dirs

__all__ = ["MAIN_SYSTEM_PROMPT", "PromptBuilder"]

log = logging.getLogger("harness_nb.engine")

MAIN_SYSTEM_PROMPT = """\
You are an assistant working inside a Jupyter notebook, next to the person's data and code.
Work in small, checkable steps. Use the tools to look before you change anything; prefer
reading files and inspecting variables over guessing. When a sub-task is self-contained
(searching a codebase, summarising a dataset, reviewing a file), delegate it with the
`task` tool so your own context stays small. Answer concisely in Markdown; name files
with their paths."""


class PromptBuilder:
    """Builds the system prompt once: ``system_prompt`` + working directory + environment +
    one section per preloaded skill (a skill that cannot be found or used is logged and
    skipped).

    ``environment_line`` gives the environment line (Python, system, today); tests pass
    their own to fix the day and the machine."""

    def __init__(
        self,
        system_prompt: str = MAIN_SYSTEM_PROMPT,
        *,
        workdir: Path,
        skills: Sequence[str] = (),
        skill_texts: Mapping[str, str] | None = None,
        environment: bool = True,
        environment_line: Callable[[], str] = current_environment_line,
    ) -> None:
        self.system_prompt = system_prompt
        self.workdir = workdir
        self.skills = list(skills)
        self.skill_texts = dict(skill_texts or {})
        self.environment = environment
        self.environment_line = environment_line
        self._built: str | None = None

    def build(self) -> str:
        if self._built is None:
            self._built = self._assemble()
        return self._built

    def _assemble(self) -> str:
        parts = [self.system_prompt.strip(), f"Working directory: {self.workdir}"]
        if self.environment:
            parts.append(self.environment_line())
        folders = skill_dirs(self.workdir)
        for name in self.skills:
            try:
                body = self.skill_texts.get(name) or load_skill(name, folders)
            except ConfigError as exc:  # a path for a name, a symlink out: never read
                log.warning("%s; skipped", exc)
                continue
            if not body or not body.strip():
                log.warning("skill %r not found in %s; skipped", name, ", ".join(map(str, folders)))
                continue
            parts.append(f"## Preloaded skill: {name}\n\n{body.strip()}")
        return "\n\n".join(parts)
