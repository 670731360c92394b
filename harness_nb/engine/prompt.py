"""System prompts: the agent's own prompt, the working directory, the environment, the
catalog of skills (when the agent holds the ``skill`` tool) and any preloaded skills,
assembled once and again only when the catalog changes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..core import ConfigError, run_blocking
from ..core.environment import current_environment_line
from ..skills.skill import load_skill, skill_dirs
from ..skills.tool import catalog_of
from ..tools import ToolRegistry

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
    """Builds the system prompt: ``system_prompt`` + working directory + environment + the
    skill catalog + one section per preloaded skill (a skill that cannot be found or used is
    logged and skipped).

    The catalog is that of the ``skill`` tool among the tools ``build`` is given (none
    without it: an agent is told of the skills it can load). The prompt is built once and
    rebuilt only when the catalog's text changes, which ``refresh`` checks at the start of
    a run: the same prompt turn after turn keeps the provider's prompt cache.

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
        self._built: tuple[str, str] | None = None  # (catalog section, prompt)

    def build(self, tools: ToolRegistry | None = None) -> str:
        """The system prompt for an agent holding ``tools``."""
        catalog = catalog_of(tools)
        section = catalog.prompt_section() if catalog is not None else ""
        if self._built is None or self._built[0] != section:
            folders = catalog.preload_dirs() if catalog is not None else skill_dirs(self.workdir)
            self._built = (section, self._assemble(section, folders))
        return self._built[1]

    async def refresh(self, tools: ToolRegistry | None = None) -> None:
        """Re-read the skills that changed on disk (off the event loop), so the next
        ``build`` lists them: at the start of every run, unless the catalog knows without
        the file system that nothing changed (``SkillCatalog.unchanged``)."""
        catalog = catalog_of(tools)
        if catalog is not None and not catalog.unchanged():
            await run_blocking(catalog.refresh)

    def _assemble(self, catalog: str, folders: list[Path]) -> str:
        parts = [self.system_prompt.strip(), f"Working directory: {self.workdir}"]
        if self.environment:
            parts.append(self.environment_line())
        if catalog:
            parts.append(catalog)
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
