"""``AgentMap``: one subagent run per row of data (``await h.map(agent, template, rows)``).

Rows are a list (any iterable), a mapping (its keys are the index), a pandas ``Series`` (its
index labels kept) or a ``DataFrame`` (each row a mapping of its columns). The template
names what goes into each row's prompt: ``{value}`` (the row's value; a DataFrame row as
``column: value`` lines), ``{index}``, and a mapping's or DataFrame row's fields by name
(``{review}``). Only plain names are allowed — ``{value.__class__}`` or ``{value[0]}`` would
let a template reach into the objects it formats — and each is checked before any row runs.

How the rows run:

- **Concurrency.** At most ``concurrency`` rows run at once; workers take rows in order.
- **Retries.** A row whose run fails with a retryable provider error (HTTP 429, 5xx, a
  dropped connection — after the provider's own retries) is tried again, up to ``retries``
  times, after an exponential, jittered wait or the server's ``Retry-After``. The wait is
  shared: one 429 holds back every worker's next start for that long, so eight workers do
  not hit a rate-limited server eight times at once. Any other failure fails its row at once.
- **Budget.** The map is one parent run: rows are its children, each clamped to what is
  left of the map's budget (``budget_usd`` / ``token_budget``, else the harness's). Once
  it is spent, the rows not yet started are not started, each with that reason.
- **Interrupts.** Cancelling the map cancels the rows running and keeps every finished
  row: ``AgentMap.result()`` (``Harness.last_map``) has them, the others marked as not run.
- **What a row's agent is told.** Its answer becomes a cell of a column, so its prompt says
  so (``row_definition``): a built-in agent's report-writing prompt is replaced by
  ``MAP_ROW_PROMPT``, an agent file's gets ``MAP_ROW_NOTE`` after it. Rows run side by
  side with nobody following them: like background tasks, they get no tool that blocks
  the kernel or writes into the notebook unless the agent file names it.

Results come back in row order (``MapResult``), as a list, or as a pandas column with the
errors beside it (``series()``, ``frame()``). Progress (``MapProgress``: done, failed,
running, tokens, cost, ETA) goes to ``on_progress`` after every change.
"""

from __future__ import annotations

import asyncio
import string
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, overload

from ..core import BudgetSpentError, ConfigError, ProviderError, Usage, new_id
from ..core.imports import shielded_imports
from ..core.usage import usd
from ..engine import ApprovalChannel, ParentContext
from ..engine.limits import BUDGET_STOPS, EARLY_STOPS
from ..providers.http import RetryPolicy
from .definition import SubAgentDefinition
from .runner import DEFAULT_SUBAGENT_PROMPT, SubagentRunner
from .tracker import TaskEntry, TaskTracker

__all__ = [
    "MAP_ROW_NOTE",
    "MAP_ROW_PROMPT",
    "AgentMap",
    "MapHandle",
    "MapOptions",
    "MapProgress",
    "MapResult",
    "MapRow",
    "map_rows",
    "row_definition",
    "start_map",
]

MAX_VALUE_CHARS = 20_000
"""Most characters of one row's value put into its prompt (the rest is cut, and said so)."""

NOT_RUN_INTERRUPTED = "not run: the map was interrupted"

MAP_ROW_NOTE = (
    "Your final message becomes this row's value in the result column, exactly as you write it: give just what "
    "the task asks for, in the form it asks for (a word, a number, a sentence), with nothing before or after it."
)
MAP_ROW_PROMPT = (
    "The task below was written once for every row of a table and filled in with this row's values. "
    f"{MAP_ROW_NOTE} Use tools only when the task needs them."
)


def row_definition(definition: SubAgentDefinition) -> SubAgentDefinition:
    """``definition`` as a map row runs it (see the module doc)."""
    if definition.source == "builtin":
        prompt = MAP_ROW_PROMPT
    else:
        prompt = f"{definition.system_prompt or DEFAULT_SUBAGENT_PROMPT}\n\n{MAP_ROW_NOTE}"
    return definition.model_copy(update={"system_prompt": prompt})


class MapOptions(TypedDict, total=False):
    """How ``Harness.map`` / ``start_map`` run (each optional; the defaults in brackets):
    ``concurrency`` (8), ``retries`` (3), ``budget_usd`` and ``token_budget`` for the whole
    map (the harness's), ``model`` and ``approval`` (the harness's), ``on_progress``."""

    concurrency: int
    retries: int
    budget_usd: float | None
    token_budget: int | None
    model: str | None
    approval: ApprovalChannel | None
    on_progress: Callable[[MapProgress], Any] | None


@dataclass(frozen=True, slots=True)
class MapRow:
    """One row's outcome: its ``position`` (0-based) and ``index`` label, the ``text`` its
    run answered and the ``error`` that stopped it (a row stopped by a limit has both),
    what it used, and how many ``attempts`` it took (0: never started)."""

    position: int
    index: Any
    text: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0

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

    @property
    def finished(self) -> int:
        return self.done + self.failed

    def line(self) -> str:
        """``412/1,000 · 3 failed · 8 running · 51,200 tokens · $0.4100 · ETA 72 s``."""
        parts = [f"{self.finished:,}/{self.total:,}"]
        if self.failed:
            parts.append(f"{self.failed:,} failed")
        if self.running:
            parts.append(f"{self.running:,} running")
        parts.append(self.usage.tokens_label())
        if self.usage.cost is not None:
            parts.append(usd(self.usage.cost))
        if self.waiting > 0:
            parts.append(f"rate-limited: waiting {self.waiting:.0f} s")
        if self.eta is not None and self.finished < self.total:
            parts.append(f"ETA {_duration(self.eta)}")
        return " · ".join(parts)


class MapResult(Sequence[MapRow]):
    """The rows of a map, in row order. ``texts`` are the answers (``None`` where a row
    failed), ``errors`` the failures by index label; ``series()`` / ``frame()`` give them as
    pandas objects on the rows' index. ``interrupted``: the map was cancelled before every
    row ran."""

    def __init__(self, agent: str, rows: Sequence[MapRow], usage: Usage, *, interrupted: bool = False) -> None:
        self.agent = agent
        self.rows = list(rows)
        self.usage = usage
        self.interrupted = interrupted

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
    def errors(self) -> dict[Any, str]:
        return {row.index: row.error for row in self.rows if row.error is not None}

    @property
    def failed(self) -> int:
        return sum(1 for row in self.rows if not row.ok)

    def series(self) -> Any:
        """The answers as a pandas ``Series`` on the rows' index (missing where a row failed)."""
        pd = _pandas()
        return pd.Series(self.texts, index=[row.index for row in self.rows], name=self.agent, dtype=object)

    def frame(self) -> Any:
        """A pandas ``DataFrame`` on the rows' index: ``result``, ``error``, ``tokens``,
        ``cost`` and ``attempts`` per row."""
        pd = _pandas()
        return pd.DataFrame(
            {
                "result": self.texts,
                "error": [row.error for row in self.rows],
                "tokens": [row.usage.total_tokens for row in self.rows],
                "cost": [row.usage.cost for row in self.rows],
                "attempts": [row.attempts for row in self.rows],
            },
            index=[row.index for row in self.rows],
        )

    def summary(self) -> str:
        """``explore over 1,000 rows: 998 done, 2 failed · 51,200 tokens · $0.41``."""
        state = f"{len(self) - self.failed:,} done, {self.failed:,} failed"
        if self.interrupted:
            state += " (interrupted)"
        cost = f" · {usd(self.usage.cost)}" if self.usage.cost is not None else ""
        return f"{self.agent} over {len(self):,} rows: {state} · {self.usage.tokens_label()}{cost}"

    def __repr__(self) -> str:
        return f"<MapResult {self.summary()}>"


@dataclass(frozen=True, slots=True)
class _Row:
    index: Any
    value: Any
    fields: Mapping[str, Any]


def map_rows(rows: Any) -> list[_Row]:
    """The rows of ``rows`` (see the module doc for what it may be), each with its index
    label, value and named fields."""
    if hasattr(rows, "iterrows") and hasattr(rows, "columns"):  # a DataFrame
        out = []
        for index, row in rows.iterrows():
            fields = {str(column): value for column, value in row.items()}
            out.append(_Row(index, "\n".join(f"{k}: {v}" for k, v in fields.items()), fields))
        return out
    if isinstance(rows, Mapping):
        return [_Row(key, value, _fields(value)) for key, value in rows.items()]
    if hasattr(rows, "items") and hasattr(rows, "index"):  # a Series
        return [_Row(index, value, _fields(value)) for index, value in rows.items()]
    if isinstance(rows, str | bytes) or not isinstance(rows, Iterable):
        raise ConfigError(
            f"map rows must be a list, a mapping, a pandas Series or DataFrame, not {type(rows).__name__}"
        )
    return [_Row(position, value, _fields(value)) for position, value in enumerate(rows)]


def _fields(value: Any) -> Mapping[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def check_template(template: str, first: _Row | None) -> None:
    """``ConfigError`` unless ``template`` names only plain fields the rows have, and at
    least one (else every row would get the same prompt)."""
    try:
        names = [name for _text, name, _spec, _conv in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"map template {template[:80]!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    if not names:
        raise ConfigError("the map template names no field: put {value} where each row's value goes")
    known = {"value", "index", *(first.fields if first else {})}
    for name in names:
        if not name.isidentifier():
            raise ConfigError(
                f"map template field {{{name}}} is not a plain name; use {{value}}, {{index}} or a column name"
            )
        if first is not None and name not in known:
            raise ConfigError(f"map template field {{{name}}} is not among the row's fields: {', '.join(sorted(known))}")


def fill(template: str, row: _Row) -> str:
    """The prompt for ``row`` (each value cut to ``MAX_VALUE_CHARS``)."""
    values = {name: _bounded(v) for name, v in row.fields.items()}
    values.update(value=_bounded(row.value), index=_bounded(row.index))
    return template.format_map(values)


def _bounded(value: Any) -> str:
    text = str(value)
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS]}[… {len(text) - MAX_VALUE_CHARS:,} more characters cut]"


class AgentMap:
    """One map of ``definition`` over ``rows`` as children of ``parent`` (see the module
    doc). ``retry`` sets the backoff between a row's attempts (its ``max_retries`` is
    replaced by ``retries``); ``clock`` and ``sleep`` are injectable for tests."""

    def __init__(
        self,
        runner: SubagentRunner,
        definition: SubAgentDefinition,
        template: str,
        rows: Any,
        parent: ParentContext,
        *,
        concurrency: int = 8,
        retries: int = 3,
        retry: RetryPolicy | None = None,
        on_progress: Callable[[MapProgress], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a whole number of 1 or more, not {concurrency!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"retries must be a whole number of 0 or more, not {retries!r}")
        self.rows = map_rows(rows)
        check_template(template, self.rows[0] if self.rows else None)
        self.runner = runner
        self.definition = definition
        self.row = row_definition(definition)
        self.template = template
        self.parent = parent
        self.concurrency = concurrency
        self.retry = replace(retry or RetryPolicy(), max_retries=retries)
        self.on_progress = on_progress
        self.clock = clock
        self.sleep = sleep
        self.id = new_id("map")
        self.account = parent.account.child()
        """What the map has used (every row's account rolls up into it, and on to the parent's)."""
        self._outcomes: dict[int, MapRow] = {}
        self._running = 0
        self._resume_at = 0.0  # no worker starts an attempt before this (shared backoff)
        self._stopped: str | None = None  # why no more rows start (the budget is spent)
        self._started_at: float | None = None
        self._interrupted = False

    async def run(self) -> MapResult:
        """Run every row; the result in row order. Cancelled, it cancels the rows running,
        keeps what finished (``result()``) and re-raises."""
        self._started_at = self.clock()
        self._report()
        pending = iter(range(len(self.rows)))
        try:
            async with asyncio.TaskGroup() as group:
                for n in range(min(self.concurrency, len(self.rows))):
                    group.create_task(self._worker(pending), name=f"harness_nb:{self.id}:worker-{n}")
        except asyncio.CancelledError:
            self._interrupted = True
            self._report()
            raise
        return self.result()

    def result(self) -> MapResult:
        """The rows so far, in order; a row that has not finished is marked as not run."""
        rows = [
            self._outcomes.get(p) or MapRow(p, row.index, error=NOT_RUN_INTERRUPTED)
            for p, row in enumerate(self.rows)
        ]
        return MapResult(self.definition.name, rows, self.account.snapshot(), interrupted=self._interrupted)

    def progress(self) -> MapProgress:
        """Where the map is now."""
        outcomes = list(self._outcomes.values())
        failed = sum(1 for row in outcomes if not row.ok)
        done = len(outcomes) - failed
        now = self.clock()
        elapsed = now - self._started_at if self._started_at is not None else 0.0
        eta = None
        if outcomes:
            eta = elapsed / len(outcomes) * (len(self.rows) - len(outcomes))
        usage = self.account.snapshot()
        return MapProgress(
            total=len(self.rows),
            done=done,
            failed=failed,
            running=self._running,
            usage=usage,
            elapsed=elapsed,
            eta=eta,
            waiting=max(self._resume_at - now, 0.0),
        )

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress())

    async def _worker(self, pending: Iterator[int]) -> None:
        for position in pending:  # one shared iterator: rows are taken in order
            self._outcomes[position] = await self._row(position)
            self._report()

    async def _row(self, position: int) -> MapRow:
        row = self.rows[position]
        prompt = fill(self.template, row)
        account = self.account.child()  # the row's, over all of its attempts

        def outcome(attempts: int, *, text: str | None = None, error: str | None = None) -> MapRow:
            return MapRow(position, row.index, text, error, account.snapshot(), attempts)

        for attempt in range(1, self.retry.max_retries + 2):
            await self._hold_back()
            if self._stopped is not None:
                return outcome(attempt - 1, error=self._stopped)
            self._running += 1
            self._report()
            try:
                result = await self.runner.run(
                    self.row, prompt, self.parent, task_id=f"{self.id}-{position + 1}", account=account, watched=False
                )
            except BudgetSpentError as exc:
                self._stopped = f"not run: {exc}"
                return outcome(attempt - 1, error=self._stopped)
            except ProviderError as exc:
                if exc.retryable and attempt <= self.retry.max_retries:
                    self._back_off(self.retry.delay(attempt - 1, exc.retry_after))
                    self._report()  # shows the wait
                    continue
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                return outcome(attempt, error=f"{exc}{tries}")
            except Exception as exc:  # the row fails; its siblings go on
                return outcome(attempt, error=f"{type(exc).__name__}: {exc}")
            finally:
                self._running -= 1
            error = None
            if result.stop_reason in BUDGET_STOPS:
                error = f"out of budget ({result.stop_reason})"
            elif result.stop_reason in EARLY_STOPS:
                error = f"stopped: {result.stop_reason}"
            return outcome(attempt, text=result.final_text, error=error)
        raise AssertionError("unreachable: the last attempt returns")

    def _back_off(self, delay: float) -> None:
        """Hold back every worker's next attempt for ``delay`` seconds from now."""
        self._resume_at = max(self._resume_at, self.clock() + delay)

    async def _hold_back(self) -> None:
        while (wait := self._resume_at - self.clock()) > 0:
            await self.sleep(wait)


def _duration(seconds: float) -> str:
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


class MapHandle:
    """A map running in the background (``start_map``): ``await`` it for the ``MapResult``,
    read ``progress()`` or the rows so far (``result()``), ``cancel()`` it. Its task entry
    (``id``, e.g. ``bg-3``) is in the tracker, so ``%task`` lists it and ``%task stop``
    cancels it."""

    def __init__(self, mapped: AgentMap, entry: TaskEntry, tracker: TaskTracker) -> None:
        self.map = mapped
        self.entry = entry
        self._tracker = tracker

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def done(self) -> bool:
        return self.entry.done

    def progress(self) -> MapProgress:
        return self.map.progress()

    def result(self) -> MapResult:
        """The rows so far, in order (those not finished marked as not run)."""
        return self.map.result()

    def cancel(self) -> None:
        if self.entry.task is not None and not self.entry.task.done():
            self.entry.task.cancel()

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> MapResult:
        await self._tracker.wait(self.entry.id)
        if self.entry.task is not None:  # cancelled: the rows' own tasks unwind first
            await asyncio.wait({self.entry.task})
        return self.map.result()

    def __repr__(self) -> str:
        state = "running" if not self.done else str(self.entry.status)
        return f"<map {self.id}: {self.map.definition.name} over {len(self.map.rows):,} rows, {state}>"


def start_map(mapped: AgentMap, tracker: TaskTracker) -> MapHandle:
    """Run ``mapped`` as a background task owned by ``tracker`` (which cancels it when the
    harness closes) and return its handle at once. Its entry ends completed (its summary as
    the result; failed rows are in the rows), cancelled, or failed on a bug. The person
    started it, so its end is not reported to the main agent."""
    prompt = f"map over {len(mapped.rows):,} rows: {mapped.template}"
    entry = tracker.start("map", mapped.definition.name, prompt, description=f"map over {len(mapped.rows):,} rows")
    entry.delivered = True
    entry.usage = mapped.account.usage

    async def body() -> None:
        try:
            result = await mapped.run()
        except asyncio.CancelledError:
            tracker.cancel(entry.id)
            raise
        except Exception as exc:  # a bug: recorded on the entry, which nobody awaits
            tracker.finish(entry.id, f"{type(exc).__name__}: {exc}", failed=True)
            return
        tracker.finish(entry.id, result.summary())

    entry.task = asyncio.get_running_loop().create_task(body(), name=f"harness_nb:{mapped.id}")
    return MapHandle(mapped, entry, tracker)
