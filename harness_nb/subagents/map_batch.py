"""A map in batch mode (``h.map(..., mode="batch")``): every row one model call, sent
through the vendor's batch API (``providers/batch.py``) at half the online price.

- **Only one call, no tools.** A row's agent must offer no tool (``tools: []``) and name no
  MCP server: a batch request cannot run a tool loop. It is told what a map row is told
  (``row_definition``), its system prompt built as a subagent's; the request is what the
  online row's first call would be. Anything else is a ``ConfigError`` before any row is
  sent (``BatchRun.prepare``), as is a model whose vendor has no batch API.
- **Submitted once, recorded at once.** The rows left are encoded in order into batches of
  at most ``batch_size`` rows and the vendor's own bounds (``Packer``), each submitted as
  soon as it is full and written to the map's store as soon as the vendor has made it,
  with its rows' keys (the ``custom_id`` of each request is the row's key).
- **Durable.** A map restarted mid-batch (``resume=True`` after a crash, a restart, an
  interrupt) finds its batches still waiting in the store and polls them; only rows in no
  batch are submitted. Results are stored as they are read, committed a hundred rows at a
  time; a batch is ended in the store only once all its rows are, so a crash in between
  reads its results again.
- **Polling** at once, then every ``PollPolicy`` interval, growing from ``first`` by
  ``factor`` up to ``most`` seconds (an injected ``sleep`` in tests); the progress bar
  shows each batch's state. A poll that fails on the way (a dropped connection) is tried
  again at the next interval; one the vendor refuses fails that batch's rows, and the batch
  stays waiting in the store for a resume — unless the vendor does not know it (404): then
  it is ended there, and a resume sends its rows again.
- **Outcomes.** A row answered is done, priced at batch rates (``Price.batch``); a request
  the vendor refused, a failed batch, an answer cut at ``max_tokens`` or an empty one fail
  its row with the reason; rows an expired or cancelled batch never ran fail as "not run",
  the other rows of such a batch keep their answers. ``resume=True`` sends the failed rows
  again.
- **Typed outputs** ask for the shape inside each request (``AnswerShaper``: OpenAI's
  ``response_format``, Anthropic's forced answer tool). An answer that does not fit is
  asked once more, in a batch of its own (round 2, the answer and the problem in its
  conversation), and fails its row when it does not fit again.
- **Budget.** Before a row is sent, its most is held against what the map has left: its
  input at four characters a token, its output at ``max_tokens`` (as many tokens as its
  input when none is sent), at batch prices. The rows past what is left are not sent, each
  saying so; their cost is known only when their results come back.
- **Interrupts** stop the polling, never the batches: they run on at the vendor, and a
  ``resume`` collects them. ``cancel_batches`` asks the vendor to stop a map's batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ..core import AssistantMessage, ConfigError, Message, ProviderError, Usage, UserMessage, run_blocking
from ..core.secret import SECRETS
from ..engine import MemorySession
from ..engine.context import UsageAccount
from ..providers.base import ModelRequest, Provider
from ..providers.batch import BatchAnswer, BatchAPI, BatchState, Packer, batch_api
from ..providers.http import HTTPProvider
from .map_output import AnswerShaper
from .map_result import MapRow
from .map_rows import fill
from .map_store import STORE_FILE, MapStore, StoredBatch

if TYPE_CHECKING:
    from .agent_map import AgentMap

__all__ = ["BatchRun", "PollPolicy", "cancel_batches"]

log = logging.getLogger("harness_nb.subagents")

CHARS_PER_TOKEN = 4  # a request's most, before it is sent (its usage, once back, is the vendor's)
REFUSED_BUDGET = (
    "not run: the map's budget does not cover this row's most at batch prices (its input at four characters "
    "a token, its output at max_tokens)"
)


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """How often a map polls its batches: after ``first`` seconds, then each wait
    ``factor`` times the last, at most ``most`` seconds."""

    first: float = 5.0
    factor: float = 1.5
    most: float = 120.0

    def waits(self) -> Callable[[], float]:
        """A fresh sequence of waits: each call gives the next."""
        wait = self.first / self.factor

        def next_wait() -> float:
            nonlocal wait
            wait = min(wait * self.factor, self.most)
            return wait

        return next_wait


@dataclass(slots=True)
class _Waiting:
    """A batch being polled: what the store holds of it, and its last state."""

    stored: StoredBatch
    state: BatchState | None = None
    problem: str | None = None  # why its last poll failed (it is polled again)


class BatchRun:
    """The rows of ``mapped`` sent through its model's batch API (see the module doc);
    ``size``: most rows a batch (the vendor's most when ``None``)."""

    def __init__(self, mapped: AgentMap, *, size: int | None = None, poll: PollPolicy | None = None) -> None:
        self.map = mapped
        self.size = size
        self.poll = poll or PollPolicy()
        self.system = ""
        self.provider: HTTPProvider | None = None
        self.shaper: AnswerShaper | None = None
        self.api: BatchAPI | None = None
        self._waiting: list[_Waiting] = []
        self._batch_of: dict[str, str] = {}  # the batch each key of the waiting batches is in
        self._scope: set[str] = set()  # keys this run still waits for
        self._first: dict[str, tuple[str, str, Usage]] = {}  # a typed row's first answer, its problem and usage
        self._next_check: float | None = None

    # -- before any row is sent --------------------------------------------------------------

    async def prepare(self) -> None:
        """Check the row's agent can run as one call (no tools, no MCP server), build its
        system prompt and find its model's batch API: ``ConfigError`` otherwise."""
        mapped = self.map
        definition = mapped.row
        if definition.mcp_servers:
            raise ConfigError(
                f"mode='batch' runs each row as one model call without tools, and agent {definition.name} names MCP "
                "servers: give the map an agent without them, or run it without mode='batch'"
            )
        child = mapped.runner.build(
            definition, mapped.parent, task_id=f"{mapped.id}-batch", background=False, watched=False,
            session=MemorySession(),
        )
        try:
            tools = child.engine.tools
            if len(tools):
                raise ConfigError(
                    f"mode='batch' runs each row as one model call without tools, and agent {definition.name} has "
                    f"{', '.join(tools.names())}: give the map an agent with no tools (an agent file's `tools: []`, "
                    "or SubAgentDefinition(..., tools=[])), or run it without mode='batch'"
                )
            await child.engine.prompt_builder.refresh(tools)
            self.system = child.engine.session.secrets.scrub(child.engine.prompt_builder.build(tools))
        finally:
            child.engine.session.close()
        provider = child.context.provider
        self.api = batch_api(provider)
        self.provider = self.api.provider
        if mapped.output is not None:
            self.shaper = AnswerShaper(provider, mapped.output)

    # -- running -----------------------------------------------------------------------------

    async def run(self, keys: Sequence[str]) -> None:
        """Collect the rows of ``keys``: poll the batches the store has waiting for them,
        send the others, and poll until every batch has ended (see the module doc)."""
        mapped = self.map
        self._scope = set(keys)
        if mapped.store is not None:
            for stored in await run_blocking(mapped.store.batches, waiting=True):
                if self._scope.intersection(stored.keys):
                    self._wait_for(_Waiting(stored))
        fresh = [key for key in keys if key not in self._batch_of]
        self._show()
        await self._send(fresh, round_=1)
        next_wait = self.poll.waits()
        while self._waiting:
            fixes = await self._poll_all()
            if fixes:
                await self._send(fixes, round_=2)
                next_wait = self.poll.waits()
                continue  # the new batch is polled at once, like every new one
            if not self._waiting:
                break
            wait = next_wait()
            self._next_check = mapped.clock() + wait
            self._show()
            await mapped.sleep(wait)
            self._next_check = None
        self._next_check = None
        self._show()

    def waiting_batch(self, key: str) -> str | None:
        """The id of the batch ``key`` waits in, if any (what an interrupted row says)."""
        return self._batch_of.get(key) if key in self._scope else None

    def _wait_for(self, waiting: _Waiting) -> None:
        self._waiting.append(waiting)
        self._batch_of.update(dict.fromkeys(waiting.stored.keys, waiting.stored.id))

    async def _send(self, keys: Sequence[str], *, round_: int) -> None:
        """Encode ``keys``' requests in order, admit those the budget covers, and submit
        each batch as soon as it is full (so no more than one batch is held encoded)."""
        api, mapped = self.api, self.map
        assert api is not None, "prepare() first"
        batch = Packer(min(self.size or api.max_requests, api.max_requests), api.max_bytes)
        left_usd, left_tokens = mapped.parent.remaining_usd(), mapped.parent.remaining_tokens()
        price = mapped.parent.prices.lookup(self._provider().model_id, self._provider().model)
        for number, key in enumerate(keys):
            request = self._request(key, round_)
            line = api.encode(key, self._provider().body(request, stream=False))
            most = self._most(line, request)
            cost = price.cost(most, batch=True) if price is not None else 0.0
            if (left_usd is not None and cost > left_usd) or (left_tokens is not None and most.total_tokens > left_tokens):
                for refused in keys[number:]:
                    await self._fail(refused, REFUSED_BUDGET)
                break
            left_usd = left_usd - cost if left_usd is not None else None
            left_tokens = left_tokens - most.total_tokens if left_tokens is not None else None
            if not batch.fits(line) and not await self._submit(batch, round_, later=keys[number:]):
                return
            batch.add(key, line)
            if number % 100 == 99:
                await asyncio.sleep(0)  # let the kernel answer its cells while 100,000 rows are encoded (~10 ms a turn)
        if batch.keys:
            await self._submit(batch, round_, later=())

    async def _submit(self, batch: Packer, round_: int, *, later: Sequence[str]) -> bool:
        """Submit ``batch`` and record it at once (then empty it); ``False`` when the vendor
        refused it: its rows fail, and so do the ``later`` ones (they would be refused too)."""
        api, mapped = self.api, self.map
        assert api is not None
        keys, lines = batch.take()
        try:
            state = await api.submit(lines, label=f"{mapped.id}-r{round_}-{len(self._waiting) + 1}")
        except ProviderError as exc:
            for key in (*keys, *later):
                await self._fail(key, f"the batch could not be submitted: {exc}")
            return False
        stored = StoredBatch(state.id, self._provider().model_id, round_, tuple(keys), state.status, time.time())
        if mapped.store is not None:  # at once, before anything can interrupt: the rows are paid for
            mapped.store.add_batch(stored)
        self._wait_for(_Waiting(stored, state))
        self._show()
        return True

    def _request(self, key: str, round_: int) -> ModelRequest:
        """The request of ``key``'s row: its prompt; in round 2 also its first answer and
        what did not fit in it."""
        mapped = self.map
        prompt = fill(mapped.template, mapped.rows[mapped.first_position(key)])
        messages: list[Message] = [UserMessage(content=SECRETS.scrub(prompt))]
        if round_ == 2 and mapped.output is not None:
            text, problem, _usage = self._first[key]
            messages += [AssistantMessage(content=text), UserMessage(content=mapped.output.fix_prompt(problem))]
        request = ModelRequest(
            system=self.system, messages=messages, agent=mapped.row.name, effort=mapped.row.effort
        )
        return self.shaper.shaped(request) if self.shaper is not None else request

    def _most(self, line: bytes, request: ModelRequest) -> Usage:
        """The most a request can use, before it is sent (see the module doc)."""
        tokens_in = len(line) // CHARS_PER_TOKEN + 1
        tokens_out = self._provider().output_limit(request) or tokens_in
        return Usage(input_tokens=tokens_in, output_tokens=tokens_out)

    async def _poll_all(self) -> list[str]:
        """Poll every waiting batch once; collect those that ended. The keys of typed
        answers that did not fit in round 1, to ask again."""
        api = self.api
        assert api is not None
        fixes: list[str] = []
        for waiting in list(self._waiting):
            try:
                state = await api.poll(waiting.stored.id)
            except ProviderError as exc:
                if exc.retryable:
                    waiting.problem = f"its last check failed ({exc}); checked again later"
                    continue
                await self._give_up(waiting, f"batch {waiting.stored.id} could not be checked: {exc}", gone=exc.status == 404)
                continue
            waiting.state, waiting.problem = state, None
            if state.status != waiting.stored.status and self.map.store is not None:
                self.map.store.batch_status(waiting.stored.id, state.status)
            if state.ended:
                fixes += await self._collect(waiting, state)
            self._show()
        return fixes

    async def _collect(self, waiting: _Waiting, state: BatchState) -> list[str]:
        """Take an ended batch's results into the rows; the round-1 misfits to ask again."""
        api, stored = self.api, waiting.stored
        assert api is not None
        fixes: list[str] = []
        mine = set(stored.keys) & self._scope
        if state.outcome == "failed":
            for key in sorted(mine, key=self.map.first_position):
                await self._fail(key, f"its batch {stored.id} failed: {state.problem}")
        else:
            try:
                with self._grouped() as commit:
                    async for number, answer in _numbered(api.results(state)):
                        if answer.custom_id in mine:
                            mine.discard(answer.custom_id)
                            if await self._answered(answer, stored.round):
                                fixes.append(answer.custom_id)
                        if number % 100 == 99:
                            commit()
                            await asyncio.sleep(0)  # a file read at once would not give the loop a turn
            except ProviderError as exc:  # its misfits fail with the rest: nothing is asked again
                await self._give_up(waiting, f"the results of batch {stored.id} could not be read: {exc}")
                return []
            for key in sorted(mine, key=self.map.first_position):
                await self._fail(key, self._unanswered(state))
        self._waiting.remove(waiting)
        if self.map.store is not None:
            self.map.store.batch_status(stored.id, state.status, ended=True)
        return fixes

    @contextlib.contextmanager
    def _grouped(self) -> Iterator[Callable[[], None]]:
        """The store's rows committed a hundred at a time while a batch's results are read
        (``MapStore.group``); the batch is ended in the store only after, so a crash before
        loses nothing its results cannot give again. Yields the commit."""
        store = self.map.store
        if store is None:
            yield lambda: None
            return
        with store.group():
            yield store.commit

    @staticmethod
    def _unanswered(state: BatchState) -> str:
        if state.outcome == "expired":
            return "not run: its batch's 24 hours ran out before it"
        if state.outcome == "cancelled":
            return "not run: its batch was cancelled before it"
        return f"batch {state.id} ended ({state.status}) without an answer for this row"

    async def _give_up(self, waiting: _Waiting, reason: str, *, gone: bool = False) -> None:
        """Fail the rows of a batch that cannot be followed now; it stays waiting in the
        store, for a ``resume`` to poll again — unless the vendor has no such batch
        (``gone``): then it is ended there, and a resume sends its rows again."""
        keys = set(waiting.stored.keys) & self._scope
        again = "resume=True sends them again" if gone else "resume=True checks it again"
        for key in sorted(keys, key=self.map.first_position):
            await self._fail(key, f"{reason}; {again}")
        self._waiting.remove(waiting)
        if gone and self.map.store is not None:
            self.map.store.batch_status(waiting.stored.id, "not found", ended=True)

    async def _answered(self, answer: BatchAnswer, round_: int) -> bool:
        """Settle the row of ``answer``; ``True``: a typed answer that did not fit in round
        1, kept to ask again."""
        mapped, key = self.map, answer.custom_id
        if answer.response is None:
            await self._fail(key, answer.error or "no answer", attempts=0 if answer.not_run else 1)
            return False
        response = self.shaper.answered(answer.response) if self.shaper is not None else answer.response
        provider = self._provider()
        usage = mapped.parent.prices.priced(response.usage, provider.model_id, provider.model, response.model, batch=True)
        account = UsageAccount(mapped.account)
        account.credit(usage, turns=1)
        if key in self._first:  # round 2: the row's usage is both calls'
            account.usage.add(self._first[key][2])
            account.usage.turns += 1
        text = response.message.content
        attempts = round_
        if response.stop_reason == "max_tokens":
            await self._settle(key, text=text, error="stopped: max_tokens", usage=account.snapshot(), attempts=attempts)
            return False
        if mapped.output is None:
            error = None if text.strip() else "stopped: empty_answer"
            await self._settle(key, text=text, error=error, usage=account.snapshot(), attempts=attempts)
            return False
        verdict = mapped.output.check(text)
        if not isinstance(verdict, str):
            await self._settle(key, text=text, output=verdict, usage=account.snapshot(), attempts=attempts)
            return False
        if round_ == 1:
            self._first[key] = (text, verdict, usage)
            error = f"the answer did not fit the output: {verdict} (asked once more, in a batch)"
            await mapped.settle(key, self._row(key, text=text, error=error, usage=usage, attempts=1), final=False)
            return True
        await self._settle(
            key, text=text, error=f"the answer did not fit the output twice: {verdict}", usage=account.snapshot(),
            attempts=attempts,
        )
        return False

    async def _settle(
        self, key: str, *, text: str | None = None, error: str | None = None, output: BaseModel | None = None,
        usage: Usage | None = None, attempts: int = 1,
    ) -> None:
        self._scope.discard(key)
        self._first.pop(key, None)
        await self.map.settle(key, self._row(key, text=text, error=error, output=output, usage=usage, attempts=attempts))

    async def _fail(self, key: str, reason: str, *, attempts: int = 0) -> None:
        await self._settle(key, error=reason, attempts=attempts)

    def _row(
        self, key: str, *, text: str | None = None, error: str | None = None, output: BaseModel | None = None,
        usage: Usage | None = None, attempts: int = 1,
    ) -> MapRow:
        position = self.map.first_position(key)
        index = self.map.rows[position].index
        return MapRow(position, index, text, error, usage or Usage(), attempts, output)

    def _provider(self) -> HTTPProvider:
        assert self.provider is not None, "prepare() first"
        return self.provider

    # -- what the bar shows ------------------------------------------------------------------

    def line(self) -> str:
        """``batch in_progress 412/1,000 · next check in 45 s`` (several: each state once,
        with how many batches are in it)."""
        states = [w.state.line() if w.state is not None else "submitted" for w in self._waiting]
        if not states:
            return "batch: submitting" if self._scope else "batch: done"
        if len(states) == 1:
            shown = f"batch {states[0]}"
        else:
            counted: dict[str, int] = {}
            for w in self._waiting:
                word = w.state.status if w.state is not None else "submitted"
                counted[word] = counted.get(word, 0) + 1
            shown = f"{len(states)} batches: " + ", ".join(f"{n} {word}" for word, n in counted.items())
        problems = [w.problem for w in self._waiting if w.problem]
        if problems:
            shown += f" · {problems[0]}"
        if self._next_check is not None:
            shown += f" · next check in {max(self._next_check - self.map.clock(), 0):.0f} s"
        return shown

    def waiting_rows(self) -> int:
        """Rows of this run in batches not yet ended."""
        return sum(len(self._scope.intersection(w.stored.keys)) for w in self._waiting)

    def _show(self) -> None:
        self.map.show_batch(self.line(), self.waiting_rows())


async def _numbered(items: AsyncIterator[BatchAnswer]) -> AsyncIterator[tuple[int, BatchAnswer]]:
    number = 0
    async for item in items:
        yield number, item
        number += 1


async def cancel_batches(folder: Path, map_id: str, provider_for: Callable[[str], Provider]) -> list[BatchState]:
    """Ask the vendor to stop every batch of stored map ``map_id`` not yet ended; the
    store records their state. The next ``resume=True`` of the map polls them to their end
    and takes what they answered (the rest fail as not run, and a later resume sends them
    again). A batch the vendor does not know (404) is ended in the store, its rows left to
    send again. ``provider_for`` gives the provider of a batch's ``provider/model``."""
    path = folder / map_id / STORE_FILE
    if not path.is_file():
        raise ConfigError(f"no stored map {map_id!r} under {folder}; h.maps() lists the stored ones")
    store = await run_blocking(MapStore.open, path)
    try:
        states = []
        for stored in await run_blocking(store.batches, waiting=True):
            try:
                state = await batch_api(provider_for(stored.model)).cancel(stored.id)
            except ProviderError as exc:
                if exc.status != 404:
                    raise
                store.batch_status(stored.id, "not found", ended=True)
                states.append(BatchState(stored.id, "not found", ended=True, problem=str(exc)))
                continue
            store.batch_status(stored.id, state.status)
            states.append(state)
        return states
    finally:
        store.close()
