"""``SubagentRunner``: run one subagent on an isolated session.

A subagent is an ordinary ``AgentEngine`` with a fresh session (it sees none of the
parent's history or system prompt: the prompt is the only channel), tools narrowed by
``resolve_tools``, the parent's hooks plus one that denies coordination tools at run time,
the definition's model or the parent's provider, and a system prompt of its own.

Everything a child inherits comes from a ``ParentContext``: the frozen context of the run
that starts it (provider, tools, hooks, limits, workdir, approval channel, depth, usage
account, prices, budget scope, delegation), never the parent engine itself nor the
harness's settings of the moment — so a background child keeps the provider, tools, hooks,
channel and delegation of the run that launched it, however long it waits for a slot or
outlives that run, and bills its usage to that run's account.

Budgets: a child's USD budget is the smallest of its definition's ``max_budget_usd``, the
delegation's ``budget_usd`` and what its parent has left (its budget minus what its
account has spent, subagents included); its token budget is what the parent has left of
its own. Every call of the child is checked against the parent's budgets too, so
children running in parallel cannot together overspend. A parent with nothing left
starts no child (``BudgetSpentError``).

MCP servers: a definition's ``mcp_servers`` names configured servers (started if need be)
or holds inline configurations, whose servers are started for that run only and stopped
after it; their tools join the child's, narrowed by the definition's ``tools`` /
``disallowed_tools`` like every other tool. The inline servers of an agent file under the
workdir are the project's (a cloned repository brings them): like ``.mcp.json``'s, they start
only once the person trusts them (``mcp/trust.py``); until then the subagent runs without
them, and one warning says how to trust them.

Permission mode and memory: a definition's ``permissionMode`` (``effective_mode``:
``bypassPermissions`` only with the delegation's ``allow_bypass_permissions``) and its
memory folder (``memory.py``) go into the child's own copy of the parent's ``PermissionHook``
(``for_subagent``); the rest of the parent's hooks are shared as they are. Its memory's
first lines join its system prompt, and its file tools may reach that folder.

Approvals: a foreground subagent relays to the parent run's approval channel, so the person
sees the request where the parent runs. A background subagent is denied (fail closed)
unless its delegation says ``background_approvals="ask"``, where the request goes to the
launching run's channel and times out to Denied. The person's answer, their reason for a
denial included, comes back unchanged: the child's tool result quotes it, and the task's
result tells the parent (``TaskEntry.denials``, rendered by ``render.py``).

Questions (``ask_person``, ``engine/ask.py``) go the same way: a foreground child asks
through its parent's ask channel (the card names the child), a background child or a
teammate only with ``background_approvals="ask"`` (timing out after ``approval_timeout``),
a map row never (nobody answers a thousand cards). A child with no channel is not offered
the tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetSpentError,
    Event,
    HarnessError,
    RunFinished,
    SubagentUpdate,
    ToolCall,
    ToolCallStarted,
    TurnFinished,
)
from ..core.usage import usd
from ..engine import (
    AgentEngine,
    Answer,
    ApprovalChannel,
    Approved,
    AskChannel,
    Denied,
    DenyCoordinationHook,
    EventSink,
    Hook,
    HookRegistry,
    Injector,
    Limits,
    MemorySession,
    ParentContext,
    PromptBuilder,
    Question,
    RunContext,
    RunResult,
    UsageAccount,
)
from ..engine.hook import denial_line
from ..mcp import McpManager, Servers, parse_servers
from ..permissions.hook import PermissionHook
from ..permissions.mode import PermissionMode
from ..providers.base import Provider
from ..providers.effort import effort_note
from ..tools import Tool
from .definition import SubAgentDefinition
from .memory import Memory, load_memory
from .model import ModelResolver
from .narrowing import effective_mode, memory_only_writes, resolve_tools

log = logging.getLogger("harness_nb.subagents")

BACKGROUND_DENIED = (
    "you run in the background, where nobody can approve a call; do without it, or say in your report what "
    "needs the person's approval"
)
BACKGROUND_NOTE = (
    "You run in the background while the person and the main agent go on with other work: nobody follows "
    "your steps, calls that need an approval {approvals}, and your final message is delivered to the main "
    "agent when you finish."
)
DEFAULT_SUBAGENT_PROMPT = (
    "You are a subagent: finish the task you are given with the tools you have, then reply "
    "with a concise report of what you found or changed (with file paths)."
)


@dataclass(frozen=True, slots=True)
class Child:
    """A subagent ready to run: its engine (session, narrowed tools, hooks, prompt) and the
    context of its runs (provider, limits, approval channel, usage account)."""

    engine: AgentEngine
    context: RunContext


class SubagentRunner:
    """Runs subagent definitions as children of a parent run (a ``ParentContext``).

    ``models`` resolves a definition's model and keeps the providers it makes; the harness
    shares one resolver between its own runs and its subagents. ``mcp`` holds the
    configured MCP servers a definition's ``mcp_servers`` may name. ``approval_timeout``:
    how long a background child's question waits for an answer. ``home`` is where
    user-scope memory lives (default: the home folder). What may change between runs (the
    subagent budget, background approvals, ``bypassPermissions``) is no attribute here: it
    comes with each parent (``ParentContext.delegation``).
    """

    def __init__(
        self,
        models: ModelResolver,
        *,
        max_depth: int = 3,
        approval_timeout: float = 300.0,
        mcp: McpManager | None = None,
        home: Path | None = None,
    ) -> None:
        self.models = models
        self.mcp = mcp
        self.max_depth = max_depth
        self.approval_timeout = approval_timeout
        self.home = home

    def check_depth(self, parent: ParentContext) -> None:
        """Refuse a spawn deeper than ``max_depth`` with a clear error."""
        if parent.depth + 1 > self.max_depth:
            raise HarnessError(
                f"cannot start a subagent at depth {parent.depth + 1}: the limit is max_depth="
                f"{self.max_depth}. Do this part yourself instead of delegating it."
            )

    def build(
        self,
        definition: SubAgentDefinition,
        parent: ParentContext,
        *,
        task_id: str,
        background: bool,
        account: UsageAccount | None = None,
        injectors: Sequence[Injector] = (),
        session: MemorySession | None = None,
        extra_tools: Sequence[Tool] = (),
        agent: str | None = None,
        mcp_tools: Sequence[Tool] = (),
        watched: bool | None = None,
        prompt_note: str = "",
        wrap_provider: Callable[[Provider], Provider] | None = None,
    ) -> Child:
        """The child of ``parent`` for one run of ``definition`` (or, for a teammate, for
        all of its turns). ``account`` is the child's usage account (by default a new one
        billing the parent's); ``agent`` the child's name in events (the definition's).

        ``extra_tools`` are added after narrowing and exempt from the coordination deny hook:
        a teammate's own ``send_message`` is the one coordination tool it is meant to hold.
        ``mcp_tools`` are the tools of the definition's own MCP servers, narrowed by it here.
        ``watched``: whether the person follows the run as it goes (default: it is not in the
        background) — an unwatched child holds no tool that blocks the kernel or writes into
        the notebook unless its definition names it. ``prompt_note`` follows the definition's prompt
        (how this run differs from a foreground one). ``wrap_provider`` wraps the provider
        the child runs on (a typed map row asks every call for its answer's shape).
        """
        self.check_depth(parent)
        watched = not background if watched is None else watched
        tools = parent.tools.subset(resolve_tools(definition, parent.tools, watched=watched))
        for name in resolve_tools(definition, mcp_tools):
            tools.add(next(t for t in mcp_tools if t.name == name))
        for extra in extra_tools:
            tools.add(extra)
        memory = load_memory(definition, workdir=parent.workdir, home=self.home)
        writable = [memory.folder] if memory is not None and memory.writable else []
        hooks = HookRegistry(
            [
                *self.permission_hooks(definition, parent, writable),
                DenyCoordinationHook(exempt=[t.name for t in extra_tools]),
            ]
        )
        if session is None:
            transcript = None
            if parent.transcript is not None:
                transcript = parent.transcript.with_name(f"{parent.session_id}.{task_id}.jsonl")
            session = MemorySession(f"{parent.session_id}.{task_id}", transcript=transcript)
        limits = self.child_limits(definition, parent)
        provider = self.models.provider_for(definition, parent.provider)
        if wrap_provider is not None:
            provider = wrap_provider(provider)
        note = effort_note(provider.model_id, definition.effort)
        if note is not None and "not sent" in note:
            log.info("agent %s: effort %s", definition.name, note)
        own_prompt = _joined(definition.system_prompt or DEFAULT_SUBAGENT_PROMPT, prompt_note)
        engine = AgentEngine(
            provider,
            tools,
            hooks=hooks,
            session=session,
            prompt_builder=PromptBuilder(
                _with_memory(own_prompt, memory, parent.workdir),
                workdir=parent.workdir,
                skills=definition.skills,
            ),
            limits=limits,
            workdir=parent.workdir,
            agent=agent or definition.name,
            depth=parent.depth + 1,
            injectors=injectors,
            roots=writable,
            effort=definition.effort,
        )
        approval = self._approval_for(definition.name, parent, background)
        context = RunContext(
            provider,
            limits,
            approval,
            account or parent.account.child(),
            parent.compaction,
            prices=parent.prices,
            parent_budget=parent.budget,
            tool_slots=parent.tool_slots,
            delegation=parent.delegation,
            ask=self._ask_for(parent, background=background, watched=watched),
        )
        return Child(engine, context)

    def permission_hooks(
        self, definition: SubAgentDefinition, parent: ParentContext, writable: Sequence[Path] = ()
    ) -> list[Hook]:
        """The parent's hooks for a child of ``definition``: each ``PermissionHook`` in the
        child's permission mode, writing its memory folders ``writable``. Without one (an
        engine built bare) a ``plan`` agent still gets one that refuses every change."""
        hooks: Sequence[Hook] = parent.hooks.hooks
        mode: PermissionMode
        mode, note = effective_mode(definition, allow_bypass=parent.delegation.allow_bypass_permissions)
        if note:
            log.warning("agent %s: %s", definition.name, note)
        only = writable if memory_only_writes(definition) else None
        out = [h.for_subagent(mode, writable=writable, writes_only_in=only) if isinstance(h, PermissionHook) else h for h in hooks]
        if mode == "plan" and not any(isinstance(h, PermissionHook) for h in hooks):
            out.append(PermissionHook("never", mode="plan", writable=writable))
        return out

    def child_limits(self, definition: SubAgentDefinition, parent: ParentContext) -> Limits:
        """The limits of a child of ``parent``: the parent's, with the definition's
        ``max_turns`` and the budgets clamped as the module doc says. ``BudgetSpentError``
        when the parent has no budget left."""
        left_usd, left_tokens = parent.remaining_usd(), parent.remaining_tokens()
        spent = None
        if left_usd is not None and left_usd <= 0:
            spent = f"{usd(max(left_usd, 0.0))} left of its budget"
        elif left_tokens is not None and left_tokens <= 0:
            spent = f"{max(left_tokens, 0):,} tokens left of its token budget"
        if spent is not None:
            raise BudgetSpentError(
                f"subagent {definition.name} was not started: {parent.agent} has {spent}. "
                "Finish the work without delegating it."
            )
        caps = [c for c in (definition.max_budget_usd, parent.delegation.budget_usd, left_usd) if c is not None]
        return replace(
            parent.limits,
            max_turns=definition.max_turns or parent.limits.max_turns,
            budget_usd=min(caps) if caps else None,
            token_budget=left_tokens,
        )

    def _approval_for(self, agent: str, parent: ParentContext, background: bool) -> ApprovalChannel | None:
        parent_channel = parent.approval
        if parent_channel is None:
            return None
        if background and parent.delegation.background_approvals != "ask":
            async def deny(call: ToolCall, reason: str, risk: str) -> Approved | Denied:
                return Denied(BACKGROUND_DENIED)

            return deny
        timeout = self.approval_timeout if background else None

        async def relay(call: ToolCall, reason: str, risk: str) -> Approved | Denied:
            try:
                async with asyncio.timeout(timeout):
                    return await parent_channel(call, f"[{agent}] {reason}", risk)
            except TimeoutError:
                return Denied(f"no answer within {timeout:g} s: denied")

        return relay

    def _ask_for(self, parent: ParentContext, *, background: bool, watched: bool) -> AskChannel | None:
        """The ask channel of a child of ``parent`` (see the module doc): its parent's for a
        foreground child the person follows; with ``background_approvals="ask"`` the same,
        timed out after ``approval_timeout``, for a background one; else none."""
        channel = parent.ask
        if channel is None or not (watched or background):  # a map row: unwatched, in the foreground
            return None
        if not background:
            return channel
        if parent.delegation.background_approvals != "ask":
            return None
        timeout = self.approval_timeout

        async def relay(question: Question) -> Answer:
            try:
                async with asyncio.timeout(timeout):
                    return await channel(question)
            except TimeoutError:
                return Answer(f"no answer within {timeout:g} s")

        return relay

    async def run(
        self,
        definition: SubAgentDefinition,
        prompt: str,
        parent: ParentContext,
        *,
        task_id: str,
        background: bool = False,
        account: UsageAccount | None = None,
        emit: EventSink | None = None,
        injectors: Sequence[Injector] = (),
        wrap: bool = True,
        watched: bool | None = None,
        wrap_provider: Callable[[Provider], Provider] | None = None,
        follow_up: Callable[[RunResult], str | None] | None = None,
    ) -> RunResult:
        """Run ``definition`` on ``prompt`` as a child of ``parent``, billing ``account``;
        child events reach ``emit`` wrapped in ``SubagentUpdate`` (unwrapped with
        ``wrap=False``, for a direct ``%@name`` run where the subagent is the whole run);
        ``watched`` and ``wrap_provider`` as for ``build``. ``follow_up`` is asked after
        each run for a prompt to continue the same conversation with (a map row's answer
        that did not validate, with the problem), ``None`` when done; the last run's result
        is returned, its usage that of them all. Exceptions propagate."""
        async with self._mcp_tools(definition, parent.workdir) as mcp_tools:
            child = self.build(
                definition,
                parent,
                task_id=task_id,
                background=background,
                account=account,
                injectors=injectors,
                mcp_tools=mcp_tools,
                watched=watched,
                prompt_note=background_note(parent) if background else "",
                wrap_provider=wrap_provider,
            )
            sink = emit or (lambda _e: None)

            def forward(event: Event) -> None:
                sink(SubagentUpdate(task_id=task_id, event=event, agent=definition.name))

            try:
                result = await child.engine.run(prompt, on_event=forward if wrap else sink, context=child.context)
                while follow_up is not None and (again := follow_up(result)) is not None:
                    result = await child.engine.run(again, on_event=forward if wrap else sink, context=child.context)
                return result
            finally:
                child.engine.session.close()

    @contextlib.asynccontextmanager
    async def _mcp_tools(self, definition: SubAgentDefinition, workdir: Path) -> AsyncIterator[list[Tool]]:
        """The tools of ``definition``'s MCP servers while it runs: the configured servers it
        names, and its inline ones, started now and stopped when it ends. A name that is no
        configured server, or a bad inline configuration, is a ``HarnessError`` naming it."""
        if not definition.mcp_servers:
            yield []
            return
        names = [s for s in definition.mcp_servers if isinstance(s, str)]
        tools: list[Tool] = []
        if names:
            if self.mcp is None:
                raise HarnessError(f"agent {definition.name!r} names MCP servers, but this harness has none")
            for name in names:
                self.mcp.entry(name)  # an unknown name fails here, listing the configured ones
            tools += await self.mcp.tools(names)
        inline = inline_servers(definition, workdir, strict=True)
        if not inline.entries:
            yield tools
            return
        base = self.mcp or McpManager(workdir, files=False)
        scoped = base.scoped(inline)
        try:
            tools += await scoped.tools()
            yield tools
        finally:
            await scoped.aclose()


def background_note(parent: ParentContext) -> str:
    """What a background task's prompt adds: nobody follows it, what needs an approval is
    denied (or waits for the person, with ``background_approvals="ask"``), and its last
    message is all the main agent gets."""
    asks = parent.delegation.background_approvals == "ask"
    approvals = "wait for the person's answer" if asks else "are denied: nobody can approve them"
    return BACKGROUND_NOTE.format(approvals=approvals)


def _joined(prompt: str, note: str) -> str:
    return f"{prompt}\n\n{note}" if note else prompt


def _with_memory(prompt: str, memory: Memory | None, workdir: Path) -> str:
    return prompt if memory is None else f"{prompt}\n\n{memory.prompt_section(workdir.resolve())}"


def inline_servers(definition: SubAgentDefinition, workdir: Path, *, strict: bool) -> Servers:
    """The inline ``mcpServers`` of ``definition`` (with ``strict``, a bad one is a
    ``ConfigError`` naming the agent; else a warning), marked as the project's when its file
    lies under ``workdir`` (the person's own agent folders excepted)."""
    inline: dict[str, Any] = {}
    for item in definition.mcp_servers:
        if isinstance(item, dict):
            inline.update(item)
    if not inline:
        return Servers()
    source = f"agent {definition.name}"
    return parse_servers(inline, source, workdir=workdir, strict=strict, project=from_project(definition, workdir))


def from_project(definition: SubAgentDefinition, workdir: Path) -> bool:
    """Whether ``definition`` was read from a file under ``workdir`` — one a repository can
    bring — rather than built in, made in code or read from ``~/.claude/agents`` or
    ``~/.harness_nb/agents``."""
    source = Path(definition.source)
    if source.suffix != ".md":  # "builtin", or a name given in code
        return False
    real = source.resolve()
    home = Path.home()
    mine = [(home / sub).resolve() for sub in (".claude/agents", ".harness_nb/agents")]
    return real.is_relative_to(workdir.resolve()) and not any(real.is_relative_to(m) for m in mine)


def progress_line(event: Event) -> str | None:
    """A short progress-log line for a child event (``None``: not worth a line)."""
    if isinstance(event, ToolCallStarted):
        return event.call.brief()
    if isinstance(event, ApprovalRequested):
        return f"waiting for approval: {event.call.brief()}"
    if isinstance(event, ApprovalDecided) and event.by_person and not event.approved:
        return denial_line(event.call, event.feedback)
    if isinstance(event, TurnFinished):
        return f"turn {event.turn} · {event.usage.tokens_label()}"
    if isinstance(event, RunFinished):
        return f"finished ({event.stop_reason})"
    return None
