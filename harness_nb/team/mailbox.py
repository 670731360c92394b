"""``Mailbox``: the in-memory inbox of one team member (a teammate or the team lead).

Many producers, one consumer, all on one event loop. ``send`` appends and sets a wake-up
event; ``wait`` sleeps on that event until something is queued (no polling); ``drain``
takes everything in arrival order and ``take`` removes only the most urgent message, so the
rest stay queued for later turns.

Priority when several messages wait (``pick_priority``): shutdown messages first, then the
lead's, then peers'; first in, first out within a class.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

TEAM_LEAD = "team-lead"
"""The reserved name of the main agent inside every team."""

MessageKind = Literal["message", "shutdown_request", "shutdown_response", "idle_notification"]

_SHUTDOWN_KINDS = frozenset({"shutdown_request", "shutdown_response"})
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Message:
    """One mailbox message. ``id`` is unique in the process and grows with send order."""

    sender: str
    kind: MessageKind
    text: str
    to: str = ""
    id: int = field(default_factory=lambda: next(_ids))
    sent_at: float = field(default_factory=time.time)


def priority_class(message: Message) -> int:
    """0 for shutdown messages, 1 for the lead's, 2 for peers' (lower is more urgent)."""
    if message.kind in _SHUTDOWN_KINDS:
        return 0
    return 1 if message.sender == TEAM_LEAD else 2


def pick_priority(messages: Sequence[Message]) -> int:
    """The index of the message to handle first: the most urgent class, earliest within it.
    Raises ``ValueError`` on an empty sequence."""
    if not messages:
        raise ValueError("pick_priority needs at least one message")
    # min() keeps the first of equal keys, which is exactly FIFO within a class
    return min(range(len(messages)), key=lambda i: priority_class(messages[i]))


def by_priority(messages: Sequence[Message]) -> list[Message]:
    """``messages`` in the order a consumer taking them one by one would handle them."""
    return sorted(messages, key=priority_class)  # sorted() is stable: FIFO within a class


class Mailbox:
    """The inbox of ``owner``. The wake-up event is set exactly while messages are queued,
    so ``wait`` returns at once when something is already waiting.

    Messages are kept in one queue per priority class, so ``take`` costs the same however
    many wait; a per-mailbox sequence number restores arrival order for ``drain``.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._classes: tuple[deque[tuple[int, Message]], ...] = (deque(), deque(), deque())
        self._seq = itertools.count()
        self._wake = asyncio.Event()

    def send(self, message: Message) -> None:
        """Queue ``message`` and wake the consumer. Never blocks."""
        self._classes[priority_class(message)].append((next(self._seq), message))
        self._wake.set()

    async def wait(self) -> None:
        """Return once at least one message is queued (at once if one already is)."""
        await self._wake.wait()

    def drain(self) -> list[Message]:
        """Remove and return every queued message, in arrival order."""
        out = self.peek()
        for queue in self._classes:
            queue.clear()
        self._wake.clear()
        return out

    def take(self) -> Message | None:
        """Remove and return the most urgent message (the one ``pick_priority`` picks); the
        others stay queued in their order. ``None`` when empty."""
        for queue in self._classes:
            if queue:
                _, message = queue.popleft()
                if not len(self):
                    self._wake.clear()
                return message
        return None

    def peek(self) -> list[Message]:
        """The queued messages in arrival order, without removing them."""
        if not any(self._classes):  # the lead's inbox, asked before every LLM call: mostly empty
            return []
        return [m for _, m in heapq.merge(*self._classes, key=lambda pair: pair[0])]

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._classes)

    def __repr__(self) -> str:
        return f"<Mailbox {self.owner} queued={len(self)}>"
