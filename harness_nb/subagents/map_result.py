"""What a map gives back: ``MapRow`` (one row's outcome), ``MapResult`` (the rows in order,
as a list or pandas objects), ``MapProgress`` (where a running map is) and ``MapEstimate``
(what the whole map will cost, from a sample)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from pydantic import BaseModel

from ..core import ConfigError, Usage
from ..core.imports import shielded_imports
from ..core.usage import usd
from .map_output import RowOutput

__all__ = ["MapEstimate", "MapProgress", "MapResult", "MapRow", "Projection", "RowSource"]

RowSource = Literal["run", "stored", "duplicate", "waiting"]
Z_80 = 1.2816  # the normal quantile of 90%: a two-sided 80% range


@dataclass(frozen=True, slots=True)
class MapRow:
    """One row's outcome: its ``position`` (0-based) and ``index`` label, the ``text`` its
    run answered and the ``error`` that stopped it (a row stopped by a limit has both),
    a typed map's validated ``output``, what it used, how many ``attempts`` it took (0:
    never started) and the ``seconds`` it ran. ``source``: it ran in this map, came from
    the map's store (``resume``, an estimate's sample), is a ``duplicate`` of an
    identical row, which ran once (its usage counted there), or is ``waiting`` in a vendor
    batch of an interrupted map in batch mode (its ``error`` says which; a resume collects it)."""

    position: int
    index: Any
    text: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    output: BaseModel | None = None
    seconds: float = 0.0
    source: RowSource = "run"

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class MapProgress:
    """Where a map is: rows ``done`` and ``failed`` of ``total``, ``running`` now, what they
    used, seconds ``elapsed`` and the estimated seconds left (``None`` until a row ended)."""

    total: int
    done: int
    failed: int
    running: int
    usage: Usage
    elapsed: float
    eta: float | None
    waiting: float = 0.0
    """Seconds every worker is holding back after a rate limit (0: none)."""
    batch: str | None = None
    """In batch mode, the state of its batches at the vendor (``batch in_progress 412/1,000``)."""

    @property
    def finished(self) -> int:
        return self.done + self.failed

    def line(self) -> str:
        """``412/1,000 · 3 failed · 8 running · 51,200 tokens · $0.4100 · ETA 72 s`` (in batch
        mode: ``… · 588 in batches · batch in_progress 412/1,000 · next check in 45 s``)."""
        parts = [f"{self.finished:,}/{self.total:,}"]
        if self.failed:
            parts.append(f"{self.failed:,} failed")
        if self.running:
            parts.append(f"{self.running:,} in batches" if self.batch is not None else f"{self.running:,} running")
        parts.append(self.usage.tokens_label())
        if self.usage.cost is not None:
            parts.append(usd(self.usage.cost))
        if self.waiting > 0:
            parts.append(f"rate-limited: waiting {self.waiting:.0f} s")
        if self.batch is not None:
            parts.append(self.batch)
        if self.eta is not None and self.finished < self.total:
            parts.append(f"ETA {duration(self.eta)}")
        return " · ".join(parts)


class MapResult(Sequence[MapRow]):
    """The rows of a map, in row order. ``texts`` are the answers (``None`` where a row
    failed), ``outputs`` a typed map's validated answers, ``errors`` the failures by index
    label; ``series()`` / ``frame()`` give them as pandas objects on the rows' index.
    ``interrupted``: the map was cancelled before every row ran. ``map_id`` names its store
    (``h.maps()``); ``store_problem`` says why rows stopped being written, if they did."""

    def __init__(
        self,
        agent: str,
        rows: Sequence[MapRow],
        usage: Usage,
        *,
        interrupted: bool = False,
        output: RowOutput | None = None,
        map_id: str | None = None,
        store_problem: str | None = None,
    ) -> None:
        self.agent = agent
        self.rows = list(rows)
        self.usage = usage
        self.interrupted = interrupted
        self.output = output
        self.map_id = map_id
        self.store_problem = store_problem

    @overload
    def __getitem__(self, i: int) -> MapRow: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[MapRow]: ...
    def __getitem__(self, i: int | slice) -> MapRow | Sequence[MapRow]:
        return self.rows[i]

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def texts(self) -> list[str | None]:
        return [row.text if row.ok else None for row in self.rows]

    @property
    def outputs(self) -> list[BaseModel | None]:
        """A typed map's answers as instances of its output model (``None`` where a row failed)."""
        return [row.output if row.ok else None for row in self.rows]

    @property
    def errors(self) -> dict[Any, str]:
        return {row.index: row.error for row in self.rows if row.error is not None}

    @property
    def failed(self) -> int:
        return sum(1 for row in self.rows if not row.ok)

    @property
    def waiting(self) -> int:
        """Rows not back yet from vendor batches (an interrupted map in batch mode)."""
        return sum(1 for row in self.rows if row.source == "waiting")

    def series(self) -> Any:
        """The answers as a pandas ``Series`` on the rows' index (missing where a row failed)."""
        pd = _pandas()
        return pd.Series(self.texts, index=[row.index for row in self.rows], name=self.agent, dtype=object)

    def frame(self) -> Any:
        """A pandas ``DataFrame`` on the rows' index: a typed map's fields, one column
        each (else ``result``, the answer's text), then ``error``, ``tokens``, ``cost`` and
        ``attempts`` per row."""
        pd = _pandas()
        columns: dict[str, list[Any]] = {}
        if self.output is None:
            columns["result"] = self.texts
        else:
            values = [row.output.model_dump() if row.ok and row.output is not None else {} for row in self.rows]
            for name in self.output.columns:
                columns[name] = [value.get(name) for value in values]
        columns.update(
            error=[row.error for row in self.rows],
            tokens=[row.usage.total_tokens for row in self.rows],
            cost=[row.usage.cost for row in self.rows],
            attempts=[row.attempts for row in self.rows],
        )
        return pd.DataFrame(columns, index=[row.index for row in self.rows])

    def summary(self) -> str:
        """``explore over 1,000 rows: 998 done, 2 failed · 51,200 tokens · $0.41``, saying
        how many rows came from the store and whether the store stopped being written."""
        state = f"{len(self) - self.failed:,} done, {self.failed - self.waiting:,} failed"
        if self.interrupted:
            state += " (interrupted)"
        if self.waiting:
            state += f", {self.waiting:,} waiting in vendor batches (resume=True collects them)"
        stored = sum(1 for row in self.rows if row.source == "stored")
        if stored:
            state += f", {stored:,} of them from the store"
        cost = f" · {usd(self.usage.cost)}" if self.usage.cost is not None else ""
        problem = f" · not saved: {self.store_problem}" if self.store_problem else ""
        return f"{self.agent} over {len(self):,} rows: {state} · {self.usage.tokens_label()}{cost}{problem}"

    def __repr__(self) -> str:
        return f"<MapResult {self.summary()}>"


@dataclass(frozen=True, slots=True)
class Projection:
    """One quantity (tokens, USD, seconds) for a whole map, projected from a sample:
    ``spent`` by the sample, ``expected`` for the rows left, with an 80% range ``low`` to
    ``high`` of that (the sample's spread, and how far the mean of a few rows can be off),
    and a row's 10th and 90th percentile in the sample."""

    spent: float
    expected: float
    low: float
    high: float
    row_p10: float
    row_p90: float

    @property
    def total(self) -> float:
        """The whole map: the sample's and the rest's."""
        return self.spent + self.expected

    @classmethod
    def of(cls, values: Sequence[float], left: int, *, scale: float = 1.0) -> Projection:
        """From the sample's per-row ``values``, for ``left`` rows more (their sum divided
        by ``scale``: the concurrency, for time). Needs one value at least."""
        n = len(values)
        mean = statistics.fmean(values)
        sd = statistics.stdev(values) if n > 1 else 0.0
        # a sum of `left` new rows: each row's spread, and the mean's own uncertainty
        spread = Z_80 * math.sqrt(left * sd**2 + left**2 * sd**2 / n)
        expected = left * mean
        if n > 1:
            p10, _, p90 = _deciles(values)
        else:
            p10 = p90 = values[0]
        return cls(
            spent=sum(values) / scale,
            expected=expected / scale,
            low=max(expected - spread, 0.0) / scale,
            high=(expected + spread) / scale,
            row_p10=p10,
            row_p90=p90,
        )


def _deciles(values: Sequence[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=10, method="inclusive")
    return cuts[0], cuts[4], cuts[8]


@dataclass(frozen=True, slots=True)
class MapEstimate:
    """What a whole map will use, from a sample of its rows (``h.map(..., estimate=True)``):
    ``tokens``, ``cost`` (USD; ``None`` when the model has no price) and ``seconds`` at
    ``concurrency``, for ``rows`` rows of which ``unique`` are distinct, ``stored`` were
    done before and ``left`` remain after the ``sample`` rows (stored: the real map does not
    run them again). ``sample`` holds the sample rows' outcomes."""

    agent: str
    rows: int
    unique: int
    stored: int
    left: int
    concurrency: int
    sample: tuple[MapRow, ...]
    tokens: Projection | None
    cost: Projection | None
    seconds: Projection | None
    map_id: str | None = None

    def summary(self) -> str:
        """A few lines: the totals for all rows with their 80% ranges, and a row's p10–p90."""
        ran = len(self.sample)
        head = f"estimate for {self.agent} over {self.rows:,} rows from {ran:,} sample rows"
        notes = []
        if self.unique < self.rows:
            notes.append(f"{self.unique:,} distinct")
        if self.stored:
            notes.append(f"{self.stored:,} done before")
        notes.append(f"{self.left:,} left to run; the sample's are stored and not run again")
        lines = [f"{head} ({', '.join(notes)})"]
        failed = sum(1 for row in self.sample if not row.ok)
        if failed:
            lines.append(f"  {failed:,} of the sample rows failed: look at .sample before the whole map")
        if self.tokens is None:
            lines.append("  nothing to project: no sample row ran")
            return "\n".join(lines)
        t = self.tokens
        lines.append(
            f"  tokens  ~{_count(t.total)} (80%: {_count(t.spent + t.low)}–{_count(t.spent + t.high)}); "
            f"a row {_count(t.row_p10)}–{_count(t.row_p90)} (p10–p90)"
        )
        if self.cost is None:
            lines.append("  cost    unknown: the model has no price (set the prices setting)")
        else:
            c = self.cost
            lines.append(
                f"  cost    ~{usd(c.total)} (80%: {usd(c.spent + c.low)}–{usd(c.spent + c.high)}); "
                f"the sample spent {usd(c.spent)}"
            )
        if self.seconds is not None:
            s = self.seconds
            lines.append(
                f"  time    ~{duration(s.expected)} more at concurrency {self.concurrency} "
                f"(80%: {duration(s.low)}–{duration(s.high)}; rate limits not counted)"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


def _count(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:,.0f}"


def duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _pandas() -> Any:
    try:
        with shielded_imports():
            import pandas
    except ImportError:
        raise ConfigError("series() and frame() need pandas: pip install pandas (texts and errors need nothing)") from None
    return pandas
