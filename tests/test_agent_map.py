"""``Harness.map`` / ``AgentMap``: one subagent run per row — results in row order, bounded
concurrency, retries with a shared backoff, a failing row that does not stop the others,
the budget, an interrupt that keeps what finished, and the progress it reports.

Real HTTP (the fake LLM server) where the rows' answers matter; a gated in-process provider
where the test must hold rows mid-call to prove concurrency and interrupts, and an injected
clock for the backoff and the ETA (no test measures wall-clock time)."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pandas as pd
import pytest

from harness_nb import Harness
from harness_nb.core import AssistantMessage, ConfigError, ProviderError, Usage
from harness_nb.providers.base import ModelRequest, ModelResponse, Provider, TextChunk
from harness_nb.providers.http import RetryPolicy
from harness_nb.subagents.agent_map import NOT_RUN_INTERRUPTED, AgentMap, MapProgress
from harness_nb.testing import FakeLLMServer
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

ROW = re.compile(r"ROW<(.*?)>")


def answered(text: str) -> ModelResponse:
    return ModelResponse(message=AssistantMessage(content=text), usage=Usage(input_tokens=10, output_tokens=2))


def row_of(body) -> str:
    """The row a request is for: the ``ROW<…>`` its user messages carry."""
    for message in body.get("messages", []):
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
        for text in texts:
            if found := ROW.search(text or ""):
                return found.group(1)
    raise AssertionError(f"no ROW<…> in {body}")


def http_harness(tmp_path, server: FakeLLMServer, **kwargs) -> Harness:
    h = Harness(
        "openai-compatible/m",
        workdir=tmp_path,
        base_url=server.url + "/v1",
        include_user_agents=False,
        sandbox="off",
        provider_options={"max_retries": 0},  # the map's own retries are under test
        **kwargs,
    )
    OPEN.append(h)
    return h


async def test_rows_come_back_in_row_order_with_a_failing_row_kept_beside_the_others(tmp_path):
    def answer(body):
        row = row_of(body)
        if row == "sour":
            return {"raw": '{"error": {"message": "this row is refused"}}', "status": 400, "content_type": "application/json"}
        return {"text": f"label:{row.upper()}", "usage": {"input_tokens": 100, "output_tokens": 10}}

    async with FakeLLMServer([answer], loop=True) as srv:
        h = http_harness(tmp_path, srv)
        reviews = pd.Series(["sweet", "sour", "salty", "bitter"], index=["a", "b", "c", "d"])
        seen: list[MapProgress] = []
        result = await h.map("general-purpose", "Label ROW<{value}> (row {index})", reviews, concurrency=3, on_progress=seen.append)

    assert result.texts == ["label:SWEET", None, "label:SALTY", "label:BITTER"]
    assert list(result.errors) == ["b"] and "this row is refused" in result.errors["b"]
    column = result.series()
    assert list(column.index) == ["a", "b", "c", "d"] and column["c"] == "label:SALTY" and column.isna()["b"]
    frame = result.frame()
    assert frame.loc["a", "tokens"] == 110 and frame.loc["b", "attempts"] == 1
    assert result.usage.total_tokens == 330 == h.usage.total_tokens  # billed to the harness too
    assert seen[-1].finished == 4 and (seen[-1].done, seen[-1].failed, seen[-1].running) == (3, 1, 0)
    assert "general-purpose over 4 rows: 3 done, 1 failed" in result.summary()


async def test_a_rate_limited_row_is_retried_and_succeeds(tmp_path):
    attempts: Counter[str] = Counter()

    def answer(body):
        row = row_of(body)
        attempts[row] += 1
        if row == "busy" and attempts[row] <= 2:
            return {"fault": "rate_limit", "retry_after": 0}
        return {"text": f"ok {row}"}

    async with FakeLLMServer([answer], loop=True) as srv:
        h = http_harness(tmp_path, srv)
        result = await h.map("general-purpose", "ROW<{value}>", ["calm", "busy", "still"], concurrency=2)
    assert result.texts == ["ok calm", "ok busy", "ok still"]
    assert [row.attempts for row in result] == [1, 3, 1]

    attempts.clear()
    async with FakeLLMServer([answer], loop=True) as srv:
        h = http_harness(tmp_path, srv)
        given_up = await h.map("general-purpose", "ROW<{value}>", ["busy"], retries=1)
    assert given_up.texts == [None] and "429" in given_up.errors[0] and "after 2 attempts" in given_up.errors[0]


async def test_dataframe_rows_fill_columns_and_a_bad_template_is_refused_before_any_call(tmp_path):
    async with FakeLLMServer([lambda body: {"text": row_of(body)}], loop=True) as srv:
        h = http_harness(tmp_path, srv)
        df = pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3, 19]}, index=[10, 20])
        result = await h.map("general-purpose", "ROW<{city}={temp}>", df)
        assert result.texts == ["Oslo=3", "Lima=19"] and [row.index for row in result] == [10, 20]
        for template, problem in [
            ("no field at all", "names no field"),
            ("ROW<{value.__class__}>", "not a plain name"),
            ("ROW<{value[0]}>", "not a plain name"),
            ("ROW<{town}>", "not among the row's fields: city, index, temp, value"),
            ("ROW<{value>", "expected '}'"),
        ]:
            with pytest.raises(ConfigError, match=re.escape(problem)):
                await h.map("general-purpose", template, df)
        with pytest.raises(ConfigError, match="concurrency must be a whole number of 1 or more"):
            await h.map("general-purpose", "{value}", [1], concurrency=0)
        with pytest.raises(ConfigError, match="map rows must be a list"):
            await h.map("general-purpose", "{value}", "abc")
        assert len(srv.requests) == 2  # only the good map called the model


async def test_the_map_budget_stops_starting_rows_once_it_is_spent(tmp_path):
    costly = {"text": "done", "usage": {"input_tokens": 10_000, "output_tokens": 0}}
    async with FakeLLMServer([costly], loop=True) as srv:
        h = http_harness(tmp_path, srv, prices={"m": {"input": 1.0, "output": 1.0}})  # $0.01 a row
        result = await h.map("general-purpose", "ROW<{value}>", list(range(6)), concurrency=1, budget_usd=0.025)
    assert result.texts[:2] == ["done", "done"]
    assert all(text is None for text in result.texts[3:])
    assert all("budget" in result.errors[i] for i in range(3, 6))
    assert len(srv.requests) <= 3 and result.usage.cost is not None and result.usage.cost <= 0.03


class Gated(Provider):
    """Answers each row only when the test opens that row's gate; counts rows in flight."""

    name = "gated"

    def __init__(self) -> None:
        super().__init__("gated")
        self.gates: dict[str, asyncio.Event] = {}
        self.in_flight = 0
        self.most_in_flight = 0
        self.started: list[str] = []

    def gate(self, row: str) -> asyncio.Event:
        return self.gates.setdefault(row, asyncio.Event())

    async def stream(self, request: ModelRequest):  # type: ignore[override]
        text = " ".join(str(m.content) for m in request.messages)
        row = ROW.search(text).group(1)
        self.started.append(row)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate(row).wait()
        finally:
            self.in_flight -= 1
        yield TextChunk(f"answer {row}")
        yield answered(f"answer {row}")


async def wait_until(condition, timeout: float = 30) -> None:
    """Until ``condition()`` holds. Not a count of loop turns: a run's setup reads files on
    worker threads, which a loaded machine finishes later."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.001)
    except TimeoutError:
        raise AssertionError(f"condition never held in {timeout:g} s") from None


async def test_at_most_concurrency_rows_run_at_once_and_rows_start_in_order(tmp_path):
    provider = Gated()
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, sandbox="off")
    OPEN.append(h)
    rows = [f"r{i}" for i in range(7)]
    mapped = asyncio.create_task(h.map("general-purpose", "ROW<{value}>", rows, concurrency=3))
    await wait_until(lambda: provider.in_flight == 3)
    # workers take rows in order; which of the first three reaches the model first depends
    # on whether its run had to read the skill folders first
    assert sorted(provider.started) == ["r0", "r1", "r2"]
    provider.gate("r1").set()  # one slot frees: the next row in order takes it
    await wait_until(lambda: provider.started[-1] == "r3" and provider.in_flight == 3)
    for row in rows:
        provider.gate(row).set()
    result = await mapped
    assert provider.most_in_flight == 3
    assert result.texts == [f"answer r{i}" for i in range(7)]


async def test_an_interrupt_cancels_running_rows_and_keeps_the_finished_ones(tmp_path):
    provider = Gated()
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, sandbox="off")
    OPEN.append(h)
    provider.gate("r0").set()
    provider.gate("r1").set()
    mapped = asyncio.create_task(h.map("general-purpose", "ROW<{value}>", [f"r{i}" for i in range(5)], concurrency=2))
    # r0 and r1 answered, r2 and r3 running (which of r1 and r2 reached the model first
    # depends on whether its run had to read the skill folders first)
    await wait_until(lambda: sorted(provider.started) == ["r0", "r1", "r2", "r3"] and provider.in_flight == 2)
    mapped.cancel()
    with pytest.raises(asyncio.CancelledError):
        await mapped
    partial = h.last_map.result()
    assert partial.interrupted and partial.texts[:2] == ["answer r0", "answer r1"]
    assert [partial.errors.get(i) for i in range(2, 5)] == [NOT_RUN_INTERRUPTED] * 3
    assert provider.in_flight == 0  # the rows that were running were cancelled, not left behind
    others = [t for t in asyncio.all_tasks() if t.get_name().startswith(f"harness_nb:{h.last_map.id}")]
    assert others == []


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class RateLimitedOnce(Provider):
    """The first request is refused with a 429 asking for ``wait`` seconds; every call and
    the refusal are logged with the clock's time."""

    name = "limited"

    def __init__(self, wait: float, clock: Clock) -> None:
        super().__init__("limited")
        self.wait = wait
        self.clock = clock
        self.log: list[tuple[str, float]] = []

    async def stream(self, request: ModelRequest):  # type: ignore[override]
        self.log.append(("call", self.clock()))
        if len(self.log) == 1:
            self.log.append(("429", self.clock()))
            raise ProviderError("rate limited", provider="limited", status=429, retryable=True, retry_after=self.wait)
        await asyncio.sleep(0)
        yield answered("fine")


def map_on(h: Harness, rows, clock: Clock, seen: list[MapProgress], concurrency: int) -> AgentMap:
    return AgentMap(
        h._parts.runner,
        h.registry.get("general-purpose"),
        "{value}",
        rows,
        h.lead_context(),
        concurrency=concurrency,
        retry=RetryPolicy(base_delay=1.0),
        on_progress=seen.append,
        clock=clock,
        sleep=clock.sleep,
    )


async def test_the_eta_follows_the_clock_and_a_rate_limit_waits_for_retry_after(tmp_path):
    clock = Clock()
    h = Harness(RateLimitedOnce(30, clock), workdir=tmp_path, include_user_agents=False, sandbox="off")
    OPEN.append(h)
    seen: list[MapProgress] = []
    result = await map_on(h, ["a", "b", "c", "d"], clock, seen, concurrency=1).run()
    assert result.texts == ["fine"] * 4 and result[0].attempts == 2
    assert clock.sleeps == [30]  # the server's Retry-After, waited once
    assert "rate-limited: waiting 30 s" in next(p for p in seen if p.waiting).line()
    # 30 s went by before the first row finished: the ETA says 30 s per row for the other 3
    first_done = next(p for p in seen if p.finished == 1)
    assert (first_done.elapsed, first_done.eta) == (30, 90)
    assert seen[-1].eta == 0 and seen[-1].line().startswith("4/4")


async def test_one_rate_limit_holds_back_every_worker_not_only_its_own(tmp_path):
    clock = Clock()
    provider = RateLimitedOnce(30, clock)
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, sandbox="off")
    OPEN.append(h)
    result = await map_on(h, [f"r{i}" for i in range(6)], clock, [], concurrency=3).run()
    assert result.texts == ["fine"] * 6
    refused = provider.log.index(("429", 100.0))
    later = [t for kind, t in provider.log[refused + 1 :] if kind == "call"]
    assert len(later) >= 4 and min(later) >= 130, provider.log


async def test_a_background_map_returns_at_once_is_a_task_and_can_be_stopped(tmp_path):
    provider = Gated()
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, sandbox="off")
    OPEN.append(h)
    provider.gate("r0").set()
    handle = await h.start_map("general-purpose", "ROW<{value}>", ["r0", "r1", "r2"], concurrency=1)
    assert not handle.done and h.tracker.get(handle.id).kind == "map"  # nothing has run yet
    await wait_until(lambda: provider.started == ["r0", "r1"])
    assert handle.progress().finished == 1 and handle.result().texts == ["answer r0", None, None]
    h.tracker.cancel(handle.id)  # %task stop
    result = await handle
    assert str(h.tracker.get(handle.id).status) == "cancelled"
    assert result.texts == ["answer r0", None, None] and result.errors[1] == NOT_RUN_INTERRUPTED
    assert provider.in_flight == 0

    provider.gate("s0").set()
    finished = await h.start_map("general-purpose", "ROW<{value}>", ["s0"])
    assert (await finished).texts == ["answer s0"]
    assert h.tracker.get(finished.id).outcome.startswith("general-purpose over 1 rows: 1 done, 0 failed")
    assert h.tracker.drain_completed() == []  # the person's map is not reported to the main agent
