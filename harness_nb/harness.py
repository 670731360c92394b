"""``Harness``: the plain-Python entry point (no IPython needed).

    from harness_nb import Harness
    h = Harness(model="openai/gpt-4o-mini", workdir=".")
    result = await h.run("Summarise data.csv")
    print(result.final_text, result.usage)

A harness owns one main conversation, its tools and hooks, and the provider; the registry
of subagents (``registry``), the tracker of background work (``tracker``) and the teams
(``teams``). The model and keys come from the arguments, else from the environment
(``HARNESS_NB_MODEL``, ``OPENAI_API_KEY``, ...).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from .core import ConfigError, Event
from .engine import (
    MAIN_SYSTEM_PROMPT,
    AgentEngine,
    ApprovalChannel,
    AskAllHook,
    DangerHook,
    EventSink,
    Hook,
    Injector,
    HookRegistry,
    Limits,
    MemorySession,
    OffloadHook,
    PromptBuilder,
    RedactSecretsHook,
    RunResult,
)
from .providers.base import Provider
from .subagents import (
    AgentRegistry,
    BackgroundApprovals,
    MessageRouter,
    SubagentHandle,
    SubagentRunner,
    TaskTool,
    TaskTracker,
    TrackerRoute,
    coordination_tools,
)
from .team import TeamManager
from .tools import Tool, ToolRegistry

ApprovalPolicy = Literal["dangerous", "always", "never"]

NO_MODEL_MESSAGE = (
    "no model configured. Pass Harness(model='openai/gpt-4o-mini') (or 'anthropic/…', "
    "'ollama/…', 'openai-compatible/…'), set the HARNESS_NB_MODEL environment variable, or in "
    "a notebook run  %config HarnessNB.model = 'openai/gpt-4o-mini'. To work offline, use "
    "'scripted/<script.yaml>' or 'replay/<cassette.jsonl>'."
)


class Harness:
    """One main agent conversation with its tools, hooks and provider.

    ``approval_policy``: ``"dangerous"`` asks before risky shell commands and writes (and
    always before ``run_python``), ``"always"`` asks before every tool that changes
    anything, ``"never"`` asks nothing. Asking goes to ``approval`` (an async callable
    ``(call, reason, risk) -> Approved | Denied``); without one, asked calls are denied.
    """

    def __init__(
        self,
        model: str | Provider | None = None,
        *,
        workdir: str | Path = ".",
        api_key: str | None = None,
        base_url: str | None = None,
        system_prompt: str = MAIN_SYSTEM_PROMPT,
        tools: Iterable[Tool] | None = None,
        extra_tools: Iterable[Tool] = (),
        hooks: Iterable[Hook] = (),
        approval: ApprovalChannel | None = None,
        approval_policy: ApprovalPolicy = "dangerous",
        max_turns: int = 50,
        token_budget: int | None = None,
        wall_time: float | None = None,
        tool_timeout: float = 60.0,
        offload_chars: int = 20_000,
        record_to: str | Path | None = None,
        transcripts: bool = True,
        skills: Iterable[str] = (),
        agent_dirs: Iterable[str | Path] = (),
        include_user_agents: bool = True,
        background_approvals: BackgroundApprovals = "deny",
        max_concurrency: int = 4,
        max_depth: int = 3,
        teams: bool = True,
    ) -> None:
        self.workdir = Path(workdir).expanduser().resolve()
        if not self.workdir.is_dir():
            raise ConfigError(f"workdir {self.workdir} is not a folder; create it or pass another")
        self._model = model if model is not None else os.environ.get("HARNESS_NB_MODEL") or None
        self._api_key = api_key
        self._base_url = base_url
        self._record_to = record_to
        self._provider: Provider | None = model if isinstance(model, Provider) else None
        self._retired: list[Provider] = []
        self.system_prompt = system_prompt
        self.skills = list(skills)
        self.approval = approval
        self.approval_policy = approval_policy
        self.limits = Limits(
            max_turns=max_turns, token_budget=token_budget, wall_time=wall_time, tool_timeout=tool_timeout
        )
        self.transcripts = transcripts
        self.registry = AgentRegistry(
            self.workdir,
            extra_dirs=[Path(d).expanduser() for d in agent_dirs],
            include_user=include_user_agents,
        )
        self.tracker = TaskTracker()
        self.runner = SubagentRunner(
            provider_factory=self._make_provider,
            max_depth=max_depth,
            background_approvals=background_approvals,
        )
        self.router = MessageRouter([TrackerRoute(self.tracker)])
        self.task_tool = TaskTool(self.registry, self.runner, self.tracker, max_concurrency=max_concurrency)
        self.teams: TeamManager | None = None
        if teams:  # §6: mailboxes before task ids in send_message; `task(team_name=…)` spawns
            self.teams = TeamManager(
                self.state_dir / "teams",
                agents=self.registry,
                runner=self.runner,
                tracker=self.tracker,
                parent=self._lead_engine,
            )
            self.router.routes.insert(0, self.teams.route)
            self.task_tool.team_spawner = self.teams.spawn_from_task
        if tools is None:
            from .tools.builtin import builtin_tools

            tools = builtin_tools()
        self.tools = ToolRegistry(
            [
                *tools,
                *extra_tools,
                self.task_tool,
                *coordination_tools(self.tracker, self.router),
                *(self.teams.tools() if self.teams else ()),
            ]
        )
        self.injectors: list[Injector] = [self.tracker.completion_texts]
        if self.teams is not None:
            self.injectors.append(self.teams.injector)
        self.hooks = HookRegistry(self._policy_hooks(approval_policy))
        # redact before offloading, so an offloaded file never holds a key either
        self.hooks.add(RedactSecretsHook([api_key] if api_key else []))
        self.hooks.add(OffloadHook(self.state_dir / "offload", limit=offload_chars))
        for h in hooks:
            self.hooks.add(h)
        self.session = self._new_session()
        self._engine: AgentEngine | None = None

    @property
    def state_dir(self) -> Path:
        """``<workdir>/.harness_nb``: sessions, offloaded outputs, teams, cassettes."""
        return self.workdir / ".harness_nb"

    @property
    def model(self) -> str | None:
        """The ``provider/model`` string in use (``None`` when nothing is configured)."""
        if self._provider is not None:
            return self._provider.model_id
        return self._model if isinstance(self._model, str) else None

    @property
    def provider(self) -> Provider:
        """The main agent's provider, created on first use. Raises ``ConfigError`` when no model
        is configured (a clear message saying how to configure one, never a fake answer)."""
        if self._provider is None:
            if not self._model:
                raise ConfigError(NO_MODEL_MESSAGE)
            self._provider = self._make_provider(str(self._model), main=True)
        return self._provider

    def _make_provider(self, model: str, *, main: bool = False) -> Provider:
        from .providers.factory import create_provider

        return create_provider(
            model,
            api_key=self._api_key if main else None,
            base_url=self._base_url if main else None,
            record_to=self._resolve_record_path(),
            workdir=self.workdir,
        )

    def _resolve_record_path(self) -> Path | None:
        if self._record_to is None:
            return None
        p = Path(self._record_to)
        return p if p.is_absolute() else self.workdir / p

    @staticmethod
    def _policy_hooks(policy: ApprovalPolicy) -> list[Hook]:
        if policy == "dangerous":
            return [DangerHook()]
        if policy == "always":
            return [AskAllHook()]
        if policy == "never":
            return []
        raise ConfigError(f"approval_policy must be 'dangerous', 'always' or 'never', not {policy!r}")

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

    @property
    def engine(self) -> AgentEngine:
        """The main agent's engine (built on first use, rebuilt after ``new_conversation``)."""
        if self._engine is None:
            self._engine = AgentEngine(
                self.provider,
                self.tools,
                hooks=self.hooks,
                session=self.session,
                prompt_builder=PromptBuilder(self.system_prompt, workdir=self.workdir, skills=self.skills),
                limits=self.limits,
                approval=self.approval,
                workdir=self.workdir,
                agent="main",
                injectors=self.injectors,
                services={"harness": self},
            )
        return self._engine

    def configure(
        self,
        *,
        model: str | None = None,
        approval_policy: ApprovalPolicy | None = None,
        max_turns: int | None = None,
        token_budget: int | None = None,
        background_approvals: BackgroundApprovals | None = None,
    ) -> None:
        """Change settings between runs; the conversation is kept."""
        # Compare with the configured string, not the provider's model_id: they differ for
        # scripted/ and replay/ paths, and a needless switch restarts the provider.
        if model is not None and model != self._model:
            if self._provider is not None:
                # subagents or teammates may still be using it: close it with the harness
                self._retired.append(self._provider)
            self._model, self._provider = model, None
            if self._engine is not None:
                self._engine.provider = self.provider
        if approval_policy is not None and approval_policy != self.approval_policy:
            others = [h for h in self.hooks.hooks if not isinstance(h, DangerHook | AskAllHook)]
            self.hooks.hooks = [*self._policy_hooks(approval_policy), *others]
            self.approval_policy = approval_policy
        if max_turns is not None or token_budget is not None:
            self.limits = replace(
                self.limits,
                max_turns=max_turns if max_turns is not None else self.limits.max_turns,
                token_budget=(token_budget or None) if token_budget is not None else self.limits.token_budget,
            )
            if self._engine is not None:
                self._engine.limits = self.limits
        if background_approvals is not None:
            self.runner.background_approvals = background_approvals

    async def run(
        self,
        prompt: str,
        *,
        on_event: EventSink | None = None,
        model: str | None = None,
        max_turns: int | None = None,
    ) -> RunResult:
        """Run the main agent on ``prompt`` in the ongoing conversation. ``model`` and
        ``max_turns`` apply to this run only."""
        engine = self.engine
        engine.approval = self.approval
        saved = engine.provider, engine.limits
        if model is not None:
            engine.provider = self._make_provider(model)
        if max_turns is not None:
            engine.limits = replace(engine.limits, max_turns=max_turns)
        try:
            return await engine.run(prompt, on_event=on_event)
        finally:
            if engine.provider is not saved[0]:
                await engine.provider.aclose()
            engine.provider, engine.limits = saved

    async def run_stream(self, prompt: str) -> AsyncIterator[Event]:
        """Yield the events of a main-agent run as they happen."""
        engine = self.engine
        engine.approval = self.approval
        async for event in engine.run_stream(prompt):
            yield event

    def _lead_engine(self) -> AgentEngine:
        """The main engine with the current approval channel: the parent of teammates."""
        engine = self.engine
        engine.approval = self.approval
        return engine

    async def run_subagent(self, name: str, prompt: str, *, on_event: EventSink | None = None) -> RunResult:
        """Run subagent ``name`` directly on ``prompt`` in the foreground, bypassing the main
        model (the ``%@name`` path). Its usage shows on its task entry (``fg-N``)."""
        definition = self.registry.get(name)
        engine = self.engine
        engine.approval = self.approval
        _, result = await self.task_tool.run_child(definition, prompt, engine, emit=on_event, wrap=False)
        return result

    def start_subagent(
        self, name: str, prompt: str, *, description: str = "", on_event: EventSink | None = None
    ) -> SubagentHandle:
        """Start subagent ``name`` in the background and return a handle at once: ``await``
        it for the ``RunResult``, ``cancel()`` it, or ``send(message)`` to steer it. Must be
        called with an event loop running."""
        definition = self.registry.get(name)
        engine = self.engine
        engine.approval = self.approval
        entry = self.task_tool.launch_background(
            definition, prompt, engine, description=description, emit=on_event
        )
        return SubagentHandle(self.tracker, entry)

    async def aclose(self) -> None:
        """Cancel background tasks, close the providers' connections and the transcript."""
        if self.teams is not None:
            await self.teams.aclose()
        await self.tracker.aclose()
        await self.runner.aclose()
        self.session.close()
        for provider in (*self._retired, self._provider):
            if provider is not None:
                await provider.aclose()
        self._retired.clear()

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<Harness model={self.model!r} workdir={str(self.workdir)!r}>"
