"""Tool base, registry and the built-in tools (files, search, ``bash``).

May import ``core`` and ``sandbox`` (``bash`` runs in it); nothing above them.
"""

from ..sandbox import Sandbox, SandboxMode
from .base import (
    CallOrder,
    FunctionTool,
    Tool,
    ToolContext,
    ToolOutcome,
    ToolOutput,
    ToolRegistry,
    invoke,
    own_timeout,
    tool,
)
from .builtin import READ_ONLY_TOOLS, builtin_tools
from .files import edit_file, ls, read_file, write_file
from .path import Target, display_path, read_target, resolve_in_workdir, write_target
from .search import glob, grep
from .shell import BashTool, bash, kill_running_commands

__all__ = [
    "READ_ONLY_TOOLS",
    "BashTool",
    "CallOrder",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolOutput",
    "ToolRegistry",
    "Sandbox",
    "SandboxMode",
    "Target",
    "bash",
    "builtin_tools",
    "display_path",
    "edit_file",
    "glob",
    "grep",
    "invoke",
    "kill_running_commands",
    "own_timeout",
    "ls",
    "read_file",
    "read_target",
    "resolve_in_workdir",
    "tool",
    "write_file",
    "write_target",
]
