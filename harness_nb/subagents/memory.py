"""Agent memory: Claude Code's ``memory:`` field — one ``MEMORY.md`` per agent and scope.

========  ==========================================  ================================
scope     folder                                      for
========  ==========================================  ================================
user      ``~/.claude/agent-memory/<name>/``          what the agent learns everywhere
project   ``<workdir>/.claude/agent-memory/<name>/``  the project's, shared (in git)
local     ``<workdir>/.claude/agent-memory-local/     the project's, personal
          <name>/``
========  ==========================================  ================================

The first ``PRELOAD_LINES`` lines of ``MEMORY.md`` go into the agent's system prompt, with
its path and how to keep it. The agent updates it with ``write_file`` / ``edit_file``: its
copy of the permission hook treats that folder as writable (the agent-file ask that guards
``.claude/`` does not apply inside it) and its file tools may reach it even outside the
workdir (the user scope). ``bash`` cannot write it: in the sandbox ``.claude/`` is a
read-only mount, as for every agent and settings folder.

A memory folder is granted only where it is what its path says: when a symlink anywhere on
the way leads elsewhere (a cloned repository pointing ``agent-memory/x`` at
``.claude/agents``), the agent gets the preload but no writable folder, and a warning.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ..core import NotRegularFileError, read_regular
from .definition import SubAgentDefinition

log = logging.getLogger("harness_nb.subagents")

MEMORY_FILE = "MEMORY.md"
PRELOAD_LINES = 200
"""Lines of ``MEMORY.md`` preloaded into the system prompt (Claude Code's number)."""
MEMORY_MAX_BYTES = 256 * 1024
"""Most of ``MEMORY.md`` read for the preload."""


@dataclass(frozen=True, slots=True)
class Memory:
    """One agent's memory: its ``folder`` (``writable`` unless a symlink leads it
    elsewhere), the first lines of its ``MEMORY.md`` and how many lines were left out."""

    scope: str
    folder: Path
    text: str
    omitted: int
    writable: bool

    @property
    def file(self) -> Path:
        """The ``MEMORY.md`` in ``folder``."""
        return self.folder / MEMORY_FILE

    def prompt_section(self, workdir: Path) -> str:
        """The system-prompt section: where the memory is, how to keep it, what it holds."""
        shown = self.file.relative_to(workdir) if self.file.is_relative_to(workdir) else self.file
        body = self.text.rstrip() or "(empty: nothing remembered yet)"
        more = f"\n\n[… {self.omitted} more lines not shown; keep MEMORY.md under {PRELOAD_LINES} lines]" if self.omitted else ""
        how = (
            f"Update it with write_file or edit_file (path {shown}) when you learn something worth "
            f"keeping for later runs: conventions, recurring problems, where things are. Keep it "
            f"under {PRELOAD_LINES} lines; put details in other files in the same folder."
            if self.writable
            else "It cannot be written here (its folder is a link elsewhere); read it, do not update it."
        )
        return f"## Your memory ({self.scope} scope): {shown}\n\n{how}\n\n{body}{more}"


def memory_folder(scope: str, name: str, *, workdir: Path, home: Path) -> Path:
    """Where agent ``name`` keeps its ``scope`` memory (see the module doc)."""
    if scope == "user":
        return home / ".claude" / "agent-memory" / name
    if scope == "project":
        return workdir / ".claude" / "agent-memory" / name
    if scope == "local":
        return workdir / ".claude" / "agent-memory-local" / name
    raise ValueError(f"memory scope must be user, project or local, not {scope!r}")


def load_memory(defn: SubAgentDefinition, *, workdir: Path, home: Path | None = None) -> Memory | None:
    """``defn``'s memory (``None`` when it has no ``memory`` field). A missing file is an
    empty memory; an unreadable one is empty with a warning. Reads at most
    ``MEMORY_MAX_BYTES`` (a few small reads, once per subagent run)."""
    if defn.memory is None:
        return None
    base = (home or Path.home()).resolve() if defn.memory == "user" else workdir.resolve()
    folder = memory_folder(defn.memory, defn.name, workdir=base, home=base)
    try:
        writable = folder.resolve(strict=False) == folder
    except (OSError, RuntimeError):
        writable = False
    if not writable:
        log.warning("agent %s: its memory folder %s leads elsewhere (a symlink); it is not writable", defn.name, folder)
    text, omitted = _first_lines(folder / MEMORY_FILE, defn.name)
    return Memory(defn.memory, folder, text, omitted, writable)


def _first_lines(path: Path, agent: str) -> tuple[str, int]:
    try:
        data = read_regular(path, MEMORY_MAX_BYTES)[:MEMORY_MAX_BYTES]
    except FileNotFoundError:
        return "", 0
    except (NotRegularFileError, OSError) as exc:
        log.warning("agent %s: cannot read its memory %s (%s); starting empty", agent, path, exc)
        return "", 0
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[:PRELOAD_LINES]), max(len(lines) - PRELOAD_LINES, 0)
