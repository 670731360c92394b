"""The delegation tool ``task``: the main model's only way to start subagents.

Its schema is generated from the registry (``subagent_type`` is an enum of the registered
names; the description lists each agent), so a new agent file is delegable at once.
Modes, checked in this order: team (``team_name``), chain, parallel (``tasks``), single;
``background`` works with one task or with ``tasks`` (each its own background task); left
out for one task, the agent's own ``background`` field decides (parallel tasks and chains
run in the foreground unless told). The result forms are in ``render.py``.

Subagents start from ``ToolContext.parent``, the calling run's ``ParentContext``: its
provider, tools, hooks, limits, approval channel, usage account and budget scope, fixed
when that run started. A subagent that runs out of budget (or cannot start because its
parent has none left) is a failed task: the model gets an error result and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..core import ApprovalDecided, Event, SubagentFailedError, SubagentUpdate, ToolError, ToolSpec
from ..engine import ParentContext, RunResult
from ..engine.hook import denial_line
from ..engine.limits import BUDGET_STOPS
from ..tools import Tool, ToolContext
from .definition import SubAgentDefinition
from .registry import AgentRegistry
from .render import finished_task, running_task, task_result
from .runner import SubagentRunner, progress_line
from .tracker import TaskEntry, TaskTracker

MAX_PARALLEL_TASKS = 8
OUT_OF_BUDGET = "ran out of budget before it was done; what it had so far:"


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    subagent_type: str
    prompt: str
    description: str = ""


class TaskParams(BaseModel):
    """Arguments of ``task``; which ones are set decides the mode."""

    model_config = ConfigDict(extra="forbid")
    subagent_type: str | None = None
    prompt: str | None = None
    description: str = ""
    background: bool | None = None  # None: the agent's own default (its ``background`` field)
    tasks: list[_Item] | None = None
    chain: list[_Item] | None = None
    team_name: str | None = None
    name: str | None = None


TeamSpawner = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class _Outcome:
    task_id: str
    text: str
    result: RunResult | None  # None when the subagent failed


class TaskTool(Tool):
    """Delegate bounded work to subagents: single, background, parallel, chain or team."""

    name = "task"
    Params = TaskParams
    long_running = True  # a foreground subagent may run longer than the per-tool timeout
    coordination = True
    in_call_order = True  # task ids follow the order of the model's calls

    def __init__(
        self,
        registry: AgentRegistry,
        runner: SubagentRunner,
        tracker: TaskTracker,
        *,
        max_concurrency: int = 4,
        max_background: int = 8,
        team_spawner: TeamSpawner | None = None,
    ) -> None:
        self.registry = registry
        self.runner = runner
        self.tracker = tracker
        self.max_concurrency = max_concurrency
        # background subagents running at once; the others wait, ``queued``
        self.background_slots = asyncio.Semaphore(max_background)
        self.team_spawner = team_spawner
        self._spec_version: tuple[int, bool] | None = None

    @property
    def description(self) -> str:  # type: ignore[override]
        return self.spec().description

    def spec(self) -> ToolSpec:
        """The schema, rebuilt whenever the registry's set of agents has changed (or teams
        came on: only then does it speak of them)."""
        version = (self.registry.version, self.team_spawner is not None)
        if self._spec is None or self._spec_version != version:
            self._spec = _build_spec(self.registry.list(), teams=version[1])
            self._spec_version = version
        return self._spec

    async def run(self, params: TaskParams, ctx: ToolContext) -> str:
        # Several task calls in one turn: each waits for the earlier ones to take their task
        # ids, and passes its turn once it has taken its own (or on the way out, if it
        # takes none), so bg-1 is the model's first call however their checks raced.
        await ctx.order.wait_turn(ctx.call.id)
        try:
            return await self._run(params, ctx)
        finally:
            ctx.order.pass_turn(ctx.call.id)

    async def _run(self, params: TaskParams, ctx: ToolContext) -> str:
        parent: ParentContext = ctx.parent
        if params.team_name:
            return await self._team(params, ctx)
        if params.tasks and params.chain:
            raise ToolError("give either `tasks` (parallel) or `chain` (sequential), not both")
        if params.chain:
            if params.background:
                raise ToolError(
                    "a chain runs in the foreground: drop `background`, or start each step as "
                    "its own background task once the previous one is done"
                )
            return await self._chain(params.chain, parent, ctx)
        if params.tasks:
            if params.background:
                return self._background_all(params.tasks, parent, ctx)
            return await self._parallel(params.tasks, parent, ctx)
        if not params.subagent_type or not params.prompt:
            raise ToolError(
                "give `subagent_type` and `prompt` (one task), `tasks` (parallel) or `chain` (sequential)"
            )
        definition = self.registry.get(params.subagent_type)
        if definition.background if params.background is None else params.background:
            entry = self.launch_background(definition, params.prompt, parent, description=params.description, emit=ctx.emit)
            return running_task(entry.id)
        outcome = await self._foreground(definition, params.prompt, params.description, parent, ctx)
        if outcome.result is None:
            raise ToolError(outcome.text)
        return outcome.text

    async def run_child(
        self,
        definition: SubAgentDefinition,
        prompt: str,
        parent: ParentContext,
        *,
        description: str = "",
        emit: Callable[[Event], Any] | None = None,
        wrap: bool = True,
        numbered: Callable[[], None] = lambda: None,
    ) -> tuple[str, RunResult]:
        """Run one subagent in the foreground, tracked as ``fg-N``. Returns (task id, result);
        a failure is recorded on the task entry and re-raised. ``numbered`` is called once
        the task has its id, before it runs."""
        entry = self.tracker.start("subagent", definition.name, prompt, description=description, background=False)
        numbered()
        account = parent.account.child()
        entry.usage = account.usage  # live: %task shows what it has used so far
        run = self.runner.run(
            definition, prompt, parent, task_id=entry.id, account=account, emit=self._sink(entry.id, emit), wrap=wrap
        )
        return entry.id, await self._tracked(entry, definition, run)

    async def _tracked(self, entry: TaskEntry, definition: SubAgentDefinition, run: Awaitable[RunResult]) -> RunResult:
        """Await a subagent run and record how it ended on its task entry (cancelled, failed
        — re-raised as ``SubagentFailedError`` —, out of budget — failed, its partial text kept —
        or completed). Its usage is already billed: the child's account rolls up into the
        launching run's as it goes."""
        try:
            result = await run
        except asyncio.CancelledError:
            self.tracker.cancel(entry.id)
            raise
        except Exception as exc:
            self.tracker.finish(entry.id, f"{type(exc).__name__}: {exc}", failed=True)
            raise SubagentFailedError(entry.id, definition.name, exc) from exc
        result = result.model_copy(update={"task_id": entry.id})
        entry.run_result = result
        if result.stop_reason in BUDGET_STOPS:
            self.tracker.finish(entry.id, f"{OUT_OF_BUDGET}\n\n{result.final_text}", failed=True)
        else:
            self.tracker.finish(entry.id, result.final_text)
        return result

    async def _foreground(
        self, definition: SubAgentDefinition, prompt: str, description: str, parent: ParentContext, ctx: ToolContext
    ) -> _Outcome:
        """``run_child`` for the model: never raises except on cancellation, so one failure
        does not lose the results of its siblings."""
        try:
            task_id, result = await self.run_child(
                definition,
                prompt,
                parent,
                description=description,
                emit=ctx.emit,
                numbered=lambda: ctx.order.pass_turn(ctx.call.id),
            )
        except SubagentFailedError as exc:
            return _Outcome(exc.task_id, finished_task(self.tracker.get(exc.task_id)), None)
        failed = result.stop_reason in BUDGET_STOPS
        return _Outcome(task_id, finished_task(self.tracker.get(task_id)), None if failed else result)

    def launch_background(
        self,
        definition: SubAgentDefinition,
        prompt: str,
        parent: ParentContext,
        *,
        description: str = "",
        emit: Callable[[Event], Any] | None = None,
    ) -> TaskEntry:
        """Start a subagent as an asyncio task owned by the tracker and return its entry at
        once. It keeps ``parent`` — the launching run's provider, tools, hooks, approval
        channel, delegation and usage account — however long it outlives that run. At most
        ``max_background`` run at once: the others wait in state ``queued``, and are built
        from ``parent`` when their turn comes, so they start as launched. Messages queued
        with ``tracker.add_pending`` reach it at its next turn."""
        self.runner.check_depth(parent)
        entry = self.tracker.start("subagent", definition.name, prompt, description=description, background=True)
        account = parent.account.child()
        entry.usage = account.usage
        sink = self._sink(entry.id, emit)

        async def body() -> None:
            if self.background_slots.locked():
                self.tracker.set_queued(entry.id, True)
            async with self.background_slots:
                self.tracker.set_queued(entry.id, False)
                await run_it()

        async def run_it() -> None:
            run = self.runner.run(
                definition,
                prompt,
                parent,
                task_id=entry.id,
                background=True,
                account=account,
                emit=sink,
                injectors=[lambda: self.tracker.drain_pending(entry.id)],
            )
            with contextlib.suppress(SubagentFailedError):  # recorded on the entry; nobody awaits this task
                await self._tracked(entry, definition, run)

        entry.task = asyncio.get_running_loop().create_task(body(), name=f"subagent:{definition.name}:{entry.id}")
        return entry

    def _background_all(self, items: list[_Item], parent: ParentContext, ctx: ToolContext) -> str:
        """``background`` with ``tasks``: each item becomes its own background task."""
        _check_count(items)
        definitions = [self.registry.get(i.subagent_type) for i in items]
        entries = [
            self.launch_background(d, i.prompt, parent, description=i.description, emit=ctx.emit)
            for d, i in zip(definitions, items, strict=True)
        ]
        return "\n".join(running_task(e.id) for e in entries)

    async def _parallel(self, items: list[_Item], parent: ParentContext, ctx: ToolContext) -> str:
        _check_count(items)
        definitions = [self.registry.get(i.subagent_type) for i in items]
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(definition: SubAgentDefinition, item: _Item) -> _Outcome:
            async with gate:
                return await self._foreground(definition, item.prompt, item.description, parent, ctx)

        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(one(d, i), name=f"parallel:{d.name}:{n}")
                for n, (d, i) in enumerate(zip(definitions, items, strict=True))
            ]
        outcomes = [t.result() for t in tasks]
        text = "\n".join(o.text for o in outcomes)
        if all(o.result is None for o in outcomes):
            raise ToolError(f"every one of the {len(outcomes)} parallel tasks failed:\n{text}")
        return text

    async def _chain(self, steps: list[_Item], parent: ParentContext, ctx: ToolContext) -> str:
        definitions = [self.registry.get(s.subagent_type) for s in steps]
        previous = ""
        last_id = ""
        denials: list[str] = []  # every step's: the chain's result shows only the last text
        for n, (definition, step) in enumerate(zip(definitions, steps, strict=True), start=1):
            prompt = step.prompt.replace("{previous}", previous)
            outcome = await self._foreground(definition, prompt, step.description, parent, ctx)
            if outcome.result is None:
                raise ToolError(f"chain stopped at step {n} of {len(steps)} ({definition.name}): {outcome.text}")
            previous, last_id = outcome.result.final_text, outcome.task_id
            denials += self.tracker.get(last_id).denials
        return task_result(last_id, "completed", previous, denials=denials, steps=str(len(steps)))

    async def _team(self, params: TaskParams, ctx: ToolContext) -> str:
        if self.team_spawner is None:
            raise ToolError(
                "teams are off here: use a subagent (task without team_name) or do it yourself; the person "
                "can turn teams on with %config HarnessNB.teams = True"
            )
        if not params.subagent_type or not params.prompt:
            raise ToolError("spawning a teammate needs `subagent_type`, `prompt` and `team_name` (and `name`)")
        definition = self.registry.get(params.subagent_type)
        return str(await self.team_spawner(definition, params, ctx))

    def _sink(self, task_id: str, emit: Callable[[Event], Any] | None) -> Callable[[Event], None]:
        """Child events go to the parent's event stream and, as lines, to the task's log; a
        call the person denied is noted on the task entry, for its result."""
        tracker = self.tracker

        def sink(event: Event) -> None:
            if emit is not None:
                emit(event)
            inner = event.event if isinstance(event, SubagentUpdate) else event
            line = progress_line(inner)
            if line is not None:
                tracker.log(task_id, line)
            if isinstance(inner, ApprovalDecided) and inner.by_person and not inner.approved:
                tracker.note_denial(task_id, denial_line(inner.call, inner.feedback))

        return sink


def _check_count(items: list[_Item]) -> None:
    if len(items) > MAX_PARALLEL_TASKS:
        raise ToolError(f"at most {MAX_PARALLEL_TASKS} parallel tasks at once, got {len(items)}; split them")


def _build_spec(definitions: list[SubAgentDefinition], *, teams: bool = False) -> ToolSpec:
    """The schema of ``task``: one task's fields at the top level, and the same fields
    defined once (``$defs``) for the items of ``tasks`` and ``chain``; the team's fields only
    with ``teams``. Every word is sent with every call: the description says what the model
    must know to delegate well (what the subagent sees, how a background report comes back)."""
    listing = "\n".join(
        f"- {d.name}: {' '.join(d.description.split())}" + (" (background by default)" if d.background else "")
        for d in definitions
    )
    agent = {"type": "string", "enum": [d.name for d in definitions]}
    title = {"type": "string", "description": "3-5 words, shown to the person."}
    one = {"subagent_type": agent, "prompt": {"type": "string"}, "description": title}
    team = " team_name (+ name) starts a long-lived teammate." if teams else ""
    description = (
        "Delegate a self-contained job to a subagent and get its final report. It sees only "
        "`prompt`: put every path, fact and requirement there. background=true returns a task id "
        "at once; the report comes back by itself as <background-task-completed> at your next "
        "step after it ends: do not poll. tasks=[…] run in parallel; chain=[…] in order, "
        f"{{previous}} in a prompt being the previous report.{team}\nAgents:\n{listing}"
    )
    items = {"type": "array", "items": {"$ref": "#/$defs/task"}}
    properties: dict[str, Any] = {
        **one,
        "background": {"type": "boolean"},
        "tasks": {**items, "maxItems": MAX_PARALLEL_TASKS},
        "chain": items,
    }
    if teams:
        properties |= {"team_name": {"type": "string"}, "name": {"type": "string"}}
    parameters = {
        "type": "object",
        "properties": properties,
        "$defs": {"task": {"type": "object", "properties": one, "required": ["subagent_type", "prompt"]}},
    }
    return ToolSpec(name="task", description=description, parameters=parameters)
