"""``h.map(..., estimate=True)``: a sample of the rows, spread over them, projected onto the
whole map — tokens and USD against a known script over real HTTP, time on an injected
clock — with an 80% range; the sample's rows are stored and the real map does not pay
them again (checked at the fake server)."""

from __future__ import annotations

import asyncio
import math
import re
import statistics

import pytest

from harness_nb import Harness
from harness_nb.core import AssistantMessage, Usage
from harness_nb.providers.base import ModelRequest, ModelResponse, Provider
from harness_nb.subagents.agent_map import AgentMap
from harness_nb.subagents.map_result import Z_80, Projection
from harness_nb.testing import FakeLLMServer
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

ROW = re.compile(r"ROW<r(\d+)>")


def number_of(body) -> int:
    for message in body.get("messages", []):
        if isinstance(message.get("content"), str) and (found := ROW.search(message["content"])):
            return int(found.group(1))
    raise AssertionError(f"no ROW<r…> in {body}")


def expected(values: list[float], left: int, scale: float = 1.0) -> tuple[float, float, float]:
    """The projection's (expected, low, high), computed here the long way."""
    mean, var = statistics.fmean(values), statistics.variance(values)
    spread = Z_80 * math.sqrt(left * var + left * left * var / len(values))
    return left * mean / scale, max(left * mean - spread, 0) / scale, (left * mean + spread) / scale


async def test_an_estimate_projects_a_known_script_and_the_map_then_runs_only_the_rest(tmp_path):
    # row rN reads 100·(N+1) tokens at $10 a million: its cost is $0.001·(N+1)
    def answer(body):
        return {"text": "ok", "usage": {"input_tokens": 100 * (number_of(body) + 1), "output_tokens": 0}}

    rows = [f"r{i}" for i in range(10)]
    async with FakeLLMServer([answer], loop=True) as srv:
        h = Harness(
            "openai-compatible/m", workdir=tmp_path, base_url=srv.url + "/v1", include_user_agents=False,
            sandbox="off", prices={"m": {"input": 10.0, "output": 10.0}},
        )
        OPEN.append(h)
        estimate = await h.map("general-purpose", "ROW<{value}>", rows + ["r0"], estimate=True, sample=4)
        sampled = sorted(number_of(r.body) for r in srv.requests)
        assert sampled == [0, 2, 5, 7]  # spread over the rows, not the first four
        assert [m.info.kind for m in h.maps()] == ["estimate"]

        tokens = [100.0, 300.0, 600.0, 800.0]
        assert (estimate.rows, estimate.unique, estimate.left, len(estimate.sample)) == (11, 10, 6, 4)
        low_high = expected(tokens, 6)
        t = estimate.tokens
        assert t is not None and t.spent == 1800 and (t.expected, t.low, t.high) == pytest.approx(low_high)
        assert t.total == pytest.approx(1800 + 2700)  # the script's true total is 5,500: inside the range
        assert t.spent + t.low < 5500 < t.spent + t.high
        assert (t.row_p10, t.row_p90) == pytest.approx((160.0, 740.0))
        c = estimate.cost
        assert c is not None and c.spent == pytest.approx(0.018)
        assert (c.expected, c.low, c.high) == pytest.approx(tuple(v / 100_000 for v in low_high))
        text = estimate.summary()
        assert text.startswith(
            "estimate for general-purpose over 11 rows from 4 sample rows (10 distinct, 6 left to run; "
            "the sample's are stored and not run again)"
        )
        assert "  tokens  ~4,500 (80%: " in text and "a row 160–740 (p10–p90)" in text
        assert "  cost    ~$0.0450 (80%: " in text and "the sample spent $0.0180" in text

        srv.requests.clear()
        result = await h.map("general-purpose", "ROW<{value}>", rows)  # takes the estimate's store over
    assert sorted(number_of(r.body) for r in srv.requests) == [1, 3, 4, 6, 8, 9]
    assert result.texts == ["ok"] * 10 and result.map_id == estimate.map_id
    assert [m.info.kind for m in h.maps()] == ["map"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Timed(Provider):
    """Row rN takes N seconds on the clock."""

    name = "timed"

    def __init__(self, clock: Clock) -> None:
        super().__init__("timed")
        self.clock = clock
        self.asked: list[int] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        number = int(ROW.search(str(request.messages[0].content)).group(1))  # type: ignore[union-attr]
        self.asked.append(number)
        self.clock.now += number
        await asyncio.sleep(0)
        return ModelResponse(message=AssistantMessage(content="ok"), usage=Usage(input_tokens=10, output_tokens=1))


async def test_an_estimate_projects_time_at_the_map_s_concurrency_and_says_when_no_price_is_known(tmp_path):
    clock = Clock()
    provider = Timed(clock)
    provider.streaming = False
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, sandbox="off")
    OPEN.append(h)
    mapped = AgentMap(
        h._parts.runner, h.registry.get("general-purpose"), "ROW<{value}>", [f"r{i}" for i in range(1, 7)],
        h.lead_context(), concurrency=1, clock=clock,
    )
    estimate = await mapped.estimate(3)
    assert provider.asked == [1, 3, 5]
    seconds = estimate.seconds
    assert seconds is not None and [row.seconds for row in estimate.sample] == [1, 3, 5]
    assert (seconds.expected, seconds.low, seconds.high) == pytest.approx(expected([1, 3, 5], 3))
    assert estimate.cost is None and "cost    unknown: the model has no price" in estimate.summary()
    assert estimate.map_id is None  # no store given: nothing was written


def test_a_projection_of_one_row_has_no_spread():
    one = Projection.of([120.0], 9)
    assert (one.spent, one.expected, one.low, one.high, one.row_p10, one.row_p90) == (120, 1080, 1080, 1080, 120, 120)
