"""MCP servers in a real ipykernel: a project ``.mcp.json`` server waits for the person's
trust (``%mcp`` says "needs your approval" and what it would run; a run before that goes on
without it and says how to trust it; ``%mcp trust`` lets it start), starts at the next
``%%agent`` run (not at ``%load_ext``), a call of its non-read-only tool shows an approval
card in the running cell, ``%mcp`` lists the servers and restarts one, and a bad
``%config HarnessNB.mcp_servers`` fails its cell."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from mcp_support import stdio_demo
from notebook_support import (
    HARNESS,
    error_name,
    kernel_json,
    model_requests,
    notebook,
    result_text,
    tool_results,
    wait_for_widget_text,
)

pytestmark = pytest.mark.kernel


async def test_trust_then_approval_for_a_non_read_only_mcp_tool_and_percent_mcp(tmp_path):
    mark = tmp_path / "ran"
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"demo": stdio_demo(DEMO_MARK=str(mark))}}))
    script = {
        "agents": {
            "main": [
                {"text": "No MCP tools here."},
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
        assert "demo" in listing and "needs your approval" in listing and ".mcp.json" in listing
        assert "demo.py" in listing and "%mcp trust demo" in listing
        refused = await k.run("%mcp restart demo", check=False)
        assert error_name(refused) == "UsageError" and "%mcp trust demo" in k.error(refused)

        untrusted = await k.run("%%agent\nwhat tools do you have?")
        assert "%mcp trust demo" in k.text(untrusted) and "would run:" in k.text(untrusted)
        offered = await kernel_json(k, f"[t.name for t in {HARNESS}.provider.requests[0].tools]")
        assert "read_file" in offered and not [t for t in offered if t.startswith("mcp__")]
        assert not mark.exists()  # the server's command never ran

        trusted = await k.run("%mcp trust demo")
        assert k.text(trusted).strip() == "trusted demo (.mcp.json); it starts at its next use"
        listing = k.text(await k.run("%mcp"))
        assert "not started" in listing and "needs your approval" not in listing
        assert (tmp_path / "home" / ".harness_nb" / "mcp-trust.json").is_file()
        assert k.text(await k.run("%mcp trust --all")).strip() == "no MCP server waits for your approval"
        assert k.text(await k.run("%mcp reload")).strip() == "1 MCP servers configured"

        cell = k.execute("%%agent\nnote that I must buy milk")
        card = await wait_for_widget_text(k, "Approve mcp__demo__add_note?")
        assert "buy milk" in card and "not known to be read-only" in card
        assert cell.reply is None, "the cell stays busy while the card waits"
        k.click(await k.wait_for_button("Approve"))
        await k.finished(cell)
        assert cell.status == "ok", k.error(cell)
        assert result_text(cell) == "Noted it."
        requests = (await model_requests(k, "main"))[1:]
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
