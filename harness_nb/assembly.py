"""``assemble``: the parts of one harness, wired once from what it is built from.

What a harness is built from — the workdir, the sandbox, the agent and skill folders, the
tool objects and hooks given in code, the ``built`` settings — becomes ``Parts``: the
provider factory, the permission rules, the agents and skills, the MCP servers, the
subagent runner and task tool, the teams, the task tracker, the checkpoints, the offload
hook, the tracing. ``Harness`` is the facade over them; nothing else holds them.

What the runs that start now are given — the settings, the tools offered, the hooks run —
is a ``Kit``: ``Parts.kit`` makes a new one for each change of settings or of the MCP tools,
and none is changed once made. A run's context (``Parts.context``) holds the kit's parts
it started with, and so does every background task it launches, however long that task
waits for a slot. ``Conversation`` is the main agent's session and the engine over it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .core import ConfigError, new_id, run_blocking
from .core.imports import shielded_imports
from .core.secret import SECRETS, protect_loggers
from .engine import (
    AgentEngine,
    ApprovalChannel,
    AskChannel,
    AskPersonTool,
    CheckpointHook,
    CompactionPolicy,
    Hook,
    HookRegistry,
    Injector,
    MainPrompt,
    MemorySession,
    OffloadHook,
    ParentContext,
    PromptBuilder,
    RedactSecretsHook,
    RunContext,
    UsageAccount,
)
from .engine.resume import SessionSummary, list_sessions, read_session
from .mcp import TRUST_FILE, McpManager, ServerEntry, TrustStore
from .permissions.hook import PermissionHook
from .permissions.remember import remembering
from .permissions.rule import PermissionRules
from .providers.base import Provider
from .sandbox import Checkpoints, machine_folder_problem, note_workdir
from .settings import SETTINGS, RunSettings
from .skills.catalog import SkillCatalog
from .skills.tool import SkillTool
from .subagents import (
    AgentRegistry,
    MessageRouter,
    ModelResolver,
    SubagentRunner,
    TaskTool,
    TaskTracker,
    TrackerRoute,
    coordination_tools,
)
from .subagents.runner import inline_servers
from .team import TeamManager
from .tools import Sandbox, Tool, ToolRegistry
from .tracing import Tracing

__all__ = ["Conversation", "Kit", "Parts", "assemble"]

log = logging.getLogger("harness_nb")


@dataclass(frozen=True)
class Kit:
    """What a run started now is given: the ``settings`` in force, every tool the main
    agent could be offered (``tool_pool``), the ``tools`` it is offered, the ``hooks`` its
    calls pass (``permission`` first), the MCP tools among them and the compaction policy.
    Made anew, never changed (see the module doc)."""

    settings: RunSettings
    tool_pool: ToolRegistry
    tools: ToolRegistry
    hooks: HookRegistry
    permission: PermissionHook
    mcp_tools: tuple[Tool, ...]
    compaction: CompactionPolicy


@dataclass(frozen=True)
class Parts:
    """The parts of one harness (see the module doc). ``fixed_tools`` is the tool pool
    without MCP tools; ``own_tools`` the names of the tool objects given, offered whatever
    the ``tools`` setting names; ``later_hooks`` every hook after the permission hook;
    ``protected`` the agent folders inside the workdir (only the person changes them);
    ``main_prompt`` the main agent's built-in prompt (the ``system_prompt`` setting
    replaces its text)."""

    workdir: Path
    sandbox: Sandbox
    models: ModelResolver
    permissions: PermissionRules
    registry: AgentRegistry
    skill_catalog: SkillCatalog
    tracker: TaskTracker
    mcp: McpManager
    runner: SubagentRunner
    router: MessageRouter
    task_tool: TaskTool
    teams: TeamManager | None
    checkpointer: Checkpoints | None
    total: UsageAccount
    injectors: tuple[Injector, ...]
    fixed_tools: tuple[Tool, ...]
    own_tools: tuple[str, ...]
    later_hooks: tuple[Hook, ...]
    protected: tuple[Path, ...]
    tracing: Tracing
    main_prompt: MainPrompt = field(default_factory=MainPrompt)

    @property
    def state_dir(self) -> Path:
        """``<workdir>/.harness_nb``: sessions, offloaded outputs, teams, cassettes."""
        return self.workdir / ".harness_nb"

    def kit(
        self, settings: RunSettings, *, previous: Kit | None = None, mcp_tools: Sequence[Tool] | None = None
    ) -> Kit:
        """The kit of ``settings`` (the ``previous`` one's MCP tools unless ``mcp_tools`` are
        given; its hooks when the policy is the same). A tool name that is not in the pool
        is an ``UnknownNameError`` listing those there are, and nothing is made."""
        mcp = tuple(mcp_tools) if mcp_tools is not None else previous.mcp_tools if previous is not None else ()
        pool = ToolRegistry([*self.fixed_tools, *mcp])
        tools = pool
        if settings.tools is not None:  # MCP tools are offered whatever the names say
            tools = ToolRegistry([*pool.pick([*settings.tools, *self.own_tools]), *mcp])
        if previous is not None and previous.settings.approval_policy == settings.approval_policy:
            permission, hooks = previous.permission, previous.hooks
        else:  # the same hook under the new policy: the files the agent wrote stay known
            permission = (
                previous.permission.with_policy(settings.approval_policy)
                if previous is not None
                else PermissionHook(settings.approval_policy, rules=self.permissions, protected=self.protected)
            )
            hooks = HookRegistry([permission, *self.later_hooks])
        compaction = settings.compaction(self.state_dir / "offload")
        return Kit(settings, pool, tools, hooks, permission, mcp, compaction)

    def engine(self, kit: Kit, provider: Provider, session: MemorySession) -> AgentEngine:
        """The main agent's engine over ``session`` (the kit's tools, hooks and limits are only
        the defaults of a run given no context: each run passes its own)."""
        settings = kit.settings
        main = self.main_prompt
        prompt = PromptBuilder(
            settings.system_prompt or main.text, workdir=self.workdir, skills=settings.skills, state=main.state
        )
        return AgentEngine(
            provider, kit.tools, hooks=kit.hooks, session=session, prompt_builder=prompt, limits=settings.limits,
            workdir=self.workdir, agent="main", injectors=self.injectors,
        )

    def checkpoints_on(self) -> Checkpoints:
        """The checkpoints, or the ``ConfigError`` saying they are off."""
        if self.checkpointer is None:
            raise ConfigError("checkpoints are off for this harness (checkpoints=False): nothing to go back to")
        return self.checkpointer

    async def aclose(self) -> None:
        """Cancel background tasks, stop the MCP servers, close the providers' connections and
        the watches (checkpoints, settings files, skills)."""
        if self.teams is not None:
            await self.teams.aclose()
        await self.tracker.aclose()
        await self.mcp.aclose()
        await self.models.aclose()
        if self.checkpointer is not None:
            await run_blocking(self.checkpointer.close)
        self.permissions.close()
        self.skill_catalog.close()
        await self.tracing.aclose()

    def applied(self, kit: Kit, settings: RunSettings) -> Kit:
        """The kit of ``settings``, replacing ``kit``; the parts that live across runs follow
        them: the rules given in code, the options providers are made with (those made before
        stay open for the runs using them), the MCP servers given in code. A change to a
        ``built`` setting is a ``ConfigError``, a tool name not in the pool an
        ``UnknownNameError``; either changes nothing."""
        old = kit.settings
        built = [s.name for s in SETTINGS.values() if s.built and s.value(settings) != s.value(old)]
        if built:
            raise ConfigError(
                f"{', '.join(built)} take effect when a harness is built: make a new Harness with them "
                "(the notebook does so itself when they change)"
            )
        new = self.kit(settings, previous=kit)
        if (settings.allow, settings.deny) != (old.allow, old.deny):
            self.permissions.configure(allow=settings.allow, deny=settings.deny)
        if settings.options != old.options:
            self.models.retire_made()
        if settings.mcp != old.mcp:
            mcp = settings.mcp
            self.mcp.configure(servers=mcp.servers or {}, start_timeout=mcp.start_timeout, trust=mcp.trust)
        return new

    def context(
        self,
        kit: Kit,
        provider: Provider,
        *,
        max_turns: int | None,
        approval: ApprovalChannel | None,
        ask: AskChannel | None = None,
    ) -> RunContext:
        """A new run's context on ``provider``: ``kit``'s limits (``max_turns`` for this run
        only), prices, compaction, tools, hooks and delegation, the approval channel
        ``approval`` (its "Approve for this session" keeping its rule on this harness), the
        ask channel ``ask`` and a fresh usage account billed to the harness's total."""
        settings = kit.settings
        limits = settings.limits if max_turns is None else replace(settings.limits, max_turns=max_turns)
        channel = remembering(approval, self.permissions) if approval is not None else None
        return RunContext(
            provider, limits, channel, self.total.child(), kit.compaction, prices=settings.price_table,
            tools=kit.tools, hooks=kit.hooks, delegation=settings.delegation, ask=ask,
        )


def assemble(
    workdir: str | Path,
    settings: RunSettings,
    *,
    settings_now: Callable[[], RunSettings],
    lead: Callable[[], ParentContext],
    provider: Provider | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    sandbox: Sandbox | None = None,
    tools: Sequence[Tool] = (),
    builtins: bool = True,
    extra_tools: Iterable[Tool] = (),
    hooks: Iterable[Hook] = (),
    main_prompt: MainPrompt | None = None,
) -> Parts:
    """The parts of a harness on ``workdir`` built with ``settings`` (its ``built`` ones
    stay for its life). ``settings_now`` gives the settings in force (the providers made
    later use their options), ``lead`` the main agent as a parent (what a teammate started
    outside a run inherits). ``provider`` is a model object given (recorded like the ones
    made, never changed); ``api_key`` and ``base_url`` apply to the harness's own model;
    ``sandbox`` a sandbox object (else one is made from the sandbox settings); ``tools``
    tool objects given, which replace the built-ins unless ``builtins``; ``main_prompt`` the
    main agent's built-in system prompt."""
    folder = Path(workdir).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"workdir {folder} is not a folder; create it or pass another")
    refused = machine_folder_problem(folder)
    if refused is not None:
        raise ConfigError(refused)
    note_workdir(folder)  # commands may write it: the harness's programs never come from there
    state = folder / ".harness_nb"
    # Made now, before the skills and rules below are read and watched: the harness's own
    # first write there (a transcript, an offloaded output) is then no news about them, where
    # making the folder at the first run made that run read both again on worker threads.
    try:
        state.mkdir(exist_ok=True)
    except OSError as exc:  # a read-only workdir: the run writing there first says so
        log.debug("cannot make %s yet: %s", state, exc)
    home = Path.home() if settings.include_user_agents else None
    agent_dirs = [Path(d).expanduser() for d in settings.agent_dirs]
    box = _sandbox(settings, sandbox).protecting(d.resolve() for d in agent_dirs)
    record_to = None if settings.record_to is None else folder / settings.record_to

    def make_provider(model: str) -> Provider:
        with shielded_imports():
            from .providers.factory import create_provider

        now = settings_now()
        own = model == now.model
        return create_provider(
            model,
            api_key=api_key if own else None,
            base_url=base_url if own else None,
            record_to=record_to,
            workdir=folder,
            options=now.options,
        )

    models = ModelResolver(make_provider)
    if provider is not None:
        with shielded_imports():
            from .providers.cassette import recording

        models.adopt(provider.model_id, recording(provider, record_to, workdir=folder))
    permissions = PermissionRules(folder, home=home, allow=settings.allow, deny=settings.deny)
    registry = AgentRegistry(folder, extra_dirs=agent_dirs, include_user=settings.include_user_agents)
    skill_catalog = SkillCatalog(folder, home=home)
    # Read now, as the agent files are (the registry above), so that a run finds them unchanged
    # (inotify) on the loop: eight harnesses started at once otherwise sent 16 first reads
    # to the worker threads, whose GIL handoffs held up every launch behind them.
    permissions.current()
    skill_catalog.refresh()
    tracker = TaskTracker()
    mcp = McpManager(
        folder,
        servers=settings.mcp.servers,
        home=home,
        start_timeout=settings.mcp.start_timeout,
        trust=settings.mcp.trust,
        trust_store=TrustStore(Path.home() / TRUST_FILE),
        agent_servers=lambda: _agent_servers(registry, folder),
    )
    subagents = settings.subagents
    runner = SubagentRunner(models, max_depth=subagents.max_depth, mcp=mcp)
    router = MessageRouter([TrackerRoute(tracker)])
    task_tool = TaskTool(
        registry, runner, tracker, max_concurrency=subagents.max_concurrency, max_background=subagents.max_background
    )
    tracing = Tracing(lambda: settings_now().tracing)
    teams: TeamManager | None = None
    if settings.teams:  # §6: mailboxes before task ids in send_message; `task(team_name=…)` spawns
        teams = TeamManager(state / "teams", agents=registry, runner=runner, tracker=tracker, lead=lead)
        router.routes.insert(0, teams.route)
        task_tool.team_spawner = teams.spawn_from_task
        teams.on_event.append(tracing.teammate_event)  # a teammate's turns reach no launch's sink
    base: list[Tool] = []
    if builtins:
        with shielded_imports():
            from .tools.builtin import builtin_tools

        base = [*builtin_tools(sandbox=box), SkillTool(skill_catalog)]
    team_tools = teams.tools() if teams else []
    # ask_person is offered only to a run that can ask someone (engine/ask.py)
    fixed = (*base, *tools, *extra_tools, task_tool, *coordination_tools(tracker, router), *team_tools, AskPersonTool())
    offload = OffloadHook(state / "offload", limit=settings.offload_chars)
    sources: list[Injector] = [tracker.completion_texts, *([teams.injector] if teams else [])]
    found = (d.resolve() for d, _label in registry.search_dirs())
    protected = tuple(d for d in found if d.is_relative_to(folder))
    later: list[Hook] = []
    checkpointer: Checkpoints | None = None
    if settings.checkpoints.enabled:
        folders = [d.relative_to(folder).as_posix() for d in protected]
        checkpointer = Checkpoints(folder, max_file_mb=settings.checkpoints.max_mb, folders=folders)
        later.append(CheckpointHook(checkpointer))
    # the process's secrets learn this harness's key and its workdir's .env files
    SECRETS.add(api_key)
    SECRETS.watch(folder)
    protect_loggers()
    # redact before offloading, so an offloaded file never holds a key either
    later += [RedactSecretsHook(SECRETS), offload, *hooks]
    return Parts(
        workdir=folder,
        sandbox=box,
        models=models,
        permissions=permissions,
        registry=registry,
        skill_catalog=skill_catalog,
        tracker=tracker,
        mcp=mcp,
        runner=runner,
        router=router,
        task_tool=task_tool,
        teams=teams,
        checkpointer=checkpointer,
        total=UsageAccount(),
        injectors=tuple(_capped(source, offload, folder) for source in sources),
        fixed_tools=fixed,
        own_tools=tuple(t.name for t in tools),
        later_hooks=tuple(later),
        protected=protected,
        tracing=tracing,
        main_prompt=main_prompt or MainPrompt(),
    )


class Conversation:
    """The main agent's conversation: its session (with ``transcripts``, written to
    ``<state>/sessions/<id>.jsonl``) and the engine over it, made by ``make_engine`` on
    first use and again after ``new`` or ``resume``."""

    def __init__(
        self, state_dir: Path, *, transcripts: bool, make_engine: Callable[[MemorySession], AgentEngine]
    ) -> None:
        self.folder = state_dir / "sessions"
        self.transcripts = transcripts
        self.make_engine = make_engine
        self.session = self._fresh()
        self._engine: AgentEngine | None = None

    def _fresh(self) -> MemorySession:
        session = MemorySession()
        if self.transcripts:
            session.transcript = self.folder / f"{session.id}.jsonl"
        return session

    def engine(self) -> AgentEngine:
        """The engine of the conversation (made now if need be)."""
        if self._engine is None:
            self._engine = self.make_engine(self.session)
        return self._engine

    def new(self) -> None:
        """Forget the conversation so far: the next run starts fresh."""
        self.session.close()
        self.session = self._fresh()
        self._engine = None

    def saved(self) -> list[SessionSummary]:
        """The conversations on disk, newest first."""
        return list_sessions(self.folder)

    def resume(self, session_id: str | None) -> int:
        """Continue conversation ``session_id`` (the newest when ``None``) from its transcript:
        the next run goes on from its history, appending to the same transcript; a tool call
        a crash left without a result gets an error result. Returns the messages restored."""
        session_id, path, messages, repaired = read_session(self.folder, session_id)
        self.session.close()
        self.session = MemorySession(session_id, transcript=path if self.transcripts else None)
        self.session.messages = messages
        if repaired:
            log.info("session %s: repaired %d tool call(s) left unfinished", session_id, repaired)
        self._engine = None
        return len(messages)


def _sandbox(settings: RunSettings, given: Sandbox | None) -> Sandbox:
    """The sandbox object given (with the ``sandbox_limits`` setting, when set), else the
    one the sandbox settings make."""
    group = settings.sandbox
    if given is None:
        return Sandbox.create(group.mode, network=group.network, limits=group.limits)
    return given if group.limits is None else given.limited(group.limits)


def _capped(source: Injector, offload: OffloadHook, workdir: Path) -> Injector:
    """``source`` with each text longer than ``offload_chars`` offloaded like a long tool
    result: a background result or a mailbox message cannot flood the conversation."""

    def inject() -> list[str]:
        # scrubbed first: the offloaded whole must not hold a key either
        return [offload.shorten(new_id("injected"), SECRETS.scrub(text), workdir) for text in source()]

    return inject


def _agent_servers(registry: AgentRegistry, workdir: Path) -> list[ServerEntry]:
    """The inline MCP servers of the agents' definitions (for ``%mcp`` and trust)."""
    found: list[ServerEntry] = []
    for definition in registry.list():
        found += inline_servers(definition, workdir, strict=False).entries.values()
    return found
