"""The team's wire format: how mailbox messages read when they reach a model.

The mailbox and the teammate loop only move ``Message`` objects; this module decides what
a teammate's next prompt and the lead's injected text look like (the seed's split: the
mechanism in the loop, the policy here).
"""

from __future__ import annotations

from .mailbox import TEAM_LEAD, Message

NO_TEXT = "(no text: the turn ended with tool calls only)"


def envelope(sender: str, body: str, *, kind: str | None = None) -> str:
    """``<teammate-message from="…" [kind="…"]>body</teammate-message>``."""
    attrs = f' from="{sender}"' + (f' kind="{kind}"' if kind else "")
    return f"<teammate-message{attrs}>{body}</teammate-message>"


def format_prompt(message: Message) -> str:
    """A message as a teammate's next prompt."""
    return envelope(message.sender, message.text)


def format_for_leader(message: Message) -> str:
    """A message as the team lead reads it at its next turn: idle notifications and
    shutdown answers say in words what happened instead of carrying a raw payload."""
    if message.kind == "idle_notification":
        body = f"{message.sender} finished its turn and is idle. Its last message:\n{message.text or NO_TEXT}"
        return envelope(message.sender, body, kind="idle_notification")
    if message.kind == "shutdown_response":
        return envelope(message.sender, message.text, kind="shutdown_response")
    return envelope(message.sender, message.text)


def teammate_system_prompt(base: str, *, name: str, team: str) -> str:
    """The definition's own prompt plus what a teammate needs to know about its team."""
    addendum = (
        f"You are {name!r}, a long-lived teammate in team {team!r}. The team lead is "
        f"{TEAM_LEAD!r} (the main agent, working with a person in a notebook). Messages reach "
        'you as <teammate-message from="…">. When you finish a turn, your last message is '
        "sent to the team lead automatically, and you wait until someone writes to you. Use "
        f"send_message(to=…, message=…) to write to {TEAM_LEAD!r} or a teammate by name while "
        "you work. You cannot start subagents or teammates: do the work yourself."
    )
    return f"{base.strip()}\n\n{addendum}" if base.strip() else addendum
