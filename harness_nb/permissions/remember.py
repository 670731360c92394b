"""Remembered approvals: "Approve for this session" keeps a rule for the rest of the
session. ``remembering(channel, rules)`` wraps an approval channel so that an answer of
``Approved(remember=rule)`` adds ``rule`` to the session's rules.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..core import ToolCall
from ..engine.hook import ApprovalChannel, Approved, Denied
from .rule import PermissionRules, Rule, Sourced, first_match

logger = logging.getLogger("harness_nb.permission")


def remembering(channel: ApprovalChannel, rules: PermissionRules) -> ApprovalChannel:
    """``channel``, adding the rule of an ``Approved(remember=rule)`` answer to ``rules``
    for the rest of the session. A rule that would not even match the call it answers is
    not added (a channel's mistake must not widen what runs unasked)."""

    async def ask(call: ToolCall, reason: str, risk: str) -> Approved | Denied:
        answer = await channel(call, reason, risk)
        rule: Rule | None = answer.remember if isinstance(answer, Approved) else None
        if rule is not None:
            try:
                args = call.parsed_arguments()
            except ValueError:
                args = {}
            sourced = Sourced(rule, "this session", True)
            if first_match([sourced], call, args, workdir=rules.workdir, home=rules.home or Path.home()):
                rules.remember(rule)
            else:
                logger.warning("approved for this session: %s does not match %s; not kept", rule, call.brief())
        return answer

    return ask
