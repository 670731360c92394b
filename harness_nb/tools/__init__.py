"""Tool base, registry and the built-in tools."""

from .base import FunctionTool, Tool, ToolContext, ToolOutcome, ToolRegistry, invoke, own_timeout, tool
from .builtin import READ_ONLY_TOOLS, builtin_tools
from .files import edit_file, ls, read_file, write_file
from .path import display_path, resolve_in_workdir
from .search import glob, grep
from .shell import bash

__all__ = [
    "READ_ONLY_TOOLS",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolRegistry",
    "bash",
    "builtin_tools",
    "display_path",
    "edit_file",
    "glob",
    "grep",
    "invoke",
    "own_timeout",
    "ls",
    "read_file",
    "resolve_in_workdir",
    "tool",
    "write_file",
]
