"""The magics: ``%%agent``, ``%agent``, ``%fix``, ``%@<name>``, ``%agents``, ``%task`` and
``%approvals``.

Every magic returns a ``Pending`` awaitable; the input transformer puts ``await`` in front
of top-level calls, so runs happen on the kernel's loop while the cell shows busy.
"""

from __future__ import annotations

import asyncio
import html
import re
import shlex
import time
from argparse import SUPPRESS, ArgumentTypeError
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ...core import ConfigError, HarnessError, UnknownNameError, Usage
from ...settings import RunSettings
from ...subagents import TaskStatus
from ...subagents.map_options import MAP_BACKENDS
from ...subagents.map_output import output_fields
from ..controller import NotebookHarness, Pending, completion_markdown, done, shown_as_one_line, with_ticker
from ..kernel.history import refers_to_error
from ..widgets.agent_table import AgentTable
from ..widgets.reply import AgentReply, MarkdownText
from ..widgets.theme import table

if TYPE_CHECKING:
    from ...engine.resume import SessionSummary
    from ...sandbox import Checkpoint
    from ...subagents import TaskEntry

_VALUE_OPTIONS = {
    "--model", "-m", "--max-turns", "--agent", "-a", "--timeout", "--over", "--concurrency", "--retries", "--budget",
    "--undo", "--output", "--sample", "--batch-size", "--backend",
}
_CHECKPOINT = re.compile(r"^#?[0-9]+$|^[0-9a-f]{4,40}$")  # a checkpoint's number, or its commit id
_MAP = re.compile(r"^\s*map\s+(--|-h\b)")  # `%agent map --over …`; `%agent map the data` is a prompt


def _unquoted(text: str) -> str:
    """A template as written after the options, without one pair of surrounding quotes."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _option_value(option: str, rest: str) -> tuple[str, str]:
    """The value of ``option`` at the start of ``rest`` — a word, or a quoted text with its
    spaces (``--output 'label:bug|question, score:float'``) — and what follows it."""
    if rest[:1] in ("'", '"'):
        end = rest.find(rest[0], 1)
        if end < 0:
            raise UsageError(f"{option} {rest[:40]}: its quote is never closed")
        value, tail = rest[1:end], rest[end + 1 :]
    else:
        value, _, tail = rest.partition(" ")
    if not value:
        raise UsageError(f"{option} needs a value")
    return value, tail.lstrip()


def split_options(line: str, *, session_ids: bool = True) -> tuple[str, str]:
    """Split ``--opt value … prompt text`` into (options, prompt); the prompt is kept verbatim
    (quotes, apostrophes, braces and a trailing ``?`` included). ``session_ids``: a word
    after ``--resume`` may be a session's id (``%agent``; not ``%agent map``, whose
    ``--resume`` is a flag and whose template may be one word)."""
    rest = line.lstrip()
    options: list[str] = []
    while rest.startswith("-"):
        token, _, tail = rest.partition(" ")
        options.append(token)
        rest = tail.lstrip()
        if token in _VALUE_OPTIONS and "=" not in token:
            value, rest = _option_value(token, rest)
            options.append(value)
        resumed = session_ids and token == "--resume"
        if resumed and (rest.startswith("session-") or (rest and " " not in rest.strip())):
            # its session id is optional: the word after it is one when it looks like one or
            # is the line's last word (so a mistyped id fails its cell, never becomes a paid prompt)
            value, _, tail = rest.partition(" ")
            options.append(value)
            rest = tail.lstrip()
        if token == "--rewind" and _CHECKPOINT.match(rest.partition(" ")[0]):  # so is its checkpoint
            value, _, tail = rest.partition(" ")
            options.append(value)
            rest = tail.lstrip()
        if token == "--":
            options.pop()
            break
    return " ".join(shlex.quote(o) for o in options), rest


def checkpoint_of(text: str) -> int | str:
    """``--rewind N`` / ``--undo N``: a checkpoint's number (``3`` or ``#3``), or its commit id."""
    if not _CHECKPOINT.match(text):
        raise ArgumentTypeError(f"{text!r} is not a checkpoint: give its number (%agent --checkpoints lists them)")
    return int(text.lstrip("#")) if text.lstrip("#").isdigit() else text


def turn_count(text: str) -> int:
    """``--max-turns N``: a whole number in the range of ``HarnessNB.max_turns``."""
    try:
        turns = int(text)
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not a whole number; give the most LLM calls this run may make") from None
    try:
        RunSettings(max_turns=turns)  # the setting's own rule
    except ConfigError as exc:
        raise ArgumentTypeError(f"got {turns}; {exc}") from None
    return turns


@magics_class
class HarnessMagics(Magics):
    """Magics of harness_nb (one instance per shell). The extension's state lives here, as
    IPython's own extensions keep theirs on their Magics: ``controller`` (settings, the
    ``Harness``, the views) and which ``%@name`` magics are registered. Find the instance
    of a shell with ``notebook.harness_magics(shell)``."""

    def __init__(self, shell: Any, controller: NotebookHarness) -> None:
        super().__init__(shell)
        self.controller = controller
        self._agent_magics: set[str] = set()  # the agents that have a %@name magic now
        self._agent_version: int | None = None  # the registry's version they were made from

    def refresh_agents(self, *_args: Any) -> None:
        """Before each cell: agent files added or edited since the last cell become
        ``%@name`` magics now."""
        try:
            harness = self.controller.harness()
        except UsageError:
            return  # no harness can be made with these settings: the agent's own cells say why
        if harness.registry.changed_on_disk():
            harness.registry.reload()
        self.sync_agent_magics()

    def knows_agent(self, name: str) -> bool:
        """Whether ``%@name`` names an agent (agent files added since the last cell count:
        the folders are read again when the name is not known yet)."""
        if self.shell is not None and self.shell.find_magic("@" + name) is not None:
            return True
        self.refresh_agents()
        return name in self._agent_magics

    def sync_agent_magics(self) -> None:
        """Register ``%@name`` for every agent in the registry, dropping stale ones."""
        registry = self.controller.harness().registry
        current = set(registry.names())
        if current == self._agent_magics and self._agent_version == registry.version:
            return
        shell: Any = self.shell
        magics = shell.magics_manager.magics
        for name in self._agent_magics - current:
            magics["line"].pop("@" + name, None)
            magics["cell"].pop("@" + name, None)
        for name in current:
            fn = make_direct_magic(self.controller, name)
            shell.register_magic_function(fn, "line_cell", "@" + name)
        self._agent_magics = current
        self._agent_version = registry.version

    @magic_arguments()
    @argument("--model", "-m", default=None, help="provider/model for this run only")
    @argument("--max-turns", type=turn_count, default=None, help="most LLM calls for this run (1 or more)")
    @argument("--bg", action="store_true", help="run in the background (as --agent, default general-purpose)")
    @argument("--agent", "-a", default="general-purpose", help="the subagent a --bg run uses")
    @argument("--new", action="store_true", help="start a new conversation first")
    @argument(
        "--resume", nargs="?", const="", default=None, metavar="SESSION",
        help="continue a conversation from its transcript (this workdir's newest without SESSION)",
    )
    @argument("--sessions", action="store_true", help="list this workdir's conversations")
    @argument(
        "--compact", action="store_true",
        help="compact the conversation now (old tool results become stubs, older turns a summary), "
        "then run the prompt if there is one",
    )
    @argument("--fix", action="store_true", help="fix the last error: the last failed cell and its traceback go with the prompt")
    @argument(
        "--checkpoints", action="store_true",
        help="list the workdir's checkpoints (one before each call that changed files)",
    )
    @argument(
        "--rewind", nargs="?", const="", default=None, metavar="N",
        help="put the workdir back as it was before a call (checkpoint N; the latest without N), "
        "after showing the diff",
    )
    @argument(
        "--undo", type=checkpoint_of, default=None, metavar="N", help="undo what the call of checkpoint N changed"
    )
    @argument("--yes", action="store_true", help="with --rewind: rewind without asking")
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Pending:
        """Run the main agent on the cell body (or the rest of the line).

        %%agent [--model M] [--max-turns N] [--new]       foreground, in the ongoing conversation
        %%agent --bg [--agent NAME]                        in the background; the result lands here
        %%agent --fix                                      fix the last error (its cell and traceback go along)
        %agent --new                                       forget the conversation
        %agent --sessions                                  this workdir's conversations on disk
        %agent --resume [SESSION]                          continue one (the newest by default)
        %agent --compact                                   compact the conversation now
        %agent --checkpoints                               the workdir's checkpoints
        %agent --rewind [N] [--yes]                        put the workdir back as it was before a call
        %agent --undo N                                    undo what one call changed
        %agent map --over EXPR [--agent NAME] "template with {value}"
                                                           one subagent run per row (see %agent map -h)
        """
        if _MAP.match(line):
            return self._map(line.lstrip()[len("map") :])
        options, rest = split_options(line)
        args = parse_argstring(self.agent, options)
        prompt = cell if cell is not None else rest
        if cell is not None and rest:
            raise UsageError(f"unexpected text after the options of %%agent: {rest!r}; put the prompt in the cell body")
        c = self.controller
        typed = prompt
        if args.fix or refers_to_error(prompt):
            prompt = c.history.prompt_with_error(prompt, fix=args.fix)
        if args.sessions:
            display(SessionTable(c.harness().sessions()))
            return done(None)
        if args.checkpoints:
            display(CheckpointTable(c.harness().checkpoints()))
            return done(None)
        if args.rewind is not None:
            point = checkpoint_of(args.rewind) if args.rewind else None
            return Pending(c.rewind(point, yes=args.yes), "agent rewind")
        if args.undo is not None:
            return Pending(c.undo(args.undo), "agent undo")
        if args.new:
            c.harness().new_conversation()
            if not prompt.strip():
                return done(None)
        if args.resume is not None:
            try:
                count = c.harness().resume(args.resume or None)
            except HarnessError as exc:
                raise UsageError(str(exc)) from None
            print(f"resumed {c.harness().session.id}: {count} messages")
            if not prompt.strip():
                return done(None)
        if args.compact:
            return Pending(self._compact_then(prompt, model=args.model, max_turns=args.max_turns), "agent compact")
        if args.fix and not args.bg:  # asked again where the page can show an edit of the cell
            return Pending(self._fix(typed, model=args.model, max_turns=args.max_turns), "fix run")
        if args.bg:
            task_id = c.start_background(args.agent, prompt)
            return done(None, f"background {task_id}")
        return Pending(c.run_main(prompt, model=args.model, max_turns=args.max_turns), "agent run")

    @no_var_expand
    @line_magic
    def fix(self, line: str) -> Pending:
        """Fix the last error: the main agent gets the last failed cell and its traceback,
        and what you write after %fix (``%fix keep the column names``)."""
        self.controller.history.prompt_with_error(line, fix=True)  # a UsageError now when nothing failed
        return Pending(self._fix(line, model=None, max_turns=None), "fix run")

    async def _fix(self, prompt: str, *, model: str | None, max_turns: int | None) -> AgentReply:
        """Fix the last error: asked as an edit of the failed cell where the page can show one."""
        fixing = await self.controller.fix_prompt(prompt)
        return await self.controller.run_main(fixing, model=model, max_turns=max_turns)

    async def _compact_then(self, prompt: str, *, model: str | None, max_turns: int | None) -> Any:
        """Compact the conversation; then run ``prompt`` in it, when there is one."""
        compacted = await self.controller.compact(model=model)
        if not prompt.strip():
            return compacted
        return await self.controller.run_main(prompt, model=model, max_turns=max_turns)

    @magic_arguments()
    @argument("--over", metavar="EXPR", help="the rows: an expression of this notebook (a list, a Series, a DataFrame)")
    @argument("--agent", "-a", default="general-purpose", help="the subagent each row runs (default general-purpose)")
    @argument("--concurrency", type=int, default=8, help="most rows running at once (default 8)")
    @argument("--retries", type=int, default=3, help="retries of a row on a rate limit or server error (default 3)")
    @argument("--budget", type=float, default=None, metavar="USD", help="most the whole map may spend")
    @argument("--bg", action="store_true", help="run in the background: the cell returns at once, the bar keeps moving")
    @argument("--last", action="store_true", help="the rows of the latest map so far (after an interrupt, say)")
    @argument("--list", action="store_true", help="the maps stored in this workdir: id, rows done, agent, model")
    @argument(
        "--output", metavar="FIELDS",
        help="typed answers, one column each: 'label:bug|question, score:float' (str, int, float, bool, list[str], a|b)",
    )
    @argument("--resume", action="store_true", help="continue the stored map of this agent, template and model")
    @argument(
        "--backend", choices=MAP_BACKENDS, default="kernel",
        help="where the rows run: kernel (here) or ray (a Ray cluster: ray_address, $RAY_ADDRESS, else local)",
    )
    @argument("--estimate", action="store_true", help="run a sample of the rows; project tokens, cost and time for all")
    @argument("--batch", action="store_true", help="one call a row through the vendor's batch API: half the price, within 24 h")
    @argument("--batch-size", type=int, default=None, metavar="N", help="most rows a batch (default the vendor's most)")
    @argument("--sample", type=int, default=None, metavar="N", help="rows the estimate runs (default 20)")
    def map_options(self, line: str) -> None:
        """%agent map --over EXPR [--agent NAME] [--concurrency N] [--retries N] [--budget USD] [--bg]
                      [--output FIELDS] [--resume] [--estimate [--sample N]] [--batch [--batch-size N]]
                      [--backend ray] "template"

        Runs the subagent once per row of EXPR, the template filled from the row: {value}
        (the row's value), {index} (its label) and, for a DataFrame, {column} names. Shows
        a progress bar; returns the rows in order (.texts, .errors, .series(), .frame()).
        Calls that would ask for approval are denied (nobody can answer one per row). With
        --bg the cell returns at once (the map is a task: %task, %task stop ID) and the bar
        keeps moving while you run other cells; %agent map --last gives its rows.

        --output asks each row for typed fields, validated (.frame() has a column each).
        Every finished row is stored under .harness_nb/maps; --resume runs only the rows
        a crash, restart or interrupt left undone (--list shows the stored maps). --estimate
        runs a sample and says what the whole map would take; the map afterwards does not
        run the sample again. --batch sends every row as one call (an agent without tools)
        through OpenAI's Batch API or Anthropic's Message Batches, at half the price; the
        bar shows the batches' state, and --resume after a restart collects them.
        --backend ray runs the rows on a Ray cluster (pip install 'harness_nb[ray]'); the
        kernel still stores them, and --resume works either way."""

    def _map(self, line: str) -> Pending:
        options, rest = split_options(line, session_ids=False)
        args = parse_argstring(self.map_options, options)
        c = self.controller
        if args.last:
            last = c.harness().last_map
            if last is None:
                raise UsageError("no map has run in this kernel yet")
            return done(last.result())
        if args.list:
            return done(c.harness().maps())
        if not args.over:
            raise UsageError('%agent map needs --over EXPR, e.g. %agent map --over df.review "Label: {value}"')
        template = _unquoted(rest)
        if not template.strip():
            raise UsageError('%agent map needs a template after the options, e.g. "Summarise: {value}"')
        if self.shell is None:
            raise UsageError("%agent map needs an IPython shell")
        if args.sample is not None and not args.estimate:
            raise UsageError("--sample N goes with --estimate (how many rows the estimate runs)")
        if args.estimate and args.bg:
            raise UsageError("an estimate runs in this cell: drop --bg (or --estimate)")
        if args.batch_size is not None and not args.batch:
            raise UsageError("--batch-size N goes with --batch (most rows a batch)")
        output = _unquoted(args.output) if args.output is not None else None  # the parser keeps quotes
        if output is not None:
            try:
                output_fields(output)
            except ConfigError as exc:
                raise UsageError(f"--output: {exc}") from None
        try:
            rows = self.shell.ev(args.over)
        except Exception as exc:
            raise UsageError(f"--over {args.over}: {type(exc).__name__}: {exc}") from None
        run = c.run_map(
            args.agent,
            template,
            rows,
            concurrency=args.concurrency,
            retries=args.retries,
            budget_usd=args.budget,
            background=args.bg,
            output=output,
            resume=args.resume,
            estimate=args.estimate,
            sample=args.sample,
            batch=args.batch,
            batch_size=args.batch_size,
            backend=args.backend,
        )
        return Pending(run, "agent map")

    @line_magic
    def approvals(self, line: str) -> Pending:
        """Show again the approval cards and questions (``ask_person``) that still wait for
        you — after a page reload lost one from its cell, say. Each is a copy of the card: a
        click here answers the run that asked. (The next cell you run shows a waiting card too; while a foreground run
        waits, a cell run from a reloaded page shows it as soon as it queues.)"""
        if line.strip():
            raise UsageError("%approvals takes no arguments")
        controller = self.controller
        # a cell queued behind a busy one may have been shown the cards already, while it
        # waited (QueuedCells): those are above this cell's output, decided or not
        shown = controller.pending.take_shown_in(controller.request_id())
        if not controller.show_waiting([c for c in controller.pending if id(c) not in shown]) and not shown:
            print("no approval or question is waiting")
        return done(None)

    @magic_arguments()
    @argument("--reload", action="store_true", help="re-read the agent folders first")
    @argument("--unknown", default=None, help=SUPPRESS)  # what %@name with no such agent becomes
    @line_magic
    def agents(self, line: str) -> Pending:
        """List the registered subagents: name, source file, effective tools (narrowed
        against the main agent's current tools), model, and what else its file sets
        (budget, permission mode, background, memory, effort, colour) or holds but is
        not acted on here; then the warnings of agent files that could not be (fully)
        loaded."""
        args = parse_argstring(self.agents, line)
        h = self.controller.harness()
        if args.unknown is not None:
            names = ", ".join(f"%@{n}" for n in h.registry.names())
            raise UsageError(
                f"%@{args.unknown}: no agent of that name; the agents here are {names}. "
                "%agents lists them; an agent is a file agents/<name>.md in the workdir"
            )
        if args.reload:
            h.registry.reload()
        self.sync_agent_magics()
        display(AgentTable(h))
        if self.controller.widgets_enabled and self.controller.unattended() is None:  # a page a person reads
            print(self.controller.bridge.describe())
        return done(None)

    @no_var_expand
    @line_magic
    def task(self, line: str) -> Pending:
        """Background tasks.

        %task                   list (id, agent, description, state, elapsed, tokens, cost)
                                and what the whole session has used
        %task show ID           progress log, usage and cost, result
        %task wait ID [--timeout S]   wait, then show the result in this cell
        %task stop ID           cancel it
        %task send ID message   steer a running subagent (it reads it at its next turn)
        """
        h = self.controller.harness()
        command, _, rest = line.strip().partition(" ")
        command = command or "list"
        rest = rest.strip()
        if command == "list":
            display(TaskTable(h.tracker.list(), total=h.usage))
            return done(None)
        if command not in {"show", "wait", "stop", "send"}:
            raise UsageError(f"unknown %task command {command!r}; use list, show, wait, stop or send")
        task_id, _, tail = rest.partition(" ")
        if not task_id:
            raise UsageError(f"%task {command} needs a task id; ids: {', '.join(e.id for e in h.tracker.list()) or '(none)'}")
        try:
            entry = h.tracker.get(task_id)
        except UnknownNameError as exc:
            raise UsageError(str(exc)) from None
        if command == "show":
            display(MarkdownText(task_details(entry)))
            return done(None)
        if command == "stop":
            if entry.done:
                print(f"{task_id} already ended ({entry.status})")
            else:
                h.tracker.cancel(task_id)
                print(f"{task_id} ({entry.agent}) cancelled")
            return done(None)
        if command == "send":
            if not tail.strip():
                raise UsageError("%task send ID message: the message is missing")
            return Pending(self._send(task_id, tail.strip()), f"%task send {task_id}")
        timeout = None
        if tail.strip():
            opts = parse_argstring(self.task_wait_options, tail)
            timeout = opts.timeout
        return Pending(self._wait(task_id, timeout), f"%task wait {task_id}")

    @magic_arguments()
    @argument("--timeout", type=float, default=None)
    def task_wait_options(self, line: str) -> None:  # parser holder for `%task wait ID --timeout S`
        """Options of %task wait."""

    async def _send(self, to: str, message: str) -> None:
        try:
            print(await self.controller.harness().router.send(to, message, "user"))
        except HarnessError as exc:
            raise UsageError(str(exc)) from None

    async def _wait(self, task_id: str, timeout: float | None) -> AgentReply | None:
        h = self.controller.harness()
        try:
            entry = await with_ticker(h.tracker.wait(task_id, timeout))
        except asyncio.CancelledError as exc:  # stop pressed while waiting: the task goes on
            shown_as_one_line(exc, f"Interrupted (stopped waiting; {task_id} goes on)")
            raise
        if not entry.done:
            print(f"{task_id} still running after {timeout:g} s")
            return None
        # Not marked delivered: the person reading it here does not tell the main agent, which
        # still gets the result at its next turn.
        # Re-post from this cell: nbclient/nbval and late frontends only keep outputs whose
        # parent is the cell they executed, so the launching cell's live update is not enough.
        if entry.status is not TaskStatus.COMPLETED:
            display(MarkdownText(completion_markdown(entry)))
            return None
        return AgentReply(entry.result or "", usage=entry.usage, task_id=entry.id)


def make_direct_magic(controller: NotebookHarness, name: str) -> Any:
    """The ``%@name`` / ``%%@name`` magic for subagent ``name``: ``--bg`` / ``--fg`` first
    on the line choose the run mode, else the agent's own ``background`` field does."""

    @no_var_expand
    def direct(line: str, cell: str | None = None) -> Pending:
        words = line.split(maxsplit=1)
        flag = words[0] if words and words[0] in ("--bg", "--fg") else None
        if flag is not None:
            line = words[1] if len(words) > 1 else ""
        prompt = (line if cell is None else (f"{line}\n{cell}" if line.strip() else cell)).strip()
        background = flag == "--bg" if flag else controller.harness().registry.get(name).background
        if background:
            return done(None, f"background {controller.start_background(name, prompt)}")
        return Pending(controller.run_direct(name, prompt), f"%@{name}")

    direct.__doc__ = (
        f"Run subagent {name!r} directly on the prompt, bypassing the main agent: in the foreground, "
        "or in the background with --bg (or when the agent's file says background: true; --fg overrides)."
    )
    return direct


class Table:
    """A table with a stable plain-text form (columns padded, left-aligned) and an HTML one;
    ``footer`` is a line under it."""

    def __init__(self, head: tuple[str, ...], rows: Sequence[tuple[str, ...]], *, empty: str, footer: str = "") -> None:
        self.head = head
        self.rows = list(rows)
        self.empty = empty
        self.footer = footer

    def __repr__(self) -> str:
        if not self.rows:
            return "\n".join(filter(None, [self.empty, self.footer]))
        rows = [self.head, *self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        return "\n".join(filter(None, [*lines, self.footer]))

    def _repr_html_(self) -> str:
        footer = f"<p>{html.escape(self.footer)}</p>" if self.footer else ""
        if not self.rows:
            return f"<i>{html.escape(self.empty)}</i>{footer}"
        return table([html.escape(h) for h in self.head], [[html.escape(c) for c in r] for r in self.rows]) + footer


class TaskTable(Table):
    """``%task`` output: one row per task, then what the whole session (``total``: the
    harness's usage, every run, subagent and teammate) has used."""

    def __init__(self, entries: list[TaskEntry], *, total: Usage | None = None) -> None:
        rows = [
            (
                e.id,
                e.agent,
                e.description,
                str(e.status),
                f"{e.elapsed:.1f} s",
                f"{e.usage.total_tokens:,}",
                _cost(e.usage),
            )
            for e in entries
        ]
        footer = ""
        if total is not None:
            cost = total.cost_label()
            footer = f"session: {total.tokens_label()}{' · ' + cost if cost else ''}"
        head = ("id", "agent", "description", "state", "elapsed", "tokens", "cost")
        super().__init__(head, rows, empty="no tasks yet", footer=footer)


class SessionTable(Table):
    """``%agent --sessions``: this workdir's conversations, newest first."""

    def __init__(self, sessions: list[SessionSummary]) -> None:
        rows = [
            (s.id, s.when, s.first_prompt, str(s.runs), str(s.turns), _cost(s.usage))
            for s in sessions
        ]
        super().__init__(
            ("session", "last used", "first prompt", "runs", "turns", "cost"),
            rows,
            empty="no conversations in this workdir yet",
        )


class CheckpointTable(Table):
    """``%agent --checkpoints``: the workdir's checkpoints, oldest first."""

    def __init__(self, checkpoints: list[Checkpoint]) -> None:
        rows = [
            (
                f"#{c.number}",
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.time)),
                c.tool,
                c.agent,
                c.summary,
            )
            for c in checkpoints
        ]
        super().__init__(
            ("checkpoint", "taken", "before", "agent", "what it did"),
            rows,
            empty="no checkpoints yet: one is taken before each tool call that changes files",
            footer="%agent --rewind N puts the workdir back as it was then; %agent --undo N undoes that call alone"
            if rows
            else "",
        )


def _cost(usage: Usage) -> str:
    return usage.cost_label() or "—"


def _so_far(entry: TaskEntry) -> str:
    """A running task's usage: ``1,234 tokens · $0.0040 · 3.1 s so far``."""
    cost = entry.usage.cost_label()
    return f"{entry.usage.tokens_label()}{' · ' + cost if cost else ''} · {entry.elapsed:.1f} s so far"


def task_details(entry: TaskEntry) -> str:
    """``%task show``: header, description, the whole prompt, progress log, result."""
    log = "\n".join(f"    {line}" for line in entry.log) or "    (no progress yet)"
    prompt = "\n".join(f"> {line}" if line.strip() else ">" for line in entry.prompt.strip().splitlines()) or "> (none)"
    parts = [
        # the usage summary carries the run's own wall time; while it runs there is none yet
        f"**{entry.id}** · {entry.agent} · {entry.status} · "
        + (entry.usage.summary() if entry.usage.wall_time else _so_far(entry)),
        f"*{entry.description}*",
        "prompt:\n\n" + prompt,
        "progress:\n\n" + log,
    ]
    if entry.done:
        parts.append(f"result:\n\n{entry.outcome}")
    return "\n\n".join(parts)
