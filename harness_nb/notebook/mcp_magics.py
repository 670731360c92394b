"""``%mcp``: the MCP servers of this kernel's harness.

    %mcp                    list them: source, state, tools, the last error; bad config entries
    %mcp restart NAME       stop server NAME and start it again (the error, if it cannot)
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ..core import HarnessError
from ..core.secret import SECRETS
from ..mcp import McpManager
from .controller import NotebookHarness, Pending, done, with_ticker
from .magics import Table


class McpTable(Table):
    """``%mcp`` output: one row per configured server, then each server's last error in full
    and the configuration's warnings."""

    def __init__(self, manager: McpManager) -> None:
        statuses = manager.status()
        rows = [
            (s.name, s.source, s.target, s.state, str(len(s.tools)), (s.error or "").split("\n")[0][:80])
            for s in statuses
        ]
        notes = [f"{s.name}: {s.error}" for s in statuses if s.error]
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
    @argument("command", nargs="?", default="list", choices=["list", "restart"], help="list (the default) or restart")
    @argument("name", nargs="?", default=None, help="the server to restart")
    @line_magic
    def mcp(self, line: str) -> Pending:
        """MCP servers: ``%mcp`` lists them (source, state, tool count, last error);
        ``%mcp restart NAME`` stops server NAME and starts it again. Servers start by
        themselves at the first %%agent run."""
        args = parse_argstring(self.mcp, line)
        manager = self.controller.harness().mcp
        if args.command == "list":
            display(McpTable(manager))
            return done(None)
        if not args.name:
            raise UsageError(f"%mcp restart NAME: name a server; configured: {', '.join(manager.names()) or '(none)'}")
        return Pending(self._restart(manager, args.name), f"%mcp restart {args.name}")

    async def _restart(self, manager: McpManager, name: str) -> None:
        try:
            connection = await with_ticker(manager.restart(name))
        except HarnessError as exc:  # unknown name, or it did not start: the error says which
            raise UsageError(SECRETS.scrub(str(exc))) from None
        print(f"{name}: {connection.state}, {len(connection.tools)} tools")
