"""Token, turn and cost accounting (prices: ``price.py``)."""

from __future__ import annotations

from pydantic import BaseModel

from .price import DEFAULT_PRICES


def plural(n: int, word: str) -> str:
    """``1 turn``, ``3 turns``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


class Usage(BaseModel):
    """What a run (or one LLM call) consumed.

    ``input_tokens`` are the prompt tokens read at the full input price: the cached part
    of a prompt is ``cache_read_tokens`` (read from the provider's prompt cache) and
    ``cache_write_tokens`` (written to it), never counted twice. ``cost`` (USD) is ``None``
    when no call could be priced; ``unpriced_calls`` counts calls whose model has no
    price, ``unreported_calls`` those whose server sent no usage at all (many local
    servers do not): their tokens are the provider's estimate (characters over its token
    ratio), marked as one wherever they are shown, so "0 tokens" or "$0" is never shown
    for "nobody said"."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    turns: int = 0
    tool_calls: int = 0
    wall_time: float = 0.0
    cost: float | None = None
    unreported_calls: int = 0
    unpriced_calls: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """Every token the model read or wrote: the prompt (cached parts included) and the
        output. What ``token_budget`` counts and what views show as "tokens"."""
        return self.prompt_tokens + self.output_tokens

    def add(
        self, other: Usage, *, turns: int = 0, tool_calls: int = 0, charge: tuple[float | None, int] | None = None
    ) -> None:
        """Add ``other`` into this usage in place (costs add when either is known), and
        ``turns`` LLM calls and ``tool_calls`` besides those it counts; ``charge`` (from
        ``PriceTable.charge``) is ``other``'s price when it has none of its own, added as if
        ``other`` carried it. The fields are summed in the instance's dict: every LLM call
        adds to every account up to the harness's, and pydantic's checked assignment (or a
        priced copy of ``other``) cost more than the sums."""
        mine, theirs = self.__dict__, other.__dict__
        for name in _SUMMED:
            mine[name] += theirs[name]
        mine["turns"] += turns
        mine["tool_calls"] += tool_calls
        cost = other.cost
        if charge is not None and cost is None:
            cost = charge[0]
            mine["unpriced_calls"] += charge[1]
        if cost is not None:
            mine["cost"] = (self.cost or 0.0) + cost

    def priced(self, model: str) -> Usage:
        """This usage with ``cost`` from the built-in prices of ``model`` (see
        ``PriceTable.priced`` for your own prices)."""
        return DEFAULT_PRICES.priced(self, model)

    def tokens_label(self) -> str:
        """``1,234 tokens``; ``~1,234 tokens (estimated)`` when no call reported its usage
        (``usage not reported`` when there was nothing to estimate either); ``~1,234 tokens
        (2 calls estimated)`` when some did not."""
        if not self.unreported_calls:
            return f"{self.total_tokens:,} tokens"
        if not self.total_tokens:
            return "usage not reported"
        if self.unreported_calls >= self.turns:  # a single call's usage has no turns
            return f"~{self.total_tokens:,} tokens (estimated)"
        return f"~{self.total_tokens:,} tokens ({plural(self.unreported_calls, 'call')} estimated)"

    def cost_label(self) -> str:
        """``$0.0123``; ``$0.0123 (2 calls unpriced)`` when some calls had no price;
        ``~$0.0123`` when some tokens are estimates; ``""`` when no call was priced (an
        offline or local model): views then show no cost at all rather than "$0" or a "cost
        unknown" on every line."""
        if self.cost is None:
            return ""
        label = ("~" if self.unreported_calls else "") + usd(self.cost)
        if self.unpriced_calls:
            label += f" ({plural(self.unpriced_calls, 'call')} unpriced)"
        return label

    def summary(self) -> str:
        """One short human line: ``1,234 tokens · 3 turns · 5 tools · 4.2 s · $0.0123``."""
        parts = [self.tokens_label(), plural(self.turns, "turn"), plural(self.tool_calls, "tool")]
        if self.wall_time:
            parts.append(f"{self.wall_time:.1f} s")
        if cost := self.cost_label():
            parts.append(cost)
        return " · ".join(parts)


def usd(amount: float) -> str:
    """``$0.0123``, ``$12.35``: four decimals below a dollar, two above."""
    return f"${amount:,.2f}" if abs(amount) >= 1 else f"${amount:.4f}"


_SUMMED = (
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns", "tool_calls",
    "wall_time", "unreported_calls", "unpriced_calls",
)  # fmt: skip
