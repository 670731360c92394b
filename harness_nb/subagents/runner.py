"""``SubagentRunner``: run one subagent on an isolated session.

A subagent is an ordinary ``AgentEngine`` with a fresh session (it sees none of the
parent's history or system prompt: the prompt is the only channel), tools narrowed by
``resolve_tools``, the parent's hooks plus one that denies coordination tools at run time,
the definition's model or the parent's provider, and a system prompt of its own.

Approvals: a foreground subagent relays to the parent's approval channel, so the person
sees the request where the parent runs. A background subagent is denied (fail closed)
unless ``background_approvals="ask"``, where the request goes to the channel that was
current when the task was launched and times out to Denied.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Literal

from ..core import (
    ApprovalRequested,
    Event,
    HarnessError,
    RunFinished,
    SubagentUpdate,
    ToolCall,
    ToolCallStarted,
    TurnFinished,
)
from ..engine import (
    AgentEngine,
    ApprovalChannel,
    Approved,
    Denied,
    DenyToolsHook,
    EventSink,
    Injector,
    Limits,
    MemorySession,
    PromptBuilder,
    RunResult,
)
from ..providers.base import Provider
from ..tools import Tool
from .definition import SubAgentDefinition
from .permission import COORDINATION_TOOLS, resolve_tools

log = logging.getLogger("harness_nb.subagents")

BackgroundApprovals = Literal["deny", "ask"]
BACKGROUND_DENIED = "background subagent: no approval channel, denied"
DEFAULT_SUBAGENT_PROMPT = (
    "You are a subagent: finish the task you are given with the tools you have, then reply "
    "with a concise report of what you found or changed (with file paths)."
)
# Claude Code agent files name models by family; they mean "an Anthropic model".
MODEL_ALIASES = {
    "sonnet": "claude-sonnet-4-5",
    "opus": "claude-opus-4-1",
    "haiku": "claude-haiku-4-5",
}


class SubagentRunner:
    """Runs subagent definitions as children of a parent engine.

    ``provider_factory`` turns a ``provider/model`` string into a provider (for definitions
    that name their own model); providers it makes are kept and reused.
    """

    def __init__(
        self,
        *,
        provider_factory: Callable[[str], Provider] | None = None,
        max_depth: int = 3,
        background_approvals: BackgroundApprovals = "deny",
        approval_timeout: float = 300.0,
    ) -> None:
        self.provider_factory = provider_factory
        self.max_depth = max_depth
        self.background_approvals = background_approvals
        self.approval_timeout = approval_timeout
        self._providers: dict[str, Provider] = {}

    def check_depth(self, parent: AgentEngine) -> None:
        """Refuse a spawn deeper than ``max_depth`` with a clear error."""
        if parent.depth + 1 > self.max_depth:
            raise HarnessError(
                f"cannot start a subagent at depth {parent.depth + 1}: the limit is max_depth="
                f"{self.max_depth}. Do this part yourself instead of delegating it."
            )

    def provider_for(self, definition: SubAgentDefinition, parent: AgentEngine) -> Provider:
        """The definition's model when it names one, else the parent's provider."""
        model = (definition.model or "").strip()
        if not model or model == "inherit":
            return parent.provider
        if "/" not in model:
            alias = MODEL_ALIASES.get(model.lower())
            if alias and parent.provider.name == "anthropic":
                model = f"anthropic/{alias}"
            else:
                log.info("agent %s: model %r is not provider/model; using the parent's", definition.name, model)
                return parent.provider
        if model == parent.provider.model_id:
            return parent.provider
        if model not in self._providers:
            if self.provider_factory is None:
                raise HarnessError(f"agent {definition.name!r} asks for model {model!r} but no provider factory is set")
            self._providers[model] = self.provider_factory(model)
        return self._providers[model]

    def build(
        self,
        definition: SubAgentDefinition,
        parent: AgentEngine,
        *,
        task_id: str,
        background: bool,
        injectors: Sequence[Injector] = (),
        session: MemorySession | None = None,
        extra_tools: Sequence[Tool] = (),
        relay_to: ApprovalChannel | None = None,
    ) -> AgentEngine:
        """The child engine for one run of ``definition`` under ``parent``.

        ``relay_to`` is the channel the child's approval requests go to, when it is not the
        parent's channel of the moment (a background task keeps the one current at launch).

        ``extra_tools`` are added after narrowing and exempt from the coordination deny hook:
        a teammate's own ``send_message`` is the one coordination tool it is meant to hold.
        """
        self.check_depth(parent)
        names = resolve_tools(definition, parent.tools.names())
        denied = COORDINATION_TOOLS - {t.name for t in extra_tools}
        hooks = parent.hooks.with_hooks(
            DenyToolsHook(denied, "subagents cannot delegate or coordinate; do the work yourself")
        )
        tools = parent.tools.subset(names)
        for extra in extra_tools:
            tools.add(extra)
        if session is None:
            transcript = None
            if parent.session.transcript is not None:
                transcript = parent.session.transcript.with_name(f"{parent.session.id}.{task_id}.jsonl")
            session = MemorySession(f"{parent.session.id}.{task_id}", transcript=transcript)
        limits = parent.limits
        if definition.max_turns:
            limits = Limits(
                max_turns=definition.max_turns,
                token_budget=limits.token_budget,
                wall_time=limits.wall_time,
                tool_timeout=limits.tool_timeout,
            )
        return AgentEngine(
            self.provider_for(definition, parent),
            tools,
            hooks=hooks,
            session=session,
            prompt_builder=PromptBuilder(
                definition.system_prompt or DEFAULT_SUBAGENT_PROMPT,
                workdir=parent.workdir,
                skills=definition.skills,
            ),
            limits=limits,
            approval=self._approval_for(definition.name, relay_to or parent.approval, background),
            workdir=parent.workdir,
            agent=definition.name,
            depth=parent.depth + 1,
            injectors=injectors,
            services=parent.services,
        )

    def _approval_for(
        self, agent: str, parent_channel: ApprovalChannel | None, background: bool
    ) -> ApprovalChannel | None:
        if parent_channel is None:
            return None
        if background and self.background_approvals != "ask":
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

    async def run(
        self,
        definition: SubAgentDefinition,
        prompt: str,
        parent: AgentEngine,
        *,
        task_id: str,
        background: bool = False,
        emit: EventSink | None = None,
        injectors: Sequence[Injector] = (),
        wrap: bool = True,
        relay_to: ApprovalChannel | None = None,
    ) -> RunResult:
        """Run ``definition`` on ``prompt`` as a child of ``parent``; child events reach
        ``emit`` wrapped in ``SubagentUpdate`` (unwrapped with ``wrap=False``, for a direct
        ``%@name`` run where the subagent is the whole run). Exceptions propagate."""
        child = self.build(
            definition, parent, task_id=task_id, background=background, injectors=injectors, relay_to=relay_to
        )
        sink = emit or (lambda _e: None)

        def forward(event: Event) -> None:
            sink(SubagentUpdate(task_id=task_id, event=event, agent=definition.name))

        try:
            return await child.run(prompt, on_event=forward if wrap else sink)
        finally:
            child.session.close()

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()


def progress_line(event: Event) -> str | None:
    """A short progress-log line for a child event (``None``: not worth a line)."""
    if isinstance(event, ToolCallStarted):
        return event.call.brief()
    if isinstance(event, ApprovalRequested):
        return f"waiting for approval: {event.call.brief()}"
    if isinstance(event, TurnFinished):
        return f"turn {event.turn} · {event.usage.total_tokens:,} tokens"
    if isinstance(event, RunFinished):
        return f"finished ({event.stop_reason})"
    return None
