"""``TeamManager``: spawns, messages, revives and shuts down the teammates of one harness.

It is the seed's harness wiring in one place: the spawner (``spawn``, and ``spawn_from_task``
behind the ``task`` tool's team mode), the waker (a message to a teammate that has exited
revives it from its roster entry and transcript, the message being its next prompt), the
lead's inbox (``inbox``: an engine injector plus live listeners) and ``route``, which lets
the harness's ``send_message`` reach mailboxes by name.

Public API for the notebook layer: ``roster``, ``message_log``, ``send``, ``shutdown``,
``spawn``, ``wait_idle``, ``on_leader_message``, ``on_message``, ``on_event``, ``aclose``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core import Event, HarnessError, ToolError, UnknownNameError, run_blocking
from ..core import Message as ChatMessage
from ..engine import MemorySession, ParentContext
from ..engine.resume import repair_history
from ..engine.session import load_transcript
from ..subagents import AgentRegistry, SubAgentDefinition, SubagentRunner, TaskParams, TaskTracker
from ..tools import Tool, ToolContext
from .inbox import LeaderInbox, LeaderListener
from .mailbox import TEAM_LEAD, Message
from .protocol import format_prompt, started, teammate_system_prompt
from .registry import DEFAULT_TEAM, Member, TeamRegistry, check_name
from .roster import RosterMember, RosterStore, new_owner
from .teammate import Teammate
from .tool import team_create_tool, teammate_send_message

log = logging.getLogger("harness_nb.team")

EventListener = Callable[[str, Event], Any]


class TeamManager:
    """The teams of one harness. Teammates are children of the run that spawns them (the
    ``task`` tool's ``ToolContext.parent``); ``lead`` returns the context of the main agent
    as it is configured now, for teammates spawned or revived from outside a run (``%team``,
    a message to an exited teammate)."""

    def __init__(
        self,
        folder: Path,
        *,
        agents: AgentRegistry,
        runner: SubagentRunner,
        tracker: TaskTracker,
        lead: Callable[[], ParentContext],
        log_limit: int = 500,
    ) -> None:
        self.store = RosterStore(folder)
        self.agents = agents
        self.runner = runner
        self.tracker = tracker
        self.lead = lead
        self.registry = TeamRegistry()
        self.inbox = LeaderInbox(self.registry.leader)
        self.message_log: deque[Message] = deque(maxlen=log_limit)
        self.on_event: list[EventListener] = []
        self.on_message: list[Callable[[Message], object]] = []  # every message, as it is logged
        self.route = TeamRoute(self)
        self._closed = False
        self.owner = new_owner()  # marks, in the shared rosters, the teammates this manager runs
        self._load()

    @property
    def on_leader_message(self) -> list[LeaderListener]:
        """Callbacks ``(Message) -> Any`` told about every message for ``team-lead``."""
        return self.inbox.listeners

    def injector(self) -> list[str]:
        """Messages for the lead, formatted, for the main agent's next LLM call (once each)."""
        return self.inbox.texts()

    def tools(self) -> list[Tool]:
        """The lead's team-management tools."""
        return [team_create_tool(self)]

    # -- looking ------------------------------------------------------------------------

    def member(self, name: str) -> Member:
        """The teammate called ``name`` (or with that task id); unknown names list the valid ones."""
        member = self.registry.find(name)
        if member is None:
            raise UnknownNameError("teammate", name, [m.name for m in self.registry.members()])
        return member

    def roster(self, team: str | None = None) -> list[RosterMember]:
        """A snapshot of every teammate (of ``team``, or of all teams): name, team, agent,
        state, last message, turns, usage (``.tokens``)."""
        return [m.record.model_copy(deep=True) for m in self.registry.members(team)]

    async def wait_idle(self, name: str, *, turns: int | None = None, timeout: float | None = None) -> RosterMember:
        """Wait until teammate ``name`` is not working (idle or exited) and, with ``turns``,
        has finished at least that many turns. Raises ``TimeoutError`` after ``timeout``."""
        member = self.member(name)

        def ready(m: Member) -> bool:
            return m.state != "working" and not m.reviving and (turns is None or m.record.turns >= turns)

        if not await member.wait_until(ready, timeout):
            raise TimeoutError(f"teammate {member.name} still {member.state} after {timeout} s")
        return member.record.model_copy(deep=True)

    # -- teams --------------------------------------------------------------------------

    def create_team(self, name: str) -> str:
        """``team_create``: rename the default team while it is still empty and unnamed,
        otherwise create ``name``. Returns a sentence for the model."""
        if name in self.registry.teams:
            return f"team {name!r} already exists; add teammates with task(team_name={name!r}, ...)"
        default = self.registry.team(self.registry.default)
        if default.name == DEFAULT_TEAM and not default.members:
            self.registry.rename(DEFAULT_TEAM, name)
            how = f"the empty default team is now called {name!r}"
        else:
            self.registry.ensure(name)
            how = f"created team {name!r}"
        self._save(name)
        return f"{how}; add teammates with task(team_name={name!r}, subagent_type=..., prompt=..., name=...)"

    # -- spawning and reviving ----------------------------------------------------------

    async def spawn(
        self,
        agent: str | SubAgentDefinition,
        prompt: str,
        *,
        team: str | None = None,
        name: str | None = None,
        description: str = "",
        parent: ParentContext | None = None,
    ) -> Member:
        """Start a teammate running ``agent`` on ``prompt`` and return at once. ``name``
        defaults to the agent's name; either is made unique (``reader-2``). ``parent`` is
        the run it is a child of (and bills): the lead's current context when ``None``."""
        definition = agent if isinstance(agent, SubAgentDefinition) else self.agents.get(agent)
        team_name = check_name("team", team or self.registry.default)
        wanted = check_name("teammate", name or definition.name)
        member_name = await run_blocking(self.store.claim, team_name, wanted, self.registry.names())
        record = RosterMember(
            name=member_name, team=team_name, agent=definition.name, task_id="", prompt=prompt, owner=self.owner
        )
        member = Member(record)
        path = self.store.transcript_path(team_name, member_name)
        session = MemorySession(f"team.{team_name}.{member_name}", transcript=path)
        first = Message(TEAM_LEAD, "message", prompt, to=member_name)
        self._start(member, definition, format_prompt(first), session, parent or self.lead(), description)
        self._log(first)
        self.registry.add(member)
        self._save(team_name)
        return member

    async def spawn_from_task(self, definition: SubAgentDefinition, params: TaskParams, ctx: ToolContext) -> str:
        """The ``task`` tool's team mode (``TaskTool.team_spawner``)."""
        member = await self.spawn(
            definition,
            params.prompt or "",
            team=params.team_name,
            name=params.name,
            description=params.description,
            parent=ctx.parent,
        )
        return started(member.record.task_id, member.name, member.team)

    async def _revive(self, member: Member, message: Message) -> None:
        """Start an exited teammate again on its recorded history, with ``message`` next."""
        member.reviving = True  # from here on, other messages queue in its mailbox
        try:
            try:
                definition = self.agents.get(member.record.agent)
            except UnknownNameError as exc:
                raise ToolError(f"cannot revive {member.name}: {exc}") from None
            elsewhere = await run_blocking(self.store.running_elsewhere, member.team, member.name, self.owner)
            if elsewhere is not None:
                raise ToolError(
                    f"{member.name} is running in another kernel (pid {elsewhere.partition(':')[0]}) on this "
                    "workdir; message it from there, or shut it down there first"
                )
            member.record.owner = self.owner
            path = self.store.transcript_path(member.team, member.name)
            history = await run_blocking(_read_history, path)
            session = MemorySession(f"team.{member.team}.{member.name}", transcript=path)
            session.messages = history
            self._start(member, definition, format_prompt(message), session, self.lead())
        finally:
            member.reviving = False
        self._save(member.team)

    def _start(
        self,
        member: Member,
        definition: SubAgentDefinition,
        prompt: str,
        session: MemorySession,
        parent: ParentContext,
        description: str = "",
    ) -> None:
        """Build the teammate's engine, register its task entry and start its loop."""
        if self._closed:  # a revival that was loading its transcript while the harness closed
            raise HarnessError("the harness is closed; teammates cannot start")
        team_definition = definition.model_copy(
            update={"system_prompt": teammate_system_prompt(definition.system_prompt, name=member.name, team=member.team)}
        )
        task_id = self._new_task_id()
        child = self.runner.build(
            team_definition,
            parent,
            task_id=task_id,
            background=True,
            session=session,
            extra_tools=[teammate_send_message(self, member.name)],
            agent=member.name,  # its identity in events, transcripts and scripted models
        )
        entry = self.tracker.start(
            "teammate",
            definition.name,
            prompt,
            description=description or f"{member.name} (team {member.team})",
            task_id=task_id,
        )
        entry.delivered = True  # it reports through the lead's mailbox, never as a completion
        entry.usage = child.context.account.usage
        entry.team, entry.member, entry.member_state = member.team, member.name, "working"
        member.record.task_id = task_id
        member.record.state = "working"
        loop = Teammate(
            member,
            child.engine,
            child.context,
            entry=entry,
            tracker=self.tracker,
            deliver=self._post,
            on_change=self._changed,
            on_event=self._event,
        )
        task = asyncio.get_running_loop().create_task(
            loop.run(prompt), name=f"teammate:{member.team}:{member.name}:{task_id}"
        )
        member.task = entry.task = task

    def _new_task_id(self) -> str:
        # ids from an earlier kernel live on in the rosters: never hand one out twice
        taken = {m.record.task_id for m in self.registry.members()}
        while True:
            task_id = self.tracker.next_id("tm")
            if task_id not in taken and self.tracker.find(task_id) is None:
                return task_id

    # -- messages -----------------------------------------------------------------------

    async def send(self, to: str, text: str, *, sender: str = TEAM_LEAD) -> str:
        """Deliver ``text`` from ``sender`` to ``to`` (``team-lead``, a teammate's name or
        task id) and return a receipt. A teammate that has exited is revived with the
        message as its next prompt. Teammates may write to the lead and their own team."""
        if sender != TEAM_LEAD:
            self.member(sender)
        if to == TEAM_LEAD:
            if sender == TEAM_LEAD:
                raise ToolError("you are team-lead: send messages to a teammate by name")
            self._post(Message(sender, "message", text, to=TEAM_LEAD))
            return f"delivered to {TEAM_LEAD}; it reads it at its next turn"
        member = self.registry.find(to)
        valid = self._recipients(sender)
        if member is None or member.name not in valid:
            raise UnknownNameError("recipient", to, valid)
        message = Message(sender, "message", text, to=member.name)
        if member.live:
            self._post(message)
            when = "now" if member.state == "idle" else "when its current turn ends"
            return f"delivered to {member.name} ({member.state}); it reads it {when}"
        self._log(message)
        await self._revive(member, message)
        return f"{member.name} had exited: revived it as {member.record.task_id} with your message as its next prompt"

    async def shutdown(self, name: str, *, wait: bool = False, timeout: float | None = None) -> str:
        """Ask teammate ``name`` to shut down; it answers and exits when its current turn
        ends. With ``wait``, return only once it has exited (or ``timeout`` passed)."""
        member = self.member(name)
        if not member.live:
            return f"{member.name} is not running ({member.state})"
        self._post(Message(TEAM_LEAD, "shutdown_request", "Please shut down.", to=member.name))
        if wait:
            await member.wait_until(lambda m: not m.live, timeout)
            if not member.live:
                return f"{member.name} has shut down (its roster entry and transcript are kept)"
        return f"shutdown requested for {member.name}; it answers when its current turn ends"

    def _recipients(self, sender: str) -> list[str]:
        if sender == TEAM_LEAD:
            return [m.name for m in self.registry.members()]
        team = self.member(sender).team
        return [TEAM_LEAD, *(m.name for m in self.registry.members(team) if m.name != sender)]

    def _post(self, message: Message) -> None:
        """Put ``message`` into its recipient's mailbox (the lead's goes through the inbox)."""
        self._log(message)
        if message.to == TEAM_LEAD:
            self.inbox.deliver(message)
            return
        member = self.registry.find(message.to)
        if member is None:
            log.warning("message %d for unknown %r dropped", message.id, message.to)
            return
        member.mailbox.send(message)

    # -- bookkeeping --------------------------------------------------------------------

    def _log(self, message: Message) -> None:
        """Keep ``message`` in the log and tell ``on_message`` listeners (a view)."""
        self.message_log.append(message)
        for listener in list(self.on_message):
            try:
                listener(message)
            except Exception:
                log.exception("team message listener failed")

    def _changed(self, member: Member) -> None:
        self._save(member.team)
        member.changed()

    def _save(self, team: str) -> None:
        # only the members this process runs (spawned or revived here): the roster keeps
        # other kernels' members as they wrote them
        mine = [m.record for m in self.registry.members(team) if m.record.owner == self.owner]
        try:
            self.store.save(team, mine)
        except OSError:  # a full disk must not kill a teammate; the next change retries
            log.exception("cannot write the roster of team %s", team)

    def _event(self, name: str, event: Event) -> None:
        for listener in list(self.on_event):
            try:
                listener(name, event)
            except Exception:
                log.exception("team event listener failed")

    def _load(self) -> None:
        """Teams and teammates recorded by earlier kernels, all ``exited`` (revivable)."""
        for roster in self.store.load_all():
            try:
                team = self.registry.ensure(roster.team)
            except HarnessError as exc:
                log.warning("team folder %r skipped: %s", roster.team, exc)
                continue
            for record in roster.members:
                if self.registry.find(record.name) is not None:
                    log.warning("teammate %r of team %s skipped: the name is taken", record.name, roster.team)
                    continue
                record.state = "exited"
                team.members[record.name] = Member(record)

    async def aclose(self) -> None:
        """Cancel every running teammate and wait for its loop to end."""
        self._closed = True
        tasks = []
        for member in self.registry.members():
            task = member.task
            if task is None or task.done():
                continue
            self.tracker.cancel(member.record.task_id)
            task.cancel()  # also when its entry had ended already (shut down, not yet out)
            tasks.append(task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class TeamRoute:
    """``send_message`` route to ``team-lead`` and the teammates, by name or task id."""

    def __init__(self, manager: TeamManager) -> None:
        self.manager = manager

    def names(self) -> list[str]:
        return self.manager.registry.names()

    async def deliver(self, to: str, message: str, sender: str) -> str | None:
        registry = self.manager.registry
        if to != TEAM_LEAD and registry.find(to) is None:
            return None
        # the lead's engine calls itself "main"; teammates have their own send_message
        who = sender if registry.find(sender) is not None else TEAM_LEAD
        return await self.manager.send(to, message, sender=who)


def _read_history(path: Path) -> list[ChatMessage]:
    """A teammate's history from its transcript, repaired: a turn cut short by a crash left
    tool calls without results, which a real API rejects."""
    if not path.is_file():
        return []
    history, _ = repair_history(load_transcript(path))
    return history
