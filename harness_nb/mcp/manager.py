"""``McpManager``: the MCP servers of one harness, and their tools.

It reads the configuration (``config.py``) on first use (and again on ``reload``) and makes
one ``ServerConnection`` per server. Nothing starts when the harness is made or the
notebook extension loads: a server starts at its first use — the first run of the main
agent (whose tool list must hold its tools before the first model call), a subagent naming
it, a call of one of its tools after a crash — on the running loop, the configured servers
concurrently, each within the start timeout. A server that fails to start costs one warning
(its error names it and quotes its stderr; ``%mcp`` shows it) and the run goes on without
its tools.

A project's server (``.mcp.json``, an agent file in the workdir) starts only once the person
trusts it (``trust.py``): until then ``%mcp`` lists it as "needs your approval" with what it
would run, its tools are not offered, and the first run that would have used it logs one
warning saying how to trust it. ``connection`` refuses it (``McpUntrustedError``), and so does
every start of its connection (a restart after a crash too): trust covers the files a server
runs, which may change while it runs. The first read of the configuration is the session's
start for trust by name (``Trust.begin``).

``scoped(…)`` makes a manager for a subagent's inline ``mcpServers``: its servers live only
while that subagent runs (the runner closes it); it shares this manager's trust.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import ConfigError, McpServerError, McpUntrustedError, UnknownNameError
from ..core.secret import SECRETS
from .config import ServerEntry, Servers, check_servers, configured_servers, parse_servers
from .connection import ServerConnection
from .tool import McpTool
from .trust import Trust, TrustStore, Verdict, describe_fully, how_to_trust

log = logging.getLogger("harness_nb.mcp")

DEFAULT_START_TIMEOUT = 30.0
NEEDS_APPROVAL = "needs your approval"
_WAITING = {"trusted": "not started", "needs approval": NEEDS_APPROVAL, "disabled": "disabled"}


@dataclass(frozen=True)
class ServerStatus:
    """One row of ``%mcp``: a server, where it is configured, what it runs or reaches in
    full (scrubbed), its state (a connection's, ``not started``, ``needs your approval``,
    ``disabled`` or, for an agent's inline server, ``starts with its agent``), why it may or
    may not start, its tools and the last error."""

    name: str
    source: str
    target: str
    state: str
    trust: str
    tools: tuple[str, ...]
    error: str | None

    @property
    def pending(self) -> bool:
        """Whether it waits for the person's trust."""
        return self.state == NEEDS_APPROVAL


class McpManager:
    """The servers configured for ``workdir`` (``~/.harness_nb/mcp.json`` when ``home`` is
    given, ``<workdir>/.mcp.json``, then ``servers``, which is checked now: a bad entry is a
    ``ConfigError``). ``start_timeout`` bounds each server's start.

    Trust (``trust.py``): ``trust`` names project servers trusted whatever they run (or is
    the ``Trust`` to share, as a scoped manager does); ``trust_store`` keeps ``%mcp trust``
    decisions (``None``: for this process only); the person's settings files are read
    under ``home`` (when given) and the workdir.
    ``agent_servers`` lists the inline servers of the agent files, so that ``%mcp`` shows
    (and ``trust`` can trust) a project agent's servers before it runs."""

    def __init__(
        self,
        workdir: Path,
        *,
        servers: Mapping[str, Any] | None = None,
        home: Path | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        files: bool = True,
        trust: Trust | Iterable[str] = (),
        trust_store: TrustStore | None = None,
        agent_servers: Callable[[], Iterable[ServerEntry]] | None = None,
    ) -> None:
        self.workdir = workdir
        self.home = home
        self.files = files
        self._given = dict(servers or {})
        if self._given:
            check_servers(self._given, workdir=workdir)
        self.start_timeout = start_timeout
        self.trusted = trust if isinstance(trust, Trust) else Trust(workdir, names=trust, store=trust_store, home=home)
        """Who trusts which project servers (shared with the scoped managers)."""
        self.agent_servers = agent_servers
        self._servers: Servers | None = None
        self._connections: dict[str, ServerConnection] = {}
        self._retired: list[ServerConnection] = []
        self._tools: dict[str, tuple[list[Any], list[McpTool]]] = {}

    # ------------------------------------------------------------------ configuration
    @property
    def servers(self) -> Servers:
        """The configured servers (the files are read on first use and by ``reload``)."""
        if self._servers is None:
            if self.files:
                self._servers = configured_servers(self.workdir, home=self.home, given=self._given)
            else:
                self._servers = parse_servers(self._given, "settings", workdir=self.workdir, strict=True)
            for warning in self._servers.warnings:
                log.warning("%s", SECRETS.scrub(warning))
            self.trusted.begin([*self._servers.entries.values(), *self._agent_entries()])
        return self._servers

    @property
    def warnings(self) -> list[str]:
        """One message per bad configuration entry or file (those servers are not used),
        and per unreadable settings or trust file."""
        return [*self.servers.warnings, *self.trusted.settings.warnings, *self.trusted.store.warnings]

    def names(self) -> list[str]:
        """The configured servers' names (trusted or not)."""
        return list(self.servers.entries)

    def verdict(self, name: str) -> Verdict:
        """Whether configured server ``name`` may start, and why."""
        return self.trusted.verdict(self._entry(name))

    def configure(
        self,
        *,
        servers: Mapping[str, Any] | None = None,
        start_timeout: float | None = None,
        trust: Iterable[str] | None = None,
    ) -> None:
        """Replace the servers given in code, the start timeout and the names trusted in
        code, from the next use on. Checked first (a bad entry is a ``ConfigError`` and
        changes nothing); a server whose entry changed, went away or lost its trust is
        stopped at the next use."""
        changed = False
        if servers is not None and dict(servers) != self._given:
            if servers:
                check_servers(servers, workdir=self.workdir)
            self._given = dict(servers)
            self._servers = None
            changed = True
        if trust is not None and frozenset(trust) != self.trusted.names:
            self.trusted.names = frozenset(trust)
            changed = True
        if changed:
            self._retire_changed()
        if start_timeout is not None:
            self.start_timeout = start_timeout
            for connection in self._connections.values():
                connection.start_timeout = start_timeout

    async def reload(self) -> None:
        """Read the configuration, settings and trust files again, and stop the servers whose
        entry changed or went away, or that are no longer trusted."""
        for warning in self.trusted.refresh():
            log.warning("%s", SECRETS.scrub(warning))
        self._servers = None
        self._retire_changed()
        await self._stop_retired()

    def _retire_changed(self) -> None:
        """Set aside (to stop) each connection whose entry is gone, changed or untrusted."""
        entries = self.servers.entries
        for name, connection in list(self._connections.items()):
            entry = entries.get(name)
            if entry != connection.entry or entry is None or not self.trusted.verdict(entry).trusted:
                self._retired.append(self._connections.pop(name))
                self._tools.pop(name, None)

    def _entry(self, name: str) -> ServerEntry:
        entry = self.servers.entries.get(name)
        if entry is None:
            raise UnknownNameError("MCP server", name, self.names())
        return entry

    def connection(self, name: str) -> ServerConnection:
        """The connection of server ``name`` (made on first ask; ``UnknownNameError`` listing
        the configured servers for a name that is not one, ``McpUntrustedError`` saying how
        to trust it for a project server not trusted)."""
        if name not in self._connections:
            entry = self._entry(name)
            self._check_trusted(entry)
            self._connections[name] = ServerConnection(
                entry, workdir=self.workdir, start_timeout=self.start_timeout, check=lambda: self._check_trusted(entry)
            )
        return self._connections[name]

    def _check_trusted(self, entry: ServerEntry) -> None:
        """Nothing when ``entry`` may start now; else ``McpUntrustedError`` saying why, what it
        would run and how to trust it."""
        verdict = self.trusted.verdict(entry)
        if not verdict.trusted:
            raise McpUntrustedError(
                SECRETS.scrub(
                    f"MCP server {entry.name!r} ({entry.source}) is not started: {verdict.why}. "
                    f"It would run: {describe_fully(entry)}. If you trust it: {how_to_trust(entry.name)}"
                )
            )

    # ------------------------------------------------------------------ trust
    def pending(self) -> list[ServerEntry]:
        """The servers (configured and agents' inline ones) waiting for the person's trust."""
        found = [e for e in self.servers.entries.values() if self.trusted.verdict(e).standing == "needs approval"]
        return found + [e for e in self._agent_entries() if not self.trusted.verdict(e).trusted]

    def trust(self, name: str | None = None) -> list[ServerEntry]:
        """Trust server ``name`` (its configured entry and any agent's inline one of that
        name), or every waiting server when ``None``, in this workdir from now on; the
        entries now trusted. ``UnknownNameError`` for no such server, ``ConfigError`` for
        one a settings file disables."""
        waiting = self.pending()
        if name is not None:
            known = {*self.names(), *(e.name for e in self._agent_entries())}
            if name not in known:
                raise UnknownNameError("MCP server", name, sorted(known))
            waiting = [e for e in waiting if e.name == name]
            if not waiting and name in self.servers.entries:
                verdict = self.verdict(name)
                if verdict.standing == "disabled":
                    raise ConfigError(f"MCP server {name!r} is disabled by {verdict.why}; remove it there to use it")
        for entry in waiting:
            self.trusted.allow(entry)
            log.info("MCP server %r (%s) trusted in %s", entry.name, entry.source, self.trusted.key)
        return waiting

    async def untrust(self, name: str) -> int:
        """Forget the ``%mcp trust`` decisions for server ``name`` in this workdir (and stop
        it if that was its only trust); how many there were."""
        gone = self.trusted.forget(name)
        self._retire_changed()
        await self._stop_retired()
        return gone

    def _agent_entries(self) -> list[ServerEntry]:
        return list(self.agent_servers()) if self.agent_servers is not None else []

    # ------------------------------------------------------------------ use
    async def tools(self, names: Iterable[str] | None = None) -> list[McpTool]:
        """The tools of the servers named (every configured one when ``None``), starting
        those that want a start, concurrently. A server that fails to start is left out
        (its error is logged and kept for ``%mcp``); so is a project server not trusted
        (one warning, the first time, says how to trust it)."""
        await self._stop_retired()
        wanted = [self._entry(n) for n in (self.names() if names is None else names)]
        verdicts = {e.name: self.trusted.verdict(e) for e in wanted}
        self.trusted.notice(e for e in wanted if verdicts[e.name].standing == "needs approval")
        connections = [self.connection(e.name) for e in wanted if verdicts[e.name].trusted]
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
        await self._stop_retired()
        connection = self.connection(name)
        await connection.stop()
        await connection.start()
        return connection

    def status(self) -> list[ServerStatus]:
        """Every configured server's row for ``%mcp``, then the agents' inline servers."""
        rows = []
        for name, entry in self.servers.entries.items():
            verdict = self.trusted.verdict(entry)
            c = self._connections.get(name)
            state: str = c.state if c is not None else _WAITING[verdict.standing]
            tools = tuple(t.name for t in self._tools_of(c)) if c is not None else ()
            error = c.last_error if c is not None else None
            rows.append(self._row(entry, verdict, state, tools, error))
        for entry in self._agent_entries():
            verdict = self.trusted.verdict(entry)
            rows.append(self._row(entry, verdict, "starts with its agent" if verdict.trusted else NEEDS_APPROVAL, (), None))
        return rows

    @staticmethod
    def _row(entry: ServerEntry, verdict: Verdict, state: str, tools: tuple[str, ...], error: str | None) -> ServerStatus:
        return ServerStatus(
            name=entry.name,
            source=entry.source,
            target=SECRETS.scrub(describe_fully(entry)),
            state=state,
            trust=verdict.why,
            tools=tools,
            error=error,
        )

    def scoped(self, servers: Servers) -> McpManager:
        """A manager of only ``servers`` (an agent's inline configurations), for one
        subagent run, sharing this manager's trust; close it after."""
        scoped = McpManager(self.workdir, start_timeout=self.start_timeout, files=False, trust=self.trusted)
        scoped._servers = servers
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
        return self._entry(name)

    def __repr__(self) -> str:
        return f"<McpManager {', '.join(self.names()) or '(no servers)'}>"


async def _start_quietly(connection: ServerConnection) -> None:
    """Start ``connection``; a failure is already logged and kept on it."""
    try:
        await connection.start()
    except McpServerError:
        pass
