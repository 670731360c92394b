"""Which tools a subagent gets: permissions only ever narrow down the delegation chain.

``resolve_tools`` is the first line of defence; the run-time ``DenyCoordinationHook`` in the
runner is the second, so a coordination tool that slips into a child's tool list by some
future mistake is still refused when called. Both read one source: the tool's own
``coordination`` flag (set on ``task``, ``task_output``, ``task_stop``, ``send_message``
and the team tools) — never a list of names that could fall out of step with the tools.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..tools import Tool
from .definition import SubAgentDefinition


def resolve_tools(defn: SubAgentDefinition, parent_tools: Iterable[Tool]) -> list[str]:
    """The names of the tools a subagent may use, in the parent's order.

    ``(allowlist ∩ parent_tools, or parent_tools when there is no allowlist)
    − disallowed_tools − coordination tools``. The result is always a subset of
    ``parent_tools``, so a child can never hold a tool its parent lacks, and resolving
    again for a grandchild can only narrow further. ``defn.tools`` of ``None`` means no
    allowlist; an empty list is an allowlist that allows nothing.
    """
    allowed = None if defn.tools is None else set(defn.tools)
    denied = set(defn.disallowed_tools)
    result: list[str] = []
    for t in parent_tools:
        if t.coordination or t.name in denied or t.name in result:
            continue
        if allowed is None or t.name in allowed:
            result.append(t.name)
    return result
