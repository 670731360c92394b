"""Long sessions in a real kernel: the context gauge in the run view's header, ``%agent
--compact`` (in a view of its own; the next request starts from the summary), and the lean
tool set of ``%config HarnessNB.tools`` (what the model is offered)."""

from __future__ import annotations

import pytest

from notebook_support import HARNESS, kernel_json, model_requests, notebook, result_text, run_views

pytestmark = pytest.mark.kernel

LISTING = {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}
SCRIPT = {
    "agents": {
        "main": [LISTING, {"text": "two files"}, {"text": "still two files"}, {"text": "lean"}],
        "compaction": [{"text": "The agent listed the folder: two files."}],
    }
}


async def test_gauge_compact_and_a_lean_tool_set(tmp_path):
    (tmp_path / "a.csv").write_text("x\n1\n")
    for i in range(40):  # a listing long enough that a summary of its turn is shorter than the turn
        (tmp_path / f"station_measurements_2024_week_{i:02}.csv").write_text("x\n")
    async with notebook(tmp_path, SCRIPT) as k:
        await k.run("%config HarnessNB.context_window = 100_000")
        assert result_text(await k.run("%%agent\nwhat is here?")) == "two files"
        header = run_views(k)[-1].header
        assert " · context " in header and "% of 100k" in header, header

        cell = await k.run("%agent --compact")
        assert result_text(cell).startswith("compacted: "), k.text(cell)
        assert "3 messages summarised" in result_text(cell)  # all but the last answer
        view = run_views(k)[-1]
        assert "compact" in view.header and "✓" in view.header
        assert " · 1 turn · " in view.header and " · 0 tokens" not in view.header, view.header  # the summary call
        assert any("compacting the conversation (as asked)" in t for t in k.widget_texts())

        assert result_text(await k.run("%%agent\nand now?")) == "still two files"
        first = (await model_requests(k, "main"))[-1]["messages"][0]
        assert first["role"] == "user" and first["content"].startswith("<conversation-summary>")
        assert "already done; do not redo any of it" in first["content"]
        assert "two files" in first["content"]

        await k.run("%config HarnessNB.tools = ['read_file', 'grep']")
        assert result_text(await k.run("%%agent\nlean?")) == "lean"
        offered = await kernel_json(k, f"[t.name for t in {HARNESS}.provider.requests[-1].tools]")
        assert offered == ["read_file", "grep"]
        await k.run("%config HarnessNB.tools = []")
        assert "run_python" in await kernel_json(k, f"{HARNESS}.tools.names()")
