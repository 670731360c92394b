"""``AgentEngine``: the ReAct loop.

One turn: put waiting injections (finished background tasks, mailbox messages) into the
conversation, call the model (streaming text out as events), run the tool calls of its
answer concurrently, append the results, repeat until the model answers without tool
calls or a limit stops the run. Events go to a sink callback; ``run_stream`` turns that
into an async iterator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from ..core import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    Event,
    HarnessError,
    LimitExceeded,
    MessagesInjected,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolResultMessage,
    TurnFinished,
    Usage,
    UserMessage,
    new_id,
)
from ..providers.base import ModelRequest, ModelResponse, Provider, TextChunk
from ..tools import ToolContext, ToolOutcome, ToolRegistry, invoke, own_timeout
from .hook import NO_CHANNEL_FEEDBACK, ApprovalChannel, Approved, Ask, Deny, HookRegistry
from .limits import Limits, RunResult
from .prompt import PromptBuilder
from .session import MemorySession

log = logging.getLogger("harness_nb.engine")

EventSink = Callable[[Event], Any]
Injector = Callable[[], Sequence[str]]

TOOL_TIMEOUT_MARGIN = 5.0
INTERRUPTED_RESULT = "error: the run was interrupted before this tool call finished"


class AgentEngine:
    """A ReAct loop over one provider, one tool registry and one session.

    ``injectors`` are called before every LLM call; each returns texts (background results,
    steering or mailbox messages) that join the conversation as a user message. ``depth``
    is 0 for the main agent and grows by one for each level of subagent.
    """

    def __init__(
        self,
        provider: Provider,
        tools: ToolRegistry,
        *,
        hooks: HookRegistry | None = None,
        session: MemorySession | None = None,
        prompt_builder: PromptBuilder | None = None,
        limits: Limits | None = None,
        approval: ApprovalChannel | None = None,
        workdir: Path | None = None,
        agent: str = "main",
        depth: int = 0,
        injectors: Sequence[Injector] = (),
        services: dict[str, Any] | None = None,
    ) -> None:
        self.provider = provider
        self.tools = tools
        self.hooks = hooks if hooks is not None else HookRegistry()
        self.session = session if session is not None else MemorySession()
        self.workdir = (workdir or Path.cwd()).resolve()
        self.prompt_builder = prompt_builder or PromptBuilder(workdir=self.workdir)
        self.limits = limits or Limits()
        self.approval = approval
        self.agent = agent
        self.depth = depth
        self.injectors = list(injectors)
        self.services = services or {}
        self._usage: Usage | None = None
        self._lock = asyncio.Lock()

    @property
    def running(self) -> bool:
        return self._lock.locked()

    def add_child_usage(self, usage: Usage) -> None:
        """Roll a subagent's usage into the current run's usage."""
        if self._usage is not None:
            self._usage.add(usage)

    async def run(self, prompt: str, *, on_event: EventSink | None = None) -> RunResult:
        """Run until the model is done or a limit is hit. Raises ``ProviderError`` when the
        model cannot be reached, ``CancelledError`` when interrupted (after emitting
        ``RunFailed(interrupted=True)``)."""
        if self._lock.locked():
            raise HarnessError(
                f"agent {self.agent!r} is already running in this conversation; wait for it, "
                "or start a new conversation"
            )
        async with self._lock:
            return await self._run(prompt, _safe_sink(on_event))

    async def run_stream(self, prompt: str) -> AsyncIterator[Event]:
        """Yield the run's events as they happen; the last is ``RunFinished`` or ``RunFailed``
        (after which a failure is re-raised)."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        task = asyncio.create_task(self.run(prompt, on_event=queue.put_nowait), name=f"run:{self.agent}")
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            task.result()
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _run(self, prompt: str, emit: EventSink) -> RunResult:
        run_id = new_id("run")
        usage = self._usage = Usage()
        start = time.perf_counter()
        first_message = len(self.session.messages)
        final, stop = "", "end_turn"
        emit(RunStarted(run_id=run_id, model=self.provider.model_id, prompt=prompt, agent=self.agent))
        self.session.record("run_started", run_id=run_id, agent=self.agent, model=self.provider.model_id)
        self.session.append(UserMessage(content=prompt))
        try:
            async with asyncio.timeout(self.limits.wall_time):
                while True:
                    if usage.turns >= self.limits.max_turns:
                        raise LimitExceeded("max_turns", f"reached max_turns ({self.limits.max_turns})")
                    self._inject(emit)
                    response = await self._call_model(emit)
                    usage.add(response.usage)
                    usage.turns += 1
                    message = response.message
                    self.session.append(message)
                    emit(TurnFinished(turn=usage.turns, usage=usage.model_copy(), agent=self.agent))
                    if message.content:
                        final = message.content
                    if not message.tool_calls:
                        stop = response.stop_reason
                        break
                    usage.tool_calls += len(message.tool_calls)
                    await self._run_tools(message.tool_calls, response.stop_reason, emit)
                    budget = self.limits.token_budget
                    if budget is not None and usage.total_tokens >= budget:
                        raise LimitExceeded("token_budget", f"used {usage.total_tokens:,} of the {budget:,}-token budget")
        except LimitExceeded as exc:
            stop = exc.limit
            final = f"{final}\n\n[stopped: {exc}]".strip()
        except TimeoutError:
            stop = "wall_time"
            final = f"{final}\n\n[stopped: reached the wall-time limit ({self.limits.wall_time} s)]".strip()
        except BaseException as exc:
            usage.wall_time = time.perf_counter() - start
            interrupted = isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
            reason = "interrupted" if interrupted else f"{type(exc).__name__}: {exc}"
            self.session.record("run_failed", run_id=run_id, error=reason)
            emit(RunFailed(error=reason, interrupted=interrupted, usage=usage.model_copy(), agent=self.agent))
            raise
        finally:
            self._usage = None
        usage.wall_time = time.perf_counter() - start
        priced = usage.priced(self.provider.model)
        if priced.cost is not None and usage.cost is None:
            usage = priced
        self.session.record_usage(run_id, usage, stop)
        emit(RunFinished(final_text=final, stop_reason=stop, usage=usage.model_copy(), agent=self.agent))
        return RunResult(
            final_text=final,
            usage=usage,
            stop_reason=stop,
            turns=usage.turns,
            tool_calls=usage.tool_calls,
            run_id=run_id,
            session_id=self.session.id,
            model=self.provider.model_id,
            agent=self.agent,
            messages=self.session.messages[first_message:],
        )

    def _inject(self, emit: EventSink) -> None:
        texts = [t for source in self.injectors for t in source()]
        if texts:
            self.session.append(UserMessage(content="\n\n".join(texts)))
            emit(MessagesInjected(texts=tuple(texts), agent=self.agent))

    async def _call_model(self, emit: EventSink) -> ModelResponse:
        request = ModelRequest(
            system=self.prompt_builder.build(),
            messages=self.session.messages,
            tools=self.tools.specs(),
            agent=self.agent,
        )
        if not self.provider.streaming:
            response = await self.provider.complete(request)
            if response.message.content:
                emit(TextDelta(text=response.message.content, agent=self.agent))
            return response
        result: ModelResponse | None = None
        # aclosing: on an interrupt the stream (and its HTTP response) closes now, not when
        # the garbage collector gets to the generator
        async with contextlib.aclosing(self.provider.stream(request)) as stream:
            async for item in stream:
                if isinstance(item, TextChunk):
                    emit(TextDelta(text=item.text, agent=self.agent))
                else:
                    result = item
        if result is None:
            raise HarnessError(f"{self.provider!r} ended its stream without an answer")
        return result

    async def _run_tools(self, calls: Sequence[ToolCall], stop_reason: str, emit: EventSink) -> None:
        results: dict[str, ToolResultMessage] = {}
        try:
            if len(calls) == 1:
                results[calls[0].id] = await self._run_tool(calls[0], stop_reason, emit)
            else:
                async with asyncio.TaskGroup() as group:
                    tasks = [
                        group.create_task(self._run_tool(c, stop_reason, emit), name=f"tool:{c.name}:{c.id}")
                        for c in calls
                    ]
                for c, task in zip(calls, tasks, strict=True):
                    results[c.id] = task.result()
        finally:
            # Every tool call needs a result, or the next model call is rejected: a call cut
            # short by an interrupt or a limit gets an error result instead of vanishing.
            for c in calls:
                self.session.append(
                    results.get(c.id)
                    or ToolResultMessage(tool_call_id=c.id, name=c.name, content=INTERRUPTED_RESULT, is_error=True)
                )

    async def _run_tool(self, call: ToolCall, stop_reason: str, emit: EventSink) -> ToolResultMessage:
        emit(ToolCallStarted(call=call, agent=self.agent))
        ctx = ToolContext(workdir=self.workdir, call=call, agent=self.agent, emit=emit, engine=self)
        outcome = await self._outcome(call, stop_reason, ctx, emit)
        outcome = await self.hooks.after_tool(call, outcome, ctx)
        emit(
            ToolCallFinished(
                call=call, result=outcome.content, is_error=outcome.is_error, duration=outcome.duration, agent=self.agent
            )
        )
        return ToolResultMessage(tool_call_id=call.id, name=call.name, content=outcome.content, is_error=outcome.is_error)

    async def _outcome(self, call: ToolCall, stop_reason: str, ctx: ToolContext, emit: EventSink) -> ToolOutcome:
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(self.tools.names()) or "(none)"
            return ToolOutcome(f"error: unknown tool {call.name!r}; available tools: {names}", True)
        if stop_reason == "max_tokens":
            try:
                call.parsed_arguments()
            except ValueError:
                return ToolOutcome(
                    f"error: your answer hit max_tokens in the middle of this {call.name} call, so its "
                    "arguments are incomplete JSON and it was not run. Send the call again with "
                    "shorter arguments (for a large file, write it in several parts).",
                    True,
                )
        decision = await self.hooks.before_tool(call, ctx)
        if isinstance(decision, Deny):
            return ToolOutcome(f"error: denied: {decision.reason}", True)
        if isinstance(decision, Ask):
            emit(ApprovalRequested(call=call, reason=decision.reason, risk=decision.risk, agent=self.agent))
            if self.approval is None:
                answer: Any = None
            else:
                answer = await self.approval(call, decision.reason, decision.risk)
            approved = isinstance(answer, Approved)
            feedback = answer.feedback if answer is not None else NO_CHANNEL_FEEDBACK
            emit(ApprovalDecided(call=call, approved=approved, feedback=feedback, agent=self.agent))
            if not approved:
                why = f": {feedback}" if feedback else ""
                return ToolOutcome(f"error: the call was denied{why}. Do not retry it unchanged.", True)
        if tool.long_running:
            return await invoke(tool, call, ctx)
        deadline = self.limits.tool_timeout
        requested = own_timeout(tool, call)
        if requested is not None:  # the tool enforces its own limit and reports partial output
            deadline = max(deadline, requested + TOOL_TIMEOUT_MARGIN)
        try:
            async with asyncio.timeout(deadline):
                return await invoke(tool, call, ctx)
        except TimeoutError:
            return ToolOutcome(f"error: {call.name} timed out after {deadline:g} s", True)


def _safe_sink(sink: EventSink | None) -> EventSink:
    if sink is None:
        return lambda _event: None

    def emit(event: Event) -> None:
        try:
            sink(event)
        except Exception:  # a broken UI must not break the run
            log.exception("event sink failed on %s", type(event).__name__)

    return emit
