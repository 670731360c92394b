"""What tokens cost: ``Price`` (USD per million tokens), the built-in list ``PRICES`` and
``PriceTable``, the built-in list with a person's own prices on top.

A price has four figures: input, output, cache read and cache write. Where a model's list
gives no cache figures, they follow Anthropic's ratios to the input price — reads 0.1×,
writes 1.25× (a five-minute cache write) — so an entry may give only ``input`` and
``output``. OpenAI's automatic caching charges nothing extra to write, so the OpenAI
entries give ``cache_write`` equal to ``input`` and their own read price.

The figures are public list prices (platform.openai.com/docs/pricing and
platform.claude.com/docs/en/about-claude/pricing), standard tier, without long-context
surcharges (Sonnet above 200k prompt tokens costs more). A request sent through a vendor's
batch API (OpenAI's Batch API, Anthropic's Message Batches: ``h.map(..., mode="batch")``)
costs ``batch`` × every figure, half by default (``BATCH_RATIO``): both vendors answer a
batch at 50% of the online price, prompt-cache prices included.
A model that is in neither list has no cost: ``Usage.cost`` stays ``None`` and the call
counts in ``Usage.unpriced_calls``, never as "$0".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from .error import ConfigError

if TYPE_CHECKING:
    from .usage import Usage

__all__ = ["BATCH_RATIO", "CACHE_READ_RATIO", "CACHE_WRITE_RATIO", "PRICES", "Price", "PriceTable", "price_for"]

CACHE_READ_RATIO = 0.1
CACHE_WRITE_RATIO = 1.25
BATCH_RATIO = 0.5
"""What a batch request costs of the online price (OpenAI's Batch API, Anthropic's Message Batches)."""


class Price(BaseModel):
    """USD per million tokens for one model. ``cache_read`` and ``cache_write`` left out
    are ``input`` × 0.1 and × 1.25; ``batch`` is the share of these a batch request costs
    (``BATCH_RATIO``, a half, unless given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float
    output: float
    cache_read: float = 0.0  # from ``input`` by _derive when not given
    cache_write: float = 0.0
    batch: float = BATCH_RATIO

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        for name in ("input", "output", "cache_read", "cache_write"):
            value = data.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a number of USD per million tokens, 0 or more, not {value!r}")
        share = data.get("batch")
        if share is not None and (isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1):
            raise ValueError(f"batch must be the share of the price a batch request costs, 0 to 1, not {share!r}")
        if isinstance(data.get("input"), int | float):
            # rounded, so that 3.00 gives 0.3 and 3.75, not 0.30000000000000004
            if data.get("cache_read") is None:
                data["cache_read"] = round(data["input"] * CACHE_READ_RATIO, 12)
            if data.get("cache_write") is None:
                data["cache_write"] = round(data["input"] * CACHE_WRITE_RATIO, 12)
        return data

    def cost(self, usage: Usage, *, batch: bool = False) -> float:
        """The USD cost of ``usage``'s tokens at this price (``batch``: sent in a batch)."""
        online = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1_000_000
        return online * self.batch if batch else online


def _openai(input: float, output: float, cache_read: float) -> Price:
    return Price(input=input, output=output, cache_read=cache_read, cache_write=input)


def _anthropic(input: float, output: float) -> Price:
    return Price(input=input, output=output)  # cache figures by the 0.1× / 1.25× ratios


PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-5": _openai(1.25, 10.00, 0.125),
    "gpt-5.1": _openai(1.25, 10.00, 0.125),
    "gpt-5-mini": _openai(0.25, 2.00, 0.025),
    "gpt-5-nano": _openai(0.05, 0.40, 0.005),
    "gpt-4.1": _openai(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
    "gpt-4o": _openai(2.50, 10.00, 1.25),
    "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "o3": _openai(2.00, 8.00, 0.50),
    "o3-mini": _openai(1.10, 4.40, 0.55),
    "o4-mini": _openai(1.10, 4.40, 0.275),
    "o1": _openai(15.00, 60.00, 7.50),
    # Anthropic (a dated name such as claude-sonnet-4-5-20250929 finds its entry)
    "claude-opus-4-6": _anthropic(5.00, 25.00),
    "claude-opus-4-5": _anthropic(5.00, 25.00),
    "claude-opus-4-1": _anthropic(15.00, 75.00),
    "claude-opus-4": _anthropic(15.00, 75.00),
    "claude-opus-4-0": _anthropic(15.00, 75.00),
    "claude-sonnet-4-5": _anthropic(3.00, 15.00),
    "claude-sonnet-4": _anthropic(3.00, 15.00),
    "claude-sonnet-4-0": _anthropic(3.00, 15.00),
    "claude-3-7-sonnet": _anthropic(3.00, 15.00),
    "claude-haiku-4-5": _anthropic(1.00, 5.00),
    "claude-3-5-haiku": _anthropic(0.80, 4.00),
    # Claude 3 Haiku's cache prices are not the usual ratios of its input price
    "claude-3-haiku": Price(input=0.25, output=1.25, cache_read=0.03, cache_write=0.30),
}
"""The built-in prices, USD per million tokens, by model name (without the provider)."""


def _find(table: Mapping[str, Price], name: str) -> Price | None:
    """``name``'s entry: exact, else the longest key it extends with a suffix
    (``gpt-4o-2024-08-06`` → ``gpt-4o``, ``claude-3-5-haiku-latest`` → ``claude-3-5-haiku``)."""
    if name in table:
        return table[name]
    best = max((k for k in table if name.startswith(k + "-")), key=len, default=None)
    return table[best] if best is not None else None


def price_for(model: str) -> Price | None:
    """The built-in price of ``model``, or ``None``."""
    return _find(PRICES, model)


class PriceTable:
    """The built-in prices with ``own`` on top: a model named in ``own`` (as
    ``provider/model`` or just ``model``) gets that price, whatever the built-in list says.
    ``own`` values are ``Price`` or mappings (``{"input": 0.5, "output": 1.5}``). A table
    does not change once made (runs share it)."""

    __slots__ = ("own", "_found")

    def __init__(self, own: Mapping[str, Price | Mapping[str, Any]] | None = None) -> None:
        prices = {n: v if isinstance(v, Price) else Price.model_validate(v) for n, v in (own or {}).items()}
        self.own: Mapping[str, Price] = MappingProxyType(prices)
        # lookups by names, remembered: the table never changes, and every answer is priced
        self._found: dict[tuple[str, ...], Price | None] = {}

    @classmethod
    def of(cls, own: Mapping[str, Any] | PriceTable | None) -> Self:
        """A table from a person's ``prices`` setting, checked: a bad entry is one
        ``ConfigError`` naming the model, the field and what it must be."""
        if isinstance(own, cls):
            return own
        if own is None:
            return cls()
        if not isinstance(own, Mapping):
            raise ConfigError(
                "prices must be a mapping of model name to price, e.g. "
                "{'my-model': {'input': 0.5, 'output': 1.5}}, not " + type(own).__name__
            )
        checked: dict[str, Price] = {}
        for name, value in own.items():
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"prices: a model name must be non-empty text, not {name!r}")
            try:
                checked[name] = value if isinstance(value, Price) else Price.model_validate(value)
            except ValidationError as exc:
                raise ConfigError(f"prices[{name!r}]: {_explain(exc)}") from None
        return cls(checked)

    def lookup(self, *names: str) -> Price | None:
        """The price for the first of ``names`` known here (your own prices first)."""
        if names in self._found:
            return self._found[names]
        found = next(
            (p for table in (self.own, PRICES) for name in names if name and (p := _find(table, name)) is not None),
            None,
        )
        if len(self._found) < 1024:  # model names come from servers: keep the memo bounded
            self._found[names] = found
        return found

    def priced(self, usage: Usage, *names: str, batch: bool = False) -> Usage:
        """``usage`` with its cost from the first of ``names`` that has a price (of an
        estimate, for a call whose server reported no usage; ``batch``: at its batch price).
        A call with no tokens at all to price stays unpriced (nobody said); one whose model
        has no price counts in ``unpriced_calls``."""
        charge = self.charge(usage, *names, batch=batch)
        if charge is None:
            return usage
        cost, unpriced = charge
        return usage.model_copy(update={"cost": cost, "unpriced_calls": usage.unpriced_calls + unpriced})

    def charge(self, usage: Usage, *names: str, batch: bool = False) -> tuple[float | None, int] | None:
        """What ``priced`` sets, without the copy: ``(cost, 0)`` from the first of ``names``
        that has a price, ``(None, 1)`` for a model with none, ``None`` for a call with no
        tokens to price. For the engine's billing, which adds it straight into the
        accounts (``Usage.add``'s ``charge``) on every call."""
        if usage.unreported_calls and not usage.total_tokens:
            return None
        price = self.lookup(*names)
        if price is None:
            return None, 1
        return price.cost(usage, batch=batch), 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PriceTable) and dict(other.own) == dict(self.own)

    def __hash__(self) -> int:
        return hash(frozenset(self.own.items()))

    def __repr__(self) -> str:
        return f"<PriceTable own={sorted(self.own)}>"


DEFAULT_PRICES = PriceTable()
"""The built-in prices alone."""


def _explain(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field; a price has input, output, cache_read, cache_write, batch"
        elif error["type"] == "missing":
            message = "missing (input and output are required, USD per million tokens)"
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)
