"""Budgets, checked before each model call, so that the call that would exceed one is never
made.

A run may have a budget in USD (``Limits.budget_usd``) and in tokens
(``Limits.token_budget``: every token the model reads or writes, cached parts of the
prompt included). Its ``BudgetScope`` holds it to its own budgets — against its usage
account, which its subagents bill too — and to those of every run enclosing it (a
subagent's scope has its launching run's as ``parent``). Before each call the engine
estimates the call (``CallEstimate``) and reserves it in every scope of the chain; a
scope whose spending, plus what other calls have reserved, plus this estimate would pass
its budget stops the run with ``LimitExceededError`` instead (``budget_usd`` or
``token_budget``). The reservation ends when the answer is billed, so subagents running
in parallel cannot together spend past their parent's budget.

What the estimate of a call counts:

- **Prompt tokens**: the context meter's figure (``meter.py``), the one compaction uses:
  the prompt tokens the conversation's previous call reported (input, cache read and
  cache write) plus the messages added since, at the provider's calibrated characters
  per token; without a previous call, the whole request so estimated.
- **Output tokens**: the ``max_tokens`` the provider sends (Anthropic always sends one,
  8192 unless set); for a provider that sends none, the largest answer of the
  conversation so far. An answer can be that long, so a budget keeps room for it.
- **Cost**, from the run's price table: when the previous call used the prompt cache and
  the history it sent is still there unchanged (not compacted), its prompt is priced as a
  cache read; the rest as a cache write for a provider that writes the cache
  (Anthropic), else at the input price; the output at the output price. So the estimate
  assumes the cache still holds what the previous call read or wrote (the APIs keep it
  five minutes).

A budget in USD on a model without a price cannot be kept: such a run stops before its
first call and says how to add the price.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from ..core import BudgetWarning, LimitExceededError, Message, Price, Usage
from ..core.usage import usd
from .context import UsageAccount
from .limits import Limits

__all__ = ["WARN_AT", "BudgetScope", "CallEstimate", "PromptTally"]

WARN_AT = 0.8
"""The share of a budget at which a run emits ``BudgetWarning``."""


@dataclass(frozen=True, slots=True)
class CallEstimate:
    """What one model call is expected to use at most: ``prompt_tokens`` (of which
    ``cached_tokens`` are expected to be read from the prompt cache), ``output_tokens``;
    ``cache_writes`` says the provider writes the rest of the prompt to its cache."""

    prompt_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cache_writes: bool = False

    @property
    def tokens(self) -> int:
        """Prompt and output tokens (what a token budget counts)."""
        return self.prompt_tokens + self.output_tokens

    def cost(self, price: Price) -> float:
        """The estimated USD cost at ``price`` (see the module doc)."""
        fresh = self.prompt_tokens - self.cached_tokens
        fresh_price = price.cache_write if self.cache_writes else price.input
        return (
            self.cached_tokens * price.cache_read + fresh * fresh_price + self.output_tokens * price.output
        ) / 1_000_000


class PromptTally:
    """What a call's estimate adds to the context meter's prompt size, for one
    conversation: how much of the prompt the provider's cache likely holds — the previous
    prompt, when that call used the cache and the messages it sent are all still there,
    the same objects (compaction replaces them) — and the largest answer so far, the
    output allowance of a provider that sends no ``max_tokens``."""

    __slots__ = ("_sent", "_cached", "_largest_output")

    def __init__(self) -> None:
        self._sent: list[Message] = []
        self._cached = 0
        self._largest_output = 0

    def estimate(
        self, messages: Sequence[Message], prompt_tokens: int, *, output_limit: int | None, cache_writes: bool
    ) -> CallEstimate:
        """The estimate of a call sending ``messages``, which the meter puts at
        ``prompt_tokens`` (see the module doc)."""
        output = output_limit if output_limit is not None else self._largest_output
        cached = 0
        sent = self._sent
        if self._cached and len(messages) >= len(sent) and all(map(operator.is_, messages, sent)):
            cached = min(self._cached, prompt_tokens)
        return CallEstimate(prompt_tokens, output, cached, cache_writes)

    def observe(self, sent: Sequence[Message], usage: Usage) -> None:
        """Note the answer to a request of the messages ``sent``, which used ``usage``."""
        self._sent = list(sent)
        cache_used = not usage.unreported_calls and usage.cache_read_tokens + usage.cache_write_tokens > 0
        self._cached = usage.prompt_tokens if cache_used else 0
        self._largest_output = max(self._largest_output, usage.output_tokens)


class BudgetScope:
    """The budgets one run is held to: its own ``limits`` against its ``account``, and its
    ``parent``'s (the scope of the run that launched it) — see the module doc."""

    def __init__(self, limits: Limits, account: UsageAccount, *, agent: str = "main", parent: BudgetScope | None = None) -> None:
        self.limits = limits
        self.account = account
        self.agent = agent
        self.parent = parent
        self.reserved_usd = 0.0
        self.reserved_tokens = 0
        self._warned: set[str] = set()
        own = limits.budget_usd is not None or limits.token_budget is not None
        # any budget in the chain; without one no call is estimated at all
        self.active: bool = own or (parent is not None and parent.active)

    def chain(self) -> Iterator[BudgetScope]:
        """This scope and every enclosing one, innermost first."""
        scope: BudgetScope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    @property
    def spent_usd(self) -> float:
        return self.account.usage.cost or 0.0

    @property
    def spent_tokens(self) -> int:
        return self.account.usage.total_tokens

    def remaining_usd(self) -> float | None:
        """USD left before the tightest budget of the chain (``None``: no USD budget)."""
        left = [
            s.limits.budget_usd - s.spent_usd - s.reserved_usd for s in self.chain() if s.limits.budget_usd is not None
        ]
        return min(left) if left else None

    def remaining_tokens(self) -> int | None:
        """Tokens left before the tightest token budget of the chain (``None``: none)."""
        left = [
            s.limits.token_budget - s.spent_tokens - s.reserved_tokens
            for s in self.chain()
            if s.limits.token_budget is not None
        ]
        return min(left) if left else None

    @contextlib.contextmanager
    def reserve(self, estimate: CallEstimate, price: Price | None, model: str) -> Iterator[None]:
        """Hold ``estimate`` against every budget of the chain while the call runs; raise
        ``LimitExceededError`` — and make no reservation — when one would be passed."""
        cost = estimate.cost(price) if price is not None else None
        for scope in self.chain():
            scope._check(estimate.tokens, cost, model, whose=self._whose(scope))
        chain = list(self.chain())
        for scope in chain:
            scope.reserved_tokens += estimate.tokens
            scope.reserved_usd += cost or 0.0
        try:
            yield
        finally:
            for scope in chain:
                scope.reserved_tokens -= estimate.tokens
                scope.reserved_usd -= cost or 0.0

    def _whose(self, scope: BudgetScope) -> str:
        return "this run" if scope is self else f"{scope.agent}, which started this run,"

    def _check(self, tokens: int, cost: float | None, model: str, *, whose: str) -> None:
        budget, token_budget = self.limits.budget_usd, self.limits.token_budget
        if token_budget is not None:
            left = token_budget - self.spent_tokens - self.reserved_tokens
            if tokens > left:
                raise LimitExceededError(
                    "token_budget",
                    f"the next call may use {tokens:,} tokens and {whose} has {max(left, 0):,} "
                    f"of its {token_budget:,}-token budget left",
                )
        if budget is None:
            return
        if cost is None:
            raise LimitExceededError(
                "budget_usd",
                f"no price is known for {model}, so the {usd(budget)} budget cannot be kept: add "
                "its price (Harness(prices=...) or %config HarnessNB.prices) or remove the budget",
            )
        left_usd = budget - self.spent_usd - self.reserved_usd
        if cost > left_usd:
            raise LimitExceededError(
                "budget_usd",
                f"the next call may cost {usd(cost)} and {whose} has {usd(max(left_usd, 0.0))} "
                f"of its {usd(budget)} budget left",
            )

    def warnings(self) -> list[BudgetWarning]:
        """A ``BudgetWarning`` for each of this run's own budgets that has now reached 80%,
        once each."""
        if self.limits.budget_usd is None and self.limits.token_budget is None:
            return []  # no budget of its own (the case of most runs): nothing to warn of, every call
        budgets: list[tuple[Literal["budget_usd", "token_budget"], float | None, float]] = [
            ("budget_usd", self.limits.budget_usd, self.spent_usd),
            ("token_budget", self.limits.token_budget, float(self.spent_tokens)),
        ]
        out = []
        for limit, budget, spent in budgets:
            if budget is not None and limit not in self._warned and spent >= WARN_AT * budget:
                self._warned.add(limit)
                out.append(BudgetWarning(limit=limit, spent=spent, budget=budget, agent=self.agent))
        return out
