"""``AgentRegistry``: every subagent the main agent can delegate to, by name.

Definitions stack up in precedence order, lowest first; a later definition of the same
name replaces an earlier one, and each replacement is logged and kept in ``overrides``:

1. the built-ins ``general-purpose`` and ``explore``;
2. user folders ``~/.harness_nb/agents/`` then ``~/.claude/agents/``;
3. project folders ``agents/``, ``.claude/agents/``, ``.harness_nb/agents/`` (under the
   working directory), then any ``extra_dirs``;
4. definitions registered in code with ``register`` (the person asked for them explicitly,
   so they win over files, and ``reload`` keeps them).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core import UnknownNameError
from .definition import SubAgentDefinition
from .loader import DID_YOU_MEAN, DROPPED_SKILL, NOT_CLAUDE_SPELLING, SKIPPED, LoadResult, agent_files, load_agent_dir

logger = logging.getLogger("harness_nb.subagents")

GENERAL_PURPOSE_PROMPT = """\
You are a general-purpose subagent. The main agent handed you one self-contained task; \
the task text is all you know about the conversation, so do not ask for more context - \
work with what you were given and what you can find in the working directory.

- Finish the task. Search, read, run and edit as needed; prefer checking over guessing.
- Stay within the task: do not start unrelated changes or refactors.
- When you are done, reply with a concise report for the main agent: what you found or \
changed, with file paths (and line numbers where they help), what you verified and how, \
and anything left undone or uncertain. Lead with the answer; skip the narrative of your \
steps. Your final message is the only thing the main agent will see."""

EXPLORE_PROMPT = """\
You are a fast, read-only investigator. Answer the question you were given by reading \
files, searching code and inspecting the notebook's variables.

- Never modify anything: no file writes, no edits, no code that changes state.
- Search broadly first (glob, grep), then read only the parts that matter.
- Report findings, not process: answer first, then the evidence as file paths with line \
numbers (path/to/file.py:42) and variable names, quoting a line or two where it helps.
- Say plainly what you could not find or are unsure about rather than guessing."""

BUILTIN_AGENTS: tuple[SubAgentDefinition, ...] = (
    SubAgentDefinition(
        name="general-purpose",
        description="Multi-step work that mixes searching, running and changing code or data.",
        system_prompt=GENERAL_PURPOSE_PROMPT,
    ),
    SubAgentDefinition(
        name="explore",
        description="Read-only search of files, code and variables; reports paths and line numbers.",
        system_prompt=EXPLORE_PROMPT,
        tools=["read_file", "glob", "grep", "ls", "list_variables", "inspect_variable"],
    ),
)


@dataclass(frozen=True)
class AgentOverride:
    """A definition that replaced an earlier one of the same name."""

    name: str
    replaced: str
    by: str

    def __str__(self) -> str:
        return f"agent {self.name!r} from {self.by} replaces the one from {self.replaced}"


class AgentRegistry:
    """The subagent definitions of one working directory, built-ins and files together.

    Folders are read when the registry is created and again on ``reload()``. ``warnings``
    holds one readable line per agent file skipped or only partly understood; ``version``
    goes up whenever the set of definitions changes, so a caller (the notebook's
    ``%@name`` magics) knows to refresh.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        extra_dirs: Sequence[Path] = (),
        home: Path | None = None,
        include_user: bool = True,
    ) -> None:
        self.workdir = Path(workdir)
        self.extra_dirs = tuple(Path(d) for d in extra_dirs)
        self.home = Path(home) if home is not None else Path.home()
        self.include_user = include_user
        self.version = 0
        self.warnings: list[str] = []
        self.overrides: list[AgentOverride] = []
        self._registered: dict[str, SubAgentDefinition] = {}
        self._defs: dict[str, SubAgentDefinition] = {}
        self._signature: tuple[tuple[str, int, int], ...] = ()
        self.reload()

    def search_dirs(self) -> list[tuple[Path, str]]:
        """The agent folders in precedence order (lowest first), each with its label."""
        dirs: list[tuple[Path, str]] = []
        if self.include_user:
            for sub in (".harness_nb/agents", ".claude/agents"):
                dirs.append((self.home / sub, f"~/{sub}"))
        for sub in ("agents", ".claude/agents", ".harness_nb/agents"):
            dirs.append((self.workdir / sub, sub))
        dirs.extend((d, str(d)) for d in self.extra_dirs)
        return dirs

    def reload(self) -> None:
        """Read the folders again; definitions registered in code are kept on top."""
        loaded = LoadResult()
        seen: set[Path] = set()
        for folder, label in self.search_dirs():
            # Running in the home folder makes ~/.claude/agents a project folder too.
            key = folder.resolve()
            if key in seen:
                continue
            seen.add(key)
            loaded.extend(load_agent_dir(folder, label=label))

        defs: dict[str, SubAgentDefinition] = {}
        self.overrides = []
        for defn in (*BUILTIN_AGENTS, *loaded.definitions, *self._registered.values()):
            self._put(defs, defn)
        for warning in loaded.warnings:
            # A skipped file is a problem, and so are a skill name that tried to be a path and
            # a misspelt field; a note on a loaded one (a Claude Code model alias, say) is
            # not, and a collection of 80 agents would flood stderr with it.
            problem = any(marker in warning for marker in (SKIPPED, DROPPED_SKILL, DID_YOU_MEAN, NOT_CLAUDE_SPELLING))
            level = logging.WARNING if problem else logging.INFO
            logger.log(level, "%s", warning)
        self.warnings = loaded.warnings
        self._signature = self.disk_signature()
        self._replace(defs)

    def disk_signature(self) -> tuple[tuple[str, int, int], ...]:
        """Path, modification time and size of every agent file (cheap: a stat each)."""
        stamps = []
        for folder, _label in self.search_dirs():
            if folder.is_dir():
                for path in agent_files(folder):
                    try:
                        st = path.stat()
                    except OSError:
                        continue
                    stamps.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(sorted(stamps))

    def changed_on_disk(self) -> bool:
        """Whether an agent file was added, edited or removed since the last (re)load."""
        return self.disk_signature() != self._signature

    def register(self, defn: SubAgentDefinition) -> None:
        """Add or replace a definition from code. It outranks files and survives reload."""
        self._registered[defn.name] = defn
        defs = dict(self._defs)
        self._put(defs, defn)
        self._replace(defs)

    def get(self, name: str) -> SubAgentDefinition:
        """The definition called ``name``; ``UnknownNameError`` lists the valid names."""
        try:
            return self._defs[name]
        except KeyError:
            raise UnknownNameError("agent", name, self._defs) from None

    def names(self) -> list[str]:
        """Every registered agent name, sorted."""
        return sorted(self._defs)

    def __contains__(self, name: object) -> bool:
        return name in self._defs

    def __len__(self) -> int:
        return len(self._defs)

    def _put(self, defs: dict[str, SubAgentDefinition], defn: SubAgentDefinition) -> None:
        old = defs.get(defn.name)
        if old is not None and old != defn:
            override = AgentOverride(defn.name, old.source, defn.source)
            self.overrides.append(override)
            logger.info("%s", override)
        defs[defn.name] = defn

    def _replace(self, defs: dict[str, SubAgentDefinition]) -> None:
        if defs != self._defs:
            self.version += 1
        self._defs = defs

    # Defined last: inside the class body the name ``list`` means this method from here on.
    def list(self) -> list[SubAgentDefinition]:
        """Every definition, sorted by name."""
        return [self._defs[name] for name in sorted(self._defs)]
