"""MCP servers in a real ipykernel: a project ``.mcp.json`` server starts at the first
``%%agent`` run (not at ``%load_ext``), a call of its non-read-only tool shows an approval
card in the running cell, ``%mcp`` lists the servers and restarts one, and a bad
``%config HarnessNB.mcp_servers`` fails its cell."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from mcp_support import stdio_demo
from notebook_support import error_name, model_requests, notebook, result_text, tool_results, wait_for_widget_text

pytestmark = pytest.mark.kernel


async def test_approval_for_a_non_read_only_mcp_tool_and_percent_mcp(tmp_path):
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"demo": stdio_demo()}}))
    script = {
        "agents": {
            "main": [
                {"tool_calls": [{"name": "mcp__demo__pid", "arguments": {}}]},
                {"tool_calls": [{"name": "mcp__demo__echo", "arguments": {"text": "hi"}}]},
                {"tool_calls": [{"name": "mcp__demo__add_note", "arguments": {"text": "buy milk"}}]},
                {"text": "Noted it."},
                {"tool_calls": [{"name": "mcp__demo__pid", "arguments": {}}]},
                {"text": "That is its pid."},
            ]
        }
    }
    async with notebook(tmp_path, script) as k:
        listing = k.text(await k.run("%mcp"))
        assert "demo" in listing and "not started" in listing and ".mcp.json" in listing

        cell = k.execute("%%agent\nnote that I must buy milk")
        card = await wait_for_widget_text(k, "Approve mcp__demo__add_note?")
        assert "buy milk" in card and "not known to be read-only" in card
        assert cell.reply is None, "the cell stays busy while the card waits"
        k.click(await k.wait_for_button("Approve"))
        await k.finished(cell)
        assert cell.status == "ok", k.error(cell)
        assert result_text(cell) == "Noted it."
        requests = await model_requests(k, "main")
        server_pid = int(tool_results(requests[1])[0])
        assert tool_results(requests[2])[-1] == "echo: hi"  # read-only: no card
        assert tool_results(requests[3])[-1] == "noted (1 notes)"

        listing = k.text(await k.run("%mcp"))
        row = next(line for line in listing.splitlines() if line.startswith("demo"))
        assert "running" in row and " 7 " in f" {row} "

        restarted = await k.run("%mcp restart demo")
        assert k.text(restarted).strip() == "demo: running, 7 tools"
        unknown = await k.run("%mcp restart nope", check=False)
        assert error_name(unknown) == "UsageError" and "unknown MCP server 'nope'; valid: demo" in k.error(unknown)

        bad = await k.run("%config HarnessNB.mcp_servers = {'x': {'args': []}}", check=False)
        assert error_name(bad) == "UsageError"
        assert "MCP server 'x': \"command\" is missing" in k.error(bad)
        assert "HarnessNB.mcp_servers stays {}" in k.error(bad)
        await _gone(server_pid)  # the restart replaced it

        await k.run("%%agent\nwhich process serves you now?")
        last = tool_results((await model_requests(k, "main"))[-1])[-1]
        assert int(last) != server_pid
    # the kernel is gone, and so is the server it ran
    await _gone(int(last))


async def _gone(pid: int) -> None:
    async with asyncio.timeout(60):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            await asyncio.sleep(0.05)
