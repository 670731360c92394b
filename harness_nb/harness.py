"""``Harness``: the plain-Python entry point (no IPython needed).

    from harness_nb import Harness
    h = Harness(model="openai/gpt-4o-mini", workdir=".")
    result = await h.run("Summarise data.csv")
    print(result.final_text, result.usage)

A harness owns one main conversation, its tools and hooks, and the provider; the registry
of subagents (``registry``), the tracker of background work (``tracker``) and the teams
(``teams``). The model and keys come from the arguments, else from the environment
(``HARNESS_NB_MODEL``, ``OPENAI_API_KEY``, ...). Whatever key it is given, whatever
credential the environment or a ``.env`` file under the workdir holds, is masked in
everything the harness sends or writes (``core.secret.SECRETS``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from typing_extensions import Unpack

from .core import Compacted, ConfigError, Event, PriceTable, Usage, new_id, run_blocking
from .core.imports import shielded_imports
from .core.secret import SECRETS, protect_loggers
from .engine import (
    MAIN_SYSTEM_PROMPT,
    AgentEngine,
    ApprovalChannel,
    CheckpointHook,
    EventSink,
    Hook,
    HookRegistry,
    Injector,
    Limits,
    MemorySession,
    OffloadHook,
    ParentContext,
    PermissionHook,
    PermissionRules,
    PromptBuilder,
    RedactSecretsHook,
    RunContext,
    RunResult,
    SkillCatalog,
    SkillTool,
    UsageAccount,
    remembering,
    require_positive,
)
from .engine.resume import SessionSummary, list_sessions, read_session
from .mcp import DEFAULT_START_TIMEOUT, TRUST_FILE, McpManager, McpTool, ServerEntry, TrustStore
from .providers.base import Provider
from .sandbox import DEFAULT_MAX_FILE_MB, Checkpoint, Checkpoints, Rewind
from .providers.options import ProviderOptions, ReplayPace
from .settings import ApprovalPolicy, RunSettings
from .subagents import (
    AgentRegistry,
    BackgroundApprovals,
    MessageRouter,
    ModelResolver,
    SubagentHandle,
    SubagentRunner,
    TaskTool,
    TaskTracker,
    TrackerRoute,
    coordination_tools,
)
from .subagents.agent_map import AgentMap, MapHandle, MapOptions, MapResult, start_map
from .subagents.runner import inline_servers
from .team import TeamManager
from .sandbox import SandboxLimits
from .tools import Sandbox, SandboxMode, Tool, ToolRegistry

log = logging.getLogger("harness_nb")

NO_MODEL_MESSAGE = (
    "no model configured. Pass Harness(model='openai/gpt-4o-mini') (or 'anthropic/…', "
    "'ollama/…', 'openai-compatible/…'), set the HARNESS_NB_MODEL environment variable, or in "
    "a notebook run  %config HarnessNB.model = 'openai/gpt-4o-mini'. To work offline, use "
    "'scripted/<script.yaml>' or 'replay/<cassette.jsonl>'."
)


class Harness:
    """One main agent conversation with its tools, hooks and providers.

    ``approval_policy``: ``"allowlist"`` (the default; ``"dangerous"`` is its old name) runs
    read-only tools and shell commands known to be read-only (inside the sandbox, every
    command that destroys nothing in the workdir) and asks before everything else, always
    before ``run_python`` and before writes to agent, skill and settings files;
    ``"always"`` asks before every tool that changes anything, ``"never"`` asks nothing.
    ``allow`` / ``deny`` are permission rules (``Bash(git status:*)``, ``Write(data/**)``,
    ``mcp__server__tool``; see ``engine.rule``), added to those of
    ``.claude/settings.json``, ``.claude/settings.local.json``, ``.harness_nb/settings.json``
    and ``~/.claude/settings.json`` (read with the user's agents, ``include_user_agents``).
    Deny rules win, then allow rules, then the policy. Asking goes to the run's approval
    channel: the ``approval=`` of that run, else the harness's ``approval`` (an async
    callable ``(call, reason, risk) -> Approved | Denied``); without one, asked calls are
    denied. ``Approved(remember=rule)`` ("Approve for this session") keeps ``rule`` in
    ``permissions`` for the harness's life; ``Denied.by_the_person(reason)`` is the
    person's denial, whose reason the model reads. ``allow_bypass_permissions`` lets an
    agent file's ``permissionMode: bypassPermissions`` take effect (off: the usual policy,
    with a warning); the other modes need no permission, as none widens a deny or ask rule.

    ``provider_options`` (a dict or ``ProviderOptions``: ``streaming``, ``max_tokens``,
    ``temperature``, ``tool_choice``, ``empty_content``, ``context_window``, ``extra``
    request fields) apply to every provider the harness makes. ``api_key`` and
    ``base_url`` apply to the harness's own model (else the environment's are used).
    ``context_window`` is a shortcut for that option: the window compaction works against
    (default: the model's, from the table of known models or what an OpenAI-compatible
    server reports). ``compact_threshold``: the fraction of the window past which the
    conversation is compacted before a call (``compact()`` does it on request).
    ``replay_pace`` is a shortcut for that option too: how fast a ``replay/`` model streams
    (``"instant"``, the default; ``"recorded"``, as the cassette timed the live run; or a
    speed factor, ``2`` twice as fast).

    ``tools``: the tools offered to the main agent (and, narrowed, to its subagents).
    ``None``: the built-ins (``skill`` among them). Tool objects replace the built-ins.
    Tool names keep only those tools — of the built-ins, ``extra_tools`` and the
    delegation, coordination and team tools (``tool_pool``) — for a lean set: every tool's
    schema is sent with every call, and a small local model's context may not hold them all.

    ``settings``: the run settings as one ``RunSettings`` instead of their keywords (the
    model, ``approval_policy``, ``allow``/``deny``, ``background_approvals``, the limits and
    budgets, ``prices``, ``provider_options``, ``context_window``, ``replay_pace``,
    ``compact_threshold``, tool names; see ``harness_nb.settings``); ``h.settings`` is the value in force,
    ``configure(...)`` / ``apply(settings)`` change it for the runs that start from then on.

    Each run gets its own ``RunContext`` (provider, limits, approval channel, usage
    account): ``run(..., model=X)`` runs on X without touching other runs, and background
    work keeps the context of the run that launched it. ``usage`` is the harness's total.

    Money: every call is priced from ``prices`` — the built-in list
    (``harness_nb.core.PRICES``) plus your own, ``{"my-model": {"input": 0.5, "output":
    1.5}}`` in USD per million tokens (cache prices default to 0.1× and 1.25× the input
    price) — and the cost rolls up with the tokens: ``result.usage.cost`` per run,
    ``h.usage.cost`` for everything. ``budget_usd`` (and ``token_budget``) bound each run,
    its subagents included; ``subagent_budget_usd`` each subagent run (a definition's
    ``max_budget_usd`` too), clamped to what its parent has left. Budgets are checked
    before each model call, against that call's estimate (``engine/budget.py``), so the
    call that would pass one is never made.

    Skills: the Agent Skills (``<name>/SKILL.md``) of ``.claude/skills`` and
    ``.harness_nb/skills`` (and of ``~/.claude/skills`` and ``~/.harness_nb/skills`` with
    ``include_user_agents``) are listed in the main agent's prompt by name and description
    (``skill_catalog``) and loaded on demand by the read-only ``skill`` tool; ``skills``
    names skills preloaded whole into the main agent's prompt.

    ``sandbox``: how ``bash`` runs (``sandbox/bubblewrap.py``): ``"auto"`` under bubblewrap where
    it works (else unsandboxed, with one warning), ``"bwrap"`` always (``ConfigError`` when
    it cannot), ``"off"`` never, or a ``Sandbox``; ``sandbox_network`` lets sandboxed
    commands use the network; ``sandbox_limits`` (a ``SandboxLimits`` or a mapping of its
    fields, e.g. ``{"processes": 2000, "file_size": "64G"}``) what one command may use.
    ``self.sandbox.active`` says whether commands are confined, ``describe()`` how.

    ``checkpoints`` (on by default): before each call that can change files the workdir is
    checkpointed in a shadow git repository under ``~/.harness_nb/checkpoints/`` (files over
    ``checkpoint_max_mb`` by size and time only); the model and the view see what each call
    created, changed and deleted, ``rewind()`` / ``undo()`` go back, ``checkpoints()`` lists
    them, and a change to a path only the person may change that no approval covered is
    reverted at once (``sandbox/checkpoint.py``). Kernel state is not covered.

    MCP servers (``mcp/``): those of ``~/.harness_nb/mcp.json`` (with ``include_user_agents``),
    ``<workdir>/.mcp.json`` and ``mcp_servers`` (``{"name": {"command": …} | {"type": "http",
    "url": …}}``, Claude Code's format) start at the first run, each within
    ``mcp_start_timeout`` seconds; their tools (``mcp__<server>__<tool>``) are offered with the
    others, whatever ``tools`` names. ``self.mcp`` lists and restarts them; ``aclose`` stops them.
    A project's servers (``.mcp.json``, inline ones in agent files under the workdir) start
    only once the person trusts them (``mcp/trust.py``): ``mcp_trust`` names some,
    ``self.mcp.trust(name)`` trusts one for good (``~/.harness_nb/mcp-trust.json``).
    """

    def __init__(
        self,
        model: str | Provider | None = None,
        *,
        workdir: str | Path = ".",
        settings: RunSettings | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        provider_options: Mapping[str, Any] | None = None,
        system_prompt: str = MAIN_SYSTEM_PROMPT,
        tools: Iterable[Tool | str] | None = None,
        extra_tools: Iterable[Tool] = (),
        hooks: Iterable[Hook] = (),
        approval: ApprovalChannel | None = None,
        approval_policy: ApprovalPolicy = "allowlist",
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        max_turns: int = 50,
        token_budget: int | None = None,
        budget_usd: float | None = None,
        subagent_budget_usd: float | None = None,
        prices: Mapping[str, Any] | None = None,
        wall_time: float | None = None,
        tool_timeout: float = 60.0,
        max_parallel_tool_calls: int = 8,
        offload_chars: int = 20_000,
        record_to: str | Path | None = None,
        transcripts: bool = True,
        skills: Iterable[str] = (),
        agent_dirs: Iterable[str | Path] = (),
        include_user_agents: bool = True,
        background_approvals: BackgroundApprovals = "deny",
        allow_bypass_permissions: bool = False,
        max_concurrency: int = 4,
        max_background: int = 8,
        max_depth: int = 3,
        teams: bool = True,
        sandbox: SandboxMode | Sandbox = "auto",
        sandbox_network: bool = False,
        sandbox_limits: SandboxLimits | Mapping[str, Any] | None = None,
        context_window: int | None = None,
        replay_pace: ReplayPace | None = None,
        compact_threshold: float = 0.8,
        mcp_servers: Mapping[str, Any] | None = None,
        mcp_start_timeout: float = DEFAULT_START_TIMEOUT,
        mcp_trust: Iterable[str] = (),
        checkpoints: bool = True,
        checkpoint_max_mb: float = DEFAULT_MAX_FILE_MB,
    ) -> None:
        given = None if tools is None else list(tools)
        names = [t for t in given or () if isinstance(t, str)]
        objects = [t for t in given or () if not isinstance(t, str)]
        # the run settings: keywords, or one RunSettings (checked whole before anything is built)
        settings = _one_of(
            settings,
            RunSettings(
                model=model.model_id if isinstance(model, Provider) else model,
                approval_policy=approval_policy,
                allow=tuple(allow),
                deny=tuple(deny),
                background_approvals=background_approvals,
                allow_bypass_permissions=allow_bypass_permissions,
                max_turns=max_turns,
                token_budget=token_budget,
                budget_usd=budget_usd,
                subagent_budget_usd=subagent_budget_usd,
                wall_time=wall_time,
                tool_timeout=tool_timeout,
                max_parallel_tool_calls=max_parallel_tool_calls,
                prices=prices,
                provider_options=provider_options,
                context_window=context_window,
                replay_pace=replay_pace,
                compact_threshold=compact_threshold,
                tools=tuple(names),
            ),
        )
        if settings.model is None and os.environ.get("HARNESS_NB_MODEL"):
            settings = settings.changed(model=os.environ["HARNESS_NB_MODEL"])
        self.workdir = Path(workdir).expanduser().resolve()
        if not self.workdir.is_dir():
            raise ConfigError(f"workdir {self.workdir} is not a folder; create it or pass another")
        if not isinstance(sandbox, Sandbox):
            sandbox = Sandbox.create(sandbox, network=sandbox_network, limits=sandbox_limits)
        elif sandbox_limits is not None:
            sandbox = sandbox.limited(sandbox_limits)
        # agent folders given here are kept read-only to commands, like the project's own
        agent_dirs = list(agent_dirs)
        self.sandbox: Sandbox = sandbox.protecting(Path(d).expanduser().resolve() for d in agent_dirs)
        require_positive("max_concurrency", max_concurrency, whole=True)
        require_positive("max_background", max_background, whole=True)
        require_positive("max_depth", max_depth, whole=True)
        require_positive("offload_chars", offload_chars, whole=True)
        require_positive("mcp_start_timeout", mcp_start_timeout)
        self._settings = RunSettings()
        self._api_key = api_key
        self._base_url = base_url
        self._record_to = record_to
        self.models = ModelResolver(self._make_provider)
        if isinstance(model, Provider):
            if settings.context_window:
                model.context_window = settings.context_window
            self.models.adopt(model.model_id, self._recorded(model))
        self.system_prompt = system_prompt
        self.skills = list(skills)
        self.approval = approval
        self.permissions = PermissionRules(self.workdir, home=Path.home() if include_user_agents else None)
        self.transcripts = transcripts
        self.total = UsageAccount()
        self.registry = AgentRegistry(
            self.workdir,
            extra_dirs=[Path(d).expanduser() for d in agent_dirs],
            include_user=include_user_agents,
        )
        self.skill_catalog = SkillCatalog(self.workdir, home=Path.home() if include_user_agents else None)
        """The Agent Skills of the workdir (and the user's, with ``include_user_agents``)."""
        self.tracker = TaskTracker()
        self.mcp = McpManager(
            self.workdir,
            servers=mcp_servers,
            home=Path.home() if include_user_agents else None,
            start_timeout=mcp_start_timeout,
            trust=mcp_trust,
            trust_store=TrustStore(Path.home() / TRUST_FILE),
            agent_servers=self._agent_servers,
        )
        """The MCP servers: started at the first run, stopped by ``aclose``; ``mcp.configure``
        replaces the servers given in code."""
        self.runner = SubagentRunner(self.models, max_depth=max_depth, mcp=self.mcp)
        self.router = MessageRouter([TrackerRoute(self.tracker)])
        self.task_tool = TaskTool(
            self.registry, self.runner, self.tracker, max_concurrency=max_concurrency, max_background=max_background
        )
        self.teams: TeamManager | None = None
        if teams:  # §6: mailboxes before task ids in send_message; `task(team_name=…)` spawns
            self.teams = TeamManager(
                self.state_dir / "teams",
                agents=self.registry,
                runner=self.runner,
                tracker=self.tracker,
                lead=self.lead_context,
            )
            self.router.routes.insert(0, self.teams.route)
            self.task_tool.team_spawner = self.teams.spawn_from_task
        base: list[Tool] = []
        if given is None or names:
            with shielded_imports():
                from .tools.builtin import builtin_tools

            base = [*builtin_tools(sandbox=self.sandbox), SkillTool(self.skill_catalog)]
        self.tool_pool = ToolRegistry(
            [
                *base,
                *objects,
                *extra_tools,
                self.task_tool,
                *coordination_tools(self.tracker, self.router),
                *(self.teams.tools() if self.teams else ()),
            ]
        )
        """Every tool the main agent could be offered; ``tools`` is the part it is."""
        self._own_tools = [t.name for t in objects]
        self.tools = ToolRegistry()
        self.offload = OffloadHook(self.state_dir / "offload", limit=offload_chars)
        sources: list[Injector] = [self.tracker.completion_texts]
        if self.teams is not None:
            sources.append(self.teams.injector)
        self.injectors = [self._capped(source) for source in sources]
        self.hooks = HookRegistry(self._policy_hooks(settings.approval_policy))
        self.checkpointer: Checkpoints | None = None
        """The workdir's checkpoints (``None`` with ``checkpoints=False``)."""
        if checkpoints:
            require_positive("checkpoint_max_mb", checkpoint_max_mb)
            folders = [d.relative_to(self.workdir).as_posix() for d in self._agent_folders()]
            self.checkpointer = Checkpoints(self.workdir, max_file_mb=checkpoint_max_mb, folders=folders)
            self.hooks.add(CheckpointHook(self.checkpointer))
        # the process's secrets learn this harness's key and its workdir's .env files
        SECRETS.add(api_key)
        SECRETS.watch(self.workdir)
        protect_loggers()
        # redact before offloading, so an offloaded file never holds a key either
        self.hooks.add(RedactSecretsHook(SECRETS))
        self.hooks.add(self.offload)
        for h in hooks:
            self.hooks.add(h)
        self.apply(settings, first=True)
        self.session = self._new_session()
        self._engine: AgentEngine | None = None
        self.last_map: AgentMap | None = None
        """The latest ``map``: its rows so far (``last_map.result()``), also after an interrupt."""

    def _capped(self, source: Injector) -> Injector:
        """``source`` with each text longer than ``offload_chars`` offloaded like a long tool
        result: a background result or a mailbox message cannot flood the conversation."""

        def inject() -> list[str]:
            # scrubbed first: the offloaded whole must not hold a key either
            return [self.offload.shorten(new_id("injected"), SECRETS.scrub(text), self.workdir) for text in source()]

        return inject

    @property
    def state_dir(self) -> Path:
        """``<workdir>/.harness_nb``: sessions, offloaded outputs, teams, cassettes."""
        return self.workdir / ".harness_nb"

    @property
    def model(self) -> str | None:
        """The ``provider/model`` string in use (``None`` when nothing is configured)."""
        return self._settings.model

    @property
    def usage(self) -> Usage:
        """Everything this harness has used so far: every run, subagent and teammate."""
        return self.total.snapshot()

    @property
    def provider(self) -> Provider:
        """The main agent's provider, created on first use. Raises ``ConfigError`` when no model
        is configured (a clear message saying how to configure one, never a fake answer)."""
        if not self.model:
            raise ConfigError(NO_MODEL_MESSAGE)
        return self.models.get(self.model)

    def _make_provider(self, model: str) -> Provider:
        with shielded_imports():
            from .providers.factory import create_provider

        own = model == self.model
        return create_provider(
            model,
            api_key=self._api_key if own else None,
            base_url=self._base_url if own else None,
            record_to=self._resolve_record_path(),
            workdir=self.workdir,
            options=self.provider_options,
        )

    def _recorded(self, provider: Provider) -> Provider:
        """A provider instance given to the harness, recorded like the ones it makes."""
        with shielded_imports():
            from .providers.cassette import recording

        return recording(provider, self._resolve_record_path(), workdir=self.workdir)

    def _resolve_record_path(self) -> Path | None:
        if self._record_to is None:
            return None
        p = Path(self._record_to)
        return p if p.is_absolute() else self.workdir / p

    def _policy_hooks(self, policy: ApprovalPolicy) -> list[Hook]:
        return [PermissionHook(policy, rules=self.permissions, protected=self._agent_folders())]

    def _agent_folders(self) -> list[Path]:
        """The agent folders the registry reads that lie in the workdir (protected paths)."""
        found = (d.resolve() for d, _label in self.registry.search_dirs())
        return [d for d in found if d.is_relative_to(self.workdir)]

    def _new_session(self) -> MemorySession:
        session = MemorySession()
        if self.transcripts:
            session.transcript = self.state_dir / "sessions" / f"{session.id}.jsonl"
        return session

    def new_conversation(self) -> None:
        """Forget the conversation so far; the next ``run`` starts fresh."""
        self.session.close()
        self.session = self._new_session()
        self._engine = None

    def sessions(self) -> list[SessionSummary]:
        """The conversations this workdir has on disk, newest first (id, date, first prompt,
        runs, turns, usage): what ``resume`` can continue."""
        return list_sessions(self.state_dir / "sessions")

    def resume(self, session_id: str | None = None) -> int:
        """Continue conversation ``session_id`` (this workdir's newest when ``None``) from its
        transcript, e.g. after a kernel restart: the next ``run`` goes on from its history,
        appending to the same transcript. A tool call a crash left without a result gets an
        error result. Returns the number of messages restored."""
        session_id, path, messages, repaired = read_session(self.state_dir / "sessions", session_id)
        self.session.close()
        self.session = MemorySession(session_id, transcript=path if self.transcripts else None)
        self.session.messages = messages
        if repaired:
            log.info("session %s: repaired %d tool call(s) left unfinished", session_id, repaired)
        self._engine = None
        return len(messages)

    @property
    def engine(self) -> AgentEngine:
        """The main agent's engine: the conversation's session, tools, hooks and prompt
        (built on first use, rebuilt after ``new_conversation``). Each run passes it its own
        ``RunContext``."""
        if self._engine is None:
            self._engine = AgentEngine(
                self.provider,
                self.tools,
                hooks=self.hooks,
                session=self.session,
                prompt_builder=PromptBuilder(self.system_prompt, workdir=self.workdir, skills=self.skills),
                limits=self.limits,
                workdir=self.workdir,
                agent="main",
                injectors=self.injectors,
            )
        return self._engine

    @property
    def settings(self) -> RunSettings:
        """The settings the next run starts from (``configure`` / ``apply`` change them)."""
        return self._settings

    @property
    def limits(self) -> Limits:
        """When the next run stops on its own (``settings.limits``)."""
        return self._settings.limits

    @property
    def prices(self) -> PriceTable:
        """What each model's tokens cost: the built-in list plus ``prices``."""
        return self._settings.price_table

    @property
    def provider_options(self) -> ProviderOptions:
        """The options every provider the harness makes is made with."""
        return self._settings.options

    @property
    def approval_policy(self) -> ApprovalPolicy:
        """When a tool call asks first (see the class doc)."""
        return self._settings.approval_policy

    def configure(
        self,
        *,
        model: str | None = None,
        approval_policy: ApprovalPolicy | None = None,
        max_turns: int | None = None,
        token_budget: int | None = None,
        budget_usd: float | None = None,
        subagent_budget_usd: float | None = None,
        tool_timeout: float | None = None,
        max_parallel_tool_calls: int | None = None,
        prices: Mapping[str, Any] | None = None,
        background_approvals: BackgroundApprovals | None = None,
        allow_bypass_permissions: bool | None = None,
        provider_options: Mapping[str, Any] | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        context_window: int | None = None,
        replay_pace: ReplayPace | None = None,
        compact_threshold: float | None = None,
        tools: Iterable[str] | None = None,
    ) -> None:
        """Change settings for the runs that start from now on: ``apply(settings.changed(...))``.
        ``None`` leaves a setting as it is; ``model=""`` unconfigures the model,
        ``token_budget=0``, ``budget_usd=0`` and ``subagent_budget_usd=0`` remove a budget,
        ``context_window=0`` goes back to the model's own window and ``tools=[]`` offers
        every tool again. ``allow`` / ``deny`` replace the rules given in code (the
        session's rules and the settings files' stay)."""
        self.apply(
            self._settings.changed(
                model=model,
                approval_policy=approval_policy,
                max_turns=max_turns,
                token_budget=token_budget,
                budget_usd=budget_usd,
                subagent_budget_usd=subagent_budget_usd,
                tool_timeout=tool_timeout,
                max_parallel_tool_calls=max_parallel_tool_calls,
                prices=prices,
                background_approvals=background_approvals,
                allow_bypass_permissions=allow_bypass_permissions,
                provider_options=provider_options,
                allow=None if allow is None else tuple(allow),
                deny=None if deny is None else tuple(deny),
                context_window=context_window,
                replay_pace=replay_pace,
                compact_threshold=compact_threshold,
                tools=None if tools is None else tuple(tools),
            )
        )

    def apply(self, settings: RunSettings, *, first: bool = False) -> None:
        """Make ``settings`` the ones the runs that start from now on use; the conversation is
        kept, and runs (and background tasks) already under way keep the settings they
        started with. A tool name that is not among the harness's tools is an
        ``UnknownNameError`` and changes nothing (every other value was checked when
        ``settings`` was made)."""
        old = self._settings
        offered = self._offered(settings.tools)  # checks the names before anything changes
        if first or (settings.allow, settings.deny) != (old.allow, old.deny):
            self.permissions.configure(allow=settings.allow, deny=settings.deny)
        if settings.approval_policy != old.approval_policy and not first:
            # the same hook under the new policy: the files the agent wrote stay known
            self.hooks.hooks = [
                h.with_policy(settings.approval_policy) if isinstance(h, PermissionHook) else h
                for h in self.hooks.hooks
            ]
        if settings.options != old.options and not first:
            # providers made with the old options stay open for runs still using them
            self.models.retire_made()
        if first or settings.tools != old.tools:
            self.tools.hold(offered)
        self.runner.subagent_budget_usd = settings.subagent_budget_usd
        self.runner.background_approvals = settings.background_approvals
        self.runner.allow_bypass_permissions = settings.allow_bypass_permissions
        self.compaction = settings.compaction(self.state_dir / "offload")
        self._settings = settings

    def run_context(
        self, *, model: str | None = None, max_turns: int | None = None, approval: ApprovalChannel | None = None
    ) -> RunContext:
        """A new run's context: the harness's provider, limits and prices (or ``model`` /
        ``max_turns`` for this run only), the approval channel (``approval``, else the
        harness's) and a fresh usage account billed to the harness's total."""
        provider = self.models.get(model) if model is not None else self.provider
        limits = self.limits if max_turns is None else replace(self.limits, max_turns=max_turns)
        channel = approval or self.approval
        if channel is not None:  # "Approve for this session" keeps its rule on this harness
            channel = remembering(channel, self.permissions)
        return RunContext(provider, limits, channel, self.total.child(), self.compaction, prices=self.prices)

    def _offered(self, names: tuple[str, ...] | None) -> Iterable[Tool]:
        """The tools named (and those given as objects), or the whole pool; a name not in
        the pool is an ``UnknownNameError`` listing those there are."""
        return self.tool_pool if names is None else self.tool_pool.pick([*names, *self._own_tools])

    def _agent_servers(self) -> list[ServerEntry]:
        """The inline MCP servers of the agents' definitions (for ``%mcp`` and trust)."""
        found: list[ServerEntry] = []
        for definition in self.registry.list():
            found += inline_servers(definition, self.workdir, strict=False).entries.values()
        return found

    async def connect_mcp(self) -> list[McpTool]:
        """Start the MCP servers that want a start (the first time: all of them; later, those
        that crashed) and offer their tools; a server that fails to start is left out, its
        error logged and shown by ``%mcp``. Every run does this first. Returns the MCP tools
        now offered."""
        tools = await self.mcp.tools()
        names = {t.name for t in tools}
        for registry in (self.tool_pool, self.tools):
            for old in [t for t in registry if isinstance(t, McpTool) and t.name not in names]:
                registry.remove(old.name)
            for t in tools:
                registry.add(t)
        return tools

    async def compact(self, *, on_event: EventSink | None = None, model: str | None = None) -> Compacted:
        """Compact the conversation now: old tool results become stubs pointing at their
        offload files, the turns before the latest prompt a summary (written by the model,
        or by ``model``; marked as history). The transcript keeps every message. Returns
        what was done; ``on_event`` sees ``CompactionStarted`` and ``Compacted``."""
        return await self.engine.compact(context=self.run_context(model=model), on_event=on_event)

    def checkpoints(self) -> list[Checkpoint]:
        """The workdir's checkpoints, oldest first: one before each call that changed files
        (``number``, the call, ``tool``, ``agent``, ``time``, ``summary`` of what it did), and
        one before each rewind or undo. Empty with checkpoints off."""
        return self.checkpointer.kept() if self.checkpointer is not None else []

    async def rewind(self, checkpoint: int | str | None = None, *, dry_run: bool = False) -> Rewind:
        """Put the whole workdir back as it was before a call: checkpoint number
        ``checkpoint`` (see ``checkpoints()``), the latest when ``None``. Returns what it did
        (``dry_run``: what it would do), with a diff; what it cannot bring back (files over
        ``checkpoint_max_mb``) is listed. It is checkpointed itself first, so it can be
        undone. Kernel state and files outside the workdir are not touched."""
        return await run_blocking(self._checkpointer().rewind, checkpoint, dry_run=dry_run)

    async def undo(self, checkpoint: int | str, *, dry_run: bool = False) -> Rewind:
        """Undo what one call did (the call of checkpoint ``checkpoint``): each path it
        changed goes back where it is still as the call left it; paths changed again since
        are left alone and listed as conflicts."""
        return await run_blocking(self._checkpointer().undo, checkpoint, dry_run=dry_run)

    def _checkpointer(self) -> Checkpoints:
        if self.checkpointer is None:
            raise ConfigError(
                "checkpoints are off for this harness (checkpoints=False): there is nothing to go back to"
            )
        return self.checkpointer

    def lead_context(self, approval: ApprovalChannel | None = None) -> ParentContext:
        """The main agent as a parent, as configured now: what a subagent or teammate
        started from outside a run (``run_subagent``, ``%team``) inherits."""
        return self.engine.parent_context(self.run_context(approval=approval))

    async def run(
        self,
        prompt: str,
        *,
        on_event: EventSink | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        approval: ApprovalChannel | None = None,
    ) -> RunResult:
        """Run the main agent on ``prompt`` in the ongoing conversation. ``model``,
        ``max_turns`` and ``approval`` apply to this run only (and to the background work it
        launches)."""
        context = self.run_context(model=model, max_turns=max_turns, approval=approval)
        await self.connect_mcp()
        return await self.engine.run(prompt, on_event=on_event, context=context)

    async def run_stream(
        self,
        prompt: str,
        *,
        model: str | None = None,
        max_turns: int | None = None,
        approval: ApprovalChannel | None = None,
    ) -> AsyncIterator[Event]:
        """Yield the events of a main-agent run as they happen."""
        context = self.run_context(model=model, max_turns=max_turns, approval=approval)
        await self.connect_mcp()
        async for event in self.engine.run_stream(prompt, context=context):
            yield event

    async def run_subagent(
        self,
        name: str,
        prompt: str,
        *,
        on_event: EventSink | None = None,
        approval: ApprovalChannel | None = None,
    ) -> RunResult:
        """Run subagent ``name`` directly on ``prompt`` in the foreground, bypassing the main
        model (the ``%@name`` path). Its usage shows on its task entry (``fg-N``)."""
        definition = self.registry.get(name)
        await self.connect_mcp()
        parent = self.lead_context(approval)
        _, result = await self.task_tool.run_child(definition, prompt, parent, emit=on_event, wrap=False)
        return result

    def start_subagent(
        self,
        name: str,
        prompt: str,
        *,
        description: str = "",
        on_event: EventSink | None = None,
        approval: ApprovalChannel | None = None,
    ) -> SubagentHandle:
        """Start subagent ``name`` in the background and return a handle at once: ``await``
        it for the ``RunResult``, ``cancel()`` it, or ``send(message)`` to steer it. Must be
        called with an event loop running."""
        definition = self.registry.get(name)
        entry = self.task_tool.launch_background(
            definition, prompt, self.lead_context(approval), description=description, emit=on_event
        )
        return SubagentHandle(self.tracker, entry)

    async def map(self, agent: str, template: str, rows: Any, **options: Unpack[MapOptions]) -> MapResult:
        """Run subagent ``agent`` once per row of ``rows`` (a list, a mapping, a pandas Series
        or DataFrame) on ``template`` filled from the row (``{value}``, ``{index}``, column
        names), at most ``concurrency`` (8) at once, retrying rate limits and server errors
        ``retries`` (3) times with a shared backoff (``subagents/agent_map.py``).
        ``budget_usd`` / ``token_budget`` bound the whole map (else the harness's run
        budgets do); ``model`` and ``approval`` as for ``run``; ``on_progress`` gets a
        ``MapProgress`` after every change. Returns the rows in order (``result.texts``,
        ``result.series()``, ``result.frame()``); interrupted, the rows that finished stay in
        ``self.last_map.result()``. ``start_map`` runs one in the background instead."""
        return await (await self._agent_map(agent, template, rows, options)).run()

    async def start_map(self, agent: str, template: str, rows: Any, **options: Unpack[MapOptions]) -> MapHandle:
        """``map`` in the background: returns a handle at once (``await`` it for the
        ``MapResult``, ``progress()``, ``result()`` so far, ``cancel()``), listed by the
        tracker as ``bg-N`` and cancelled when the harness closes. Awaited itself only to
        start the MCP servers the rows' agent may use."""
        return start_map(await self._agent_map(agent, template, rows, options), self.tracker)

    async def _agent_map(self, agent: str, template: str, rows: Any, options: MapOptions) -> AgentMap:
        """The map ``map`` and ``start_map`` run, as ``last_map`` (its rows and template
        checked: a bad one fails here, before any row runs)."""
        model, approval = options.get("model"), options.get("approval")
        budget_usd, token_budget = options.get("budget_usd"), options.get("token_budget")
        definition = self.registry.get(agent)
        context = self.run_context(model=model, approval=approval)
        if budget_usd is not None or token_budget is not None:
            limits = replace(
                context.limits,
                budget_usd=budget_usd if budget_usd is not None else context.limits.budget_usd,
                token_budget=token_budget if token_budget is not None else context.limits.token_budget,
            )
            context = replace(context, limits=limits)
        await self.connect_mcp()
        mapped = AgentMap(
            self.runner,
            definition,
            template,
            rows,
            self.engine.parent_context(context),
            concurrency=options.get("concurrency", 8),
            retries=options.get("retries", 3),
            on_progress=options.get("on_progress"),
        )
        self.last_map = mapped
        return mapped

    async def aclose(self) -> None:
        """Cancel background tasks, stop the MCP servers, close the providers' connections,
        the checkpoints' watch and the transcript."""
        if self.teams is not None:
            await self.teams.aclose()
        await self.tracker.aclose()
        await self.mcp.aclose()
        await self.models.aclose()
        if self.checkpointer is not None:
            await run_blocking(self.checkpointer.close)
        self.session.close()

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<Harness model={self.model!r} workdir={str(self.workdir)!r}>"



_DEFAULTS = RunSettings()


def _one_of(settings: RunSettings | None, keywords: RunSettings) -> RunSettings:
    """``settings`` if given, else the settings the keywords make; ``ConfigError`` when both
    say something (one of them would be silently ignored)."""
    if settings is None:
        return keywords
    both = [f.name for f in fields(RunSettings) if f.init and getattr(keywords, f.name) != getattr(_DEFAULTS, f.name)]
    if both == ["model"] and settings.model is None:  # Harness(provider, settings=...)
        return settings.changed(model=keywords.model)
    if both:
        raise ConfigError(
            f"Harness got settings=RunSettings(...) and the keywords {', '.join(both)}: pass them "
            f"inside settings= (settings.changed({both[0]}=...)), or only as keywords"
        )
    return settings
