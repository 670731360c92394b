"""``AgentMap``: one subagent run per row of data (``await h.map(agent, template, rows)``).

Rows and the template are ``map_rows.py``'s; what comes back is ``map_result.py``'s. How
the rows run:

- **Concurrency.** At most ``concurrency`` rows run at once; workers take rows in order.
- **Retries.** A row whose run fails with a retryable provider error (HTTP 429, 5xx, a
  dropped connection — after the provider's own retries) is tried again, up to ``retries``
  times, after an exponential, jittered wait or the server's ``Retry-After``. The wait is
  shared: one 429 holds back every worker's next start for that long, so eight workers do
  not hit a rate-limited server eight times at once. Any other failure fails its row at once.
- **Typed outputs.** With ``output`` (``map_output.py``) each row's final answer is asked
  for in that shape, validated, asked once more with the problem when it does not fit, and
  failed on a second misfit; ``MapResult.frame()`` has one column per field.
- **Stored as they finish.** Every finished row is written to the map's store
  (``map_store.py``, under ``.harness_nb/maps/<map id>/``), keyed by its prompt and the
  map's template, agent, model and output. ``resume=True`` continues the newest stored
  map of the same key (``resume="<map id>"``: that one), running only the rows not done
  there (a failed row runs again); identical rows run once, their outcome shared.
- **Estimates.** ``estimate(sample)`` runs a sample of the rows left, spread over them,
  and projects tokens, USD and time for the rest (``MapEstimate``); its rows are stored,
  and the next map of the same key takes its store over, so they are not paid twice.
- **Budget.** The map is one parent run: rows are its children, each clamped to what is
  left of the map's budget (``budget_usd`` / ``token_budget``, else the harness's). Once
  it is spent, the rows not yet started are not started, each with that reason.
- **Batch mode.** ``mode="batch"`` sends every row as one model call through the vendor's
  batch API at half the price, its batches recorded in the store so that a restart polls
  them instead of sending the rows again (``map_batch.py``).
- **Interrupts.** Cancelling the map cancels the rows running and keeps every finished
  row: ``AgentMap.result()`` (``Harness.last_map``) has them, the others marked as not run,
  and the store has them for a ``resume``.
- **Paced in the background.** A map given a ``LoopPacer`` (``h.start_map``, ``%agent map
  --bg``) holds back its next row while the kernel's loop is slow to come round
  (``map_pacer.py``), so the notebook stays responsive; its rows and answers are the same.
- **Where rows run.** In this process, through the harness's ``SubagentRunner``, unless a
  ``RowBackend`` is given (``map_ray.RayBackend``: on a Ray cluster). A backend runs each
  attempt as the runner would; everything else (retries, budget, typed checks, the store,
  progress) stays here, so a row's outcome is recorded the same wherever it ran.
- **What a row's agent is told.** Its answer becomes a cell of a column, so its prompt says
  so (``row_definition``): a built-in agent's report-writing prompt is replaced by
  ``MAP_ROW_PROMPT``, an agent file's gets ``MAP_ROW_NOTE`` (or, typed, ``MAP_ROW_FIELDS_NOTE``)
  after it. Rows run side by side with nobody following them: like background tasks, they
  get no tool that blocks the kernel or writes into the notebook unless the agent file names it.

Progress (``MapProgress``: done, failed, running, tokens, cost, ETA) goes to
``on_progress`` after every change.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from ..core import BudgetSpentError, ConfigError, ProviderError, Usage, new_id, run_blocking
from ..engine import ParentContext, RunResult, UsageAccount
from ..engine.limits import BUDGET_STOPS, EARLY_STOPS
from ..providers.base import Provider
from ..providers.http import RetryPolicy
from .definition import SubAgentDefinition
from .map_batch import BatchRun, PollPolicy
from .map_options import MapOptions, check_options
from .map_output import AnswerShaper, RowOutput
from .map_pacer import LoopPacer
from .map_result import MapEstimate, MapProgress, MapResult, MapRow, Projection, RowSource
from .map_rows import check_template, fill, map_rows
from .map_store import MapInfo, MapKind, MapStore, StoredRow, map_key, open_map_store, refuse_waiting_batches, row_key
from .model import resolve_model
from .runner import DEFAULT_SUBAGENT_PROMPT, SubagentRunner

__all__ = [
    "DEFAULT_SAMPLE",
    "MAP_ROW_FIELDS_NOTE",
    "MAP_ROW_NOTE",
    "MAP_ROW_PROMPT",
    "NOT_RUN_INTERRUPTED",
    "AgentMap",
    "MapMode",
    "MapEstimate",
    "MapOptions",
    "MapProgress",
    "MapResult",
    "MapRow",
    "RowBackend",
    "agent_fingerprint",
    "check_options",
    "row_definition",
]


def __getattr__(name: str) -> Any:
    # ``MapHandle`` and ``start_map`` moved to ``map_handle.py`` (which imports this module):
    # code written against the old place still finds them
    if name in ("MapHandle", "start_map"):
        from . import map_handle

        return getattr(map_handle, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

log = logging.getLogger("harness_nb.subagents")

NOT_RUN_INTERRUPTED = "not run: the map was interrupted"
WAITING_IN_BATCH = "not back yet: waiting in batch {batch} at the vendor; resume=True with mode='batch' collects it"
MapMode = Literal["online", "batch"]
DEFAULT_SAMPLE = 20
"""Rows an estimate runs unless told otherwise."""

MAP_ROW_NOTE = (
    "Your final message becomes this row's value in the result column, exactly as you write it: give just what "
    "the task asks for, in the form it asks for (a word, a number, a sentence), with nothing before or after it."
)
MAP_ROW_FIELDS_NOTE = (
    "Your final answer fills this row's fields in the result table: put in each field just what the task asks for."
)


def _row_prompt(note: str) -> str:
    return (
        "The task below was written once for every row of a table and filled in with this row's values. "
        f"{note} Use tools only when the task needs them."
    )


MAP_ROW_PROMPT = _row_prompt(MAP_ROW_NOTE)


def row_definition(definition: SubAgentDefinition, *, typed: bool = False) -> SubAgentDefinition:
    """``definition`` as a map row runs it (see the module doc); ``typed``: its answer
    fills an output's fields."""
    note = MAP_ROW_FIELDS_NOTE if typed else MAP_ROW_NOTE
    if definition.source == "builtin":
        prompt = _row_prompt(note)
    else:
        prompt = f"{definition.system_prompt or DEFAULT_SUBAGENT_PROMPT}\n\n{note}"
    return definition.model_copy(update={"system_prompt": prompt})


def agent_fingerprint(definition: SubAgentDefinition) -> dict[str, Any]:
    """The parts of a row's definition that shape its answers, for the map's key: not its
    inline MCP configurations (they may hold keys), only their servers' names."""
    servers = sorted(
        name for item in definition.mcp_servers for name in ([item] if isinstance(item, str) else list(item))
    )
    return {
        "name": definition.name,
        "system_prompt": definition.system_prompt,
        "tools": definition.tools,
        "disallowed_tools": definition.disallowed_tools,
        "max_turns": definition.max_turns,
        "skills": definition.skills,
        "mcp_servers": servers,
        "permission_mode": definition.permission_mode,
        "effort": definition.effort,
        "memory": definition.memory,
    }


def _spread(keys: list[str], count: int) -> list[str]:
    """``count`` of ``keys``, evenly spread over them (all when there are no more)."""
    if len(keys) <= count:
        return list(keys)
    return [keys[i * len(keys) // count] for i in range(count)]


class RowBackend(Protocol):
    """Where a map's row attempts run when not in this process (see the module doc):
    ``run`` takes what ``SubagentRunner.run`` takes from a row and answers as it does (the
    ``RunResult``, or the same exceptions); ``close`` is called once the map has ended."""

    async def run(
        self,
        definition: SubAgentDefinition,
        prompt: str,
        parent: ParentContext,
        *,
        task_id: str,
        account: UsageAccount,
        watched: bool,
        wrap_provider: Callable[[Provider], Provider] | None,
        follow_up: Callable[[RunResult], str | None] | None,
    ) -> RunResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Scope:
    """What one ``run`` / ``estimate`` covers: the keys it runs and its rows' count."""

    keys: list[str]
    rows: int


class AgentMap:
    """One map of ``definition`` over ``rows`` as children of ``parent`` (see the module
    doc). ``output`` types the answers; ``store`` is the folder of map stores (``None``:
    nothing is written); ``resume`` as ``MapOptions`` says; ``backend`` runs the rows'
    attempts elsewhere (``None``: ``runner``, here); ``pacer`` paces a background map. ``retry`` sets the backoff
    between a row's attempts (its ``max_retries`` is replaced by ``retries``); ``clock``
    and ``sleep`` are injectable for tests. ``mode="batch"`` sends the rows through the
    vendor's batch API (``map_batch.py``: ``batch_size`` rows at most a batch, polled as
    ``poll`` says). ``prepare`` (awaited by ``run`` and ``estimate`` when nobody did
    before) reads the store and keys the rows."""

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
        output: RowOutput | None = None,
        store: Path | None = None,
        resume: bool | str = False,
        on_progress: Callable[[MapProgress], Any] | None = None,
        backend: RowBackend | None = None,
        pacer: LoopPacer | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        mode: MapMode = "online",
        batch_size: int | None = None,
        poll: PollPolicy | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a whole number of 1 or more, not {concurrency!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"retries must be a whole number of 0 or more, not {retries!r}")
        if mode not in ("online", "batch"):
            raise ConfigError(f"mode must be 'online' or 'batch', not {mode!r}")
        self.rows = map_rows(rows)
        check_template(template, self.rows[0] if self.rows else None)
        self.runner = runner
        self.definition = definition
        self.output = output
        self.row = row_definition(definition, typed=output is not None)
        self.template = template
        self.parent = parent
        self.concurrency = concurrency
        self.retry = replace(retry or RetryPolicy(), max_retries=retries)
        self.on_progress = on_progress
        self.backend = backend
        self.pacer = pacer
        self.clock = clock
        self.sleep = sleep
        self.id = new_id("map")
        """The map's id: its store's folder (a resumed map takes the stored one's)."""
        self.model = resolve_model(self.row.model, parent.provider.model_id)
        self.key = map_key(
            template=template,
            agent=agent_fingerprint(self.row),
            model=self.model,
            output=output.fingerprint if output is not None else None,
        )
        self.store_folder = store
        self.resume = resume
        self.store: MapStore | None = None
        self.account = parent.account.child()
        """What the map has used (every row's account rolls up into it, and on to the parent's)."""
        self._keys: list[str] = []  # each row's key, by position
        self._groups: dict[str, list[int]] = {}  # each key's positions, keys in order of first position
        self._left: list[str] = []  # keys not done when the map was prepared
        self._prepared = False
        self._outcomes: dict[int, MapRow] = {}
        self._scope = _Scope([], len(self.rows))
        self._done = self._failed = self._ran = 0  # in the scope: rows done and failed, keys run
        self._running = 0
        self._resume_at = 0.0  # no worker starts an attempt before this (shared backoff)
        self._stopped: str | None = None  # why no more rows start (the budget is spent)
        self._started_at: float | None = None
        self._interrupted = False
        self._store_problem: str | None = None
        self.mode: MapMode = mode
        self.batch = BatchRun(self, size=batch_size, poll=poll) if mode == "batch" else None
        """The batch mode's run (``None``: the rows run online)."""
        self._batch_line: str | None = None  # what the bar says of the batches

    # -- preparing ---------------------------------------------------------------------------

    async def prepare(self, kind: MapKind = "map") -> None:
        """Key every row, open the store (``kind``: what a new one holds) and take the rows
        it has done; a resume that names a map which is not there, or is another map, or a
        store that cannot be read, is a ``ConfigError`` here, before any row runs."""
        if self._prepared:
            return
        self._keys = await run_blocking(self._row_keys)
        for position, key in enumerate(self._keys):
            self._groups.setdefault(key, []).append(position)
        done: set[str] = set()
        if self.store_folder is not None:
            columns = tuple(self.output.columns) if self.output is not None else ()
            wanted = MapInfo(
                id=self.id, created=time.time(), agent=self.definition.name, model=self.model,
                template=self.template, columns=columns, key=self.key, kind=kind,
                total=len(self.rows), unique=len(self._groups),
            )
            if self.resume is False:
                await run_blocking(refuse_waiting_batches, self.store_folder, self.key)
            store, stored = await run_blocking(open_map_store, self.store_folder, wanted, resume=self.resume)
            self.store, self.id = store, store.info.id
            try:
                if self.batch is None and await run_blocking(store.waiting_batches):
                    raise ConfigError(
                        f"map {store.info.id} has rows waiting in vendor batches: resume it with mode='batch' to collect "
                        f"them (or stop them first: h.cancel_batches({store.info.id!r}))"
                    )
                for key, row in await run_blocking(self._stored_rows, stored):
                    self._fan_out(row, self._groups[key])
                    done.add(key)
            except BaseException:
                self._close_store()
                raise
        if self.batch is not None:
            try:
                await self.batch.prepare()
            except BaseException:
                self._close_store()
                raise
        self._left = [key for key in self._groups if key not in done]
        self._prepared = True

    def _row_keys(self) -> list[str]:
        return [row_key(self.key, fill(self.template, row)) for row in self.rows]

    def _stored_rows(self, stored: Mapping[str, StoredRow]) -> list[tuple[str, MapRow]]:
        """The rows of this map done in ``stored``, by key, as outcomes of their first rows
        (blocking: a typed output is validated again, on a worker thread)."""
        taken: list[tuple[str, MapRow]] = []
        for key, positions in self._groups.items():
            row = stored.get(key)
            if row is None or not row.ok:
                continue
            output = None
            if self.output is not None:
                checked = self.output.check(row.output or "")
                if isinstance(checked, str):
                    continue  # kept in a shape the model no longer takes: it runs again
                output = checked
            first = self.rows[positions[0]]
            done = MapRow(positions[0], first.index, row.text, None, row.usage, row.attempts, output, row.seconds, "stored")
            taken.append((key, done))
        return taken

    # -- running -------------------------------------------------------------------------------

    async def run(self) -> MapResult:
        """Run every row not done; the result in row order. Cancelled, it cancels the rows
        running, keeps what finished (``result()``, and the store) and re-raises."""
        await self.prepare()
        try:
            if self.batch is not None:
                await self._run_batch(self._left, len(self.rows))
            else:
                await self._run(self._left, len(self.rows))
        finally:
            self._close_store()
        return self.result()

    async def _run_batch(self, keys: list[str], rows: int) -> None:
        assert self.batch is not None
        self._scope = _Scope(keys, rows)
        self._started_at = self.clock()
        try:
            await self.batch.run(keys)
        except asyncio.CancelledError:
            self._interrupted = True
            self._report()
            raise

    async def estimate(self, sample: int = DEFAULT_SAMPLE) -> MapEstimate:
        """Run ``sample`` of the rows left, spread over them, and project the rest from
        them (``MapEstimate``); the sample's rows are stored like any map's."""
        if self.batch is not None:
            raise ConfigError(
                "estimate=True runs a sample online: drop mode='batch' for the estimate (a batch sends the same "
                "tokens at half the price)"
            )
        await self.prepare("estimate")
        picked = _spread(self._left, sample)
        self._done = self._failed = 0  # the estimate's progress is the sample's
        try:
            await self._run(picked, sum(len(self._groups[key]) for key in picked))
        finally:
            self._close_store()
        ran = [self._outcomes[self._groups[key][0]] for key in picked]
        ran = [row for row in ran if row.attempts > 0]  # not those a spent budget left unstarted
        left = len(self._left) - sum(1 for row in ran if row.ok)
        costs = [row.usage.cost for row in ran]
        workers = min(self.concurrency, max(left, 1))
        return MapEstimate(
            agent=self.definition.name,
            rows=len(self.rows),
            unique=len(self._groups),
            stored=len(self._groups) - len(self._left),
            left=left,
            concurrency=self.concurrency,
            sample=tuple(ran),
            tokens=Projection.of([row.usage.total_tokens for row in ran], left) if ran else None,
            cost=Projection.of([c for c in costs if c is not None], left) if ran and None not in costs else None,
            seconds=Projection.of([row.seconds for row in ran], left, scale=workers) if ran else None,
            map_id=self.id if self.store_folder is not None else None,
        )

    async def _run(self, keys: list[str], rows: int) -> None:
        """Run the rows of ``keys``, ``rows`` in all with their copies (what progress counts)."""
        self._scope = _Scope(keys, rows)
        self._started_at = self.clock()
        self._report()
        pending = iter(keys)
        if self.pacer is not None:
            self.pacer.start()
        try:
            async with asyncio.TaskGroup() as group:
                for n in range(min(self.concurrency, len(keys))):
                    group.create_task(self._worker(pending), name=f"harness_nb:{self.id}:worker-{n}")
        except asyncio.CancelledError:
            self._interrupted = True
            self._report()
            raise
        finally:
            if self.pacer is not None:
                await self.pacer.stop()
            if self.backend is not None:
                self.backend.close()

    def _close_store(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def result(self) -> MapResult:
        """The rows so far, in order; a row that has not finished is marked as not run (or,
        in batch mode, as waiting in its batch)."""
        rows = [self._outcomes.get(p) or self._unfinished(p) for p in range(len(self.rows))]
        return MapResult(
            self.definition.name,
            rows,
            self.account.snapshot(),
            interrupted=self._interrupted,
            output=self.output,
            map_id=self.id if self.store_folder is not None else None,
            store_problem=self._store_problem,
        )

    def _unfinished(self, position: int) -> MapRow:
        """A row without an outcome: not run, or waiting in a vendor batch."""
        index = self.rows[position].index
        batch = self.batch.waiting_batch(self._keys[position]) if self.batch is not None and self._keys else None
        if batch is not None:
            return MapRow(position, index, error=WAITING_IN_BATCH.format(batch=batch), source="waiting")
        return MapRow(position, index, error=NOT_RUN_INTERRUPTED)

    def progress(self) -> MapProgress:
        """Where the map is now."""
        now = self.clock()
        elapsed = now - self._started_at if self._started_at is not None else 0.0
        eta = None
        if self._ran and self.batch is None:
            eta = elapsed / self._ran * (len(self._scope.keys) - self._ran)
        return MapProgress(
            total=self._scope.rows,
            done=self._done,
            failed=self._failed,
            running=self._running,
            usage=self.account.snapshot(),
            elapsed=elapsed,
            eta=eta,
            waiting=max(self._resume_at - now, 0.0),
            batch=self._batch_line,
        )

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress())

    async def _worker(self, pending: Iterator[str]) -> None:
        for key in pending:  # one shared iterator: rows are taken in order
            if self.pacer is not None:
                await self.pacer.admit(lambda: self._running)
            await self.settle(key, await self._row(self._groups[key][0]))

    async def settle(self, key: str, row: MapRow, *, final: bool = True) -> None:
        """``row`` is the outcome of ``key``'s rows: recorded for each (its copies), stored,
        shown. ``final=False``: only stored (a batch's typed answer asked once more)."""
        positions = self._groups[key]
        if final:
            self._ran += 1
            self._fan_out(row, positions)
        if row.attempts > 0 and self._save(key, row, len(positions)):
            await self._checkpoint()
        self._report()

    def first_position(self, key: str) -> int:
        """The position of the first row whose key is ``key``."""
        return self._groups[key][0]

    def show_batch(self, line: str, waiting: int) -> None:
        """The batches' state for the bar (``line``) and the rows ``waiting`` in them."""
        self._batch_line, self._running = line, waiting
        self._report()

    def _fan_out(self, row: MapRow, positions: list[int]) -> None:
        """``row``'s outcome for every row of ``positions``: those after the first are its
        copies (duplicates of a row run now; a stored row's are stored too), costing nothing."""
        source: RowSource = "duplicate" if row.source == "run" else row.source
        for position in positions:
            if position != row.position:
                index = self.rows[position].index
                self._record(replace(row, position=position, index=index, usage=Usage(), source=source))
            else:
                self._record(row)

    def _record(self, row: MapRow) -> None:
        self._outcomes[row.position] = row
        if row.ok:
            self._done += 1
        else:
            self._failed += 1

    def _save(self, key: str, row: MapRow, copies: int) -> bool:
        """Write ``row`` to the store (``True``: a checkpoint is due); a store that fails to
        write is given up (said in the result), and the map goes on in memory."""
        if self.store is None or self._store_problem is not None:
            return False
        output = row.output.model_dump_json() if row.output is not None else None
        try:
            return self.store.put(StoredRow(key, row.text, output, row.error, row.usage, row.attempts, row.seconds, copies))
        except sqlite3.Error as exc:
            self._store_problem = f"{self.store.path}: {type(exc).__name__}: {exc}"
            log.warning("map %s: rows are no longer stored: %s", self.id, self._store_problem)
            return False

    async def _checkpoint(self) -> None:
        """The store's checkpoint, on a worker thread (this worker waits; the others go on)."""
        if self.store is None:
            return
        try:
            await run_blocking(self.store.checkpoint)
        except sqlite3.Error as exc:  # the rows are in the log all the same; the next one tries again
            log.warning("map %s: a checkpoint of its store failed: %s", self.id, exc)

    async def _row(self, position: int) -> MapRow:
        row = self.rows[position]
        prompt = fill(self.template, row)
        account = self.account.child()  # the row's, over all of its attempts
        began: float | None = None

        def outcome(
            attempts: int, *, text: str | None = None, error: str | None = None, output: BaseModel | None = None
        ) -> MapRow:
            seconds = self.clock() - began if began is not None else 0.0
            return MapRow(position, row.index, text, error, account.snapshot(), attempts, output, seconds)

        for attempt in range(1, self.retry.max_retries + 2):
            await self._hold_back()
            if self._stopped is not None:
                return outcome(attempt - 1, error=self._stopped)
            began = self.clock() if began is None else began
            self._running += 1
            self._report()
            verdicts: list[BaseModel | str] = []
            run = self.backend.run if self.backend is not None else self.runner.run
            try:
                result = await run(
                    self.row, prompt, self.parent, task_id=f"{self.id}-{position + 1}", account=account,
                    watched=False, wrap_provider=self._shaper(), follow_up=self._checker(verdicts),
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
            if result.stop_reason in BUDGET_STOPS:
                return outcome(attempt, text=result.final_text, error=f"out of budget ({result.stop_reason})")
            if result.stop_reason in EARLY_STOPS:
                return outcome(attempt, text=result.final_text, error=f"stopped: {result.stop_reason}")
            if self.output is None:
                return outcome(attempt, text=result.final_text)
            verdict = verdicts[-1] if verdicts else "no answer was checked"
            if isinstance(verdict, str):
                return outcome(attempt, text=result.final_text, error=f"the answer did not fit the output twice: {verdict}")
            return outcome(attempt, text=result.final_text, output=verdict)
        raise AssertionError("unreachable: the last attempt returns")

    def _shaper(self) -> Callable[[Provider], Provider] | None:
        output = self.output
        return None if output is None else (lambda provider: AnswerShaper(provider, output))

    def _checker(self, verdicts: list[BaseModel | str]) -> Callable[[RunResult], str | None] | None:
        """A typed row's ``follow_up``: check each answer into ``verdicts``; ask once more
        when the first does not fit."""
        output = self.output
        if output is None:
            return None

        def check(result: RunResult) -> str | None:
            if result.stop_reason in EARLY_STOPS:
                return None
            verdict = output.check(result.final_text)
            verdicts.append(verdict)
            return output.fix_prompt(verdict) if isinstance(verdict, str) and len(verdicts) == 1 else None

        return check

    def _back_off(self, delay: float) -> None:
        """Hold back every worker's next attempt for ``delay`` seconds from now."""
        self._resume_at = max(self._resume_at, self.clock() + delay)

    async def _hold_back(self) -> None:
        while (wait := self._resume_at - self.clock()) > 0:
            await self.sleep(wait)
