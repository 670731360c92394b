"""Claude Code's tool names and ours: the one table.

Agent files (``subagents.definition``) and permission rules (``permissions.rule``) are written
with Claude Code's names (``Read``, ``Bash``, ``MultiEdit``, …); both map them through
``CLAUDE_TOOL_NAMES``, keyed by lowercase so ``read``, ``READ`` and ``Read`` map the same way.
"""

from __future__ import annotations

CLAUDE_TOOL_NAMES: dict[str, str] = {
    "read": "read_file",
    "notebookread": "read_file",
    "write": "write_file",
    "edit": "edit_file",
    "multiedit": "edit_file",
    "bash": "bash",
    "glob": "glob",
    "grep": "grep",
    "ls": "ls",
    "task": "task",
    "agent": "task",
    "skill": "skill",
}
