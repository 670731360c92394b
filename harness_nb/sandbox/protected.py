"""The paths of a working directory that only the person may change: ``protection(rel)``.

A file is protected when changing it would let the agent vouch for itself: it configures
what runs later, outside any sandbox and without asking, or it holds credentials.

==============================  =============================================  ============
what                            where (relative to the workdir)                 reason
==============================  =============================================  ============
agents, skills, settings        ``agents/``, ``skills/``, ``.claude/``,          ``AGENTS``
                                ``.harness_nb/`` (and agent folders given to
                                the harness)
MCP servers                     ``.mcp.json``                                    ``MCP``
git's config and hooks          in any ``.git`` folder: ``config``,              ``GIT``
                                ``config.worktree``, ``commondir``, ``gitdir``,
                                ``hooks/``; a ``.git`` *file* (``gitdir:``)
code run at the next start      ``sitecustomize.py``, ``usercustomize.py``,      ``STARTUP``
                                ``*.pth``, ``.envrc`` (direnv) at any depth;
                                IPython and Jupyter config files at the top
                                (both load them from the current folder)
instructions other agents read  ``AGENTS.md``, ``CLAUDE.md``,                    ``INSTRUCTIONS``
                                ``CLAUDE.local.md`` at any depth
credentials                     ``.env``, ``.env.*``, ``*.env`` at any depth     ``CREDENTIALS``
==============================  =============================================  ============

Three layers consult this one list, so they cannot disagree:

- the permission hook: a file tool's write to a protected path asks, whatever the policy
  (only an approval or a rule the person gave directly lets it run, never a rule read from
  a file in the workdir);
- the sandbox: the protected folders (and the files that exist) are read-only mounts for
  ``bash``;
- the checkpoints: a change to a protected path, by any tool or command, that no approval
  covered is reverted at once — files that did not exist before included.

Names are compared as they are stored (case-sensitive), as Linux does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = [
    "HARNESS_STATE",
    "PROTECTED_FOLDERS",
    "Protection",
    "protection",
]

PROTECTED_FOLDERS: tuple[str, ...] = ("agents", "skills", ".claude", ".harness_nb")
"""Top-level folders holding agent, skill and settings files (the harness and Claude Code
load them). Every agent and skill folder the registry and the prompt builder read lies
under one of these or is given to the harness explicitly (a test holds that)."""

HARNESS_STATE: tuple[str, ...] = ("sessions", "offload", "teams", "maps", "cassettes")
"""Folders under ``.harness_nb/`` that the harness itself writes (transcripts, offloaded
results, team rosters, map stores, recordings). Tools may not change them (they lie in a
protected folder); checkpoints leave them out, as the harness's own writes are no tool's
effect."""

_TOP_LEVEL_FILES = frozenset(
    {
        ".mcp.json",
        # IPython and Jupyter read config from the current folder at start-up
        "ipython_config.py",
        "ipython_config.json",
        "ipython_kernel_config.py",
        "ipython_kernel_config.json",
        "jupyter_config.py",
        "jupyter_config.json",
        "jupyter_server_config.py",
        "jupyter_server_config.json",
        "jupyter_notebook_config.py",
        "jupyter_notebook_config.json",
        "jupyter_lab_config.py",
        "jupyter_lab_config.json",
    }
)
_STARTUP_NAMES = frozenset({"sitecustomize.py", "usercustomize.py", ".envrc"})
_INSTRUCTION_NAMES = frozenset({"AGENTS.md", "CLAUDE.md", "CLAUDE.local.md"})
_GIT_FILES = frozenset({"config", "config.worktree", "commondir", "gitdir"})


@dataclass(frozen=True, slots=True)
class Protection:
    """Why a path is protected: ``kind`` names the row of the module's table, ``text`` is
    what an approval card or a tool result says ("writes an agent, skill or settings
    file")."""

    kind: str
    text: str


AGENTS = Protection("agents", "an agent, skill or settings file")
MCP = Protection("mcp", "the MCP server list, which names commands the harness runs")
GIT = Protection("git", "git's config or hooks, which git runs later")
STARTUP = Protection("startup", "a file that runs code at the next start (Python, IPython, direnv)")
INSTRUCTIONS = Protection("instructions", "instructions that other agents follow")
CREDENTIALS = Protection("credentials", "a credentials file")


def protection(rel: str | PurePosixPath, *, folders: Iterable[str] = ()) -> Protection | None:
    """Why the path ``rel`` (relative to the workdir, ``/``-separated, no ``..``) is one only
    the person may change, or ``None``. ``folders`` adds protected folders (relative paths of
    agent folders given to the harness)."""
    parts = PurePosixPath(rel).parts
    if not parts or parts[0] in ("..", "/"):
        return None
    if parts[0] in PROTECTED_FOLDERS:
        return AGENTS
    path = "/".join(parts)
    for folder in folders:
        folder = folder.strip("/")
        if folder and (path == folder or path.startswith(folder + "/")):
            return AGENTS
    if ".git" in parts:
        found = _git_protection(parts)
        if found is not None:
            return found
    name = parts[-1]
    if len(parts) == 1 and name in _TOP_LEVEL_FILES:
        return MCP if name == ".mcp.json" else STARTUP
    if name in _STARTUP_NAMES or name.endswith(".pth"):
        return STARTUP
    if name in _INSTRUCTION_NAMES:
        return INSTRUCTIONS
    if name == ".env" or name.startswith(".env.") or name.endswith(".env"):
        return CREDENTIALS
    return None


def _git_protection(parts: tuple[str, ...]) -> Protection | None:
    """git's own files that run programs: in a ``.git`` folder, its config, hooks and the
    files that point git at another repository; a ``.git`` file (``gitdir: …``) does too."""
    at = len(parts) - 1 - parts[::-1].index(".git")  # the innermost .git
    inside = parts[at + 1 :]
    if not inside:
        return GIT  # .git itself: a file (gitdir: redirect), or a new repository's folder
    if "hooks" in inside[:-1] or inside[-1] in _GIT_FILES or inside[0] == "hooks":
        return GIT
    return None
