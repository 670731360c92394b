"""Which tools a subagent gets, and in which permission mode: permissions only ever narrow
down the delegation chain.

``resolve_tools`` is the first line of defence; the run-time ``DenyCoordinationHook`` in the
runner is the second, so a coordination tool that slips into a child's tool list by some
future mistake is still refused when called. Both read one source: the tool's own
``coordination`` flag (set on ``task``, ``task_output``, ``task_stop``, ``send_message``
and the team tools) — never a list of names that could fall out of step with the tools.

``effective_mode`` is the one rule for a definition's ``permissionMode`` (the runner and
``%agents`` both use it); the mode itself is enforced by the subagent's copy of the
``PermissionHook`` (``permissions/hook.py``), after the person's deny rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from ..permissions.mode import PermissionMode
from ..tools import Tool
from .definition import SubAgentDefinition

# What an agent with ``memory`` is given so that it can keep its MEMORY.md (Claude Code
# enables Read, Write and Edit for it), when its parent has them.
MEMORY_TOOLS = ("read_file", "write_file", "edit_file")
WRITE_TOOLS = frozenset({"write_file", "edit_file"})
BYPASS_NOT_ENABLED = (
    "permissionMode bypassPermissions is not enabled here (the person turns it on with "
    "Harness(allow_bypass_permissions=True) or %config HarnessNB.allow_bypass_permissions = True); "
    "it runs under the parent's policy"
)
AUTO_NOT_SUPPORTED = (
    "permissionMode auto (Claude Code's classifier) is not supported here; it runs under the parent's policy"
)


def effective_mode(defn: SubAgentDefinition, *, allow_bypass: bool = False) -> tuple[PermissionMode, str | None]:
    """The permission mode ``defn`` runs in, and a note when it is not the one it asked for:
    ``bypassPermissions`` only when the person enabled it, ``auto`` never (both fall back
    to ``default``, the parent's policy)."""
    mode: PermissionMode = defn.permission_mode or "default"
    if mode == "bypassPermissions" and not allow_bypass:
        return "default", BYPASS_NOT_ENABLED
    if mode == "auto":
        return "default", AUTO_NOT_SUPPORTED
    return mode, None


def resolve_tools(defn: SubAgentDefinition, parent_tools: Iterable[Tool], *, watched: bool = True) -> list[str]:
    """The names of the tools a subagent may use, in the parent's order.

    ``(allowlist ∩ parent_tools, or parent_tools when there is no allowlist)
    − disallowed_tools − coordination tools``; a subagent that runs unwatched (not
    ``watched``: in the background, as a map row, as a teammate) gets a ``foreground_only``
    tool — one that blocks the person's kernel or writes into their notebook — only when
    its allowlist names it, and a ``watched_only`` one (the tools that act on the notebook's
    page) never. Entries may be patterns (``names_tool``:
    globs such as ``kernel_*`` or ``mcp__github__*``, an MCP server's name), in either
    list. An agent with ``memory`` also gets the
    file tools (``MEMORY_TOOLS``) its parent has, writing only in its memory folder when
    its allowlist did not name them (``memory_only_writes``); one in ``plan`` mode keeps
    only read-only tools and ``bash`` (whose commands must then be read-only).

    The result is always a subset of ``parent_tools``, so a child can never hold a tool its
    parent lacks, and resolving again for a grandchild can only narrow further. ``defn.tools``
    of ``None`` means no allowlist; an empty list is an allowlist that allows nothing.
    """
    allowed = None if defn.tools is None else list(defn.tools)
    if allowed is not None and defn.memory:
        allowed += MEMORY_TOOLS
    plan = defn.permission_mode == "plan"
    result: list[str] = []
    for t in parent_tools:
        if t.coordination or any(names_tool(d, t.name) for d in defn.disallowed_tools) or t.name in result:
            continue
        named = any(names_tool(a, t.name) for a in defn.tools or ())
        if not watched and (t.watched_only or (t.foreground_only and not named)):
            continue
        if plan and not (t.read_only or t.name == "bash" or (defn.memory and t.name in WRITE_TOOLS)):
            continue
        if allowed is None or any(names_tool(a, t.name) for a in allowed):
            result.append(t.name)
    return result


def names_tool(entry: str, name: str) -> bool:
    """Whether the tool-list entry ``entry`` names the tool ``name``: the same name, a glob
    (``kernel_*``, ``mcp__github__*``, ``mcp__*__search``), or for MCP tools a server's name
    alone (``mcp__github``: every tool of that server), as in permission rules."""
    if entry == name:
        return True
    if "*" in entry or "?" in entry:
        return fnmatchcase(name, entry)
    return entry.startswith("mcp__") and name.startswith("mcp__") and entry.count("__") == 1 and name.startswith(entry + "__")


def memory_only_writes(defn: SubAgentDefinition) -> bool:
    """Whether ``defn`` holds its write tools only for its memory: it has ``memory`` and an
    allowlist that names neither ``write_file`` nor ``edit_file``."""
    return bool(defn.memory) and defn.tools is not None and not WRITE_TOOLS & set(defn.tools)
