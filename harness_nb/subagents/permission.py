"""Which tools a subagent gets: permissions only ever narrow down the delegation chain.

``resolve_tools`` is the first line of defence; the run-time ``DenyCoordinationHook`` in the
runner is the second, so a coordination tool that slips into a child's tool list by some
future mistake is still refused when called. Both read one source: the tool's own
``coordination`` flag (set on ``task``, ``task_output``, ``task_stop``, ``send_message``
and the team tools) — never a list of names that could fall out of step with the tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from ..tools import Tool
from .definition import SubAgentDefinition


def resolve_tools(defn: SubAgentDefinition, parent_tools: Iterable[Tool]) -> list[str]:
    """The names of the tools a subagent may use, in the parent's order.

    ``(allowlist ∩ parent_tools, or parent_tools when there is no allowlist)
    − disallowed_tools − coordination tools``. The result is always a subset of
    ``parent_tools``, so a child can never hold a tool its parent lacks, and resolving
    again for a grandchild can only narrow further. ``defn.tools`` of ``None`` means no
    allowlist; an empty list is an allowlist that allows nothing. MCP entries may be
    patterns (``names_tool``), in either list.
    """
    result: list[str] = []
    for t in parent_tools:
        if t.coordination or t.name in result or any(names_tool(d, t.name) for d in defn.disallowed_tools):
            continue
        if defn.tools is None or any(names_tool(a, t.name) for a in defn.tools):
            result.append(t.name)
    return result


def names_tool(entry: str, name: str) -> bool:
    """Whether the tool-list entry ``entry`` names the tool ``name``: the same name; for MCP
    tools also a glob (``mcp__github__*``, ``mcp__*__search``) or a server's name alone
    (``mcp__github``: every tool of that server), as in permission rules."""
    if entry == name:
        return True
    if not (entry.startswith("mcp__") and name.startswith("mcp__")):
        return False
    if "*" in entry:
        return fnmatchcase(name, entry)
    return entry.count("__") == 1 and name.startswith(entry + "__")
