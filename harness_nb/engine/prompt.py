"""System prompts: the agent's own prompt, the working directory, the environment, the
catalog of skills (when the agent holds the ``skill`` tool), any preloaded skills and,
last, a ``state`` the layer running the agent reports (the notebook's kernel: its
libraries and variables), assembled once and again only when the catalog or that state
changes. What changes goes last: a provider's prompt cache keeps the prefix before it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core import ConfigError, run_blocking
from ..core.environment import current_environment_line
from ..skills.skill import load_skill, skill_dirs
from ..skills.tool import catalog_of
from ..tools import ToolRegistry

__all__ = ["MAIN_SYSTEM_PROMPT", "MainPrompt", "PromptBuilder"]

log = logging.getLogger("harness_nb.engine")

MAIN_SYSTEM_PROMPT = """\
You are an assistant working inside a Jupyter notebook, next to the person's data and code.
Work in small, checkable steps. Use the tools to look before you change anything; prefer
reading files and inspecting variables over guessing. When a sub-task is self-contained
(searching a codebase, summarising a dataset, reviewing a file), delegate it with the
`task` tool so your own context stays small. Answer concisely in Markdown; name files
with their paths."""


@dataclass(frozen=True)
class MainPrompt:
    """The main agent's built-in system prompt as the layer running it writes it (the
    notebook writes its own, about cells and the kernel): ``text``, and ``state``, read at
    the start of every run and put last (see the module doc). A ``system_prompt`` setting
    replaces ``text`` and keeps ``state``."""

    text: str = MAIN_SYSTEM_PROMPT
    state: Callable[[], str] | None = None


class PromptBuilder:
    """Builds the system prompt: ``system_prompt`` + working directory + environment + the
    skill catalog + one section per preloaded skill (a skill that cannot be found or used is
    logged and skipped).

    The catalog is that of the ``skill`` tool among the tools ``build`` is given (none
    without it: an agent is told of the skills it can load). The prompt is built once and
    rebuilt only when the catalog's text changes, which ``refresh`` checks at the start of
    a run: the same prompt turn after turn keeps the provider's prompt cache.

    ``environment_line`` gives the environment line (Python, system, today); tests pass
    their own to fix the day and the machine. ``state`` (see ``MainPrompt``) is read by
    ``refresh``, so it stays the same for every call of a run; one that fails is logged and
    left out."""

    def __init__(
        self,
        system_prompt: str = MAIN_SYSTEM_PROMPT,
        *,
        workdir: Path,
        skills: Sequence[str] = (),
        skill_texts: Mapping[str, str] | None = None,
        environment: bool = True,
        environment_line: Callable[[], str] = current_environment_line,
        state: Callable[[], str] | None = None,
    ) -> None:
        self.system_prompt = system_prompt
        self.workdir = workdir
        self.skills = list(skills)
        self.skill_texts = dict(skill_texts or {})
        self.environment = environment
        self.environment_line = environment_line
        self.state = state
        self._state_text = ""
        self._built: tuple[tuple[str, str], str] | None = None  # ((catalog section, state), prompt)

    def build(self, tools: ToolRegistry | None = None) -> str:
        """The system prompt for an agent holding ``tools``."""
        catalog = catalog_of(tools)
        key = (catalog.prompt_section() if catalog is not None else "", self._state_text)
        if self._built is None or self._built[0] != key:
            folders = catalog.preload_dirs() if catalog is not None else skill_dirs(self.workdir)
            self._built = (key, self._assemble(key[0], folders))
        return self._built[1]

    async def refresh(self, tools: ToolRegistry | None = None) -> None:
        """Re-read the skills that changed on disk (off the event loop) and the ``state``, so
        the next ``build`` holds them: at the start of every run; the skills only unless the
        catalog knows without the file system that nothing changed (``SkillCatalog.unchanged``)."""
        catalog = catalog_of(tools)
        if catalog is not None and not catalog.unchanged():
            await run_blocking(catalog.refresh)
        if self.state is not None:
            try:
                self._state_text = self.state().strip()
            except Exception as exc:  # a report of the kernel must never stop a run
                log.warning("the prompt's state section failed (%s: %s); left out", type(exc).__name__, exc)
                self._state_text = ""

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
        if self._state_text:
            parts.append(self._state_text)
        return "\n\n".join(parts)
