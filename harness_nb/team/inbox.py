"""``LeaderInbox``: how messages for ``team-lead`` reach the main agent and the notebook.

The lead has no loop of its own to sleep on a mailbox (it runs when the person runs a
cell), so its inbox works the other way round: every message is published at once to the
``listeners`` (the notebook's team view shows it live) and queued; ``texts`` drains the
queue into the main agent's next LLM call, so each message is read exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .mailbox import Mailbox, Message
from .protocol import format_for_leader

log = logging.getLogger("harness_nb.team")

LeaderListener = Callable[[Message], Any]


class LeaderInbox:
    """The lead's ``mailbox`` plus the callbacks told about every message put into it."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox
        self.listeners: list[LeaderListener] = []

    def deliver(self, message: Message) -> None:
        """Queue ``message`` for the main agent's next turn and tell every listener."""
        self.mailbox.send(message)
        for listener in list(self.listeners):
            try:
                listener(message)
            except Exception:  # a broken view must not lose the message or stop the sender
                log.exception("leader-message listener failed")

    def texts(self) -> list[str]:
        """The queued messages as the main agent reads them (an engine injector); each is
        returned once, in arrival order."""
        return [format_for_leader(m) for m in self.mailbox.drain()]
