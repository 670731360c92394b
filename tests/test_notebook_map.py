"""``%agent map`` in a real ipykernel: one subagent run per row of a pandas Series, a
failing row kept beside the others, a live progress bar, and an interrupt (the stop
button) that keeps the rows that finished (``%agent map --last``)."""

from __future__ import annotations

import pytest

from harness_nb.subagents.agent_map import NOT_RUN_INTERRUPTED
from harness_nb.testing.kernel_driver import visible_text
from notebook_support import HARNESS, error_name, kernel_json, notebook, result_text, wait_for_widget_text

pytestmark = pytest.mark.kernel

SCRIPT = {
    "agents": {
        "general-purpose": [
            {"match": "ROW<sweet>", "text": "positive"},
            {"match": "ROW<sour>", "error": "the model refused this row", "status": 400},
            {"match": "ROW<salty>", "text": "neutral"},
            {"match": "ROW<quick>", "text": "fast answer"},
            {"match": "ROW<slow>", "delay": 120, "text": "never sent"},
            {"match": "ROW<quick>", "text": "fast answer"},
            {"match": "ROW<slow>", "delay": 120, "text": "never sent"},
        ]
    }
}


async def test_a_map_over_a_series_keeps_row_order_and_a_failing_row_and_survives_an_interrupt(tmp_path):
    async with notebook(tmp_path, SCRIPT) as k:
        await k.run("import pandas as pd\nreviews = pd.Series(['sweet', 'sour', 'salty'], index=['r1', 'r2', 'r3'])")
        cell = await k.run('%agent map --over reviews --concurrency 2 "Classify ROW<{value}>"')
        assert result_text(cell).startswith("<MapResult general-purpose over 3 rows: 2 done, 1 failed · "), result_text(cell)
        bar = await wait_for_widget_text(k, "agent map")
        assert "3 rows" in bar and "done, 1 failed" in bar
        # ended: the static copy stands in for the bar (a saved notebook keeps how it went)
        (shown,) = [o for o in cell.outputs if o["msg_type"] == "display_data"]
        (final,) = [o for o in cell.outputs if o["msg_type"] == "update_display_data"]
        assert final["transient"]["display_id"] == shown["transient"]["display_id"]
        assert set(final["data"]) == {"text/plain", "text/html"}, "no widget left to draw"
        assert final["data"]["text/plain"] == shown["data"]["text/plain"], "the text/plain it was shown with"
        assert visible_text(final["data"]["text/html"]).startswith(
            "agent map · general-purpose · 3 rows · done, 1 failed 3/3 · 1 failed · "
        )
        assert "width:100.0%" in final["data"]["text/html"] and "--hnb-warn" in final["data"]["text/html"]
        outcome = await kernel_json(k, "[_.texts, {str(i): e for i, e in _.errors.items()}]")
        assert outcome[0] == ["positive", None, "neutral"]
        assert list(outcome[1]) == ["r2"] and "the model refused this row" in outcome[1]["r2"]
        column = await kernel_json(k, f"{HARNESS}.last_map.result().series().to_dict()")
        assert column == {"r1": "positive", "r2": None, "r3": "neutral"}

        refused = await k.run('%agent map --over nothing "x {value}"', check=False)
        assert error_name(refused) == "UsageError" and "--over nothing: NameError" in k.text(refused)
        bad = await k.run('%agent map --over reviews "no field"', check=False)
        assert error_name(bad) == "UsageError" and "names no field" in k.text(bad)

        await k.run("pair = ['quick', 'slow']")
        running = k.execute('%agent map --over pair "ROW<{value}>"')
        await wait_for_widget_text(k, "1/2 · 1 running")
        await k.interrupt()
        await k.finished(running, timeout=30)
        assert running.status == "error" and error_name(running) in ("CancelledError", "KeyboardInterrupt")
        await wait_for_widget_text(k, "interrupted")
        kept = await k.run("%agent map --last")
        assert "(interrupted)" in result_text(kept)
        texts, errors = await kernel_json(k, "[_.texts, list(_.errors.values())]")
        assert texts == ["fast answer", None] and errors == [NOT_RUN_INTERRUPTED]
        assert result_text(await k.run("1 + 1")) == "2"  # the kernel goes on

        started = await k.run('%agent map --bg --over pair "ROW<{value}>"')  # the slow row waits 120 s
        assert result_text(started).startswith("<map bg-1: general-purpose over 2 rows, running>")
        assert result_text(await k.run("2 + 2")) == "4"  # the kernel is free while the map runs
        await k.run("%task stop bg-1")
        await wait_for_widget_text(k, "(background bg-1)")

        def static_copy():  # of the background map, sent to its cell when it stopped
            return next((o for o in started.outputs if o["msg_type"] == "update_display_data"), None)

        final = await k.wait_for(static_copy, what="the background map's static copy")
        (shown,) = [o for o in started.outputs if o["msg_type"] == "display_data"]
        assert final["transient"]["display_id"] == shown["transient"]["display_id"]
        assert "(background bg-1) · general-purpose · 2 rows · interrupted" in visible_text(final["data"]["text/html"])
        texts = await kernel_json(k, f"{HARNESS}.last_map.result().texts")
        assert texts[1] is None
