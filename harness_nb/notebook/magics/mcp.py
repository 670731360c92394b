"""``%mcp``: the MCP servers of this kernel's harness.

    %mcp                    list them: source, what they run, state, tools, the last error
    %mcp restart NAME       stop server NAME and start it again (the error, if it cannot)
    %mcp trust NAME         trust project server NAME in this folder (kept for next time)
    %mcp trust --all        trust every server that waits for your approval
    %mcp untrust NAME       forget that (and stop it)
    %mcp reload             read .mcp.json and the settings again; stop what changed
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ...core import HarnessError
from ...core.secret import SECRETS
from ...mcp import McpManager
from ...mcp.manager import NEEDS_APPROVAL
from ..controller import NotebookHarness, Pending, done, with_ticker
from .agent import Table

COMMANDS = ["list", "restart", "trust", "untrust", "reload"]


class McpTable(Table):
    """``%mcp`` output: one row per configured server (and agent's inline server), then what
    each waiting server would run and how to trust it, each server's last error in full and
    the configuration's warnings."""

    def __init__(self, manager: McpManager) -> None:
        statuses = manager.status()
        rows = [
            (s.name, s.source, s.target, s.state, str(len(s.tools)), (s.error or "").split("\n")[0][:80])
            for s in statuses
        ]
        notes = [
            f"{s.name} needs your approval ({s.trust}); it would run: {s.target}. Trust it: %mcp trust {s.name}"
            for s in statuses
            if s.pending
        ]
        notes += [f"{s.name}: {s.state} by {s.trust}" for s in statuses if s.state == "disabled"]
        notes += [f"{s.name}: {s.error}" for s in statuses if s.error]
        notes += [f"warning: {SECRETS.scrub(w)}" for w in manager.warnings]
        super().__init__(
            ("server", "source", "command or URL", "state", "tools", "last error"),
            rows,
            empty="no MCP servers configured (.mcp.json, ~/.harness_nb/mcp.json or HarnessNB.mcp_servers)",
            footer="\n".join(notes),
        )


@magics_class
class McpMagics(Magics):
    """The ``%mcp`` magic."""

    def __init__(self, shell: Any, controller: NotebookHarness) -> None:
        super().__init__(shell)
        self.controller = controller

    @magic_arguments()
    @argument("command", nargs="?", default="list", choices=COMMANDS, help="list (the default), " + ", ".join(COMMANDS[1:]))
    @argument("name", nargs="?", default=None, help="the server to restart, trust or untrust")
    @argument("--all", action="store_true", help="with trust: every server waiting for your approval")
    @line_magic
    def mcp(self, line: str) -> Pending:
        """MCP servers: ``%mcp`` lists them (source, what they run, state, tool count, last
        error); ``%mcp restart NAME`` stops server NAME and starts it again; ``%mcp trust
        NAME`` (or ``--all``) trusts a project's server (from .mcp.json or an agent file in
        this folder), which otherwise never starts, and ``%mcp untrust NAME`` forgets that;
        ``%mcp reload`` reads the configuration again. Servers start by themselves at the
        first %%agent run."""
        args = parse_argstring(self.mcp, line)
        manager = self.controller.harness().mcp
        if args.all and args.command != "trust":
            raise UsageError("--all goes with %mcp trust")
        if args.command == "list":
            display(McpTable(manager))
            return done(None)
        if args.command == "reload":
            return Pending(self._reload(manager), "%mcp reload")
        if args.command == "trust":
            return done(self._trust(manager, None if args.all else self._name(manager, args)))
        name = self._name(manager, args)
        if args.command == "untrust":
            return Pending(self._untrust(manager, name), f"%mcp untrust {name}")
        return Pending(self._restart(manager, name), f"%mcp restart {name}")

    @staticmethod
    def _name(manager: McpManager, args: Any) -> str:
        if not args.name:
            extra = " (or --all)" if args.command == "trust" else ""
            configured = ", ".join(manager.names()) or "(none)"
            raise UsageError(f"%mcp {args.command} NAME: name a server{extra}; configured: {configured}")
        return str(args.name)

    @staticmethod
    def _trust(manager: McpManager, name: str | None) -> None:
        try:
            trusted = manager.trust(name)
        except (HarnessError, OSError) as exc:  # unknown, disabled, or the trust file cannot be written
            raise UsageError(SECRETS.scrub(str(exc))) from None
        if not trusted and name is None:
            print("no MCP server waits for your approval")
        elif not trusted:
            why = next((s.trust for s in manager.status() if s.name == name), "")
            print(f"{name}: already trusted ({why})")
        for entry in trusted:
            print(f"trusted {entry.name} ({entry.source}); it starts at its next use")

    async def _untrust(self, manager: McpManager, name: str) -> None:
        try:
            gone = await manager.untrust(name)
        except OSError as exc:
            raise UsageError(f"cannot change the MCP trust file: {exc}") from None
        still = [s for s in manager.status() if s.name == name and s.state not in (NEEDS_APPROVAL, "disabled")]
        if not gone:
            print(f"{name}: no %mcp trust decision to forget" + (f" (trusted by {still[0].trust})" if still else ""))
        elif still:
            print(f"{name}: forgotten; still trusted by {still[0].trust}")
        else:
            print(f"{name}: forgotten; it needs your approval again")

    async def _reload(self, manager: McpManager) -> None:
        await manager.reload()
        waiting = ", ".join(s.name for s in manager.status() if s.pending)
        said = f"; waiting for your approval: {waiting}" if waiting else ""
        print(f"{len(manager.names())} MCP servers configured{said}")

    async def _restart(self, manager: McpManager, name: str) -> None:
        try:
            connection = await with_ticker(manager.restart(name))
        except HarnessError as exc:  # unknown name, not trusted, or it did not start: the error says which
            raise UsageError(SECRETS.scrub(str(exc))) from None
        print(f"{name}: {connection.state}, {len(connection.tools)} tools")
