"""``%agent map`` in real ipykernels: a map whose kernel is killed (SIGKILL) mid-map is
resumed in a new kernel with ``--resume`` and only the rows it had not finished reach the
server again (read off the fake server's log); ``--output`` gives typed columns and a bad
spec one ``UsageError``; ``--estimate`` runs a sample that the map after it does not run
again; ``--list`` shows the stored maps."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections import Counter
from typing import Any

import pytest

from harness_nb.subagents.map_store import stored_maps
from harness_nb.testing import FakeLLMServer
from notebook_support import HARNESS, error_name, kernel_json, model_requests, notebook, result_text

pytestmark = pytest.mark.kernel

ROW = re.compile(r"ROW<(r\d+)>")
ROWS = [f"r{i}" for i in range(10)]
MAP = '%agent map --resume --over rows --concurrency 4 "ROW<{value}>"'


def row_of(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if isinstance(message.get("content"), str) and (found := ROW.search(message["content"])):
            return found.group(1)
    raise AssertionError(f"no ROW<…> in {body}")


async def test_a_map_killed_with_its_kernel_resumes_in_a_new_kernel_asking_only_the_rows_left(tmp_path):
    stuck = {"r6", "r7", "r8", "r9"}  # answered only after the kernel is dead

    def answer(body):
        row = row_of(body)
        return {"text": row.upper(), "delay": 300 if row in stuck else 0}

    env = {"OPENAI_API_KEY": "sk-test"}
    maps = tmp_path / ".harness_nb" / "maps"
    with FakeLLMServer([answer], loop=True).in_thread() as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        async with notebook(tmp_path, env=env) as k:
            await k.run("%config HarnessNB.model = 'openai-compatible/m'")
            await k.run(f"rows = {ROWS!r}")
            k.execute(MAP)  # the cell never ends: its kernel is killed

            def stuck_in_flight() -> bool:
                stored = stored_maps(maps)
                return bool(stored) and stored[0].done == 6 and len(srv.requests) == 10

            await k.wait_for(stuck_in_flight, timeout=60, what="6 rows stored and 4 stuck at the server")
            os.kill(k.km.provisioner.pid, signal.SIGKILL)  # type: ignore[union-attr]
            async with asyncio.timeout(30):
                while await k.km.is_alive():
                    await asyncio.sleep(0.05)
        before = len(srv.requests)
        assert Counter(row_of(r.body) for r in srv.requests) == dict.fromkeys(ROWS, 1)

        stuck.clear()
        async with notebook(tmp_path, env=env) as k:
            await k.run("%config HarnessNB.model = 'openai-compatible/m'")
            await k.run(f"rows = {ROWS!r}")
            cell = await k.run(MAP)
            assert "10 done, 0 failed, 6 of them from the store" in result_text(cell), result_text(cell)
            texts = await kernel_json(k, "_.texts")
            listed = await k.run("%agent map --list")
    again = sorted(row_of(r.body) for r in srv.requests[before:])
    assert again == ["r6", "r7", "r8", "r9"]  # the killed kernel's finished rows were not asked again
    assert texts == [row.upper() for row in ROWS]
    (stored,) = stored_maps(maps)
    assert result_text(listed).startswith(f"{stored.id} · ") and "10/10 done · general-purpose · openai-compatible/m" in result_text(listed)


SCRIPT = {
    "agents": {
        "general-purpose": [
            {"match": "ROW<a>", "text": '{"label": "bug", "score": 0.9}'},
            {"match": "ROW<b>", "text": '{"label": "bgu", "score": 0.1}'},
            {"match": "(got 'bgu')", "text": '{"label": "question", "score": 0.2}'},  # the fix
            {"match": "ROW<x1>", "text": "one"},
            {"match": "ROW<x3>", "text": "three"},
            {"match": "ROW<x2>", "text": "two"},
            {"match": "ROW<x4>", "text": "four"},
        ]
    }
}


async def test_output_estimate_and_list_in_a_kernel(tmp_path):
    async with notebook(tmp_path, SCRIPT) as k:
        await k.run("import pandas as pd\ntickets = pd.Series(['a', 'b'], index=['t1', 't2'])")
        cell = await k.run("%agent map --over tickets --output 'label:bug|question, score:float' \"Triage ROW<{value}>\"")
        assert "2 done, 0 failed" in result_text(cell)
        frame = await kernel_json(k, "_.frame()[['label', 'score', 'error']].to_dict('index')")
        assert frame == {
            "t1": {"label": "bug", "score": 0.9, "error": None},
            "t2": {"label": "question", "score": 0.2, "error": None},
        }
        for line, says in [
            ("%agent map --over tickets --output 'label:bug|question, score:flaot' \"ROW<{value}>\"",
             "UsageError: --output: output field score: 'flaot' is no type (did you mean float?)"),
            ("%agent map --over tickets --output 'label:bug|question \"ROW<{value}>\"", "quote is never closed"),
            ("%agent map --over tickets --sample 2 \"ROW<{value}>\"", "UsageError: --sample N goes with --estimate"),
            ("%agent map --over tickets --estimate --bg \"ROW<{value}>\"", "UsageError: an estimate runs in this cell"),
        ]:
            refused = await k.run(line, check=False)
            assert error_name(refused) == "UsageError" and says in k.text(refused), k.text(refused)

        await k.run("more = ['x1', 'x2', 'x3', 'x4']")
        before = len(await model_requests(k))
        estimate = await k.run('%agent map --over more --estimate --sample 2 "ROW<{value}>"')
        assert result_text(estimate).startswith(
            "estimate for general-purpose over 4 rows from 2 sample rows (2 left to run; "
        ), result_text(estimate)
        asked = [r["messages"][-1]["content"] for r in (await model_requests(k))[before:]]
        # the sample is every other row; its rows run side by side, in no fixed order
        assert sorted(re.search(r"ROW<(\w+)>", a).group(1) for a in asked) == ["x1", "x3"]
        mapped = await k.run('%agent map --over more "ROW<{value}>"')
        assert "4 done, 0 failed, 2 of them from the store" in result_text(mapped)
        assert await kernel_json(k, "_.texts") == ["one", "two", "three", "four"]
        asked = [r["messages"][-1]["content"] for r in (await model_requests(k))[before + 2 :]]
        assert sorted(re.search(r"ROW<(\w+)>", a).group(1) for a in asked) == ["x2", "x4"]
        asked_before = len(await model_requests(k))
        resumed = await k.run('%agent map --over more --resume "ROW<{value}>"')  # a one-word template, not a session id
        assert "4 done, 0 failed, 4 of them from the store" in result_text(resumed), result_text(resumed)
        assert len(await model_requests(k)) == asked_before
        listing = result_text(await k.run("%agent map --list")).splitlines()
        assert len(listing) == 2 and all("done · general-purpose · scripted/script.yaml" in line for line in listing)
        assert await kernel_json(k, f"len({HARNESS}.maps())") == 2
