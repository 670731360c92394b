"""``%agent map --batch`` in a real ipykernel, against the fake of OpenAI's Batch API in a
thread of the test: the rows go up as one batch (``--batch-size``: several), come back into
the result (a refused request in the error column), the bar's static copy shows how the
batches ended, and what batch mode cannot run is one ``UsageError``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness_nb.testing import FakeBatchServer
from harness_nb.testing.kernel_driver import visible_text
from notebook_support import error_name, kernel_json, notebook, result_text

pytestmark = pytest.mark.kernel

ROW = re.compile(r"ROW<(.*?)>")
LABELER = """---
name: labeler
description: Labels a row.
tools: []
---
You label rows.
"""


def answer(api: str, body: dict[str, Any]) -> dict[str, Any]:
    row = next(found.group(1) for m in body["messages"] if (found := ROW.search(str(m["content"]))))
    return {"error": "refused", "status": 400} if row == "bad" else {"text": row.upper()}


async def test_a_batch_map_in_a_cell_goes_up_as_one_batch_and_its_bar_shows_the_batches(tmp_path):
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    (tmp_path / ".claude" / "agents" / "labeler.md").write_text(LABELER)
    with FakeBatchServer(answer=answer, polls=0).in_thread() as srv:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.url + "/v1"}
        async with notebook(tmp_path, env=env) as k:
            await k.run("%config HarnessNB.model = 'openai/gpt-4o-mini'")
            await k.run("rows = ['tea', 'bad', 'jam']")
            cell = await k.run('%agent map --batch --agent labeler --over rows "Label ROW<{value}>"')
            assert result_text(cell).startswith("<MapResult labeler over 3 rows: 2 done, 1 failed · "), result_text(cell)
            texts, errors = await kernel_json(k, "[_.texts, list(_.errors.values())]")
            assert texts == ["TEA", None, "JAM"] and "refused" in errors[0]
            (final,) = [o for o in cell.outputs if o["msg_type"] == "update_display_data"]
            shown = visible_text(final["data"]["text/html"])
            assert shown.startswith("agent map · labeler · 3 rows · done, 1 failed 3/3 · 1 failed · "), shown
            assert shown.endswith("batch: done"), shown
            await k.run("more = ['oat', 'rye', 'nut']")
            cut = await k.run('%agent map --batch --batch-size 2 --agent labeler --over more "Label ROW<{value}>"')
            assert result_text(cut).startswith("<MapResult labeler over 3 rows: 3 done, 0 failed · ")

            for line, says in [
                ('%agent map --batch --over rows "Label ROW<{value}>"', "runs each row as one model call without tools"),
                ('%agent map --batch-size 2 --agent labeler --over rows "ROW<{value}>"', "--batch-size N goes with --batch"),
                ('%agent map --batch --estimate --agent labeler --over rows "ROW<{value}>"', "drop mode='batch'"),
            ]:
                refused = await k.run(line, check=False)
                assert error_name(refused) == "UsageError" and says in k.text(refused), k.text(refused)
    assert [len(b.requests) for b in srv.batches.values()] == [3, 2, 1]  # --batch-size 2: two batches
    assert len(srv.calls("POST", r"/v1/files$")) == 3
