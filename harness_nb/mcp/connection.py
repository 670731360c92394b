"""``ServerConnection``: the life of one MCP server — start, list its tools, call them, notice
a crash, restart, stop.

The SDK's transports and ``ClientSession`` are async context managers built on anyio task
groups, whose cancel scopes must be entered and exited in the same task. So each running
server has one **owner task** (``harness_nb:mcp:<name>``) that enters them, in an
``AsyncExitStack``, lists the tools, reports ready and then waits to be told to stop; it
leaves them itself. Calls are made from the callers' own tasks (the SDK correlates requests
over memory streams, which any task may use). Stopping sets the owner's stop event and
awaits it (cancelling it after a grace period); nothing else ever exits the contexts.

States: ``not started`` → ``starting`` → ``running``; ``failed`` (it did not start, or it
died while running: ``crashed``); ``stopped``. A server that crashed is started again at its
next use; one that failed to start is not retried by itself (``restart`` does), so a
broken server costs its start timeout once, not at every run.

The SDK is imported here, on first use: importing harness_nb (and loading the notebook
extension) never pays for it. Its imports are shielded (``core.shielded_imports``): an
``mcp.py`` the agent wrote into the notebook's folder is never what runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..core import McpServerError, ToolError
from ..core.imports import shielded_imports
from ..core.secret import SECRETS, protect_loggers
from .config import HttpServer, ServerEntry, StdioServer
from .flood import limit_floods
from .stderr import StderrTail

log = logging.getLogger("harness_nb.mcp")

State = Literal["not started", "starting", "running", "failed", "stopped"]
STOP_GRACE = 6.0  # the SDK's own shutdown of a stdio server takes at most ~4.5 s
MAX_TOOLS = 256
MAX_PAGES = 16
CONNECTION_CLOSED = -32000  # the JSON-RPC code the SDK gives a request whose connection ended


@dataclass(frozen=True)
class RemoteTool:
    """A tool as a server listed it: its own name, description, JSON input schema, and
    whether it declares itself read-only (``annotations.readOnlyHint``)."""

    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool


class ServerConnection:
    """One configured server and, while it runs, its session (see the module doc).
    ``start_timeout`` bounds the start: spawning or connecting, the MCP handshake and the
    tool listing. ``check`` is called before every start and raises (an ``McpServerError``)
    when the server may not start now (its trust no longer covers what it runs)."""

    def __init__(
        self,
        entry: ServerEntry,
        *,
        workdir: Path,
        start_timeout: float = 30.0,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.entry = entry
        self.workdir = workdir
        self.start_timeout = start_timeout
        self.check = check
        self.state: State = "not started"
        self.crashed = False
        self.last_error: str | None = None
        self.tools: list[RemoteTool] = []
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._stderr: StderrTail | None = None
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        """The server's configured name (the ``<server>`` of ``mcp__<server>__<tool>``)."""
        return self.entry.name

    @property
    def wants_start(self) -> bool:
        """Whether its next use starts it: never started, stopped, or crashed while running."""
        return self.state in ("not started", "stopped") or (self.state == "failed" and self.crashed)

    async def start(self) -> None:
        """Start the server (again, when it ran before) and list its tools. Raises
        ``McpServerError`` naming the server and quoting the tail of its stderr when it
        cannot, within ``start_timeout``."""
        async with self._lock:
            if self.state == "running":
                return
            await self._stop_owner()
            if self.check is not None:
                try:
                    self.check()
                except McpServerError as exc:
                    self.last_error = str(exc)  # its state stays: once trusted, its next use starts it
                    raise
            self.state = "starting"
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[list[RemoteTool]] = loop.create_future()
            self._stop = asyncio.Event()
            self._task = loop.create_task(self._own(ready, self._stop), name=f"harness_nb:mcp:{self.name}")
            try:
                async with asyncio.timeout(self.start_timeout):
                    tools = await asyncio.shield(ready)
            except asyncio.CancelledError:
                await self._stop_owner()
                self.state = "stopped"
                raise
            except TimeoutError:
                await self._stop_owner()
                raise self._failed(f"did not start within {self.start_timeout:g} s (start_timeout)") from None
            except Exception as exc:
                await self._stop_owner()
                raise self._failed(f"could not start: {_describe(exc)}") from None
            self.tools, self.state, self.crashed, self.last_error = tools, "running", False, None
            log.info("MCP server %r started: %d tools", self.name, len(tools))

    def _failed(self, what: str) -> McpServerError:
        """The one error of a failed start: the server, what went wrong, its stderr's tail."""
        tail = self._stderr.text() if self._stderr is not None else ""
        said = f"; its stderr ends with:\n{tail}" if tail else ""
        fix = f"check its entry in {self.entry.source}, then %mcp restart {self.name}"
        message = SECRETS.scrub(f"MCP server {self.name!r} {what} ({fix}){said}")
        self.state, self.crashed, self.last_error = "failed", False, message
        log.warning("%s", message)
        return McpServerError(message)

    async def _own(self, ready: asyncio.Future[list[RemoteTool]], stop: asyncio.Event) -> None:
        """The owner task: enter the transport and the session, list the tools, wait for
        ``stop``, leave them — all in this one task."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                session = await self._connect(stack)
                initialized = await session.initialize()
                tools = await _list_tools(session) if initialized.capabilities.tools is not None else []
                self._session = session
                ready.set_result(tools)
                await stop.wait()
        except asyncio.CancelledError:
            ready.cancel()
            raise
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif self.state == "running":
                self._lost(f"its connection failed: {_describe(exc)}")
        finally:
            self._session = None

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Any:
        with shielded_imports():
            from mcp import ClientSession
            from mcp.client.stdio import StdioServerParameters, stdio_client
            from mcp.client.streamable_http import streamable_http_client

        protect_loggers("mcp")  # the SDK's loggers exist now; its records may quote a header
        limit_floods("mcp")  # it logs a traceback per line a server writes that is not JSON-RPC

        config = self.entry.config
        if isinstance(config, StdioServer):
            self._stderr = tail = StderrTail()
            errlog = await tail.open()
            stack.push_async_callback(tail.aclose)  # after the process is gone: its last words
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd or self.workdir,
            )
            try:
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            finally:
                tail.child_started()
        else:
            assert isinstance(config, HttpServer)
            with shielded_imports():
                import httpx2

            self._stderr = None
            # the SDK's own defaults: 30 s to connect and write, 300 s to read a stream
            timeout = httpx2.Timeout(30.0, read=300.0)
            client = await stack.enter_async_context(httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout))
            read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=client))
        return await stack.enter_async_context(ClientSession(read, write))

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call the server's tool ``tool`` (starting the server first when it is not running)
        and return the SDK's ``CallToolResult``. A connection that ends during the call is a
        ``McpServerError`` (the server is restarted at its next use); an error the server
        answers with is a ``ToolError``."""
        with shielded_imports():
            from mcp import MCPError

        if self.state != "running":
            await self.start()
        session = self._session
        if session is None:
            raise McpServerError(f"MCP server {self.name!r} is not running; %mcp restart {self.name}")
        try:
            return await session.call_tool(tool, arguments)
        except MCPError as exc:
            owner_gone = self._task is None or self._task.done()
            if exc.error.code != CONNECTION_CLOSED and not owner_gone:
                raise ToolError(f"MCP server {self.name!r}: {exc.error.message}") from None
            raise self._lost(f"stopped during the call to {tool} ({exc.error.message})") from None
        except (OSError, EOFError) as exc:
            raise self._lost(f"stopped during the call to {tool} ({_describe(exc)})") from None
        except Exception as exc:
            with shielded_imports():
                import anyio

            if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream):
                raise self._lost(f"stopped during the call to {tool} ({type(exc).__name__})") from None
            raise

    def _lost(self, what: str) -> McpServerError:
        """The server died while running: note it, let the owner leave its contexts (which
        ends the process), and say it will be started again."""
        if self._stop is not None:
            self._stop.set()
        tail = self._stderr.text(lines=6) if self._stderr is not None else ""
        said = f"; its stderr ends with:\n{tail}" if tail else ""
        message = SECRETS.scrub(f"MCP server {self.name!r} {what}; it is started again at its next use{said}")
        self.state, self.crashed, self.last_error = "failed", True, message
        log.warning("%s", message)
        return McpServerError(message)

    async def stop(self) -> None:
        """Stop the server (its process ends, its HTTP session is closed)."""
        async with self._lock:
            await self._stop_owner()
            if self.state in ("running", "starting"):
                self.state = "stopped"

    async def _stop_owner(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        if not task.done() and self._session is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_GRACE):
                    await asyncio.shield(task)
        if not task.done():
            task.cancel()
        try:
            await asyncio.gather(task, return_exceptions=True)
        except asyncio.CancelledError:
            task.cancel()
            raise

    def __repr__(self) -> str:
        return f"<ServerConnection {self.name} {self.state}>"


async def _list_tools(session: Any) -> list[RemoteTool]:
    """Every tool the server lists (following its pages, within bounds)."""
    with shielded_imports():
        from mcp.types import PaginatedRequestParams

    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        found += result.tools
        cursor = result.next_cursor
        if not cursor or len(found) >= MAX_TOOLS:
            break
    return [
        RemoteTool(
            name=t.name,
            description=t.description or t.name,
            schema=dict(t.input_schema or {"type": "object"}),
            read_only=bool(t.annotations and t.annotations.read_only_hint),
        )
        for t in found[:MAX_TOOLS]
    ]


def _describe(exc: BaseException) -> str:
    """The innermost message of ``exc`` (anyio task groups wrap a transport's failure in
    exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"command {exc.filename!r} not found"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
