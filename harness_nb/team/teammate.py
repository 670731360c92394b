"""The teammate loop: run a turn, report to the lead, sleep on the mailbox, repeat.

A teammate is an ordinary isolated ``AgentEngine`` whose session lives as long as the
teammate, so each turn sees every earlier one. Between turns it is ``idle``: its last text
has gone to the lead as an idle notification and it waits on its mailbox (no polling). The
most urgent waiting message becomes the next prompt; the others stay queued for the turns
after. Only a shutdown request (answered with a shutdown response) or cancellation ends it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from ..core import Event
from ..engine import AgentEngine, RunContext
from ..subagents import TaskEntry, TaskTracker, progress_line
from .mailbox import TEAM_LEAD, Message
from .protocol import format_prompt
from .registry import Member
from .roster import MemberState

log = logging.getLogger("harness_nb.team")

SHUT_DOWN = "shut down on request"


class Teammate:
    """Runs ``member``'s loop on ``engine``, every turn in ``context`` (its provider, limits
    and approval channel; each turn bills a fresh child of ``context.account``, the
    teammate's account). ``deliver`` posts a message to another member's mailbox (the lead's
    included); ``on_change`` is told whenever the member's record changed (to persist it);
    ``on_event`` sees every engine event with the member's name."""

    def __init__(
        self,
        member: Member,
        engine: AgentEngine,
        context: RunContext,
        *,
        entry: TaskEntry,
        tracker: TaskTracker,
        deliver: Callable[[Message], None],
        on_change: Callable[[Member], None],
        on_event: Callable[[str, Event], None],
    ) -> None:
        self.member = member
        self.engine = engine
        self.context = context
        self.entry = entry
        self.tracker = tracker
        self._deliver = deliver
        self._on_change = on_change
        self._on_event = on_event

    async def run(self, prompt: str) -> None:
        """The loop; returns after the shutdown handshake, re-raises cancellation."""
        try:
            while True:
                text = await self._turn(prompt)
                self._set_state("idle", f"idle: {_brief(text)}")
                self._deliver(Message(self.member.name, "idle_notification", text, to=TEAM_LEAD))
                await self.member.mailbox.wait()
                message = self.member.mailbox.take()
                if message is None:  # pragma: no cover - wait() returns only when non-empty
                    continue
                if message.kind == "shutdown_request":
                    self._shut_down(message)
                    return
                prompt = format_prompt(message)
        except asyncio.CancelledError:
            self.tracker.cancel(self.entry.id)
            raise
        except Exception as exc:  # a bug in the loop itself: turn errors are caught below
            log.exception("teammate %s crashed", self.member.name)
            self.tracker.finish(self.entry.id, f"{type(exc).__name__}: {exc}", failed=True)
        finally:
            self._exited()

    async def _turn(self, prompt: str) -> str:
        """One engine run. A failing turn (the model unreachable, say) is reported as the
        turn's text instead of ending the teammate: the lead decides what happens next."""
        self._set_state("working", f"working: {_brief(prompt)}")
        record = self.member.record
        turn = dataclasses.replace(self.context, account=self.context.account.child())
        try:
            result = await self.engine.run(prompt, on_event=self._event, context=turn)
        except Exception as exc:
            log.warning("teammate %s: turn failed: %s", self.member.name, exc)
            text = f"error: this turn failed: {type(exc).__name__}: {exc}"
        else:
            text = result.final_text
        record.usage.add(turn.account.usage)
        record.turns += 1
        record.last_message = text
        return text

    def _shut_down(self, request: Message) -> None:
        name = self.member.name
        self._deliver(Message(name, "shutdown_response", f"{name} has shut down.", to=request.sender))
        self.tracker.finish(self.entry.id, SHUT_DOWN)

    def _set_state(self, state: MemberState, line: str) -> None:
        self.member.record.state = state
        self.entry.member_state = state
        self.tracker.log(self.entry.id, line)  # also tells the tracker's listeners
        self._on_change(self.member)

    def _exited(self) -> None:
        self.engine.session.close()
        # a revival may already have replaced this loop: then the member is not ours to touch
        if self.member.task is not None and self.member.task is not asyncio.current_task():
            return
        self.member.record.state = "exited"
        self.entry.member_state = "exited"
        self._on_change(self.member)

    def _event(self, event: Event) -> None:
        line = progress_line(event)
        if line is not None:
            self.tracker.log(self.entry.id, line)
        self._on_event(self.member.name, event)


def _brief(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
