"""The team's wire format: how mailbox messages read when they reach a model.

The mailbox and the teammate loop only move ``Message`` objects; this module decides what
a teammate's next prompt and the lead's injected text look like (the seed's split: the
mechanism in the loop, the policy here).
"""

from __future__ import annotations

import re

from .mailbox import TEAM_LEAD, Message

NO_TEXT = "(no text: the turn ended with tool calls only)"


def envelope(sender: str, body: str, *, kind: str | None = None) -> str:
    """``<teammate-message from="…" [kind="…"]>body</teammate-message>``."""
    attrs = f' from="{sender}"' + (f' kind="{kind}"' if kind else "")
    return f"<teammate-message{attrs}>{body}</teammate-message>"


_ENVELOPE = re.compile(r'^\s*<teammate-message from="([^"]*)"(?: kind="([^"]*)")?>(.*)</teammate-message>\s*$', re.DOTALL)
_STARTED = re.compile(r'^\s*<teammate id="([^"]*)" name="([^"]*)" team="([^"]*)" state="([^"]*)"/>\s*$')
IDLE_PREFIX = "finished its turn and is idle. Its last message:\n"


def read_envelope(text: str) -> tuple[str, str, str] | None:
    """``(sender, kind, body)`` of an envelope (``kind`` "message" when it has none);
    ``None`` when ``text`` is not one. An idle notification's body is the teammate's last
    message alone."""
    match = _ENVELOPE.match(text)
    if match is None:
        return None
    sender, kind, body = match.group(1), match.group(2) or "message", match.group(3)
    if kind == "idle_notification":
        body = body.removeprefix(f"{sender} {IDLE_PREFIX}")
    return sender, kind, body


def started(task_id: str, name: str, team: str) -> str:
    """What the ``task`` tool returns when it starts a teammate."""
    return f'<teammate id="{task_id}" name="{name}" team="{team}" state="running"/>'


def read_started(text: str) -> tuple[str, str, str] | None:
    """``(task_id, name, team)`` of a ``started`` form, else ``None``."""
    match = _STARTED.match(text)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def format_prompt(message: Message) -> str:
    """A message as a teammate's next prompt."""
    return envelope(message.sender, message.text)


def format_for_leader(message: Message) -> str:
    """A message as the team lead reads it at its next turn: idle notifications and
    shutdown answers say in words what happened instead of carrying a raw payload."""
    if message.kind == "idle_notification":
        body = f"{message.sender} {IDLE_PREFIX}{message.text or NO_TEXT}"
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
