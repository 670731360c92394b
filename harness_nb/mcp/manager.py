"""``McpManager``: the MCP servers of one harness, and their tools.

It reads the configuration (``config.py``) on first use and makes one ``ServerConnection``
per server. Nothing starts when the harness is made or the notebook extension loads: a
server starts at its first use — the first run of the main agent (whose tool list must
hold its tools before the first model call), a subagent naming it, a call of one of its
tools after a crash — on the running loop, the configured servers concurrently, each
within the start timeout. A server that fails to start costs one warning (its error names
it and quotes its stderr; ``%mcp`` shows it) and the run goes on without its tools.

``scoped(…)`` makes a manager for a subagent's inline ``mcpServers``: its servers live only
while that subagent runs (the runner closes it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import UnknownNameError
from ..core.secret import SECRETS
from .config import ServerEntry, Servers, check_servers, configured_servers, parse_servers
from .connection import McpServerError, ServerConnection, State
from .tool import McpTool

log = logging.getLogger("harness_nb.mcp")

DEFAULT_START_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServerStatus:
    """One row of ``%mcp``: a server, where it is configured, how it is reached (scrubbed),
    its state, its tools and the last error."""

    name: str
    source: str
    target: str
    state: State
    tools: tuple[str, ...]
    error: str | None


class McpManager:
    """The servers configured for ``workdir`` (``~/.harness_nb/mcp.json`` when ``home`` is
    given, ``<workdir>/.mcp.json``, then ``servers``, which is checked now: a bad entry is a
    ``ConfigError``). ``start_timeout`` bounds each server's start."""

    def __init__(
        self,
        workdir: Path,
        *,
        servers: Mapping[str, Any] | None = None,
        home: Path | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        files: bool = True,
    ) -> None:
        self.workdir = workdir
        self.home = home
        self.files = files
        self._given = dict(servers or {})
        if self._given:
            check_servers(self._given, workdir=workdir)
        self.start_timeout = start_timeout
        self._servers: Servers | None = None
        self._connections: dict[str, ServerConnection] = {}
        self._retired: list[ServerConnection] = []
        self._tools: dict[str, tuple[list[Any], list[McpTool]]] = {}

    # ------------------------------------------------------------------ configuration
    @property
    def servers(self) -> Servers:
        """The configured servers (the files are read once, on first use)."""
        if self._servers is None:
            if self.files:
                self._servers = configured_servers(self.workdir, home=self.home, given=self._given)
            else:
                self._servers = parse_servers(self._given, "settings", workdir=self.workdir, strict=True)
            for warning in self._servers.warnings:
                log.warning("%s", SECRETS.scrub(warning))
        return self._servers

    @property
    def warnings(self) -> list[str]:
        """One message per bad configuration entry or file (those servers are not used)."""
        return list(self.servers.warnings)

    def names(self) -> list[str]:
        """The configured servers' names."""
        return list(self.servers.entries)

    def configure(self, *, servers: Mapping[str, Any] | None = None, start_timeout: float | None = None) -> None:
        """Replace the servers given in code and the start timeout, from the next use on.
        Checked first (a bad entry is a ``ConfigError`` and changes nothing); a server whose
        entry changed or went away is stopped at the next use."""
        if servers is not None and dict(servers) != self._given:
            if servers:
                check_servers(servers, workdir=self.workdir)
            self._given = dict(servers)
            old = self.servers.entries
            self._servers = None
            new = self.servers.entries
            for name, connection in list(self._connections.items()):
                if new.get(name) != old.get(name):
                    self._retired.append(self._connections.pop(name))
                    self._tools.pop(name, None)
        if start_timeout is not None:
            self.start_timeout = start_timeout
            for connection in self._connections.values():
                connection.start_timeout = start_timeout

    def connection(self, name: str) -> ServerConnection:
        """The connection of server ``name`` (made on first ask; ``UnknownNameError`` listing
        the configured servers for a name that is not one)."""
        if name not in self._connections:
            entry = self.servers.entries.get(name)
            if entry is None:
                raise UnknownNameError("MCP server", name, self.names())
            self._connections[name] = ServerConnection(entry, workdir=self.workdir, start_timeout=self.start_timeout)
        return self._connections[name]

    # ------------------------------------------------------------------ use
    async def tools(self, names: Iterable[str] | None = None) -> list[McpTool]:
        """The tools of the servers named (every configured one when ``None``), starting
        those that want a start, concurrently. A server that fails to start is left out
        (its error is logged and kept for ``%mcp``)."""
        await self._stop_retired()
        connections = [self.connection(n) for n in (self.names() if names is None else names)]
        starting = [c for c in connections if c.wants_start]
        if starting:
            async with asyncio.TaskGroup() as group:
                for c in starting:
                    group.create_task(_start_quietly(c), name=f"harness_nb:mcp-start:{c.name}")
        found: list[McpTool] = []
        taken: set[str] = set()
        for c in connections:
            for t in self._tools_of(c):
                if t.name in taken:
                    log.warning("MCP server %r: a second tool named %s is left out", c.name, t.name)
                    continue
                taken.add(t.name)
                found.append(t)
        return found

    def known_tools(self) -> list[McpTool]:
        """The tools of the servers that have started (none is started for this)."""
        return [t for c in self._connections.values() for t in self._tools_of(c)]

    def _tools_of(self, connection: ServerConnection) -> list[McpTool]:
        """``connection``'s tools as ``McpTool`` objects, made once per listing. A server that
        crashed keeps its tools: calling one starts it again."""
        if connection.state != "running" and not (connection.state == "failed" and connection.crashed):
            return []
        listed, made = self._tools.get(connection.name, (None, []))
        if listed is not connection.tools:
            made = [McpTool(connection, remote) for remote in connection.tools]
            self._tools[connection.name] = (connection.tools, made)
        return made

    async def restart(self, name: str) -> ServerConnection:
        """Stop server ``name`` and start it again (``McpServerError`` when it cannot)."""
        connection = self.connection(name)
        await connection.stop()
        await connection.start()
        return connection

    def status(self) -> list[ServerStatus]:
        """Every configured server's row for ``%mcp``."""
        rows = []
        for name, entry in self.servers.entries.items():
            c = self._connections.get(name)
            tools = tuple(t.name for t in self._tools_of(c)) if c is not None else ()
            rows.append(
                ServerStatus(
                    name=name,
                    source=entry.source,
                    target=SECRETS.scrub(entry.config.describe()),
                    state=c.state if c is not None else "not started",
                    tools=tools,
                    error=c.last_error if c is not None else None,
                )
            )
        return rows

    def scoped(self, servers: Mapping[str, Any], *, source: str) -> McpManager:
        """A manager of only ``servers`` (inline configurations, checked: a bad one is a
        ``ConfigError`` naming ``source``), for one subagent run; close it after."""
        entries = parse_servers(servers, source, workdir=self.workdir, strict=True)
        scoped = McpManager(self.workdir, start_timeout=self.start_timeout, files=False)
        scoped._servers = entries
        return scoped

    async def aclose(self) -> None:
        """Stop every server (concurrently) and wait for them."""
        await self._stop_retired()
        running = [c for c in self._connections.values() if c.state not in ("not started", "stopped")]
        if running:
            await asyncio.gather(*(c.stop() for c in running), return_exceptions=True)

    async def _stop_retired(self) -> None:
        retired, self._retired = self._retired, []
        if retired:
            await asyncio.gather(*(c.stop() for c in retired), return_exceptions=True)

    def entry(self, name: str) -> ServerEntry:
        """The configuration of server ``name``."""
        return self.connection(name).entry

    def __repr__(self) -> str:
        return f"<McpManager {', '.join(self.names()) or '(no servers)'}>"


async def _start_quietly(connection: ServerConnection) -> None:
    """Start ``connection``; a failure is already logged and kept on it."""
    try:
        await connection.start()
    except McpServerError:
        pass
