"""Token, turn and cost accounting."""

from __future__ import annotations

from pydantic import BaseModel

# USD per million tokens: (input, output, cache read, cache write). Public list prices;
# a model missing here simply has no cost.
PRICES: dict[str, tuple[float, float, float, float]] = {
    "gpt-4o": (2.50, 10.00, 1.25, 2.50),
    "gpt-4o-mini": (0.15, 0.60, 0.075, 0.15),
    "gpt-4.1": (2.00, 8.00, 0.50, 2.00),
    "gpt-4.1-mini": (0.40, 1.60, 0.10, 0.40),
    "gpt-4.1-nano": (0.10, 0.40, 0.025, 0.10),
    "o4-mini": (1.10, 4.40, 0.275, 1.10),
    "claude-sonnet-4-5": (3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4-0": (3.00, 15.00, 0.30, 3.75),
    "claude-opus-4-1": (15.00, 75.00, 1.50, 18.75),
    "claude-haiku-4-5": (1.00, 5.00, 0.10, 1.25),
    "claude-3-5-haiku-latest": (0.80, 4.00, 0.08, 1.00),
}


def plural(n: int, word: str) -> str:
    """``1 turn``, ``3 turns``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def price_for(model: str) -> tuple[float, float, float, float] | None:
    """The price entry for a model name, tolerating date suffixes (``gpt-4o-2024-08-06``)."""
    if model in PRICES:
        return PRICES[model]
    best = max((k for k in PRICES if model.startswith(k + "-")), key=len, default=None)
    return PRICES[best] if best else None


class Usage(BaseModel):
    """What a run (or one LLM call) consumed. ``cost`` is ``None`` when no price is known;
    ``unreported_calls`` counts the LLM calls whose server sent no usage at all (many local
    servers do not), so "0 tokens" is never shown for "nobody said"."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    turns: int = 0
    tool_calls: int = 0
    wall_time: float = 0.0
    cost: float | None = None
    unreported_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        """Add ``other`` into this usage in place (costs add when either is known)."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.turns += other.turns
        self.tool_calls += other.tool_calls
        self.wall_time += other.wall_time
        self.unreported_calls += other.unreported_calls
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost

    def priced(self, model: str) -> Usage:
        """Return this usage with ``cost`` filled in from the price table, when known."""
        price = price_for(model)
        if price is None:
            return self
        p_in, p_out, p_read, p_write = price
        cost = (
            self.input_tokens * p_in
            + self.output_tokens * p_out
            + self.cache_read_tokens * p_read
            + self.cache_write_tokens * p_write
        ) / 1_000_000
        return self.model_copy(update={"cost": cost})

    def tokens_label(self) -> str:
        """``1,234 tokens``; ``usage not reported`` when no call reported any; ``1,234 tokens
        (2 calls unreported)`` when some did not."""
        if not self.unreported_calls:
            return f"{self.total_tokens:,} tokens"
        if not self.total_tokens:
            return "usage not reported"
        return f"{self.total_tokens:,} tokens ({plural(self.unreported_calls, 'call')} unreported)"

    def summary(self) -> str:
        """One short human line: ``1,234 tokens · 3 turns · 5 tools · 4.2 s``."""
        parts = [self.tokens_label(), plural(self.turns, "turn"), plural(self.tool_calls, "tool")]
        if self.wall_time:
            parts.append(f"{self.wall_time:.1f} s")
        if self.cost is not None:
            parts.append(f"${self.cost:.4f}")
        return " · ".join(parts)
