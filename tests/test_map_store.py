"""A map's store (``.harness_nb/maps/<map id>/rows.sqlite``): rows written as they finish,
``resume`` running only the rows not done (after an interrupt, a failure, a spent budget),
identical rows run once, ``h.maps()`` listing what is stored, nothing secret kept, and a
store that is not one (damaged, another program's) one clear error that changes nothing.
Over real HTTP: what was run again is read off the fake server's request log."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pandas as pd  # noqa: F401  (frame() needs it)
import pytest

from harness_nb import Harness
from harness_nb.core import ConfigError
from harness_nb.subagents.map_result import MapProgress
from harness_nb.subagents.map_store import APPLICATION_ID, STORE_FILE
from harness_nb.testing import FakeLLMServer
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from map_support import asked, row_of, upper

KEY = "sk-proj-MapStoreKey0123456789abcdefGHIJ"


def harness(tmp_path, server: FakeLLMServer, **kwargs: Any) -> Harness:
    h = Harness(
        "openai-compatible/m", workdir=tmp_path, base_url=server.url + "/v1", api_key=KEY,
        include_user_agents=False, sandbox="off", provider_options={"max_retries": 0}, **kwargs,
    )
    OPEN.append(h)
    return h


async def test_identical_rows_run_once_and_every_copy_gets_the_outcome(tmp_path):
    async with FakeLLMServer([upper], loop=True) as srv:
        h = harness(tmp_path, srv)
        rows = pd.Series(["tea", "milk", "tea", "tea", "milk", "jam"], index=list("abcdef"))
        result = await h.map("general-purpose", "ROW<{value}>", rows, concurrency=3)
    assert asked(srv) == {"tea": 1, "milk": 1, "jam": 1}
    assert result.texts == ["TEA", "MILK", "TEA", "TEA", "MILK", "JAM"]
    assert [row.source for row in result] == ["run", "run", "duplicate", "duplicate", "duplicate", "run"]
    assert result.frame()["tokens"].tolist() == [45, 45, 0, 0, 0, 45]  # a copy cost nothing
    assert result.usage.total_tokens == 135


async def test_a_resumed_map_runs_only_the_rows_an_interrupt_or_a_failure_left_undone(tmp_path):
    refused = {"sour"}
    slow = {"slow": 60.0}  # seconds the server takes over a row

    def answer(body):
        row = row_of(body)
        if row in refused:
            return {"raw": '{"error": {"message": "refused"}}', "status": 400, "content_type": "application/json"}
        return {**upper(body), "delay": slow.get(row, 0.0)}

    seen: list[MapProgress] = []
    rows = ["sweet", "sour", "slow", "salty", "sweet", "umami"]
    async with FakeLLMServer([answer], loop=True) as srv:
        h = harness(tmp_path, srv)
        first = asyncio.create_task(h.map("general-purpose", "ROW<{value}>", rows, concurrency=2, on_progress=seen.append))
        async with asyncio.timeout(30):
            while not (seen and seen[-1].finished == 5):  # all but the slow row
                await asyncio.sleep(0.01)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        kept = h.last_map.result()
        assert kept.interrupted and kept.texts == ["SWEET", None, None, "SALTY", "SWEET", "UMAMI"]
        assert asked(srv) == {"sweet": 1, "sour": 1, "slow": 1, "salty": 1, "umami": 1}

        srv.requests.clear()
        refused.clear()
        slow.clear()
        resumed = await h.map("general-purpose", "ROW<{value}>", rows, resume=True, concurrency=2)
    assert asked(srv) == {"sour": 1, "slow": 1}  # only the failed and the unfinished row
    assert resumed.texts == ["SWEET", "SOUR", "SLOW", "SALTY", "SWEET", "UMAMI"]
    assert [row.source for row in resumed] == ["stored", "run", "run", "stored", "stored", "stored"]
    assert resumed.map_id == kept.map_id and "4 of them from the store" in resumed.summary()
    (listed,) = h.maps()
    assert (listed.id, listed.done, listed.failed, listed.info.total) == (kept.map_id, 6, 0, 6)


async def test_a_map_without_resume_starts_afresh_and_a_resume_may_name_its_map(tmp_path):
    async with FakeLLMServer([upper], loop=True) as srv:
        h = harness(tmp_path, srv)
        one = await h.map("general-purpose", "ROW<{value}>", ["a", "b"])
        two = await h.map("general-purpose", "ROW<{value}>", ["a", "b"])
        assert one.map_id != two.map_id and asked(srv) == {"a": 2, "b": 2}
        srv.requests.clear()
        again = await h.map("general-purpose", "ROW<{value}>", ["a", "b", "c"], resume=one.map_id)
        assert again.map_id == one.map_id and asked(srv) == {"c": 1}
        with pytest.raises(ConfigError) as info:
            await h.map("general-purpose", "Say ROW<{value}>", ["a"], resume=one.map_id)
        assert str(info.value) == f"stored map {one.map_id} is another map: its template is 'ROW<{{value}}>', not 'Say ROW<{{value}}>'"
        with pytest.raises(ConfigError, match="no stored map 'map-nope' under .*; h.maps\\(\\) lists the stored ones"):
            await h.map("general-purpose", "ROW<{value}>", ["a"], resume="map-nope")
        srv.requests.clear()
        fresh = await h.map("general-purpose", "Say ROW<{value}>", ["a"], resume=True)  # nothing of its own stored
        assert asked(srv) == {"a": 1} and fresh.map_id not in (one.map_id, two.map_id)
    assert [m.id for m in h.maps()] == [one.map_id, two.map_id, fresh.map_id]


async def test_a_typed_map_resumes_with_its_outputs_typed(tmp_path):
    def answer(body):
        return {"text": '{"label": "bug", "score": 0.5}' if row_of(body) == "crash" else '{"label": "question", "score": 1}'}

    async with FakeLLMServer([answer], loop=True) as srv:
        h = harness(tmp_path, srv)
        first = await h.map("general-purpose", "ROW<{value}>", ["crash", "how"], output="label:bug|question, score:float")
        srv.requests.clear()
        again = await h.map("general-purpose", "ROW<{value}>", ["crash", "how"], output="label:bug|question, score:float", resume=True)
        untyped = await h.map("general-purpose", "ROW<{value}>", ["crash"], resume=True)  # another key: runs
    assert [r.model_dump() for r in again.outputs] == [r.model_dump() for r in first.outputs]
    assert again.frame()["label"].tolist() == ["bug", "question"] and asked(srv) == {"crash": 1}
    assert untyped.map_id != first.map_id


async def test_a_spent_budget_stops_the_map_cleanly_and_a_resume_finishes_it(tmp_path):
    costly = {"text": "done", "usage": {"input_tokens": 10_000, "output_tokens": 0}}
    prices = {"m": {"input": 1.0, "output": 1.0}}  # $0.01 a row
    async with FakeLLMServer([costly], loop=True) as srv:
        h = harness(tmp_path, srv, prices=prices)
        rows = [f"r{i}" for i in range(5)]
        stopped = await h.map("general-purpose", "ROW<{value}>", rows, concurrency=1, budget_usd=0.025)
        paid = len(srv.requests)
        assert stopped.texts[:2] == ["done", "done"] and stopped.texts[-1] is None and paid <= 3
        srv.requests.clear()
        rest = await h.map("general-purpose", "ROW<{value}>", rows, concurrency=1, resume=True)
    assert rest.texts == ["done"] * 5
    assert len(srv.requests) == 5 - sum(1 for row in stopped if row.ok)  # the paid rows are not paid again


async def test_nothing_secret_reaches_the_store(tmp_path):
    def leaky(body):
        return {"text": f"the key is {KEY}"}

    async with FakeLLMServer([leaky], loop=True) as srv:
        h = harness(tmp_path, srv)
        result = await h.map("general-purpose", f"ROW<{{value}}> {KEY}", ["a"], output=None)
    (listed,) = h.maps()
    folder = listed.path.parent
    written = b"".join(p.read_bytes() for p in folder.iterdir())
    assert written and KEY.encode() not in written
    assert b"ROW<{value}>" in written  # the template is there, its key masked
    assert result.texts[0] is not None


async def test_a_store_that_is_not_one_is_listed_with_its_problem_and_one_clear_error_and_left_as_it_was(tmp_path):
    maps = tmp_path / ".harness_nb" / "maps"
    (maps / "map-garbage").mkdir(parents=True)
    (maps / "map-garbage" / STORE_FILE).write_bytes(b"this is not a database at all" * 100)
    (maps / "map-foreign").mkdir()
    with sqlite3.connect(maps / "map-foreign" / STORE_FILE) as other:
        other.execute("CREATE TABLE t (x)")
    (maps / "map-empty").mkdir()
    before = {p: p.read_bytes() for p in maps.rglob("*") if p.is_file()}

    async with FakeLLMServer([upper], loop=True) as srv:
        h = harness(tmp_path, srv)
        ok = await h.map("general-purpose", "ROW<{value}>", ["a"], resume=True)  # the bad ones stop nothing
        listing = h.maps()
        assert [m.id for m in listing] == [ok.map_id, "map-empty", "map-foreign", "map-garbage"]
        problems = {m.id: m.problem for m in listing[1:]}
        assert problems["map-empty"] == f"no {STORE_FILE} in its folder"
        assert "it is not a harness_nb map store (another program's SQLite file)" in problems["map-foreign"]
        assert "DatabaseError: file is not a database" in problems["map-garbage"]
        assert repr(listing).splitlines()[0].startswith(f"{ok.map_id} · ") and "unreadable:" in repr(listing)
        for bad in ("map-garbage", "map-foreign"):
            with pytest.raises(ConfigError) as info:
                await h.map("general-purpose", "ROW<{value}>", ["a"], resume=bad)
            message = str(info.value)
            assert message.startswith(f"map store {maps / bad / STORE_FILE} cannot be used: ")
            assert message.endswith("It was left as it is: move its folder aside (or delete it) and the map starts afresh")
    after = {p: p.read_bytes() for p in before}
    assert after == before, "a bad store is never changed"
    with sqlite3.connect(maps / ok.map_id / STORE_FILE) as mine:
        assert mine.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        assert mine.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_the_log_is_checkpointed_every_so_many_rows_by_a_connection_of_its_own(tmp_path):
    from harness_nb.core import Usage
    from harness_nb.subagents.map_store import CHECKPOINT_ROWS, MapInfo, MapStore, StoredRow

    info = MapInfo("map-x", 0.0, "a", "m", "{value}", (), "k", "map", CHECKPOINT_ROWS, CHECKPOINT_ROWS)
    store = MapStore.create(tmp_path, info)
    file = tmp_path / "map-x" / STORE_FILE
    due = [store.put(StoredRow(f"{i:08d}", "x" * 500, None, None, Usage(), 1, 0.1)) for i in range(CHECKPOINT_ROWS)]
    assert due == [False] * (CHECKPOINT_ROWS - 1) + [True]
    before = file.stat().st_size  # the rows are in the log, not yet in the file (no automatic checkpoint)
    store.checkpoint()
    assert file.stat().st_size > before + CHECKPOINT_ROWS * 500
    assert len(store.rows()) == CHECKPOINT_ROWS
    store.close()
