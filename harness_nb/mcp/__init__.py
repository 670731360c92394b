"""MCP servers' tools as ordinary harness_nb tools (the official ``mcp`` SDK, stdio and
streamable HTTP).

- ``config``: Claude Code's ``.mcp.json`` format, its sources and ``${VAR}`` expansion;
- ``connection``: one server's life (an owner task per running server), its stderr's tail;
- ``tool``: ``McpTool``, named ``mcp__<server>__<tool>``, and how results become text;
- ``manager``: ``McpManager``, the servers of one harness, started lazily.

Importing this package does not import the SDK; starting the first server does.
"""

from .config import HttpServer, ServerConfig, ServerEntry, Servers, StdioServer, check_servers, configured_servers
from .connection import McpServerError, RemoteTool, ServerConnection
from .manager import DEFAULT_START_TIMEOUT, McpManager, ServerStatus
from .tool import McpTool, render_result, tool_name

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "HttpServer",
    "McpManager",
    "McpServerError",
    "McpTool",
    "RemoteTool",
    "ServerConfig",
    "ServerConnection",
    "ServerEntry",
    "ServerStatus",
    "Servers",
    "StdioServer",
    "check_servers",
    "configured_servers",
    "render_result",
    "tool_name",
]
