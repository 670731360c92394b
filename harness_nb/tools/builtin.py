"""The built-in tool set every agent starts from."""

from __future__ import annotations

import copy

from ..sandbox import Sandbox
from .base import FunctionTool, Tool
from .files import edit_file, ls, read_file, write_file
from .search import glob, grep
from .shell import BashTool

READ_ONLY_TOOLS = ("read_file", "ls", "glob", "grep")
"""Names of the built-in tools that never change anything (the ``explore`` agent's set)."""

_FILE_TOOLS: tuple[FunctionTool, ...] = (read_file, write_file, edit_file, ls, glob, grep)


def builtin_tools(*, sandbox: Sandbox | None = None) -> list[Tool]:
    """Fresh instances of the built-in tools, so each registry owns its own (a caller may
    rename or re-flag one without touching another agent's). A copy keeps every attribute
    of the shipped tool. ``bash`` runs under ``sandbox`` (``None``: the default ``auto``
    sandbox)."""
    return [*(copy.copy(t) for t in _FILE_TOOLS), BashTool(sandbox)]
