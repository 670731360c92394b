"""Tracing from a notebook, in a real kernel: ``%config HarnessNB.tracing = "otel"`` traces
the next ``%%agent`` cell, whose spans carry the notebook's path (as the Jupyter server
names it to the kernel), the cell's execution count and the cell's id (as the frontend
sends it); a background ``%%agent --bg`` run is traced from its own cell; ``"off"`` again
traces nothing. The spans are caught in the kernel by the SDK's in-memory exporter behind
its tracer provider, as a program that set up OpenTelemetry has one."""

from __future__ import annotations

import pytest

from notebook_support import kernel_json, notebook, result_text

pytestmark = pytest.mark.kernel

SCRIPT = {
    "agents": {
        "main": [{"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}, {"text": "two files"}, {"text": "untraced"}],
        "general-purpose": [{"text": "looked in the background"}],
    }
}
CATCH_SPANS = """
from opentelemetry import trace as _trace
from opentelemetry.sdk.trace import TracerProvider as _Provider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor as _Simple
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter as _Memory
_caught = _Memory()
_provider = _Provider()
_provider.add_span_processor(_Simple(_caught))
_trace.set_tracer_provider(_provider)
"""
SPANS = "[{'name': s.name, 'attributes': dict(s.attributes)} for s in _caught.get_finished_spans()]"


async def test_a_traced_cell_records_its_notebook_path_execution_count_and_cell_id(tmp_path):
    path = str(tmp_path / "sales.ipynb")
    async with notebook(tmp_path, SCRIPT, env={"JPY_SESSION_NAME": path}) as k:
        await k.run(CATCH_SPANS)
        await k.run("%config HarnessNB.tracing = 'otel'")
        cell = await k.run("%%agent\nwhat is here?", cell_id="c0ffee-1")
        assert result_text(cell) == "two files"
        count = cell.reply["content"]["execution_count"]
        found = await kernel_json(k, SPANS)
        assert sorted(s["name"] for s in found) == ["chat script.yaml", "chat script.yaml", "execute_tool ls", "invoke_agent main"]
        root = next(s["attributes"] for s in found if s["name"] == "invoke_agent main")
        assert root["harness_nb.notebook.path"] == path
        assert root["harness_nb.notebook.execution_count"] == count
        assert root["harness_nb.notebook.cell_id"] == "c0ffee-1"

        await k.run("_caught.clear()")
        await k.run("%%agent --bg\nlook around", cell_id="c0ffee-2")
        await k.run("await __import__('harness_nb.notebook').notebook.harness_magics(get_ipython()).controller"
                    ".harness().tracker.wait('bg-1', 10)")
        found = await kernel_json(k, SPANS)
        assert [s["name"] for s in found] == ["chat script.yaml", "invoke_agent general-purpose"]
        assert found[1]["attributes"]["harness_nb.notebook.cell_id"] == "c0ffee-2"

        await k.run("_caught.clear()")
        await k.run("%config HarnessNB.tracing = 'off'")
        assert result_text(await k.run("%%agent\nand now?")) == "untraced"
        assert await kernel_json(k, SPANS) == []
