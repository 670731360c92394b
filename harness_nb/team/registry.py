"""``TeamRegistry``: the teams of one harness and who is in them.

team name → members (name → roster record, mailbox, running loop). The main agent is the
reserved member ``team-lead`` of every team, with one mailbox; a team named ``default``
exists from the start, and ``team_create`` may rename it while it is still empty. Teammate
names are unique across the harness, because ``send_message`` addresses them by name alone.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..core import ToolError, UnknownNameError
from .mailbox import TEAM_LEAD, Mailbox
from .roster import MemberState, RosterMember

DEFAULT_TEAM = "default"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# a teammate called "bg-3" would shadow the background task of that id in send_message,
# and "main" is how the lead's own tool calls name their sender
_TASK_ID = re.compile(r"^(bg|fg|tm)-\d+$")
_RESERVED = frozenset({TEAM_LEAD, "main"})


def check_name(kind: str, name: str) -> str:
    """Return ``name`` if it can name a team or teammate (it becomes a file name), else
    raise ``ToolError`` saying what is allowed."""
    if not _NAME.match(name) or name.endswith("."):
        raise ToolError(
            f"{kind} name {name!r} is not allowed: use 1-64 letters, digits, '-', '_' or '.', "
            "starting with a letter or digit (e.g. 'analysis' or 'data-checker')"
        )
    if name in _RESERVED or _TASK_ID.match(name):
        raise ToolError(f"{kind} name {name!r} is reserved; choose another")
    return name


class Member:
    """A teammate: its roster ``record``, its ``mailbox`` and, while it runs, its loop task.

    ``changed()`` is called on every state change and wakes ``wait_until`` callers.
    """

    def __init__(self, record: RosterMember) -> None:
        self.record = record
        self.mailbox = Mailbox(record.name)
        self.task: asyncio.Task[None] | None = None
        self.reviving = False  # set while a revival loads the transcript, so messages queue
        self._changed = asyncio.Event()

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def team(self) -> str:
        return self.record.team

    @property
    def state(self) -> MemberState:
        return self.record.state

    @property
    def live(self) -> bool:
        """Whether its loop is running (or about to), so a message can go to its mailbox."""
        task = self.task
        if self.reviving:
            return True
        # a loop being cancelled is on its way out: a message now would never be read
        return task is not None and not task.done() and not task.cancelling() and self.state != "exited"

    def changed(self) -> None:
        """Wake everyone waiting in ``wait_until``."""
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def wait_until(self, predicate: Callable[[Member], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate(self)`` holds; ``False`` if ``timeout`` passes first."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate(self):
                    await self._changed.wait()
        except TimeoutError:
            return False
        return True

    def __repr__(self) -> str:
        return f"<Member {self.name} team={self.team} agent={self.record.agent} state={self.state}>"


@dataclass
class Team:
    """A named group of teammates (the lead belongs to every team)."""

    name: str
    members: dict[str, Member] = field(default_factory=dict)


class TeamRegistry:
    """Teams, members and the lead's mailbox of one harness."""

    def __init__(self) -> None:
        self.leader = Mailbox(TEAM_LEAD)
        self.teams: dict[str, Team] = {DEFAULT_TEAM: Team(DEFAULT_TEAM)}
        self.default = DEFAULT_TEAM

    def team(self, name: str) -> Team:
        """The team called ``name``; an unknown name raises an error listing the teams."""
        try:
            return self.teams[name]
        except KeyError:
            raise UnknownNameError("team", name, self.teams) from None

    def ensure(self, name: str) -> Team:
        """The team called ``name``, created when it does not exist yet."""
        if name not in self.teams:
            self.teams[check_name("team", name)] = Team(name)
        return self.teams[name]

    def rename(self, old: str, new: str) -> Team:
        """Rename an empty team (a team with members has files on disk under its name)."""
        team = self.team(old)
        if team.members:
            raise ToolError(f"team {old!r} already has teammates; it cannot be renamed")
        if new in self.teams:
            raise ToolError(f"a team called {new!r} already exists")
        del self.teams[old]
        team.name = check_name("team", new)
        self.teams[new] = team
        if self.default == old:
            self.default = new
        return team

    def add(self, member: Member) -> None:
        """Put ``member`` into its team (created if needed)."""
        if self.find(member.name) is not None:
            raise ToolError(f"a teammate called {member.name!r} already exists")
        self.ensure(member.team).members[member.name] = member

    def find(self, name: str) -> Member | None:
        """The member called ``name`` (or whose current task id is ``name``), in any team."""
        for team in self.teams.values():
            if name in team.members:
                return team.members[name]
        for member in self.members():
            if member.record.task_id == name:
                return member
        return None

    def members(self, team: str | None = None) -> list[Member]:
        """Members of ``team`` (every team when ``None``), in the order they joined."""
        teams = [self.team(team)] if team is not None else list(self.teams.values())
        return [m for t in teams for m in t.members.values()]

    def names(self) -> list[str]:
        """Every addressable name: ``team-lead`` and each teammate."""
        return [TEAM_LEAD, *(m.name for m in self.members())]
