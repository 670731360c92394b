"""A small MCP server for the tests, written with the SDK's server side.

    python demo.py                     serve over stdio
    python demo.py --http PORT         serve streamable HTTP on 127.0.0.1:PORT (path /mcp)

Environment: ``DEMO_SLOW_START=1`` says so on stderr and then never starts serving: it reads
what the client sends, unanswered, until the client closes its end (a start that times out,
by a server that still ends as soon as it is stopped); ``DEMO_EXIT_AT_START=1`` says why on stderr and exits; ``DEMO_TOKEN`` is
echoed by ``show_token`` and written to stderr at a slow start (a secret that must not leak);
``DEMO_MARK=PATH`` appends the process id to PATH first thing (so a test can tell whether the
server was ever run); ``DEMO_FLOOD=N`` writes N lines that are not JSON-RPC to its stdout
before it serves (a server that floods its output).
"""

from __future__ import annotations

import os
import sys

if os.environ.get("DEMO_MARK"):
    with open(os.environ["DEMO_MARK"], "a") as mark:
        mark.write(f"{os.getpid()}\n")
# Before anything slow (importing the SDK), so that the tail is there however soon a start
# times out.
if os.environ.get("DEMO_SLOW_START"):
    print(f"demo: warming up a cache (token {os.environ.get('DEMO_TOKEN', '-')})", file=sys.stderr, flush=True)
    sys.stdin.buffer.read()
    sys.exit(0)
if os.environ.get("DEMO_FLOOD"):
    os.write(1, b"progress: not a JSON-RPC message\n" * int(os.environ["DEMO_FLOOD"]))
if os.environ.get("DEMO_EXIT_AT_START"):
    print("demo: cannot open the database demo.db", file=sys.stderr, flush=True)
    sys.exit(2)

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from mcp.types import (  # noqa: E402
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

server = MCPServer("demo")
READ_ONLY = ToolAnnotations(read_only_hint=True)
NOTES: list[str] = []


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Return the text, prefixed with 'echo: '."""
    return f"echo: {text}"


@server.tool(annotations=READ_ONLY)
def pid() -> str:
    """The server process's id (a restarted server has a new one)."""
    return str(os.getpid())


@server.tool()
def add_note(text: str) -> str:
    """Keep a note (changes the server's state, so it is not read-only)."""
    NOTES.append(text)
    return f"noted ({len(NOTES)} notes)"


@server.tool(annotations=READ_ONLY)
def fail(why: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"refused: {why}")


@server.tool()
def crash() -> str:
    """Ends the server process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def show_token() -> str:
    """The value of DEMO_TOKEN in the server's environment."""
    return f"token={os.environ.get('DEMO_TOKEN', '')}"


@server.tool(annotations=READ_ONLY)
def picture() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Text, an image and two embedded resources."""
    return [
        TextContent(text="a red dot"),
        ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
        EmbeddedResource(resource=TextResourceContents(uri="file:///notes.txt", text="resource body")),
        EmbeddedResource(resource=BlobResourceContents(uri="file:///data.bin", blob="AAAA", mime_type="application/octet-stream")),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
