"""MCP servers for real: the demo server (``mcp_servers/demo.py``, the SDK's server side)
started by the tests over stdio and over streamable HTTP on loopback — start, list, call, a
tool error, a crash mid-call and the restart after it, a start that times out, results,
secrets, subagent narrowing and per-subagent servers, and a whole ``Harness.run`` over
HTTP with the fake LLM server calling an MCP tool."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from harness_nb.core import McpServerError, ToolCall, ToolResultMessage
from harness_nb.harness import Harness
from harness_nb.mcp import McpManager, McpTool
from harness_nb.mcp.flood import FLOOD_FIRST, FloodFilter
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition
from harness_nb.testing import FakeLLMServer
from harness_nb.tools import ToolContext, invoke
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from mcp_support import HttpDemo, home, stdio_demo  # noqa: F401  (home: an autouse fixture)

TOKEN = "demo-Token-7Hq2Zx9Lm4Vb"


async def call(tool: McpTool, workdir: Path, **arguments: object) -> tuple[str, bool]:
    """Call an MCP tool as the engine does (``invoke``); its text and whether it failed."""
    c = ToolCall(id="c1", name=tool.name, arguments=json.dumps(arguments))
    outcome = await invoke(tool, c, ToolContext(workdir=workdir, call=c, tool=tool))
    return outcome.content, outcome.is_error


def by_name(tools: list[McpTool]) -> dict[str, McpTool]:
    return {t.name: t for t in tools}


_STARTED: list[HttpDemo] = []


@pytest.fixture(autouse=True)
async def stop_http_servers():
    """The HTTP demo servers a test started are stopped after it."""
    yield
    while _STARTED:
        await _STARTED.pop().stop()


async def http_demo() -> HttpDemo:
    """The demo server over streamable HTTP, serving (stopped after the test)."""
    server = HttpDemo()
    _STARTED.append(server)
    await server.start()
    return server


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_start_list_call_and_a_tool_error(tmp_path, transport):
    entry = stdio_demo() if transport == "stdio" else (await http_demo()).entry()
    manager = McpManager(tmp_path, servers={"demo": entry})
    try:
        assert manager.connection("demo").state == "not started"  # nothing runs before a use
        tools = by_name(await manager.tools())
        assert manager.connection("demo").state == "running"
        assert {"mcp__demo__echo", "mcp__demo__add_note", "mcp__demo__fail", "mcp__demo__crash"} <= set(tools)
        echo = tools["mcp__demo__echo"]
        assert echo.read_only and not tools["mcp__demo__add_note"].read_only
        spec = echo.spec()
        assert spec.parameters["properties"]["text"]["type"] == "string"
        assert spec.parameters["required"] == ["text"]
        assert "Return the text" in spec.description

        assert await call(echo, tmp_path, text="hi") == ("echo: hi", False)
        text, failed = await call(tools["mcp__demo__fail"], tmp_path, why="no reason")
        assert failed and text.startswith("error: mcp__demo__fail failed:") and "refused: no reason" in text
        # arguments the server's schema refuses come back as a tool error too
        text, failed = await call(echo, tmp_path, wrong=1)
        assert failed and "text" in text
        # the connection survived both errors
        assert await call(echo, tmp_path, text="still") == ("echo: still", False)
    finally:
        await manager.aclose()
    assert manager.connection("demo").state == "stopped"


async def test_results_text_image_and_resources(tmp_path):
    manager = McpManager(tmp_path, servers={"demo": stdio_demo()})
    try:
        picture = by_name(await manager.tools())["mcp__demo__picture"]
        c = ToolCall(id="c1", name=picture.name, arguments="{}")
        outcome = await invoke(picture, c, ToolContext(workdir=tmp_path, call=c, tool=picture))
    finally:
        await manager.aclose()
    text, failed = outcome.content, outcome.is_error
    assert not failed
    assert [(i.media_type, i.data) for i in outcome.images] == [("image/png", "iVBORw0KGgo=")]
    assert text.splitlines() == [
        "a red dot",
        f"[{outcome.images[0].describe()}: attached]",
        "[resource file:///notes.txt]",
        "resource body",
        "[resource file:///data.bin, application/octet-stream, 3 bytes]",
    ]


async def test_stdio_server_crashing_mid_call_is_a_tool_error_then_restarts(tmp_path):
    manager = McpManager(tmp_path, servers={"demo": stdio_demo()})
    try:
        tools = by_name(await manager.tools())
        first_pid, _ = await call(tools["mcp__demo__pid"], tmp_path)
        text, failed = await call(tools["mcp__demo__crash"], tmp_path)
        assert failed and "MCP server 'demo' stopped during the call to crash" in text
        assert "started again at its next use" in text
        connection = manager.connection("demo")
        assert (connection.state, connection.crashed) == ("failed", True)
        # the next call starts a new server process and works
        second_pid, failed = await call(tools["mcp__demo__pid"], tmp_path)
        assert not failed and second_pid != first_pid
        assert connection.state == "running"
        assert await call(tools["mcp__demo__echo"], tmp_path, text="back") == ("echo: back", False)
    finally:
        await manager.aclose()


async def test_http_server_crashing_mid_call_is_a_tool_error_then_reconnects(tmp_path):
    server = await http_demo()
    manager = McpManager(tmp_path, servers={"web": server.entry()})
    try:
        tools = by_name(await manager.tools())
        text, failed = await call(tools["mcp__web__crash"], tmp_path)
        assert failed and "MCP server 'web' stopped during the call to crash" in text
        await server.wait_exit()
        await server.start()  # the same address again: the next use reconnects
        assert await call(tools["mcp__web__echo"], tmp_path, text="again") == ("echo: again", False)
        assert manager.connection("web").state == "running"
    finally:
        await manager.aclose()


async def test_a_slow_start_times_out_naming_the_server_and_its_stderr(tmp_path, caplog):
    """The server never answers the handshake: the start fails when its timeout expires (kept
    short: the stderr line is written before the server imports anything), and stopping it
    takes no grace period, since the server leaves as soon as its stdin closes."""
    manager = McpManager(
        tmp_path, servers={"slow": stdio_demo(DEMO_SLOW_START="1", DEMO_TOKEN=TOKEN)}, start_timeout=1
    )
    try:
        assert await manager.tools() == []  # the run goes on without its tools
        connection = manager.connection("slow")
        error = connection.last_error or ""
        assert connection.state == "failed" and not connection.crashed
        assert error.startswith("MCP server 'slow' did not start within 1 s")
        assert "demo: warming up a cache" in error
        assert TOKEN not in error and "[redacted]" in error  # its env is secret, even in stderr
        assert "%mcp restart slow" in error
        assert error in caplog.text and TOKEN not in caplog.text
        # not retried at every use: one failure costs its timeout once
        assert not connection.wants_start and await manager.tools() == []
        with pytest.raises(McpServerError, match="did not start within 1 s"):
            await manager.restart("slow")
    finally:
        await manager.aclose()


async def test_a_server_that_exits_at_start_and_a_missing_command_say_why(tmp_path):
    manager = McpManager(
        tmp_path,
        servers={"broken": stdio_demo(DEMO_EXIT_AT_START="1"), "missing": {"command": "no-such-mcp-server-xyz"}},
    )
    try:
        assert await manager.tools() == []
        broken, missing = manager.connection("broken").last_error or "", manager.connection("missing").last_error or ""
    finally:
        await manager.aclose()
    assert broken.startswith("MCP server 'broken' could not start") and "cannot open the database demo.db" in broken
    assert missing.startswith("MCP server 'missing' could not start") and "no-such-mcp-server-xyz" in missing


async def test_harness_run_over_http_sends_the_mcp_result_to_the_model(tmp_path):
    """End to end: the fake LLM server calls mcp__demo__echo; the next request carries the
    server's answer as the tool result, and the transcript keeps it."""
    script = [
        {"text": "", "tool_calls": [{"name": "mcp__demo__echo", "arguments": {"text": "ping"}, "id": "call_1"}]},
        {"text": "The server said echo: ping."},
    ]
    async with FakeLLMServer(script) as srv:
        h = Harness(
            "openai-compatible/m",
            workdir=tmp_path,
            base_url=srv.url + "/v1",
            include_user_agents=False,
            mcp_servers={"demo": stdio_demo()},
        )
        OPEN.append(h)
        result = await h.run("Ask the demo server to echo ping.")
        first, second = srv.requests[0].body, srv.requests[1].body
    assert result.final_text == "The server said echo: ping."
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert offered["mcp__demo__echo"]["parameters"]["required"] == ["text"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "echo: ping"}
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(r.name, r.content, r.is_error) for r in results] == [("mcp__demo__echo", "echo: ping", False)]
    assert h.session.transcript is not None
    assert '"echo: ping"' in h.session.transcript.read_text()
    await h.aclose()
    assert h.mcp.connection("demo").state == "stopped"


async def test_an_mcp_image_reaches_a_model_that_takes_images(tmp_path):
    """An image the server returns goes to Anthropic as an image block of the tool result."""
    script = [
        {"tool_calls": [{"name": "mcp__demo__picture", "arguments": {}, "id": "toolu_1"}]},
        {"text": "A red dot."},
    ]
    async with FakeLLMServer(script) as srv:
        h = Harness(
            "anthropic/claude-haiku-4-5",
            workdir=tmp_path,
            base_url=srv.url,
            api_key="sk-ant-test-not-a-real-key-000",
            include_user_agents=False,
            mcp_servers={"demo": stdio_demo()},
        )
        OPEN.append(h)
        assert (await h.run("Show me the picture.")).final_text == "A red dot."
        second = srv.requests[1].body
    result = second["messages"][-1]["content"][-1]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    images = [b for b in result["content"] if b["type"] == "image"]
    assert images == [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]


async def test_mcp_tools_go_through_the_permission_rules_and_approvals(tmp_path):
    asked: list[str] = []

    async def approval(call, reason, risk):
        from harness_nb.engine import Denied

        asked.append(f"{call.name}: {reason}")
        return Denied("not now")

    script = [
        {"tool_calls": [{"name": "mcp__demo__echo", "arguments": {"text": "a"}}]},
        {"tool_calls": [{"name": "mcp__demo__add_note", "arguments": {"text": "b"}}]},
        {"tool_calls": [{"name": "mcp__demo__show_token", "arguments": {}}]},
        {"text": "done"},
    ]
    h = Harness(
        ScriptedProvider(script),
        workdir=tmp_path,
        include_user_agents=False,
        mcp_servers={"demo": stdio_demo()},
        approval=approval,
        deny=["mcp__demo__show_token"],
    )
    OPEN.append(h)
    result = await h.run("go")
    outs = [m.content for m in result.messages if isinstance(m, ToolResultMessage)]
    assert outs[0] == "echo: a"  # read-only: runs unasked
    assert outs[1].startswith("error: the call was denied: not now")  # not read-only: asks
    assert asked == ["mcp__demo__add_note: mcp__demo__add_note is not known to be read-only"]
    assert outs[2].startswith("error: denied: denied by the rule mcp__demo__show_token")


async def test_secrets_in_env_and_headers_never_reach_the_model_or_the_transcript(tmp_path, caplog):
    server = await http_demo()
    script = [
        {"tool_calls": [{"name": "mcp__demo__show_token", "arguments": {}}]},
        {"text": "ok"},
    ]
    provider = ScriptedProvider(script)
    h = Harness(
        provider,
        workdir=tmp_path,
        include_user_agents=False,
        mcp_servers={"demo": stdio_demo(DEMO_TOKEN=TOKEN), "web": server.entry(Authorization=f"Bearer {TOKEN}x")},
    )
    OPEN.append(h)
    result = await h.run("show me the token")
    outs = [m.content for m in result.messages if isinstance(m, ToolResultMessage)]
    assert outs == ["token=[redacted]"]
    sent = json.dumps([m.model_dump() for r in provider.requests for m in r.messages])
    assert TOKEN not in sent
    assert h.session.transcript is not None
    assert TOKEN not in h.session.transcript.read_text()
    assert TOKEN not in caplog.text
    statuses = {s.name: s for s in h.mcp.status()}
    assert statuses["web"].state == "running" and TOKEN not in repr(h.mcp.status())


async def test_a_subagent_allowed_one_mcp_tool_cannot_call_another(tmp_path):
    definition = SubAgentDefinition(
        name="echoer", description="Echoes through the demo server.", tools=["read_file", "mcp__demo__echo"]
    )
    script = {
        "main": [
            {"tool_calls": [{"name": "task", "arguments": {"subagent_type": "echoer", "prompt": "go"}}]},
            {"text": "done"},
        ],
        "echoer": [
            {"tool_calls": [{"name": "mcp__demo__add_note", "arguments": {"text": "x"}}]},
            {"tool_calls": [{"name": "mcp__demo__echo", "arguments": {"text": "y"}}]},
            {"text": "reported"},
        ],
    }
    provider = ScriptedProvider(script)
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, mcp_servers={"demo": stdio_demo()})
    OPEN.append(h)
    h.registry.register(definition)
    await h.run("delegate")
    child = [r for r in provider.requests if r.agent == "echoer"]
    assert {t.name for t in child[0].tools} == {"read_file", "mcp__demo__echo"}
    results = [m for m in child[-1].messages if isinstance(m, ToolResultMessage)]
    assert results[0].is_error and results[0].content.startswith("error: unknown tool 'mcp__demo__add_note'")
    assert (results[1].content, results[1].is_error) == ("echo: y", False)


async def test_tool_patterns_and_server_names_narrow_mcp_tools(tmp_path):
    definition = SubAgentDefinition(
        name="reader",
        description="Reads with the demo server.",
        tools="Read, mcp__demo__*",
        disallowed_tools=["mcp__demo__crash"],
    )
    script = {"reader": [{"text": "ok"}]}
    provider = ScriptedProvider(script)
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, mcp_servers={"demo": stdio_demo()})
    OPEN.append(h)
    h.registry.register(definition)
    await h.run_subagent("reader", "look")
    offered = {t.name for t in provider.requests[0].tools}
    assert "read_file" in offered and "mcp__demo__echo" in offered and "mcp__demo__add_note" in offered
    assert "mcp__demo__crash" not in offered and "bash" not in offered


async def test_inline_mcp_servers_of_a_subagent_live_only_while_it_runs(tmp_path):
    definition = SubAgentDefinition.model_validate(
        {
            "name": "noter",
            "description": "Keeps notes on its own server.",
            "tools": ["mcp__notes__add_note"],
            "mcpServers": [{"notes": stdio_demo()}],
        }
    )
    script = {
        "noter": [
            {"tool_calls": [{"name": "mcp__notes__add_note", "arguments": {"text": "x"}}]},
            {"text": "noted"},
        ]
    }
    provider = ScriptedProvider(script)
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, approval_policy="never")
    OPEN.append(h)
    h.registry.register(definition)
    result = await h.run_subagent("noter", "note x")
    assert result.final_text == "noted"
    assert [t.name for t in provider.requests[0].tools] == ["mcp__notes__add_note"]
    outs = [m.content for m in result.messages if isinstance(m, ToolResultMessage)]
    assert outs == ["noted (1 notes)"]
    # the main agent never had it, and nothing of it runs now
    assert "mcp__notes__add_note" not in h.tools and h.mcp.names() == []


async def test_a_subagent_naming_an_unknown_server_fails_clearly(tmp_path):
    definition = SubAgentDefinition.model_validate(
        {"name": "lost", "description": "Names a server nobody configured.", "mcpServers": "github"}
    )
    h = Harness(ScriptedProvider({"lost": [{"text": "never"}]}), workdir=tmp_path, include_user_agents=False)
    OPEN.append(h)
    h.registry.register(definition)
    with pytest.raises(Exception, match="unknown MCP server 'github'"):
        await h.run_subagent("lost", "go")


async def test_concurrent_calls_share_one_server_and_aclose_stops_it(tmp_path):
    manager = McpManager(tmp_path, servers={"demo": stdio_demo()})
    tools = by_name(await manager.tools())
    echo = tools["mcp__demo__echo"]
    answers = await asyncio.gather(*(call(echo, tmp_path, text=str(i)) for i in range(5)))
    assert [a for a, _ in answers] == [f"echo: {i}" for i in range(5)]
    owner = manager.connection("demo")._task
    assert owner is not None and owner.get_name() == "harness_nb:mcp:demo"
    await manager.aclose()
    assert owner.done() and manager.connection("demo").state == "stopped"


# ---------------------------------------------------------------------- a server that floods its output


async def test_a_server_flooding_its_stdout_is_logged_a_bounded_number_of_times(tmp_path, caplog):
    """3,000 lines that are not JSON-RPC: the SDK used to log a traceback for each one
    (issue 18, item 7). The first few of a kind are logged; the server still serves."""
    manager = McpManager(tmp_path, servers={"demo": stdio_demo(DEMO_FLOOD="3000")})
    try:
        tools = by_name(await manager.tools())
        assert await call(tools["mcp__demo__echo"], tmp_path, text="hi") == ("echo: hi", False)
    finally:
        await manager.aclose()
    from_sdk = [r for r in caplog.records if r.name.startswith("mcp") and r.levelno >= logging.WARNING]
    kinds = Counter((r.name, r.msg) for r in from_sdk)
    assert kinds and max(kinds.values()) <= FLOOD_FIRST, kinds
    assert ("mcp.client.stdio", "Failed to parse JSONRPC message from server") in kinds


def test_a_flood_is_logged_once_a_minute_after_the_first_records() -> None:
    now = [0.0]
    flood = FloodFilter(first=3, every=60.0, clock=lambda: now[0])

    def record(msg: str = "Failed to parse %s") -> logging.LogRecord:
        return logging.LogRecord("mcp.client.stdio", logging.ERROR, __file__, 1, msg, ("line",), None)

    passed = [r for r in (record() for _ in range(1000)) if flood.filter(r)]
    assert len(passed) == 3
    assert flood.filter(record("another kind"))  # counted apart
    now[0] = 59.0
    assert not flood.filter(record())
    now[0] = 61.0
    late = record()
    assert flood.filter(late)
    assert late.getMessage() == "Failed to parse line [998 more like this in the last 60 s were not logged]"
    now[0] = 100.0
    assert not flood.filter(record())  # 39 s after the last one let through
    now[0] = 121.0
    quiet = record()
    assert flood.filter(quiet) and quiet.getMessage().endswith("[1 more like this in the last 60 s were not logged]")
