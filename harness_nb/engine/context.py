"""A run's context: everything that belongs to one run, created when it starts and passed
down as a value — never left on a shared engine for the next run to find.

- ``RunContext`` is what ``AgentEngine.run`` is given: the provider (a per-run model
  override is just another provider here), the limits, the approval and ask channels, the
  usage account the run bills, the tools and hooks it offers and runs, and the ``Delegation``
  its subagents start under.
- ``UsageAccount`` is where usage is billed. An account has a parent: a run's account rolls
  up into the harness's total, a subagent's into the run that launched it. A background
  task that finishes after its launching run has ended still bills that run (and the
  total), never whichever run happens to be live.
- ``ParentContext`` is what a subagent inherits from the run that starts it: a small frozen
  value (provider, tools, hooks, limits, workdir, approval and ask channels, depth, usage
  account, price table, budget scope, delegation), handed to tools as ``ToolContext.parent``,
  instead of the whole parent engine.

Cost is part of ``Usage``: each call is priced from the run's ``prices`` when it is billed,
so costs roll up with the tokens (run → harness total, subagent → launching run).

Overlapping runs (a background task outliving its launcher, a teammate, a second cell)
each hold their own context, so none can see another's provider, channel or account. The
registries a context holds are never changed once handed out (a harness makes new ones when
its settings change), so a background task queued behind others starts with the tools,
hooks and delegation of the run that launched it, not those in force when its turn comes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..core import PriceTable, Usage
from ..core.price import DEFAULT_PRICES
from ..providers.base import Provider
from ..tools import ToolRegistry
from .ask import AskChannel
from .compaction.keeper import CompactionPolicy
from .hook import ApprovalChannel, HookRegistry
from .limits import Limits, ToolSlots

if TYPE_CHECKING:
    from .budget import BudgetScope

BackgroundApprovals = Literal["deny", "ask"]


@dataclass(frozen=True, slots=True)
class Delegation:
    """How the subagents a run starts are set up, fixed with the run: ``budget_usd`` caps
    each subagent run (so do its definition's ``max_budget_usd`` and what its parent has
    left); ``background_approvals`` says whether a background subagent's call that asks goes
    to the launching run's approval channel (``"ask"``) or is denied (``"deny"``);
    ``allow_bypass_permissions`` whether an agent file's ``permissionMode:
    bypassPermissions`` takes effect."""

    budget_usd: float | None = None
    background_approvals: BackgroundApprovals = "deny"
    allow_bypass_permissions: bool = False


class UsageAccount:
    """The usage billed to one run (or task): its own LLM calls and everything credited by
    its children. ``credit`` adds to this account and to every ancestor, so a harness's
    total account sees every call exactly once."""

    __slots__ = ("usage", "parent")

    def __init__(self, parent: UsageAccount | None = None) -> None:
        self.usage = Usage()
        self.parent = parent

    def credit(
        self, usage: Usage, *, turns: int = 0, tool_calls: int = 0, charge: tuple[float | None, int] | None = None
    ) -> None:
        """Bill ``usage`` (plus ``turns`` LLM calls and ``tool_calls``; priced by ``charge``
        when it carries no cost: see ``Usage.add``) here and up the chain of parents."""
        account: UsageAccount | None = self
        while account is not None:
            account.usage.add(usage, turns=turns, tool_calls=tool_calls, charge=charge)
            account = account.parent

    def child(self) -> UsageAccount:
        """A new account that rolls up into this one (for a subagent's run)."""
        return UsageAccount(self)

    def snapshot(self) -> Usage:
        """A copy of the usage so far (events and results carry snapshots, not the account)."""
        return self.usage.model_copy()

    def __repr__(self) -> str:
        return f"<UsageAccount {self.usage.summary()}>"


@dataclass(frozen=True, slots=True)
class RunContext:
    """What one run of an engine uses: ``provider``, ``limits``, ``approval`` (``None``:
    asked calls are denied, fail closed), ``account`` (the usage account it bills),
    ``compaction`` (when and how its conversation is compacted to fit the context window),
    ``prices`` (what its calls cost), ``parent_budget``, the budget scope of the run that
    launched it (a subagent is held to its parent's budgets too), and ``tool_slots``, the
    slots its tool calls take turns for (given: its parent's, which a subagent shares;
    ``None``: its own, ``limits.max_parallel_tool_calls`` of them). ``tools`` and ``hooks``
    are what the run offers and runs (``None``: its engine's); ``delegation`` how the
    subagents it starts are set up; ``ask`` the channel ``ask_person`` asks through
    (``None``: no one can answer, and the tool is not offered; see ``ask.py``)."""

    provider: Provider
    limits: Limits = field(default_factory=Limits)
    approval: ApprovalChannel | None = None
    account: UsageAccount = field(default_factory=UsageAccount)
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    prices: PriceTable = DEFAULT_PRICES
    parent_budget: BudgetScope | None = None
    tool_slots: ToolSlots | None = None
    tools: ToolRegistry | None = None
    hooks: HookRegistry | None = None
    delegation: Delegation = Delegation()
    ask: AskChannel | None = None

    def __post_init__(self) -> None:
        if self.tool_slots is None:  # set once, so a copy made with replace() shares them
            object.__setattr__(self, "tool_slots", ToolSlots(self.limits.max_parallel_tool_calls))


@dataclass(frozen=True, slots=True)
class ParentContext:
    """What a subagent inherits from the run that starts it.

    ``session_id`` and ``transcript`` name the parent's conversation, so a child's transcript
    is written beside it (``<session>.<task id>.jsonl``). ``account`` is the launching run's
    usage account: a child bills it, also when the child finishes after the run has ended.
    ``compaction`` is the parent run's policy: a child's conversation compacts the same way.
    ``budget`` is the launching run's budget scope: a child's budget is clamped to what it
    has left, and every call of the child is checked against it too. ``tool_slots`` are the
    launching run's: a child's tool calls take turns for them with its parent's.
    ``delegation``: how the launching run's subagents are set up (its children's own
    children too). ``ask``: the launching run's ask channel, which the runner passes on
    to a child or not (``SubagentRunner``).
    """

    provider: Provider
    tools: ToolRegistry
    hooks: HookRegistry
    limits: Limits
    workdir: Path
    approval: ApprovalChannel | None
    account: UsageAccount
    depth: int = 0
    agent: str = "main"
    session_id: str = ""
    transcript: Path | None = None
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    prices: PriceTable = DEFAULT_PRICES
    budget: BudgetScope | None = None
    tool_slots: ToolSlots | None = None
    delegation: Delegation = Delegation()
    ask: AskChannel | None = None

    def remaining_usd(self) -> float | None:
        """USD the launching run (and every run enclosing it) has left; ``None``: no USD
        budget."""
        return self.budget.remaining_usd() if self.budget is not None else None

    def remaining_tokens(self) -> int | None:
        """Tokens the launching run (and every run enclosing it) has left; ``None``: no token
        budget."""
        return self.budget.remaining_tokens() if self.budget is not None else None
