"""``RunSettings``: the settings every run of a harness starts from, as one checked value.

    from harness_nb import Harness, RunSettings
    h = Harness(model="openai/gpt-4o-mini", max_turns=10)          # keywords, or
    h = Harness(settings=RunSettings(model="openai/gpt-4o-mini", max_turns=10))
    h.configure(budget_usd=0.50)                                   # one change, or
    h.apply(h.settings.changed(budget_usd=0.50, approval_policy="always"))

A harness has two kinds of settings. What it is built from (the workdir, the sandbox, the
agent folders, tool objects, hooks) stays for its life. What a run starts from — the model,
the approval policy and permission rules, the limits and budgets, prices, provider options
(``context_window`` and ``replay_pace`` among them, also as settings of their own),
compaction, the tool names offered — is a ``RunSettings``: ``Harness.settings`` is the one
in force, and ``configure`` / ``apply`` replace it for the runs that start from then on
(runs and background tasks already under way keep the context they started with).

A ``RunSettings`` is checked when it is made: an impossible limit, an unknown policy, a bad
permission rule, price or provider option is a ``ConfigError`` naming it, so a value that
exists can always be applied (only the tool names are checked by the harness, against its
tools). The notebook builds one from its ``HarnessNB`` settings for every cell and hands it
over whole, whether it builds a new harness or keeps the one it has.

``model=""`` is no model and ``tools=()`` every tool. ``changed(**changes)`` ignores a
change that is ``None`` (no change) and reads a budget or ``context_window`` of ``0`` as
"none" / the model's own window (where ``RunSettings(budget_usd=0)`` is refused: a budget of
nothing is more likely a mistake than a wish).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from .core import ConfigError, PriceTable
from .engine import CompactionPolicy, Limits
from .engine.limits import require_positive
from .permissions.mode import POLICIES
from .permissions.rule import parse_rules
from .providers.options import ProviderOptions, ReplayPace
from .subagents import BackgroundApprovals

__all__ = ["ApprovalPolicy", "RunSettings"]

ApprovalPolicy = Literal["allowlist", "dangerous", "always", "never"]

_BACKGROUND_APPROVALS = ("deny", "ask")
_ZERO_MEANS_NONE = ("token_budget", "budget_usd", "subagent_budget_usd", "context_window")


@dataclass(frozen=True)
class RunSettings:
    """The settings a run starts from (see the module doc). Checked when made; the checked
    forms the harness uses are ``limits``, ``price_table`` and ``options``."""

    model: str | None = None
    """``provider/model``; ``None`` (or ``""``): not configured."""
    approval_policy: ApprovalPolicy = "allowlist"
    allow: tuple[str, ...] = ()
    """Permission rules that let calls run without asking (``Bash(git status:*)``)."""
    deny: tuple[str, ...] = ()
    background_approvals: BackgroundApprovals = "deny"
    allow_bypass_permissions: bool = False
    """Whether an agent file's ``permissionMode: bypassPermissions`` takes effect."""
    max_turns: int = 50
    token_budget: int | None = None
    budget_usd: float | None = None
    subagent_budget_usd: float | None = None
    wall_time: float | None = None
    tool_timeout: float = 60.0
    max_parallel_tool_calls: int = 8
    """Most tool calls of a run (its subagents' included) executing at once; the others
    wait their turn in call order."""
    prices: Mapping[str, Any] | None = None
    """Prices added to the built-in table, in USD per million tokens."""
    provider_options: Mapping[str, Any] | ProviderOptions | None = None
    context_window: int | None = None
    replay_pace: ReplayPace | None = None
    """How fast a ``replay/`` model streams (``"instant"``, ``"recorded"``, a speed factor);
    ``None``: the provider option's, else instant."""
    compact_threshold: float = 0.8
    tools: tuple[str, ...] | None = None
    """Names of the tools offered to the main agent; ``None``: every tool."""

    limits: Limits = field(init=False, repr=False, compare=False)
    price_table: PriceTable = field(init=False, repr=False, compare=False)
    options: ProviderOptions = field(init=False, repr=False, compare=False)
    """``provider_options`` with ``context_window`` and ``replay_pace`` folded in, validated."""

    def __post_init__(self) -> None:
        def set_(name: str, value: Any) -> None:  # frozen: normalised in place, once
            object.__setattr__(self, name, value)

        set_("model", self.model or None)
        set_("prices", self.prices or None)  # {} and None both add no price: one value
        set_("provider_options", self.provider_options or None)
        set_("allow", _names("allow", self.allow))
        set_("deny", _names("deny", self.deny))
        set_("tools", _names("tools", self.tools) or None if self.tools is not None else None)
        if self.approval_policy not in POLICIES:
            raise ConfigError(
                f"approval_policy must be one of {', '.join(map(repr, POLICIES))}, not {self.approval_policy!r}"
            )
        if self.background_approvals not in _BACKGROUND_APPROVALS:
            raise ConfigError(f"background_approvals must be 'deny' or 'ask', not {self.background_approvals!r}")
        parse_rules(self.allow, "allow")
        parse_rules(self.deny, "deny")
        require_positive("subagent_budget_usd", self.subagent_budget_usd, optional=True)
        require_positive("context_window", self.context_window, whole=True, optional=True)
        CompactionPolicy(threshold=self.compact_threshold)
        set_(
            "limits",
            Limits(
                max_turns=self.max_turns,
                token_budget=self.token_budget,
                budget_usd=self.budget_usd,
                wall_time=self.wall_time,
                tool_timeout=self.tool_timeout,
                max_parallel_tool_calls=self.max_parallel_tool_calls,
            ),
        )
        set_("price_table", PriceTable.of(self.prices))
        own: dict[str, Any] = {"context_window": self.context_window} if self.context_window else {}
        if self.replay_pace is not None:
            own["replay_pace"] = self.replay_pace
        set_("options", ProviderOptions.of(self.provider_options, **own))

    def changed(self, **changes: Any) -> RunSettings:
        """These settings with ``changes`` made (a change of ``None`` is no change; the
        conventions of the module doc apply). ``ConfigError`` for a name that is no setting,
        or a value that cannot be one (nothing is changed then)."""
        known = {f.name for f in fields(self) if f.init}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(f"no such run setting: {', '.join(unknown)}; the settings are {', '.join(sorted(known))}")
        made = {name: value for name, value in changes.items() if value is not None}
        for name in _ZERO_MEANS_NONE:
            if name in made and made[name] == 0 and not isinstance(made[name], bool):
                made[name] = None
        return replace(self, **made)

    def compaction(self, offload_dir: Path) -> CompactionPolicy:
        """The compaction policy of these settings, keeping cleared results in ``offload_dir``."""
        return CompactionPolicy(threshold=self.compact_threshold, offload_dir=offload_dir)


def _names(what: str, names: Iterable[str] | None) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str):
        raise ConfigError(f"{what} is a list of names, e.g. [{names!r}], not one string")
    return tuple(names)
