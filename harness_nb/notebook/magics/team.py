"""``%team``: the teams of this kernel — the live team view, messaging, shutdown, waiting.

    %team                              the team view (roster, activity, message log, text boxes)
    %team send NAME message            message a teammate (an exited one is revived)
    %team wait NAME [--turns N] [--timeout S]
                                       wait for its answer and show it in this cell
    %team shutdown NAME                ask it to shut down (the handshake)
    %%team spawn NAME [--agent A] [--team T]
    <prompt>                           start a teammate yourself (the main agent can too)
"""

from __future__ import annotations

import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ...core import HarnessError
from ...core.imports import shielded_imports
from ...team import TeamManager
from ..controller import NotebookHarness, Pending, done, with_ticker
from ..widgets.reply import AgentReply
from ..widgets.team_view import TeamView


@magics_class
class TeamMagics(Magics):
    """The ``%team`` magic and the kernel's one ``TeamView``."""

    def __init__(self, shell: Any, controller: NotebookHarness) -> None:
        super().__init__(shell)
        self.controller = controller
        self._view: TeamView | None = None
        self._view_manager: TeamManager | None = None
        self._expected_turns: dict[str, int] = {}

    def manager(self) -> TeamManager:
        teams = self.controller.harness().teams
        if teams is None:
            raise UsageError("teams are off: turn them on with %config HarnessNB.teams = True")
        return teams

    def view(self) -> TeamView | None:
        """The team view (rebuilt when the harness was rebuilt); ``None`` without widgets."""
        if not self.controller.widgets_enabled:
            return None
        manager = self.manager()
        if self._view is None or self._view_manager is not manager:
            if self._view is not None:
                self._view.close()
            self._view = TeamView(manager, rate=self.controller.config.updates_per_second)
            self._view_manager = manager
        return self._view

    @magic_arguments()
    @argument("--agent", "-a", default="general-purpose", help="the agent definition the teammate runs")
    @argument("--team", "-t", default=None, help="the team (created if new)")
    @argument("name", help="the teammate's name")
    def spawn_options(self, line: str) -> None:  # parser holder for `%%team spawn`
        """Options of %%team spawn."""

    @magic_arguments()
    @argument("--timeout", type=float, default=None)
    @argument("--turns", type=int, default=None, help="wait until it has finished this many turns in all")
    @argument("name")
    def wait_options(self, line: str) -> None:  # parser holder for `%team wait`
        """Options of %team wait."""

    @no_var_expand
    @line_cell_magic
    def team(self, line: str, cell: str | None = None) -> Pending:
        """Teams: the live view, and messaging / waiting for / shutting down teammates.

        %team | %team send NAME message | %team wait NAME [--timeout S] |
        %team shutdown NAME | %%team spawn NAME [--agent A] [--team T] + prompt in the body
        """
        command, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if command in ("", "list", "show"):
            manager = self.manager()
            view = self.view()
            if view is None:
                with shielded_imports():
                    from ..widgets.team_view import roster_table

                print(roster_table(manager.roster()))
            else:
                view.flush()
                display(view)
            return done(None)
        if command == "spawn":
            if cell is None or not cell.strip():
                raise UsageError("%%team spawn NAME [--agent A] [--team T], with the teammate's first prompt in the cell body")
            args = parse_argstring(self.spawn_options, rest)
            return Pending(self._spawn(args.name, args.agent, args.team, cell.strip()), "%%team spawn")
        if command == "send":
            name, _, message = rest.partition(" ")
            if not name or not message.strip():
                raise UsageError("%team send NAME message")
            return Pending(self._send(name, message.strip()), f"%team send {name}")
        if command == "wait":
            args = parse_argstring(self.wait_options, rest)
            return Pending(self._wait(args.name, args.timeout, args.turns), f"%team wait {args.name}")
        if command == "shutdown":
            if not rest:
                raise UsageError("%team shutdown NAME")
            return Pending(self._shutdown(shlex.split(rest)[0]), "%team shutdown")
        raise UsageError(f"unknown %team command {command!r}; use send, wait, shutdown or spawn (or nothing for the view)")

    async def _spawn(self, name: str, agent: str, team: str | None, prompt: str) -> None:
        manager = self.manager()
        try:
            member = await manager.spawn(agent, prompt, team=team, name=name)
        except HarnessError as exc:
            raise UsageError(str(exc)) from None
        self._expected_turns[member.name] = 1
        print(f"{member.name} ({member.record.agent}) joined team {member.team} as {member.record.task_id}")

    async def _send(self, name: str, message: str) -> None:
        manager = self.manager()
        try:
            before = manager.member(name).record.turns
            receipt = await manager.send(name, message)
        except HarnessError as exc:
            raise UsageError(str(exc)) from None
        self._expected_turns[name] = before + 1
        if self._view is not None:
            self._view.note_sent(name, message)
        print(receipt)

    async def _wait(self, name: str, timeout: float | None, turns: int | None = None) -> AgentReply:
        manager = self.manager()
        try:
            manager.member(name)
        except HarnessError as exc:
            raise UsageError(str(exc)) from None
        if turns is None:  # after %team send: the answer to that message
            turns = self._expected_turns.get(name)
        try:
            record = await with_ticker(manager.wait_idle(name, turns=turns, timeout=timeout))
        except TimeoutError:
            raise UsageError(f"{name} is still working after {timeout:g} s") from None
        # shown from this cell: nbclient/nbval keep only outputs of the cell they ran
        return AgentReply(record.last_message, usage=record.usage, task_id=record.task_id)

    async def _shutdown(self, name: str) -> None:
        try:
            print(await self.manager().shutdown(name, wait=True, timeout=60))
        except HarnessError as exc:
            raise UsageError(str(exc)) from None
