"""Teams (DESIGN.md §6): long-lived teammates that talk through mailboxes.

``Mailbox`` and ``pick_priority`` are the mechanism; ``protocol`` is the wire format; the
``TeamManager`` wires spawning, revival, the lead's inbox and ``send_message`` routing into
a harness (``Harness(teams=True)`` makes one as ``harness.teams``).

May import every layer up to ``subagents``; never the harness or the notebook.
"""

from .inbox import LeaderInbox, LeaderListener
from .mailbox import TEAM_LEAD, Mailbox, Message, MessageKind, by_priority, pick_priority, priority_class
from .manager import EventListener, TeamManager, TeamRoute
from .protocol import envelope, format_for_leader, format_prompt
from .registry import DEFAULT_TEAM, Member, Team, TeamRegistry, check_name
from .roster import MemberState, Roster, RosterMember, RosterStore
from .teammate import Teammate

__all__ = [
    "DEFAULT_TEAM",
    "TEAM_LEAD",
    "EventListener",
    "LeaderInbox",
    "LeaderListener",
    "Mailbox",
    "Member",
    "MemberState",
    "Message",
    "MessageKind",
    "Roster",
    "RosterMember",
    "RosterStore",
    "Team",
    "TeamManager",
    "TeamRegistry",
    "TeamRoute",
    "Teammate",
    "by_priority",
    "check_name",
    "envelope",
    "format_for_leader",
    "format_prompt",
    "pick_priority",
    "priority_class",
]
