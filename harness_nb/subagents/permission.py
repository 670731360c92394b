"""Which tools a subagent gets: permissions only ever narrow down the delegation chain.

``resolve_tools`` is the first line of defence; the run-time deny-coordination hook in the
runner is the second, so a coordination tool that slips into a child's tool list by some
future mistake is still refused when called.
"""

from __future__ import annotations

from collections.abc import Iterable

from .definition import SubAgentDefinition

# Tools that delegate, steer other agents or talk to the person. A subagent never gets
# them: it must not spawn subagents of its own or block waiting for the person.
COORDINATION_TOOLS = frozenset(
    {"task", "task_output", "task_stop", "send_message", "team_create", "team_delete", "ask_user"}
)


def resolve_tools(defn: SubAgentDefinition, parent_tools: Iterable[str]) -> list[str]:
    """The tools a subagent may use, in the parent's order.

    ``(allowlist ∩ parent_tools, or parent_tools when there is no allowlist)
    − disallowed_tools − COORDINATION_TOOLS``. The result is always a subset of
    ``parent_tools``, so a child can never hold a tool its parent lacks, and resolving
    again for a grandchild can only narrow further. ``defn.tools`` of ``None`` means no
    allowlist; an empty list is an allowlist that allows nothing.
    """
    allowed = None if defn.tools is None else set(defn.tools)
    denied = COORDINATION_TOOLS.union(defn.disallowed_tools)
    result: list[str] = []
    for name in parent_tools:
        if name in denied or name in result:
            continue
        if allowed is None or name in allowed:
            result.append(name)
    return result
