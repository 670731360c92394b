"""``Harness``: the plain-Python entry point (no IPython needed).

    from harness_nb import Harness
    h = Harness(model="openai/gpt-4o-mini", workdir=".")
    result = await h.run("Summarise data.csv")
    print(result.final_text, result.usage)

A harness is a facade: one main conversation over parts wired once (``assembly.py``), its
settings one ``RunSettings`` (``settings.py``: every setting, its default and meaning).
Every key it is given or finds (environment, ``.env`` files under the workdir) is masked in
everything it sends or writes (``core.secret.SECRETS``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, overload

if TYPE_CHECKING:  # the facade imports its parts as it is built: ``from harness_nb import Harness`` loads none
    from typing_extensions import Unpack

    from .core import Compacted, Event, Usage
    from .engine import (
        ApprovalChannel,
        AskChannel,
        EventSink,
        Hook,
        MainPrompt,
        MemorySession,
        ParentContext,
        RunContext,
        RunResult,
    )
    from .engine.resume import SessionSummary
    from .mcp import McpTool
    from .providers.base import Provider
    from .providers.batch import BatchState
    from .sandbox import Checkpoint, Rewind
    from .settings import RunSettings
    from .subagents import SubagentHandle
    from .subagents.agent_map import AgentMap
    from .subagents.map_handle import MapHandle
    from .subagents.map_options import MapOptions
    from .subagents.map_result import MapEstimate, MapResult
    from .subagents.map_store import StoredMaps
    from .tools import Sandbox, SandboxMode, Tool, ToolRegistry
    from .tracing import AttributeValue

    TraceAttributes = Mapping[str, AttributeValue]

class Harness:
    """One main agent conversation with its tools, hooks and providers.

    ``settings`` (default: the defaults) with ``changes`` made by name (``max_turns=10``; an
    unknown name is a ``ConfigError`` naming the closest). ``model``: a ``provider/model``
    (else ``default_model()``) or a ``Provider``, used as given; ``tools``: tool names (the
    setting) and objects (replacing the built-ins); ``sandbox``: a mode or a ``Sandbox``.
    Not settings: ``approval``, the async ``(call, reason, risk) -> Approved | Denied`` asked
    when a call needs a person (none: denied); ``ask``, the async ``(Question) -> Answer``
    that ``ask_person`` asks through (none: the tool is not offered); ``extra_tools``; ``hooks``; ``api_key`` and
    ``base_url`` of its own model; ``main_prompt``, the main agent's built-in system prompt
    (the notebook's speaks of cells and the kernel). Each run's ``RunContext`` is fixed as it starts:
    ``configure`` / ``apply`` change later runs only, never one under way or the background
    work it launched."""

    def __init__(
        self,
        model: str | Provider | None = None,
        *,
        workdir: str | Path = ".",
        settings: RunSettings | None = None,
        approval: ApprovalChannel | None = None,
        ask: AskChannel | None = None,
        tools: Iterable[Tool | str] | None = None,
        extra_tools: Iterable[Tool] = (),
        hooks: Iterable[Hook] = (),
        api_key: str | None = None,
        base_url: str | None = None,
        sandbox: SandboxMode | Sandbox | None = None,
        main_prompt: MainPrompt | None = None,
        **changes: Any,
    ) -> None:
        # The parts are loaded by the first harness built, not by ``from harness_nb import Harness``.
        from .assembly import Conversation, assemble
        from .providers.base import Provider
        from .settings import RunSettings, default_model
        from .tools import Sandbox

        given = None if tools is None else list(tools)
        names = tuple(t for t in given or () if isinstance(t, str))
        objects = [t for t in given or () if not isinstance(t, str)]
        provider = model if isinstance(model, Provider) else None
        box = sandbox if isinstance(sandbox, Sandbox) else None
        own: dict[str, Any] = {"model": provider.model_id if provider else model, "tools": names or None}
        own.update({"sandbox": box.mode, "sandbox_network": box.network} if box else {"sandbox": sandbox})
        settings = (settings or RunSettings()).changed(**own, **changes)
        settings = settings if settings.model else settings.changed(model=default_model())
        parts = assemble(
            workdir, settings, settings_now=lambda: self.settings, lead=self.lead_context, provider=provider,
            api_key=api_key, base_url=base_url, sandbox=box, tools=objects, builtins=given is None or bool(names),
            extra_tools=extra_tools, hooks=hooks, main_prompt=main_prompt,
        )
        self._parts, self._kit = parts, parts.kit(settings)
        self._conversation = Conversation(
            parts.state_dir, transcripts=settings.transcripts,
            make_engine=lambda session: parts.engine(self._kit, self.provider, session),
        )
        self.approval = approval
        """Asked when a call needs a person, for runs given no channel of their own (read at launch)."""
        self.ask = ask
        """What ``ask_person`` asks through, for runs given no channel of their own (read at launch)."""
        self.workdir: Path = parts.workdir
        self.sandbox: Sandbox = parts.sandbox
        """How ``bash`` runs: ``sandbox.active`` says whether commands are confined, ``describe()`` how."""
        self.registry = parts.registry
        """The subagent definitions: built in, the workdir's, the person's, ``agent_dirs``'."""
        self.skill_catalog = parts.skill_catalog
        """The Agent Skills of the workdir (and the person's, with ``include_user_agents``)."""
        self.tracker = parts.tracker
        """Subagent tasks and background work: ``list``, ``wait``, ``cancel``, ``listeners``."""
        self.mcp = parts.mcp
        """The MCP servers: started at the first run, stopped by ``aclose``; ``%mcp`` shows them."""
        self.teams = parts.teams
        """The teams (``None`` with ``teams=False``)."""
        self.router = parts.router
        """Where ``send_message`` goes: a teammate's mailbox, else a background task."""
        self.checkpointer = parts.checkpointer
        """The workdir's checkpoints (``None`` with ``checkpoints=False``)."""
        self.last_map: AgentMap | None = None
        """The latest ``map``: its rows so far (``last_map.result()``), also after an interrupt."""

    @property
    def settings(self) -> RunSettings:
        """The settings the next run starts from (``configure`` / ``apply`` change them)."""
        return self._kit.settings

    @property
    def model(self) -> str | None:
        """The ``provider/model`` string in use (``None`` when nothing is configured)."""
        return self._kit.settings.model

    @property
    def tools(self) -> ToolRegistry:
        """The tools the next run offers the main agent (``tool_pool``, narrowed by ``tools``)."""
        return self._kit.tools

    @property
    def tool_pool(self) -> ToolRegistry:
        """Every tool the main agent could be offered: what the ``tools`` setting may name."""
        return self._kit.tool_pool

    @property
    def session(self) -> MemorySession:
        """The main conversation's session: its messages and transcript."""
        return self._conversation.session

    @property
    def usage(self) -> Usage:
        """Everything this harness has used so far: every run, subagent and teammate."""
        return self._parts.total.snapshot()

    @property
    def provider(self) -> Provider:
        """The main agent's provider, made on first use (no model: a ``ConfigError`` saying how to set one)."""
        if not self.model:
            from .settings import no_model_error

            raise no_model_error()
        return self._parts.models.get(self.model)

    def configure(self, **changes: Any) -> None:
        """``apply(settings.changed(**changes))``: change settings by name for the runs that
        start from now on (``None`` is no change; see ``harness_nb.settings``)."""
        self.apply(self.settings.changed(**changes))

    def apply(self, settings: RunSettings) -> None:
        """Make ``settings`` those of the runs that start from now on (the conversation is kept;
        see ``Parts.applied`` for what is refused, which changes nothing)."""
        self._kit = self._parts.applied(self._kit, settings)

    def run_context(
        self,
        *,
        model: str | None = None,
        max_turns: int | None = None,
        approval: ApprovalChannel | None = None,
        ask: AskChannel | None = None,
    ) -> RunContext:
        """A new run's context, fixed now: the settings in force (or ``model`` / ``max_turns``
        for this run only), their tools and hooks, the approval and ask channels
        (``approval`` and ``ask``, else the harness's) and a fresh usage account billed to
        the harness's total."""
        provider = self._parts.models.get(model) if model is not None else self.provider
        return self._parts.context(
            self._kit, provider, max_turns=max_turns, approval=approval or self.approval, ask=ask or self.ask
        )

    def lead_context(self, approval: ApprovalChannel | None = None, ask: AskChannel | None = None) -> ParentContext:
        """The main agent as a parent, as configured now: what a subagent or teammate
        started from outside a run (``run_subagent``, ``%team``) inherits."""
        return self._conversation.engine().parent_context(self.run_context(approval=approval, ask=ask))

    async def connect_mcp(self) -> list[McpTool]:
        """Start the MCP servers that want a start (at first all; later those that crashed) and
        offer their tools from the next run on (one that fails is left out, its error shown by
        ``%mcp``). Every run does this first. Returns the MCP tools now offered."""
        tools = await self._parts.mcp.tools()
        if tuple(tools) != self._kit.mcp_tools:
            self._kit = self._parts.kit(self.settings, previous=self._kit, mcp_tools=tools)
        return tools

    def new_conversation(self) -> None:
        """Forget the conversation so far; the next ``run`` starts fresh."""
        self._conversation.new()

    def sessions(self) -> list[SessionSummary]:
        """The conversations this workdir has on disk, newest first: what ``resume`` continues."""
        return self._conversation.saved()

    def resume(self, session_id: str | None = None) -> int:
        """Continue conversation ``session_id`` (the newest when ``None``) from its transcript,
        e.g. after a kernel restart (``Conversation.resume``); returns the messages restored."""
        return self._conversation.resume(session_id)

    async def compact(self, *, on_event: EventSink | None = None, model: str | None = None) -> Compacted:
        """Compact the conversation now (``engine/compaction.py``): old tool results become stubs,
        the turns before the latest prompt a summary written by the model (or ``model``). The
        result's ``usage`` is what the summary calls used (billed to the harness's total)."""
        context = self.run_context(model=model)
        done = await self._conversation.engine().compact(context=context, on_event=on_event)
        return done.model_copy(update={"usage": context.account.snapshot()})

    def checkpoints(self) -> list[Checkpoint]:
        """The workdir's checkpoints, oldest first: one before each call that changed files and
        each rewind or undo (``sandbox/checkpoints/checkpoint.py``). Empty with checkpoints off."""
        return self.checkpointer.kept() if self.checkpointer is not None else []

    async def rewind(self, checkpoint: int | str | None = None, *, dry_run: bool = False) -> Rewind:
        """Put the workdir back as it was before checkpoint ``checkpoint`` (the latest when
        ``None``); returns what it did (``dry_run``: would do). It can be undone itself."""
        from .core import run_blocking

        return await run_blocking(self._parts.checkpoints_on().rewind, checkpoint, dry_run=dry_run)

    async def undo(self, checkpoint: int | str, *, dry_run: bool = False) -> Rewind:
        """Undo what the call of checkpoint ``checkpoint`` did, where the paths it changed are
        still as it left them (the others are listed as conflicts)."""
        from .core import run_blocking

        return await run_blocking(self._parts.checkpoints_on().undo, checkpoint, dry_run=dry_run)

    async def _launch(
        self, model: str | None, max_turns: int | None, approval: ApprovalChannel | None, ask: AskChannel | None = None
    ) -> RunContext:
        """A run's context, made once the MCP servers have started (their tools are in it)."""
        self.run_context(model=model)  # no model: fail before any server starts
        await self.connect_mcp()
        return self.run_context(model=model, max_turns=max_turns, approval=approval, ask=ask)

    def _traced(self, on_event: EventSink | None, attributes: TraceAttributes | None) -> EventSink | None:
        """A launch's event sink: ``on_event``, fed to a trace first when the ``tracing``
        setting in force says so (``tracing/``), with ``attributes`` on its runs' spans."""
        return self._parts.tracing.observe(on_event, self.settings.tracing, attributes)

    async def run(
        self, prompt: str, *, on_event: EventSink | None = None, model: str | None = None,
        max_turns: int | None = None, approval: ApprovalChannel | None = None, ask: AskChannel | None = None,
        trace_attributes: TraceAttributes | None = None,
    ) -> RunResult:
        """Run the main agent on ``prompt`` in the ongoing conversation; ``model``, ``max_turns``,
        ``approval`` and ``ask`` apply to this run only (and to the background work it
        launches); ``trace_attributes`` go on its spans when it is traced (a notebook's cell)."""
        context = await self._launch(model, max_turns, approval, ask)
        sink = self._traced(on_event, trace_attributes)
        return await self._conversation.engine().run(prompt, on_event=sink, context=context)

    async def run_stream(
        self, prompt: str, *, model: str | None = None, max_turns: int | None = None,
        approval: ApprovalChannel | None = None, ask: AskChannel | None = None,
        trace_attributes: TraceAttributes | None = None,
    ) -> AsyncIterator[Event]:
        """Yield the events of a main-agent run as they happen."""
        context = await self._launch(model, max_turns, approval, ask)
        tap = self._traced(None, trace_attributes)
        async for event in self._conversation.engine().run_stream(prompt, context=context, tap=tap):
            yield event

    async def run_subagent(
        self, name: str, prompt: str, *, on_event: EventSink | None = None, approval: ApprovalChannel | None = None,
        ask: AskChannel | None = None, trace_attributes: TraceAttributes | None = None,
    ) -> RunResult:
        """Run subagent ``name`` directly on ``prompt`` in the foreground, bypassing the main
        model (the ``%@name`` path). Its usage shows on its task entry (``fg-N``)."""
        definition = self.registry.get(name)
        await self.connect_mcp()
        parent = self.lead_context(approval, ask)
        sink = self._traced(on_event, trace_attributes)
        _, result = await self._parts.task_tool.run_child(definition, prompt, parent, emit=sink, wrap=False)
        return result

    def start_subagent(
        self, name: str, prompt: str, *, description: str = "", on_event: EventSink | None = None,
        approval: ApprovalChannel | None = None, ask: AskChannel | None = None,
        trace_attributes: TraceAttributes | None = None,
    ) -> SubagentHandle:
        """Start subagent ``name`` in the background, under the settings in force now, and
        return a handle at once: ``await`` it for the ``RunResult``, ``cancel()`` it, or
        ``send(message)`` to steer it. Must be called with an event loop running."""
        definition = self.registry.get(name)
        parent = self.lead_context(approval, ask)
        launch = self._parts.task_tool.launch_background
        sink = self._traced(on_event, trace_attributes)
        entry = launch(definition, prompt, parent, description=description, emit=sink)
        from .subagents import SubagentHandle

        return SubagentHandle(self.tracker, entry)

    @overload
    async def map(
        self, agent: str, template: str, rows: Any, *, estimate: Literal[False] = False, **options: Unpack[MapOptions]
    ) -> MapResult: ...
    @overload
    async def map(
        self, agent: str, template: str, rows: Any, *, estimate: Literal[True], **options: Unpack[MapOptions]
    ) -> MapEstimate: ...
    async def map(
        self, agent: str, template: str, rows: Any, *, estimate: bool = False, **options: Unpack[MapOptions]
    ) -> MapResult | MapEstimate:
        """Run subagent ``agent`` once per row of ``rows`` (a list, a mapping, a pandas Series
        or DataFrame) on ``template`` filled from the row (``subagents/agent_map.py``;
        ``options``: ``MapOptions``, each name checked). Returns the rows in order;
        interrupted, the rows that finished stay in ``self.last_map.result()`` and in the
        map's store (``resume=True`` continues it). ``estimate=True`` runs a sample of the
        rows instead and returns what the whole map would use (``MapEstimate``)."""
        mapped = await self._agent_map(agent, template, rows, options, estimate=estimate)
        if estimate:
            from .subagents.agent_map import DEFAULT_SAMPLE

            return await mapped.estimate(options.get("sample", DEFAULT_SAMPLE))
        return await mapped.run()

    async def start_map(self, agent: str, template: str, rows: Any, **options: Unpack[MapOptions]) -> MapHandle:
        """``map`` in the background: returns a handle at once, listed by the tracker as
        ``bg-N`` and cancelled when the harness closes."""
        from .subagents.map_handle import start_map

        return start_map(await self._agent_map(agent, template, rows, options, background=True), self.tracker)

    def maps(self) -> StoredMaps:
        """The maps stored in this workdir (``.harness_nb/maps``), oldest first: id, when
        made, rows done of all, agent and model (one that cannot be read, with why)."""
        from .subagents.map_store import stored_maps

        return stored_maps(self._parts.state_dir / "maps")

    async def cancel_batches(self, map_id: str) -> list[BatchState]:
        """Ask the vendor to stop the batches of stored map ``map_id`` (a map run with
        ``mode="batch"``) that have not ended; what they answered is kept, and the next
        ``resume=True`` of that map collects it (``subagents/map_batch.py``)."""
        from .subagents.map_batch import cancel_batches

        return await cancel_batches(self._parts.state_dir / "maps", map_id, self._parts.runner.models.get)

    async def _agent_map(
        self, agent: str, template: str, rows: Any, options: MapOptions, *, estimate: bool = False,
        background: bool = False,
    ) -> AgentMap:
        """The map ``map`` and ``start_map`` run, as ``last_map`` unless it is an estimate:
        its options, rows, template and output checked and its store opened, so that a bad
        one fails here, before any row runs. A ``background`` map is paced (``LoopPacer``)."""
        from .subagents.agent_map import AgentMap
        from .subagents.map_options import check_options
        from .subagents.map_output import row_output
        from .subagents.map_pacer import LoopPacer

        check_options({**options, "estimate": estimate}, estimate=estimate)
        definition = self.registry.get(agent)
        output = options.get("output")
        shape = row_output(output) if output is not None else None
        budgets = {k: options.get(k) for k in ("budget_usd", "token_budget") if options.get(k) is not None}
        parent = await self._map_parent(options.get("model"), options.get("approval"), budgets)
        backend = None
        if options.get("backend", "kernel") == "ray":
            from .core import ConfigError
            from .map_ray import RayBackend

            if options.get("mode", "online") == "batch":
                raise ConfigError(
                    "mode='batch' sends every row to the vendor's batch API, so nothing runs on Ray: drop backend='ray'"
                )

            backend = RayBackend(
                self.settings, self.workdir, self._parts.models, definition, parent,
                concurrency=options.get("concurrency", 8), approval=options.get("approval"),
            )
        mapped = AgentMap(
            self._parts.runner, definition, template, rows, parent, concurrency=options.get("concurrency", 8),
            retries=options.get("retries", 3), output=shape, store=self._parts.state_dir / "maps",
            resume=options.get("resume", False), on_progress=options.get("on_progress"),
            mode=options.get("mode", "online"), batch_size=options.get("batch_size"), backend=backend,
            pacer=LoopPacer() if background else None,
        )
        await mapped.prepare("estimate" if estimate else "map")
        if not estimate:
            self.last_map = mapped
        return mapped

    async def _map_parent(
        self, model: str | None, approval: ApprovalChannel | None, budgets: Mapping[str, Any]
    ) -> ParentContext:
        """What a map's rows run under: a run's context on ``model`` with ``budgets``
        (``budget_usd``, ``token_budget``) for all of them (a Ray worker's rows too, there
        each row's share: ``map_ray.py``)."""
        from dataclasses import replace

        context = await self._launch(model, None, approval)
        limited = replace(context, limits=replace(context.limits, **budgets))
        return self._conversation.engine().parent_context(limited)

    async def aclose(self) -> None:
        """Cancel background tasks, stop the MCP servers, close the providers' connections,
        the watches (checkpoints, settings files, skills) and the transcript."""
        await self._parts.aclose()
        self.session.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<Harness model={self.model!r} workdir={str(self.workdir)!r}>"
