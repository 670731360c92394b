"""MCP servers' tools as ordinary harness_nb tools (the official ``mcp`` SDK, stdio and
streamable HTTP).

- ``config``: Claude Code's ``.mcp.json`` format, its sources and ``${VAR}`` expansion;
- ``connection``: one server's life (an owner task per running server), its stderr's tail;
- ``tool``: ``McpTool``, named ``mcp__<server>__<tool>``, and how results become text;
- ``trust``: which project servers the person trusts (``%mcp trust``, settings, names);
- ``manager``: ``McpManager``, the servers of one harness, started lazily.

Importing this package does not import the SDK; starting the first server does. May
import ``core`` and ``tools``; never ``engine`` (its sibling layer) nor anything above.
"""

from .config import (
    HttpServer,
    ServerConfig,
    ServerEntry,
    Servers,
    StdioServer,
    check_servers,
    configured_servers,
    parse_servers,
)
from .connection import RemoteTool, ServerConnection
from .manager import DEFAULT_START_TIMEOUT, McpManager, ServerStatus
from .tool import McpTool, render_result, tool_name
from .trust import TRUST_FILE, Trust, TrustStore, Verdict, fingerprint

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "TRUST_FILE",
    "HttpServer",
    "McpManager",
    "McpTool",
    "RemoteTool",
    "ServerConfig",
    "ServerConnection",
    "ServerEntry",
    "ServerStatus",
    "Servers",
    "StdioServer",
    "Trust",
    "TrustStore",
    "Verdict",
    "check_servers",
    "configured_servers",
    "fingerprint",
    "parse_servers",
    "render_result",
    "tool_name",
]
