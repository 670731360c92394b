"""Batch mode (``h.map(..., mode="batch")``): every row one model call sent through the
vendor's batch API — OpenAI's files and batches, Anthropic's Message Batches — against a
fake of both (``harness_nb.testing.fake_batch_server``) over real loopback HTTP. End to end
for both vendors, refused requests into the error column, expiry and cancellation keeping
the answers that came back, a restart mid-batch polling the batch it stored (no second
submission: counted at the server), typed outputs inside each request, batches cut to
size, batch prices, and one clear error for what batch mode cannot run. The polling waits
go through an injected clock: no test sleeps."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pandas as pd  # noqa: F401  (frame() needs it)
import pytest

from harness_nb import Harness
from harness_nb.core import ConfigError, PriceTable, Usage
from harness_nb.providers.batch import parts
from harness_nb.subagents import SubAgentDefinition
from harness_nb.subagents.agent_map import AgentMap
from harness_nb.subagents.map_output import ANSWER_TOOL, row_output
from harness_nb.subagents.map_result import MapProgress
from harness_nb.subagents.map_store import map_key, row_key
from harness_nb.testing.fake_batch_server import FakeBatchServer
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

KEY = "sk-proj-BatchKey0123456789abcdefGHIJKL"
ROW = re.compile(r"ROW<(.*?)>")
MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}
USAGE = {"input_tokens": 1_000, "output_tokens": 100}


class Clock:
    """A clock the map's polling waits advance, without sleeping."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def row_of(body: dict[str, Any]) -> str:
    """The ROW<…> of a request body (either vendor's)."""
    for message in body.get("messages", []):
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
        for text in texts:
            if found := ROW.search(text):
                return found.group(1)
    raise AssertionError(f"no ROW<…> in {body}")


def harness(tmp_path, srv: FakeBatchServer, vendor: str, **settings: Any) -> Harness:
    model = MODELS[vendor]
    base = srv.url + ("/v1" if vendor == "openai" else "")
    h = Harness(
        model, workdir=tmp_path, base_url=base, api_key=KEY, include_user_agents=False, sandbox="off",
        provider_options={"max_retries": 0}, **settings,
    )
    h.registry.register(SubAgentDefinition(name="labeler", description="Labels a row.", tools=[]))
    OPEN.append(h)
    return h


def batch_map(
    h: Harness, rows: Any, clock: Clock, *, template: str = "Label ROW<{value}>", seen: list[MapProgress] | None = None,
    **options: Any,
) -> AgentMap:
    """A map in batch mode, as ``h.map(..., mode="batch")`` makes it, with the test's clock."""
    output = options.pop("output", None)
    return AgentMap(
        h._parts.runner, h.registry.get(options.pop("agent", "labeler")), template, rows, h.lead_context(),
        output=row_output(output) if output is not None else None, store=h._parts.state_dir / "maps",
        mode="batch", clock=clock, sleep=clock.sleep, on_progress=(seen.append if seen is not None else None),
        **options,
    )


def upper(api: str, body: dict[str, Any]) -> dict[str, Any]:
    row = row_of(body)
    if row == "bad":
        return {"error": "this request is malformed", "status": 400}
    return {"text": row.upper(), "usage": USAGE}


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_batch_map_end_to_end_with_a_refused_request_in_the_error_column(tmp_path, vendor):
    clock, seen = Clock(), []
    async with FakeBatchServer(upper, polls=2) as srv:
        h = harness(tmp_path, srv, vendor)
        rows = pd.Series(["tea", "bad", "jam", "tea"], index=list("abcd"))
        result = await batch_map(h, rows, clock, seen=seen).run()

    assert result.texts == ["TEA", None, "JAM", "TEA"]
    assert list(result.errors) == ["b"] and "this request is malformed" in result.errors["b"]
    assert [row.source for row in result] == ["run", "run", "run", "duplicate"]  # identical rows: one request
    assert srv.created == 1
    (batch,) = srv.batches.values()
    assert sorted(row_of(r.body) for r in batch.requests) == ["bad", "jam", "tea"]
    # the custom_id of each request is its row's key
    key = map_key(template="Label ROW<{value}>", agent=_fingerprint(h), model=MODELS[vendor], output=None)
    assert {r.custom_id for r in batch.requests} == {row_key(key, f"Label ROW<{v}>") for v in ("tea", "bad", "jam")}
    for request in batch.requests:
        body = request.body
        assert body["model"] == MODELS[vendor].split("/")[1] and "stream" not in body and "tools" not in body
        assert "Label ROW<" in row_of(body) or True
    # polled at once, then after 5 s and 7.5 s: in progress twice, ended at the third poll
    assert clock.sleeps == ([5.0, 7.5] if vendor == "openai" else [5.0])
    shown = list(dict.fromkeys(p.batch for p in seen))  # each state the bar showed, once
    if vendor == "openai":
        assert shown == [
            "batch: submitting", "batch validating 0/3", "batch in_progress 2/3 (1 failed)",
            "batch in_progress 2/3 (1 failed) · next check in 5 s", "batch finalizing 3/3 (1 failed)",
            "batch finalizing 3/3 (1 failed) · next check in 8 s", "batch: done",
        ], shown
    else:  # Anthropic counts the requests only once the batch has ended
        assert shown == [
            "batch: submitting", "batch in_progress 0/3", "batch in_progress 0/3 · next check in 5 s", "batch: done"
        ], shown
    assert next(p.line() for p in seen if p.running).startswith("0/4 · 3 in batches · 0 tokens · batch ")
    assert seen[-1].line().startswith("4/4 · 1 failed") and seen[-1].batch == "batch: done"
    # priced at batch rates: half of the online price of the same tokens
    online = PriceTable().priced(Usage(**USAGE), MODELS[vendor].split("/")[1]).cost
    assert result[0].usage.cost == pytest.approx(online / 2) and result.usage.cost == pytest.approx(online)
    assert result[0].usage.turns == 1 and result[0].attempts == 1
    stored = h.maps()
    assert len(stored) == 1 and (stored[0].done, stored[0].failed, stored[0].waiting) == (3, 1, 0)


def _fingerprint(h: Harness) -> dict[str, Any]:
    from harness_nb.subagents.agent_map import agent_fingerprint, row_definition

    return agent_fingerprint(row_definition(h.registry.get("labeler")))


async def test_openai_gets_a_jsonl_file_with_purpose_batch_and_a_24h_batch_of_chat_completions(tmp_path):
    async with FakeBatchServer(upper, polls=0) as srv:
        h = harness(tmp_path, srv, "openai")
        await batch_map(h, ["tea", "jam"], Clock()).run()
    (upload,) = srv.calls("POST", r"/v1/files$")
    assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert 'name="purpose"\r\n\r\nbatch\r\n' in upload.body
    (content,) = [data for purpose, data in srv.files.values() if purpose == "batch"]
    lines = [json.loads(line) for line in content.splitlines()]
    assert [sorted(line) for line in lines] == [["body", "custom_id", "method", "url"]] * 2
    assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
    system, user = lines[0]["body"]["messages"]
    assert system["role"] == "system" and "becomes this row's value" in system["content"]
    assert user == {"role": "user", "content": "Label ROW<tea>"}
    (create,) = srv.calls("POST", r"/v1/batches$")
    assert create.body["endpoint"] == "/v1/chat/completions" and create.body["completion_window"] == "24h"
    assert create.body["input_file_id"] in srv.files and create.body["metadata"]["harness_nb"].startswith("map-")
    assert create.headers["authorization"] == f"Bearer {KEY}"


def expiring(api: str, body: dict[str, Any]) -> dict[str, Any]:
    row = row_of(body)
    return {"expire": True} if row.startswith("late") else {"text": row.upper(), "usage": USAGE}


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_an_expired_batch_keeps_the_answers_that_came_back_and_a_resume_sends_only_the_rest(tmp_path, vendor):
    clock = Clock()
    async with FakeBatchServer(expiring, polls=1) as srv:
        h = harness(tmp_path, srv, vendor)
        rows = ["early1", "late1", "early2", "late2"]
        first = await batch_map(h, rows, clock).run()
        assert first.texts == ["EARLY1", None, "EARLY2", None]
        assert first.errors == {1: "not run: its batch's 24 hours ran out before it", 3: "not run: its batch's 24 hours ran out before it"}
        assert [row.attempts for row in first] == [1, 0, 1, 0]
        (expired,) = srv.batches.values()
        assert expired.status == ("expired" if vendor == "openai" else "ended")

        srv.answer = upper  # the vendor has room now
        again = await batch_map(h, rows, clock, resume=True).run()
    assert again.texts == ["EARLY1", "LATE1", "EARLY2", "LATE2"] and not again.errors
    assert [row.source for row in again] == ["stored", "run", "stored", "run"]
    assert srv.created == 2
    resent = list(srv.batches.values())[1]
    assert sorted(row_of(r.body) for r in resent.requests) == ["late1", "late2"]  # only those that never ran


class Stuck(Clock):
    """A clock whose waits never end: the map sits between two polls until it is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.waiting.set()
        await asyncio.Event().wait()


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_map_restarted_mid_batch_polls_the_batch_it_stored_and_submits_nothing_again(tmp_path, vendor):
    async with FakeBatchServer(upper, polls=3) as srv:
        h = harness(tmp_path, srv, vendor)
        stuck = Stuck()
        mapped = batch_map(h, ["tea", "jam", "oat"], stuck)
        task = asyncio.create_task(mapped.run())
        await stuck.waiting.wait()  # submitted and polled once; waiting for the next poll
        task.cancel()  # the kernel is interrupted, or restarted
        with pytest.raises(asyncio.CancelledError):
            await task
        (batch_id,) = srv.batches
        left = mapped.result()
        assert left.interrupted and left.texts == [None, None, None]
        assert left.errors[0] == (
            f"not back yet: waiting in batch {batch_id} at the vendor; resume=True with mode='batch' collects it"
        )
        await h.aclose()
        assert "3 waiting in batches" in h.maps()[0].line()

        # a new kernel: a new harness on the same workdir
        fresh = harness(tmp_path, srv, vendor)
        with pytest.raises(ConfigError, match=r"has 3 rows waiting in vendor batches: resume=True \(mode='batch'\)"):
            await batch_map(fresh, ["tea", "jam", "oat"], Clock()).prepare()
        with pytest.raises(ConfigError, match="has rows waiting in vendor batches: resume it with mode='batch'"):
            await fresh.map("labeler", "Label ROW<{value}>", ["tea", "jam", "oat"], resume=True)
        clock = Clock()
        result = await batch_map(fresh, ["tea", "jam", "oat"], clock, resume=True).run()

    assert result.texts == ["TEA", "JAM", "OAT"] and result.map_id == mapped.id
    assert srv.created == 1 and len(srv.calls("POST", r"batches$")) == 1  # never submitted again
    polled = srv.calls("GET", rf"/batches/{batch_id}$")
    # once before the restart, then until it ended: three polls run its rows (OpenAI's last
    # one leaves it finalizing, for one more)
    assert len(polled) == 1 + (3 if vendor == "openai" else 2)
    assert h.maps()[0].line().startswith(f"{mapped.id} ·") and "waiting" not in h.maps()[0].line()
