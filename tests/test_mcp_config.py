"""MCP server configuration: Claude Code's ``.mcp.json`` format, its sources and precedence,
``${VAR}`` expansion, and hostile files — each bad entry one clear message, never a crash,
and nothing started by reading a configuration."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness_nb.core import ConfigError
from harness_nb.core.secret import SECRETS
from harness_nb.harness import Harness
from harness_nb.mcp import HttpServer, McpManager, StdioServer, configured_servers, tool_name
from harness_nb.mcp.config import MAX_FILE_BYTES, expand, parse_server
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from mcp_support import home  # noqa: F401  (an autouse fixture)


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def test_claude_code_format_both_transports(tmp_path):
    write(
        tmp_path / ".mcp.json",
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server-fs", "."], "env": {"DEBUG": "1"}, "cwd": "tools"},
                "typed": {"type": "stdio", "command": "srv"},
                "web": {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Team": "data"}},
                "web2": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
            }
        },
    )
    servers = configured_servers(tmp_path, home=None)
    assert servers.warnings == []
    entries = servers.entries
    assert entries["files"].config == StdioServer("npx", ("-y", "server-fs", "."), {"DEBUG": "1"}, tmp_path / "tools")
    assert entries["files"].source == ".mcp.json"
    assert entries["typed"].config == StdioServer("srv")
    assert entries["web"].config == HttpServer("https://example.com/mcp", {"X-Team": "data"})
    assert isinstance(entries["web2"].config, HttpServer)


def test_variables_expand_as_claude_code_does():
    env = {"HOME": "/home/me", "EMPTY": ""}
    assert expand("${HOME}/x", "w", env) == "/home/me/x"
    assert expand("${MISSING:-fallback}", "w", env) == "fallback"
    assert expand("${EMPTY:-fallback}", "w", env) == "fallback"
    assert expand("${EMPTY}", "w", env) == ""
    assert expand("$HOME and ${ not a var", "w", env) == "$HOME and ${ not a var"
    with pytest.raises(ConfigError, match=r"w: \$\{MISSING\} is not set; export MISSING, or write \$\{MISSING:-default\}"):
        expand("${MISSING}", "w", env)


def test_expansion_in_every_field(tmp_path):
    env = {"BIN": "my-server", "TOKEN": "tok-Abcdef123456", "PORT": "8123"}
    stdio = parse_server(
        "s", {"command": "${BIN}", "args": ["--port=${PORT}"], "env": {"T": "${TOKEN}"}}, "f", workdir=tmp_path, environ=env
    )
    assert stdio.config == StdioServer("my-server", ("--port=8123",), {"T": "tok-Abcdef123456"})
    http = parse_server(
        "h",
        {"type": "http", "url": "http://127.0.0.1:${PORT}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "f",
        workdir=tmp_path,
        environ=env,
    )
    assert http.config == HttpServer("http://127.0.0.1:8123/mcp", {"Authorization": "Bearer tok-Abcdef123456"})


def test_env_and_header_values_become_secrets(tmp_path):
    parse_server("s", {"command": "x", "env": {"DB": "db-Pass-w0rd-1234"}}, "f", workdir=tmp_path)
    parse_server(
        "h", {"url": "http://127.0.0.1/mcp", "headers": {"Authorization": "Bearer hdr-Tok3n-ABCDEFG"}}, "f", workdir=tmp_path
    )
    text = SECRETS.scrub("db-Pass-w0rd-1234 and hdr-Tok3n-ABCDEFG")
    assert "db-Pass" not in text and "hdr-Tok3n" not in text


@pytest.mark.parametrize(
    ("name", "entry", "message"),
    [
        ("a__b", {"command": "x"}, "MCP server name 'a__b' must be letters, digits"),
        ("has space", {"command": "x"}, "MCP server name 'has space' must be"),
        ("ok", "npx server", "MCP server 'ok' must be an object"),
        ("ok", {"args": []}, 'MCP server \'ok\': "command" is missing'),
        ("ok", {"command": ["npx"]}, "MCP server 'ok': command must be a string"),
        ("ok", {"command": "x", "args": "a b"}, '"args" must be a list'),
        ("ok", {"command": "x", "args": [{"a": 1}]}, "args[0] must be a string"),
        ("ok", {"command": "x", "env": ["A=1"]}, "env must be an object"),
        ("ok", {"command": "x", "env": {"A": None}}, "env.A must be a string"),
        ("ok", {"command": "x", "timeout": 5}, "unknown field 'timeout'"),
        ("ok", {"command": "x\x00y"}, "holds a NUL"),
        ("ok", {"command": "x" * 9000}, "longer than 8192 characters"),
        ("ok", {"type": "sse", "url": "http://h/sse"}, '"type": "sse" (the old HTTP+SSE transport) is not supported'),
        ("ok", {"type": "websocket", "url": "ws://h"}, '"type" must be "stdio", "http" or "streamable-http"'),
        ("ok", {"type": "http"}, '"url" is missing'),
        ("ok", {"type": "http", "url": "file:///etc/passwd"}, "must be an http:// or https:// address"),
        ("ok", {"type": "http", "url": "http://h/mcp", "headers": {"A": 1.5, "B": True}}, "headers.B must be a string"),
        ("ok", {"command": "${NOT_SET_ANYWHERE_XYZ}"}, "${NOT_SET_ANYWHERE_XYZ} is not set"),
    ],
)
def test_each_bad_entry_is_one_clear_error(tmp_path, name, entry, message):
    with pytest.raises(ConfigError) as info:
        parse_server(name, entry, ".mcp.json", workdir=tmp_path)
    assert message in str(info.value)
    assert str(info.value).startswith(".mcp.json: MCP server")


def test_a_bad_entry_in_a_file_is_a_warning_and_the_rest_are_kept(tmp_path):
    write(tmp_path / ".mcp.json", {"mcpServers": {"good": {"command": "srv"}, "bad": {"args": []}, "a__b": {}}})
    servers = configured_servers(tmp_path, home=None)
    assert list(servers.entries) == ["good"]
    assert servers.warnings == [
        '.mcp.json: MCP server \'bad\': "command" is missing; name the program that runs the server, e.g. "npx"; '
        "this server is not used",
        ".mcp.json: MCP server name 'a__b' must be letters, digits, '-' and '_' (at most 48, no '__'), e.g. github; "
        "this server is not used",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', 'not an object with "mcpServers"'),
        ('{"mcpServers": []}', 'not an object with "mcpServers"'),
        ("[" * 150_000 + "]" * 150_000, "larger than 256 KiB"),
        ("[" * 50_000 + "]" * 50_000, "cannot be read as JSON (RecursionError)"),
    ],
)
def test_hostile_files_cost_one_warning(tmp_path, content, message):
    write(tmp_path / ".mcp.json", content)
    servers = configured_servers(tmp_path, home=None)
    assert servers.entries == {}
    assert len(servers.warnings) == 1 and message in servers.warnings[0], servers.warnings
    assert servers.warnings[0].startswith(".mcp.json: ")


def test_oversized_non_utf8_fifo_and_folder_files(tmp_path):
    path = tmp_path / ".mcp.json"
    path.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    assert "larger than 256 KiB" in configured_servers(tmp_path, home=None).warnings[0]
    path.write_bytes(b'{"mcpServers": {"\xff": {}}}')
    assert "not UTF-8" in configured_servers(tmp_path, home=None).warnings[0]
    path.unlink()
    os.mkfifo(path)  # reading a named pipe would block for ever
    assert "named pipe, not a regular file" in configured_servers(tmp_path, home=None).warnings[0]
    path.unlink()
    path.mkdir()
    assert "cannot read it" in configured_servers(tmp_path, home=None).warnings[0]


def test_many_servers_are_bounded(tmp_path):
    write(tmp_path / ".mcp.json", {"mcpServers": {f"s{i}": {"command": "x"} for i in range(500)}})
    servers = configured_servers(tmp_path, home=None)
    assert len(servers.entries) == 64 and "more than 64 MCP servers" in servers.warnings[0]


def test_precedence_user_then_project_then_code(tmp_path):
    home = tmp_path / "home"
    write(home / ".harness_nb" / "mcp.json", {"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}})
    write(tmp_path / ".mcp.json", {"mcpServers": {"b": {"command": "project-b"}, "c": {"command": "project-c"}}})
    servers = configured_servers(tmp_path, home=home, given={"c": {"command": "code-c"}})
    assert {n: (e.config.describe(), e.source) for n, e in servers.entries.items()} == {
        "a": ("user-a", "~/.harness_nb/mcp.json"),
        "b": ("project-b", ".mcp.json"),
        "c": ("code-c", "settings"),
    }
    assert configured_servers(tmp_path, home=None).entries.keys() == {"b", "c"}


def test_servers_given_in_code_are_checked_at_once(tmp_path):
    with pytest.raises(ConfigError, match="settings: MCP server 'x': \"command\" is missing"):
        Harness("scripted/none.yaml", workdir=tmp_path, include_user_agents=False, mcp_servers={"x": {}})
    # the whole .mcp.json document is accepted as well as its mcpServers
    h = Harness(
        "scripted/none.yaml", workdir=tmp_path, include_user_agents=False, mcp_servers={"mcpServers": {"x": {"command": "c"}}}
    )
    OPEN.append(h)
    assert h.mcp.names() == ["x"]
    with pytest.raises(ConfigError, match="url"):
        h.mcp.configure(servers={"y": {"type": "http"}})
    assert h.mcp.names() == ["x"]  # a refused value changes nothing
    h.mcp.configure(servers={"y": {"type": "http", "url": "http://127.0.0.1:1/mcp"}})
    assert h.mcp.names() == ["y"]


async def test_reading_the_configuration_starts_nothing(tmp_path):
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"command": "never-started-xyz"}}})
    manager = McpManager(tmp_path, trust=["a"])
    assert [(s.name, s.state, s.tools) for s in manager.status()] == [("a", "not started", ())]
    assert manager.known_tools() == []
    await manager.aclose()


def test_tool_names_are_made_safe_for_model_apis():
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("s", "get.file/contents v2") == "mcp__s__get_file_contents_v2"
    assert len(tool_name("s", "x" * 200)) == 64
