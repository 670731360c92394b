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
from test_agent_map import Clock  # the map's waits advance it, without sleeping

from harness_nb import Harness
from harness_nb.core import ConfigError, PriceTable, Usage
from harness_nb.providers.batch import Packer
from harness_nb.subagents import SubAgentDefinition
from harness_nb.subagents.agent_map import AgentMap
from harness_nb.subagents.map_output import ANSWER_TOOL, row_output
from harness_nb.subagents.map_result import MapProgress
from harness_nb.subagents.map_store import map_key, row_key
from harness_nb.testing import FakeBatchServer, ScriptedProvider
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

KEY = "sk-proj-BatchKey0123456789abcdefGHIJKL"
ROW = re.compile(r"ROW<(.*?)>")
MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}
USAGE = {"input_tokens": 1_000, "output_tokens": 100}


def row_of(body: dict[str, Any]) -> str:
    """The ROW<…> of a request body (either vendor's)."""
    for message in body.get("messages", []):
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
        for text in texts:
            if found := ROW.search(text):
                return found.group(1)
    raise AssertionError(f"no ROW<…> in {body}")


def harness(tmp_path, srv: FakeBatchServer, vendor: str, options: dict[str, Any] | None = None, **settings: Any) -> Harness:
    model = MODELS[vendor]
    base = srv.url + ("/v1" if vendor == "openai" else "")
    h = Harness(
        model, workdir=tmp_path, base_url=base, api_key=KEY, include_user_agents=False, sandbox="off",
        provider_options={"max_retries": 0, **(options or {})}, **settings,
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
    async with FakeBatchServer(answer=upper, polls=2) as srv:
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
    async with FakeBatchServer(answer=upper, polls=0) as srv:  # ended at the first poll: h.map waits for nothing
        h = harness(tmp_path, srv, "openai")
        result = await h.map("labeler", "Label ROW<{value}>", ["tea", "jam"], mode="batch")
    assert result.texts == ["TEA", "JAM"] and h.last_map is not None and h.last_map.mode == "batch"
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
    async with FakeBatchServer(answer=expiring, polls=1) as srv:
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
    async with FakeBatchServer(answer=upper, polls=3) as srv:
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
        assert left.interrupted and left.texts == [None, None, None] and left.waiting == 3
        assert "0 failed (interrupted), 3 waiting in vendor batches (resume=True collects them)" in left.summary()
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


FIELDS = "label:bug|question, score:float"
TYPED = {  # what each row answers at its first ask, and when asked again
    "crash": ['{"label": "bug", "score": 0.9}'],
    "howto": ['{"label": "qestion", "score": 0.5}', '{"label": "question", "score": 0.7}'],
    "rant": ['{"label": "complaint", "score": 1}', '{"label": "bug"}'],
}


def typed(api: str, body: dict[str, Any]) -> dict[str, Any]:
    row = row_of(body)
    asked = sum(1 for m in body["messages"] if m["role"] == "assistant")
    fields = TYPED[row][asked]
    if api == "anthropic":
        return {"tool_calls": [{"name": ANSWER_TOOL, "arguments": json.loads(fields)}], "usage": USAGE}
    return {"text": fields, "usage": USAGE}


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_typed_outputs_in_a_batch_are_asked_in_each_request_and_a_misfit_once_more_in_a_batch(tmp_path, vendor):
    clock = Clock()
    async with FakeBatchServer(answer=typed, polls=0) as srv:
        h = harness(tmp_path, srv, vendor)
        result = await batch_map(h, ["crash", "howto", "rant"], clock, output=FIELDS).run()

    frame = result.frame()
    assert list(frame.columns) == ["label", "score", "error", "tokens", "cost", "attempts"]
    assert frame[["label", "score"]].iloc[:2].values.tolist() == [["bug", 0.9], ["question", 0.7]]
    assert frame["error"].iloc[2].startswith("the answer did not fit the output twice: score: Field required")
    assert frame["attempts"].tolist() == [1, 2, 2] and frame["tokens"].tolist() == [1_100, 2_200, 2_200]
    first, second = srv.batches.values()  # the misfits, asked once more in a batch of their own
    assert sorted(row_of(r.body) for r in first.requests) == ["crash", "howto", "rant"]
    assert sorted(row_of(r.body) for r in second.requests) == ["howto", "rant"]
    for request in (*first.requests, *second.requests):
        body = request.body
        if vendor == "openai":
            sent = body["response_format"]
            assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
            assert sent["json_schema"]["schema"]["properties"]["label"]["enum"] == ["bug", "question"]
        else:
            (tool,) = body["tools"]
            assert tool["name"] == ANSWER_TOOL and body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}
    fixing = next(r.body for r in second.requests if row_of(r.body) == "howto")
    said = fixing["messages"][-1]["content"]
    told = said if isinstance(said, str) else said[-1]["text"]
    assert told.startswith("That answer does not fit this row's fields: label: Input should be 'bug' or 'question'")


async def test_what_batch_mode_cannot_run_is_one_clear_error_before_anything_is_sent(tmp_path):
    async with FakeBatchServer(answer=upper) as srv:
        h = harness(tmp_path, srv, "openai")
        with pytest.raises(ConfigError) as info:
            await batch_map(h, ["tea"], Clock(), agent="general-purpose").prepare()
        assert str(info.value).startswith(
            "mode='batch' runs each row as one model call without tools, and agent general-purpose has read_file, "
        )
        assert "give the map an agent with no tools (an agent file's `tools: []`" in str(info.value)
        h.registry.register(SubAgentDefinition(name="mcp", description="x", tools=[], mcp_servers=["github"]))
        with pytest.raises(ConfigError, match="agent mcp names MCP servers"):
            await batch_map(h, ["tea"], Clock(), agent="mcp").prepare()
        for options, says in [
            ({"mode": "bulk"}, "map option mode='bulk': it takes 'online' or 'batch'"),
            ({"batch_size": 10}, "map option batch_size= goes with mode='batch'"),
            ({"mode": "batch", "estimate": True}, "estimate=True runs a sample online: drop mode='batch'"),
            ({"mode": "batch", "batch_size": 0}, "map option batch_size=0: it takes a whole number of rows above 0"),
        ]:
            with pytest.raises(ConfigError) as info:
                await h.map("labeler", "Label ROW<{value}>", ["tea"], **options)
            assert str(info.value).startswith(says), str(info.value)
    assert srv.requests == []

    offline = Harness(ScriptedProvider(), workdir=tmp_path, include_user_agents=False, sandbox="off")
    OPEN.append(offline)
    offline.registry.register(SubAgentDefinition(name="labeler", description="Labels a row.", tools=[]))
    with pytest.raises(ConfigError, match="Anthropic's Message Batches: scripted/script has neither. Use an openai/"):
        await offline.map("labeler", "Label ROW<{value}>", ["tea"], mode="batch")


async def test_rows_past_a_batch_size_go_in_several_batches_each_within_the_vendor_s_bounds(tmp_path):
    async with FakeBatchServer(answer=upper, polls=0, max_requests=2) as srv:
        h = harness(tmp_path, srv, "openai")
        result = await batch_map(h, ["a1", "a2", "a3", "a4", "a5"], Clock(), batch_size=2).run()
    assert result.texts == ["A1", "A2", "A3", "A4", "A5"]
    assert [sorted(row_of(r.body) for r in b.requests) for b in srv.batches.values()] == [["a1", "a2"], ["a3", "a4"], ["a5"]]
    assert len(srv.calls("POST", r"/files$")) == 3


def cut(lines: list[bytes], most_requests: int, most_bytes: int) -> list[int]:
    """How many of ``lines`` each batch takes, filled by a ``Packer`` in order."""
    batch, sizes = Packer(most_requests, most_bytes), []
    for line in lines:
        if not batch.fits(line):
            sizes.append(len(batch.take()[0]))
        batch.add("k", line)
    return [*sizes, len(batch.keys)] if batch.keys else sizes


def test_a_batch_is_cut_by_its_count_of_requests_and_by_bytes_and_a_giant_stands_alone():
    sized = [b"x" * n for n in (10, 10, 10, 50, 10, 10)]
    assert cut(sized, most_requests=4, most_bytes=1_000) == [4, 2]
    assert cut(sized, most_requests=10, most_bytes=33) == [3, 1, 2]  # each line counts its newline
    assert cut([b"y" * 100, b"z"], most_requests=10, most_bytes=50) == [1, 1]


async def test_a_batch_the_vendor_fails_or_refuses_fails_its_rows_with_the_vendor_s_reason(tmp_path):
    # OpenAI takes the file, then fails the batch: more requests than it takes
    async with FakeBatchServer(answer=upper, polls=0, max_requests=1) as srv:
        h = harness(tmp_path, srv, "openai")
        failed = await batch_map(h, ["tea", "jam"], Clock()).run()
    (batch_id,) = srv.batches
    assert failed.errors == {
        i: f"its batch {batch_id} failed: too_many_requests: The batch has more than 1 requests." for i in (0, 1)
    }
    # Anthropic refuses the batch at once (HTTP 400)
    async with FakeBatchServer(answer=upper, polls=0, max_requests=1) as srv:
        (tmp_path / "a").mkdir()
        h = harness(tmp_path / "a", srv, "anthropic")
        refused = await batch_map(h, ["tea", "jam"], Clock()).run()
    assert srv.created == 0
    assert refused.errors[0].startswith("the batch could not be submitted: anthropic")
    assert "requests: between 1 and 1 items" in refused.errors[0] and refused.errors[1] == refused.errors[0]


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_cancelled_batches_keep_what_ran_and_a_resume_sends_the_rest(tmp_path, vendor):
    async with FakeBatchServer(answer=upper, polls=2) as srv:
        h = harness(tmp_path, srv, vendor)
        stuck = Stuck()
        mapped = batch_map(h, ["r1", "r2", "r3", "r4"], stuck)
        task = asyncio.create_task(mapped.run())
        await stuck.waiting.wait()  # half the rows have run at the vendor
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (batch_id,) = srv.batches
        states = await h.cancel_batches(mapped.id)
        assert [s.status for s in states] == ["cancelling" if vendor == "openai" else "canceling"]
        assert len(srv.calls("POST", rf"/batches/{batch_id}/cancel$")) == 1

        collected = await batch_map(h, ["r1", "r2", "r3", "r4"], Clock(), resume=True).run()
        assert collected.texts == ["R1", "R2", None, None]
        assert collected.errors == {2: "not run: its batch was cancelled before it", 3: "not run: its batch was cancelled before it"}
        assert srv.created == 1

        again = await batch_map(h, ["r1", "r2", "r3", "r4"], Clock(), resume=True).run()
    assert again.texts == ["R1", "R2", "R3", "R4"] and srv.created == 2
    assert sorted(row_of(r.body) for r in list(srv.batches.values())[1].requests) == ["r3", "r4"]


async def test_rows_a_budget_cannot_cover_at_their_most_are_not_sent(tmp_path):
    """Each request is held to its most before it is sent (input at four characters a token,
    output at max_tokens, batch prices): with room for two, the other two are not sent."""
    output_most = 1_000 * 0.60 / 2 / 1e6  # 1,000 tokens at gpt-4o-mini's batch output price
    async with FakeBatchServer(answer=upper, polls=0) as srv:
        h = harness(tmp_path, srv, "openai", options={"max_tokens": 1_000}, budget_usd=2.3 * output_most)
        result = await h.map("labeler", "Label ROW<{value}>", ["r1", "r2", "r3", "r4"], mode="batch")
    assert result.texts == ["R1", "R2", None, None]
    assert result.errors[2].startswith("not run: the map's budget does not cover this row's most at batch prices")
    (batch,) = srv.batches.values()
    assert sorted(row_of(r.body) for r in batch.requests) == ["r1", "r2"]


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_poll_that_fails_on_the_way_is_tried_again_and_junk_in_the_results_is_skipped(tmp_path, vendor, caplog):
    clock, seen = Clock(), []
    async with FakeBatchServer(answer=upper, polls=0, failing_polls=1, junk=True) as srv:
        h = harness(tmp_path, srv, vendor)
        result = await batch_map(h, ["tea", "jam"], clock, seen=seen).run()
    assert result.texts == ["TEA", "JAM"]
    assert clock.sleeps == [5.0]  # the failed poll, then one more after the first wait
    failed = next(p.batch for p in seen if p.batch and "last check failed" in p.batch)
    assert f"its last check failed ({vendor} HTTP 500: the server failed (" in failed and failed.endswith("checked again later · next check in 5 s")
    assert "a line that is not JSON was skipped" in caplog.text


async def test_an_anthropic_results_url_on_another_host_is_not_given_the_key(tmp_path, caplog):
    async with FakeBatchServer(answer=upper, polls=0, results_host="collector.invalid:8443") as srv:
        h = harness(tmp_path, srv, "anthropic")
        result = await batch_map(h, ["tea"], Clock()).run()
    assert result.texts == ["TEA"]
    (batch_id,) = srv.batches
    assert len(srv.calls("GET", rf"/v1/messages/batches/{batch_id}/results$")) == 1  # read here instead
    assert "its results_url is not on" in caplog.text


async def test_a_stored_batch_the_vendor_no_longer_knows_fails_its_rows_once_and_they_are_sent_again(tmp_path):
    async with FakeBatchServer(answer=upper, polls=3) as srv:
        h = harness(tmp_path, srv, "openai")
        stuck = Stuck()
        task = asyncio.create_task(batch_map(h, ["tea", "jam"], stuck).run())
        await stuck.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (lost,) = srv.batches
        del srv.batches[lost]  # another organisation's key, say: the vendor answers 404

        gone = await batch_map(h, ["tea", "jam"], Clock(), resume=True).run()
        assert gone.texts == [None, None]
        assert gone.errors[0].startswith(f"batch {lost} could not be checked: openai ") and "404" in gone.errors[0]
        assert gone.errors[0].endswith("; resume=True sends them again")
        again = await batch_map(h, ["tea", "jam"], Clock(), resume=True).run()
    assert again.texts == ["TEA", "JAM"] and srv.created == 1  # a new batch (the lost one was deleted here)
    assert len(srv.calls("POST", r"/v1/batches$")) == 2


async def test_a_harness_recording_to_a_cassette_says_a_batch_cannot_be_recorded(tmp_path):
    async with FakeBatchServer(answer=upper) as srv:
        h = harness(tmp_path, srv, "openai", record_to="calls.jsonl")
        with pytest.raises(ConfigError, match=r"mode='batch' cannot record to a cassette \(record_to='.*calls.jsonl'\)"):
            await h.map("labeler", "Label ROW<{value}>", ["tea"], mode="batch")
    assert srv.requests == [] and srv.info_requests == []


async def test_a_batch_map_in_the_background_is_a_task_like_any_map(tmp_path):
    async with FakeBatchServer(answer=upper, polls=0) as srv:
        h = harness(tmp_path, srv, "anthropic")
        handle = await h.start_map("labeler", "Label ROW<{value}>", ["tea", "jam"], mode="batch", batch_size=1)
        assert h.tracker.get(handle.id).kind == "map"
        result = await handle
    assert result.texts == ["TEA", "JAM"] and srv.created == 2
    assert h.tracker.get(handle.id).outcome.startswith("labeler over 2 rows: 2 done, 0 failed")
