"""``AgentEngine``: the ReAct loop.

One turn: put waiting injections (finished background tasks, mailbox messages) into the
conversation, call the model (streaming text out as events), run the tool calls of its
answer concurrently, append the results, repeat until the model answers without tool
calls, a limit stops the run, or the run goes nowhere (``progress.py``). Events go to a
sink callback (a run given none builds none of its per-call events); ``run_stream`` turns
that into an async iterator. Before each call the conversation's ``ContextKeeper`` keeps
the request within the model's context window (``compaction/keeper.py``).

The engine holds what a conversation keeps between runs (its session, prompt, context
keeper and prompt tally); what belongs to one run — provider, limits, approval and ask
channels, usage account, compaction policy, prices, the tools it offers and the hooks it
runs — is a ``RunContext`` passed to ``run`` (see ``context.py``), so changing a harness's
settings mid-run changes nothing for the run under way. A run without an ask channel holds
``ask_person`` without offering it (``ask.offered_tools``). Budgets are checked before each
model call (``budget.py``). The constructor's ``provider``, ``tools``, ``hooks``, ``limits``
and ``approval`` are only the defaults of a run given no context (or a context without
tools or hooks); nothing re-assigns them between runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core import (
    ApprovalRequested,
    AssistantMessage,
    Compacted,
    Event,
    HarnessError,
    LimitExceededError,
    MessagesInjected,
    ModelCallFinished,
    ProviderError,
    RunFailed,
    RunFinished,
    RunStarted,
    ServerAdapted,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolResultMessage,
    ToolSpec,
    TurnFinished,
    Usage,
    UserMessage,
    new_id,
)
from ..core.event import unheard
from ..core.media import bound_images
from ..providers.base import ModelRequest, ModelResponse, Provider, TextChunk
from ..tools import CallOrder, ToolContext, ToolOutcome, ToolRegistry, invoke, own_timeout
from .ask import offered_tools
from .budget import BudgetScope, PromptTally
from .compaction.keeper import ContextKeeper, FitContext
from .context import ParentContext, RunContext, UsageAccount
from .hook import ALLOW, ApprovalChannel, Ask, Deny, HookRegistry, ask_channel
from .limits import Limits, Place, RunResult, ToolTimer
from .progress import ProgressGuard
from .prompt import PromptBuilder
from .session import MemorySession

log = logging.getLogger("harness_nb.engine")

EventSink = Callable[[Event], Any]
Injector = Callable[[], Sequence[str]]

TOOL_TIMEOUT_MARGIN = 5.0
_NO_ORDER = CallOrder()  # the order of a turn with no call of an in_call_order tool: nothing waits on it
INTERRUPTED_RESULT = "error: the run was interrupted before this tool call finished"
EMPTY_ANSWER = "the model returned an empty answer (no text and no tool calls) twice"
EMPTY_AT_MAX_TOKENS = "the answer hit max_tokens before any text or tool call (raise max_tokens)"


class _Stop(Exception):
    """Ends a run early but normally: ``stop_reason`` and a note for the final text."""

    def __init__(self, stop_reason: str, note: str) -> None:
        super().__init__(note)
        self.stop_reason = stop_reason


class AgentEngine:
    """A ReAct loop over one tool registry and one session.

    ``injectors`` are called before every LLM call; each returns texts (background results,
    steering or mailbox messages) that join the conversation as a user message. ``depth``
    is 0 for the main agent and grows by one for each level of subagent. ``provider``,
    ``tools``, ``hooks``, ``limits`` and ``approval`` are the defaults for a run that is
    given no ``RunContext`` (``tools`` and ``hooks`` also for one whose context has none).
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
        roots: Sequence[Path] = (),
        effort: str | None = None,
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
        self.roots = tuple(roots)  # folders outside the workdir its file tools may use
        self.effort = effort  # its reasoning effort, on every request (a subagent's ``effort``)
        self.tally = PromptTally()
        self._lock = asyncio.Lock()
        self._timer = ToolTimer()  # the tool calls' timeouts
        self._system: tuple[str, int, str] | None = None  # (built, secrets version, scrubbed)
        self.keeper = ContextKeeper(self.session, workdir=self.workdir, agent=agent)

    @property
    def running(self) -> bool:
        return self._lock.locked()

    def default_context(self) -> RunContext:
        """A run context from the constructor's defaults, with a fresh usage account."""
        return RunContext(self.provider, self.limits, self.approval, UsageAccount())

    def parent_context(self, context: RunContext, budget: BudgetScope | None = None) -> ParentContext:
        """What a subagent started by a run with ``context`` inherits from it; ``budget`` is
        that run's budget scope (a new one over ``context`` when not given: a subagent
        started from outside a run is held to the run limits it would have had)."""
        if budget is None:
            budget = BudgetScope(context.limits, context.account, agent=self.agent, parent=context.parent_budget)
        return ParentContext(
            provider=context.provider,
            tools=self._tools(context),
            hooks=self._hooks(context),
            limits=context.limits,
            workdir=self.workdir,
            approval=context.approval,
            account=context.account,
            depth=self.depth,
            agent=self.agent,
            session_id=self.session.id,
            transcript=self.session.transcript,
            compaction=context.compaction,
            prices=context.prices,
            budget=budget,
            tool_slots=context.tool_slots,
            delegation=context.delegation,
            ask=context.ask,
        )

    def _tools(self, context: RunContext) -> ToolRegistry:
        """The tools ``context``'s run offers: its own, else the engine's."""
        return self.tools if context.tools is None else context.tools

    def _hooks(self, context: RunContext) -> HookRegistry:
        """The hooks ``context``'s run runs: its own, else the engine's."""
        return self.hooks if context.hooks is None else context.hooks

    async def run(
        self, prompt: str, *, on_event: EventSink | None = None, context: RunContext | None = None
    ) -> RunResult:
        """Run until the model is done or a limit is hit, with ``context`` (the provider,
        limits, approval channel and usage account of this run; the constructor's defaults
        when ``None``). Raises ``ProviderError`` when the model cannot be reached,
        ``CancelledError`` when interrupted (after emitting ``RunFailed(interrupted=True)``)."""
        if self._lock.locked():
            raise HarnessError(
                f"agent {self.agent!r} is already running in this conversation; wait for it, "
                "or start a new conversation"
            )
        async with self._lock:
            return await self._run(prompt, _safe_sink(on_event), context or self.default_context())

    async def run_stream(
        self, prompt: str, *, context: RunContext | None = None, tap: EventSink | None = None
    ) -> AsyncIterator[Event]:
        """Yield the run's events as they happen; the last is ``RunFinished`` or ``RunFailed``
        (after which a failure is re-raised). ``tap`` sees each one first, in the task that
        emits it (a tracer, which keeps its spans in that task's context)."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        put: EventSink = queue.put_nowait
        if tap is not None:

            def put(event: Event) -> None:
                tap(event)
                queue.put_nowait(event)

        run = self.run(prompt, on_event=put, context=context)
        task = asyncio.create_task(run, name=f"run:{self.agent}")
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            task.result()
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _run(self, prompt: str, emit: EventSink, context: RunContext) -> RunResult:
        run_id = new_id("run")
        tools = offered_tools(self._tools(context), context.ask)
        if tools is not self._tools(context):  # once per run, so no call rebuilds the registry
            context = dataclasses.replace(context, tools=tools)
        provider, limits, account = context.provider, context.limits, context.account
        budget = BudgetScope(limits, account, agent=self.agent, parent=context.parent_budget)
        parent = self.parent_context(context, budget)
        progress = ProgressGuard(limits)
        turns = tool_calls = 0
        start = time.perf_counter()
        first_message = len(self.session.history)  # compaction may rewrite ``messages``
        final, stop = "", "end_turn"
        prompt = self.session.secrets.scrub(prompt)  # a pasted key reaches no one, not even a view
        await self.session.open_transcript()  # before the run starts: an interrupt here leaves nothing half-done
        emit(RunStarted(run_id=run_id, model=provider.model_id, prompt=prompt, session_id=self.session.id, agent=self.agent))
        self.session.record("run_started", run_id=run_id, agent=self.agent, model=provider.model_id)
        self.keeper.pin(self.session.append(UserMessage(content=prompt)))
        try:
            async with asyncio.timeout(limits.wall_time):
                await self._prepare(context)
                while True:
                    if turns >= limits.max_turns:
                        raise LimitExceededError("max_turns", f"reached max_turns ({limits.max_turns})")
                    if self.injectors:
                        self._inject(emit)
                    response = await self._answer(context, budget, emit)
                    turns += 1
                    self._bill(response, context, budget, emit, turns=1, tool_calls=len(response.message.tool_calls))
                    message = self.session.append(response.message)  # as stored: scrubbed
                    if emit is not unheard:  # the events of every call: not built for nobody
                        emit(TurnFinished(turn=turns, usage=account.snapshot(), agent=self.agent))
                    if message.content:
                        final = message.content
                    if not message.tool_calls:
                        stop = response.stop_reason
                        break
                    tool_calls += len(message.tool_calls)
                    await self._run_tools(message.tool_calls, response.stop_reason, emit, parent, context)
                    if (note := progress.after_tools(message, self.session.messages)) is not None:  # going nowhere
                        self.session.append(UserMessage(content=note))
                        emit(MessagesInjected(texts=(note,), agent=self.agent))
        except (LimitExceededError, _Stop) as exc:
            stop = exc.limit if isinstance(exc, LimitExceededError) else exc.stop_reason
            final = f"{final}\n\n[stopped: {exc}]".strip()
        except TimeoutError:
            stop = "wall_time"
            final = f"{final}\n\n[stopped: reached the wall-time limit ({limits.wall_time} s)]".strip()
        except BaseException as exc:
            account.credit(Usage(wall_time=time.perf_counter() - start))
            interrupted = isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
            reason = "interrupted" if interrupted else f"{type(exc).__name__}: {exc}"
            self.session.record("run_failed", run_id=run_id, error=reason)
            emit(RunFailed(error=reason, interrupted=interrupted, usage=account.snapshot(), agent=self.agent))
            raise
        account.credit(Usage(wall_time=time.perf_counter() - start))
        usage = account.snapshot()
        self.session.record_usage(run_id, usage, stop)
        emit(RunFinished(final_text=final, stop_reason=stop, usage=usage.model_copy(), agent=self.agent))
        return RunResult(
            final_text=final,
            usage=usage,
            stop_reason=stop,
            turns=turns,
            tool_calls=tool_calls,
            run_id=run_id,
            session_id=self.session.id,
            model=provider.model_id,
            agent=self.agent,
            messages=self.session.history[first_message:],
            account=account,
        )

    async def _prepare(self, context: RunContext) -> None:
        """Before a run's first call: the skills added or edited since the last run (read on a
        worker thread) and, meanwhile, the model's context window, which the first call's fit
        needs (``discover_window``: a server is asked once for the process, its answer kept).
        Asked side by side, the first call of eight harnesses started at once waits for one
        of them, not for both in turn."""
        window = asyncio.create_task(context.provider.discover_window(), name=f"window:{self.agent}")
        try:
            await self.prompt_builder.refresh(self._tools(context))
        except BaseException:
            window.cancel()
            await asyncio.gather(window, return_exceptions=True)
            raise
        await window

    def _inject(self, emit: EventSink) -> None:
        texts = [self.session.secrets.scrub(t) for source in self.injectors for t in source()]
        if texts:
            self.session.append(UserMessage(content="\n\n".join(texts)))
            emit(MessagesInjected(texts=tuple(texts), agent=self.agent))

    async def _answer(self, context: RunContext, budget: BudgetScope, emit: EventSink) -> ModelResponse:
        """The model's next answer, its tool-call ids made unique. An answer with neither text
        nor tool calls is asked for once more, then ends the run (``empty_answer``); its
        tokens are still billed."""
        provider = context.provider
        for attempt in (1, 2):
            response = await self._call_fitted(context, budget, emit)
            if response.message.content or response.message.tool_calls:
                return _with_unique_call_ids(response)
            self._bill(response, context, budget, emit)
            if response.stop_reason == "max_tokens":
                raise _Stop("max_tokens", EMPTY_AT_MAX_TOKENS)
            if attempt == 1:
                log.warning("%s: empty answer from %s; asking once more", self.agent, provider.model_id)
        raise _Stop("empty_answer", EMPTY_ANSWER)

    async def _call_fitted(self, context: RunContext, budget: BudgetScope, emit: EventSink) -> ModelResponse:
        """The model's answer to the conversation, kept within the context window: past the
        policy's threshold it is compacted first; a provider's context-length error compacts
        it and the call is made once more (a second such error fails the run, clearly)."""
        provider = context.provider
        fit = self._fit_context(context, emit, budget)
        await self.keeper.fit(fit)
        try:
            response = await self._call_model(provider, emit, context, budget, fit.tools)
        except ProviderError as exc:
            if exc.kind != "context_length":
                raise
            log.info("%s: %s; compacting and trying once more", self.agent, exc)
            await self.keeper.after_too_long(exc, fit)
            try:
                response = await self._call_model(provider, emit, context, budget, fit.tools)
            except ProviderError as again:
                if again.kind == "context_length":
                    raise self.keeper.still_too_long(again) from again
                raise
        self.keeper.observe(response, provider)
        return response

    async def compact(self, *, context: RunContext | None = None, on_event: EventSink | None = None) -> Compacted:
        """Compact the conversation now (``Harness.compact()``, ``%agent --compact``): old
        tool results become stubs and the turns before the latest prompt a summary written
        by ``context``'s model, which it bills. Refused while a run is under way."""
        if self._lock.locked():
            raise HarnessError(f"agent {self.agent!r} is running; compact the conversation when it is done")
        context = context or self.default_context()
        fit = self._fit_context(context, _safe_sink(on_event))
        async with self._lock:
            return await self.keeper.compact("requested", fit)

    def _fit_context(self, context: RunContext, emit: EventSink, budget: BudgetScope | None = None) -> FitContext:
        """What keeping the next request within the window needs; a summary call is billed
        to ``context``'s account and priced like any other LLM call."""

        def bill(response: ModelResponse) -> None:
            self._bill(response, context, budget, emit, turns=1)

        tools = self._tools(context)
        return FitContext(context.provider, context.compaction, self._system_prompt(tools), tools.specs(), emit, bill)

    async def _call_model(
        self, provider: Provider, emit: EventSink, context: RunContext, budget: BudgetScope, specs: Sequence[ToolSpec]
    ) -> ModelResponse:
        """One call offering the tools ``specs`` (those the context was measured with)."""
        self.session.rescrub()
        request = ModelRequest(
            system=self._system_prompt(self._tools(context)),  # after the rescrub: scrubbed of every secret known now
            messages=self.session.messages,
            tools=specs,
            agent=self.agent,
            effort=self.effort,
        )
        if budget.active:
            with self._budgeted(request, context, budget):
                response = await self._send(provider, request, emit, context)
            self.tally.observe(request.messages, response.usage)  # what the next estimate builds on
        else:  # no budget in the chain: nothing to estimate or reserve
            response = await self._send(provider, request, emit, context)
        for notice in response.notices:  # what the provider learnt of its server (quirks.py): said once
            emit(ServerAdapted(model=provider.model_id, text=notice, agent=self.agent))
        return response

    def _send(self, provider: Provider, request: ModelRequest, emit: EventSink, context: RunContext) -> Any:
        """The call of ``request``: reported to ``emit`` (unless nobody hears: no event to build)."""
        if emit is unheard:
            return self._request(provider, request, emit)
        return self._reported(provider, request, emit, context)

    async def _reported(
        self, provider: Provider, request: ModelRequest, emit: EventSink, context: RunContext
    ) -> ModelResponse:
        """``_request``, then a ``ModelCallFinished`` saying when it started, what it sent and
        what came back, priced (or how it failed: an interrupted call is reported too)."""
        call: dict[str, Any] = {
            "provider": provider.name,
            "model": provider.model,
            "started": time.time_ns(),
            "streamed": provider.streaming,
            "server": getattr(provider, "base_url", ""),
            "system": request.system,
            "messages": tuple(request.messages),  # the live list grows after the call
            "tools": tuple(request.tools),
            "agent": self.agent,
        }
        try:
            response = await self._request(provider, request, emit)
        except BaseException as exc:
            emit(ModelCallFinished(**call, error=_failure(exc)))
            raise
        emit(
            ModelCallFinished(
                **call,
                answer=response.message,
                stop_reason=response.stop_reason,
                response_model=response.model,
                usage=_priced(response, context),
            )
        )
        return response

    @contextlib.contextmanager
    def _budgeted(self, request: ModelRequest, context: RunContext, budget: BudgetScope) -> Iterator[None]:
        """Hold the estimate of the call sending ``request`` against the run's (active)
        budgets while it runs; ``LimitExceededError`` (and no call) when it would pass one."""
        provider = context.provider
        estimate = self.tally.estimate(
            request.messages,
            self.keeper.measure(provider, request.system, request.tools),
            output_limit=provider.output_limit(request),
            cache_writes=provider.cache_writes,
        )
        price = context.prices.lookup(provider.model_id, provider.model)
        with budget.reserve(estimate, price, provider.model_id):
            yield

    def _bill(
        self,
        response: ModelResponse,
        context: RunContext,
        budget: BudgetScope | None,
        emit: EventSink,
        *,
        turns: int = 0,
        tool_calls: int = 0,
    ) -> None:
        """Bill an answer's usage, priced from the run's table, and say when the run has
        used 80% of a budget."""
        usage, provider = response.usage, context.provider
        # priced as it is added (no priced copy made); a provider that reports its own cost is believed
        charge = None if usage.cost is not None else context.prices.charge(usage, *_price_names(response, provider))
        context.account.credit(usage, turns=turns, tool_calls=tool_calls, charge=charge)
        for warning in budget.warnings() if budget is not None else ():
            emit(warning)

    async def _request(self, provider: Provider, request: ModelRequest, emit: EventSink) -> ModelResponse:
        """Send ``request``: streamed as text deltas, or as one answer."""
        if not provider.streaming:
            response = await provider.complete(request)
            if response.message.content and emit is not unheard:
                emit(TextDelta(text=response.message.content, agent=self.agent))
            return response
        result: ModelResponse | None = None
        # aclosing: on an interrupt the stream (and its HTTP response) closes now, not when
        # the garbage collector gets to the generator
        async with contextlib.aclosing(provider.stream(request)) as stream:
            async for item in stream:
                if isinstance(item, TextChunk):
                    if emit is not unheard:
                        emit(TextDelta(text=item.text, agent=self.agent))
                else:
                    result = item
        if result is None:
            raise HarnessError(f"{provider!r} ended its stream without an answer")
        return result

    def _system_prompt(self, tools: ToolRegistry) -> str:
        """The system prompt offering ``tools``, scrubbed (a skill or AGENTS.md may quote a
        key) once per change of the prompt or of the secrets, not on every call."""
        built, version = self.prompt_builder.build(tools), self.session.secrets.version
        cached = self._system
        if cached is None or cached[0] is not built or cached[1] != version:  # the builder keeps its text
            cached = self._system = (built, version, self.session.secrets.scrub(built))
        return cached[2]

    async def _run_tools(
        self,
        calls: Sequence[ToolCall],
        stop_reason: str,
        emit: EventSink,
        parent: ParentContext,
        context: RunContext,
    ) -> None:
        results: dict[str, ToolResultMessage] = {}
        try:
            if len(calls) == 1:  # the usual turn: no order to keep, no task group
                results[calls[0].id] = await self._run_tool(calls[0], stop_reason, emit, parent, context, _NO_ORDER)
            else:
                tools = self._tools(context)
                in_order = [c.id for c in calls if getattr(tools.get(c.name), "in_call_order", False)]
                order = CallOrder(in_order) if in_order else _NO_ORDER
                async with asyncio.TaskGroup() as group:
                    tasks = [
                        group.create_task(
                            self._run_tool(c, stop_reason, emit, parent, context, order), name=f"tool:{c.name}:{c.id}"
                        )
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

    async def _run_tool(
        self,
        call: ToolCall,
        stop_reason: str,
        emit: EventSink,
        parent: ParentContext,
        context: RunContext,
        order: CallOrder,
    ) -> ToolResultMessage:
        if emit is not unheard:
            emit(ToolCallStarted(call=call, agent=self.agent))
        tool = self._tools(context).get(call.name)
        ctx = ToolContext(
            workdir=self.workdir,
            call=call,
            agent=self.agent,
            emit=emit,
            tool=tool,
            parent=parent,
            roots=self.roots,
            order=order,
        )
        assert context.tool_slots is not None  # every RunContext has them
        place = context.tool_slots.place()  # before any await: places follow the calls' order
        try:
            outcome = await self._outcome(call, stop_reason, ctx, emit, context, place)
        finally:
            order.pass_turn(call.id)  # denied, failed or done: it holds no later call back
            place.leave()
        hooks = self._hooks(context)
        if hooks.hooks:  # none (a bare engine): no hook dispatch at all
            outcome = await hooks.after_tool(call, outcome, ctx)
        # Bounded here, where every tool's result (a kernel plot, an MCP screenshot) passes.
        images, left_out = bound_images(outcome.images) if outcome.images else ((), "")
        content = f"{outcome.content}\n{left_out}".strip() if left_out else outcome.content
        if emit is not unheard:
            emit(
                ToolCallFinished(
                    call=call,
                    result=content,
                    is_error=outcome.is_error,
                    duration=outcome.duration,
                    images=images,
                    displays=outcome.displays,
                    agent=self.agent,
                )
            )
        return ToolResultMessage(
            tool_call_id=call.id, name=call.name, content=content, is_error=outcome.is_error, images=images
        )

    async def _outcome(
        self,
        call: ToolCall,
        stop_reason: str,
        ctx: ToolContext,
        emit: EventSink,
        context: RunContext,
        place: Place,
    ) -> ToolOutcome:
        """The call's outcome: refused, denied, or run — holding one of the run's tool slots
        (``place``) only while it runs, never while it waits for an approval. A tool that
        asks through its own card (``Tool.asks_itself``) is run, told why, instead of the
        channel being asked; it holds no slot then, and bounds its own wait."""
        tool, hooks = ctx.tool, self._hooks(context)
        if tool is None:
            names = ", ".join(self._tools(context).names()) or "(none)"
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
        decision = await hooks.before_tool(call, ctx) if hooks.hooks else ALLOW
        if isinstance(decision, Deny):
            return ToolOutcome(f"error: denied: {decision.reason}", True)
        if isinstance(decision, Ask) and tool.asks_itself:
            # its own card asks (the notebook's diff in the cell): no second, generic one
            emit(ApprovalRequested(call=call, reason=decision.reason, risk=decision.risk, agent=self.agent))
            ctx = dataclasses.replace(ctx, ask=decision.reason, ask_risk=decision.risk)
        elif isinstance(decision, Ask):
            place.step_aside()
            emit(ApprovalRequested(call=call, reason=decision.reason, risk=decision.risk, agent=self.agent))
            denied = await ask_channel(context.approval, call, decision.reason, decision.risk, emit=emit, agent=self.agent)
            if denied is not None:
                return ToolOutcome(denied, True)
        # the protected paths the approved card named, or a hook vouched for: the checkpoints keep those
        vouched = decision.paths if isinstance(decision, Ask) else decision.vouched
        if tool.long_running or ctx.ask is not None:
            # the delegation tool holds no slot (its subagents' calls need them), nor does a
            # call waiting for the person on its own card; both bound their own time
            place.leave()
            return await hooks.around_tool(call, ctx, lambda: invoke(tool, call, ctx), vouched=vouched)
        # the slot before the hooks around the call: a call waiting for its turn must not hold a
        # checkpoint's "before" that the calls running meanwhile change
        async with place.held():
            if not hooks.hooks:
                return await self._invoke(call, ctx, context)
            return await hooks.around_tool(call, ctx, lambda: self._invoke(call, ctx, context), vouched=vouched)

    async def _invoke(self, call: ToolCall, ctx: ToolContext, context: RunContext) -> ToolOutcome:
        """Run the call within its timeout (the tool's own, plus a margin, when it has one)."""
        tool = ctx.tool
        assert tool is not None
        deadline = context.limits.tool_timeout
        requested = own_timeout(tool, call)
        if requested is not None:  # the tool enforces its own limit and reports partial output
            deadline = max(deadline, requested + TOOL_TIMEOUT_MARGIN)
        timer = self._timer.start(deadline)
        try:
            outcome = await invoke(tool, call, ctx)
        except BaseException as exc:
            if not self._timer.finish(timer, exc):
                raise
            return ToolOutcome(f"error: {call.name} timed out after {deadline:g} s", True)
        self._timer.finish(timer)
        return outcome


def _failure(exc: BaseException) -> str:
    """How a model call failed, in a word a trace can group by: a ``ProviderError``'s kind
    (``context_length``) or HTTP status (``429``), else the exception's class name."""
    if isinstance(exc, ProviderError):
        return exc.kind or (str(exc.status) if exc.status else type(exc).__name__)
    return type(exc).__name__


def _priced(response: ModelResponse, context: RunContext) -> Usage:
    """An answer's usage with its cost from the run's price table (a provider that reports
    its own cost is believed)."""
    usage = response.usage
    if usage.cost is None:
        usage = context.prices.priced(usage, *_price_names(response, context.provider))
    return usage


def _price_names(response: ModelResponse, provider: Provider) -> tuple[str, str, str]:
    """The names an answer's price is looked up by, in order: the provider's model id and
    model, then the model the server said answered."""
    return provider.model_id, provider.model, response.model


def _with_unique_call_ids(response: ModelResponse) -> ModelResponse:
    """``response`` with a fresh id for any tool call that repeats an earlier call's id in the
    same answer: results are matched to calls by id, and APIs reject a history with two."""
    calls = response.message.tool_calls
    if len(calls) < 2:
        return response
    seen = {c.id for c in calls}
    if len(seen) == len(calls):
        return response
    taken: set[str] = set()
    fixed = []
    for call in calls:
        if call.id in taken:
            n = 2
            while f"{call.id}-{n}" in seen:
                n += 1
            log.warning("duplicate tool-call id %r in one answer: renamed %s-%d", call.id, call.id, n)
            # new objects, not model_copy: a copy would keep the old wire-form cache
            call = ToolCall(id=f"{call.id}-{n}", name=call.name, arguments=call.arguments)
            seen.add(call.id)
        taken.add(call.id)
        fixed.append(call)
    message = AssistantMessage(content=response.message.content, tool_calls=tuple(fixed))
    return response.model_copy(update={"message": message})


def _safe_sink(sink: EventSink | None) -> EventSink:
    if sink is None:
        return unheard  # the loop skips building its per-call events for it

    def emit(event: Event) -> None:
        try:
            sink(event)
        except Exception:  # a broken UI must not break the run
            log.exception("event sink failed on %s", type(event).__name__)

    return emit
