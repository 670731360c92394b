"""``SpanTree``: the spans of one traced launch, made from the events it emits, following
the OpenTelemetry GenAI semantic conventions.

- ``invoke_agent {agent}`` (kind ``INTERNAL``) from ``RunStarted`` to ``RunFinished`` /
  ``RunFailed``, for the run and for each subagent run whose events reach the launch
  wrapped in ``SubagentUpdate`` (foreground and background); a teammate's turns are
  launches of their own (``hub.py``).
- ``chat {model}`` (``CLIENT``) for each ``ModelCallFinished``, timed from its ``started``.
- ``execute_tool {tool}`` (``INTERNAL``) from ``ToolCallStarted`` to ``ToolCallFinished``,
  with the approval's outcome.

Parents come from the OpenTelemetry context: each run's span, and each tool call's, is made
the current span of the task that emitted its start (a sink is called in the emitting
task), so what a tool call starts — a subagent, a background task, a teammate, whose tasks
copy the context when they are created — nests under that call, however long it outlives
it; a span started outside any (``Harness.start_subagent``) falls back to the span of the
run whose events carry it. The program's own current span, if any, parents the launch.

Attributes are the conventions' (``gen_ai.*``, ``server.*``, ``error.type``) and ours under
``harness_nb.*``: ``cost_usd``, ``run.id``, ``task.id``, ``stop_reason``, ``turns``,
``tool_calls``, ``approval``, ``checkpoint``, and those given at launch (a notebook's
``harness_nb.notebook.*``). ``error.type`` is the exception's class name (of a model call:
its provider error's kind, ``context_length``, or HTTP status, ``429``), ``interrupted``,
``tool_error`` (a tool's result was an error) or ``denied`` (an approval was refused).
Text that was said is recorded only with ``content`` (``content.py``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from contextvars import Token
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..core import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetWarning,
    Compacted,
    EffectsRecorded,
    Event,
    MessagesInjected,
    ModelCallFinished,
    RunFailed,
    RunFinished,
    RunStarted,
    SubagentUpdate,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from . import content as said

log = logging.getLogger("harness_nb.tracing")

Path = tuple[str, ...]
"""Where a run is in a launch: the task ids of the ``SubagentUpdate`` wrappers around its
events, ``()`` for the launched run itself."""

INTERRUPTED = frozenset({"CancelledError", "KeyboardInterrupt"})


@dataclass(slots=True)
class _Tool:
    span: Span
    token: Token[Context]
    approval: str = ""


@dataclass(slots=True)
class _Run:
    span: Span
    context: Context  # the current one, with this run's span in it
    token: Token[Context]
    conversation: str
    tools: dict[str, _Tool] = field(default_factory=dict)


class SpanTree:
    """The spans of one launch, made by ``see``-ing its events in order (``see`` never
    raises: a tracing fault is logged, the run goes on). ``attributes`` go on every run's
    span; ``content`` records what was said (scrubbed)."""

    def __init__(
        self, tracer: trace.Tracer, *, content: bool = False, attributes: Mapping[str, AttributeValue] | None = None
    ) -> None:
        self.tracer = tracer
        self.content = content
        self.attributes = dict(attributes or {})
        self._runs: dict[Path, _Run] = {}
        self._handlers: dict[type, Callable[[Any, Path], None]] = {
            RunStarted: self._run_started,
            ModelCallFinished: self._model_called,
            ToolCallStarted: self._tool_started,
            ApprovalRequested: self._approval_asked,
            ApprovalDecided: self._approval_decided,
            EffectsRecorded: self._effects,
            ToolCallFinished: self._tool_finished,
            MessagesInjected: self._injected,
            Compacted: self._compacted,
            BudgetWarning: self._budget_warning,
            RunFinished: self._run_ended,
            RunFailed: self._run_ended,
        }

    @property
    def running(self) -> bool:
        """Whether a run of this launch has started and not ended."""
        return bool(self._runs)

    def see(self, event: Event) -> None:
        """Turn ``event`` into spans (or attributes, or span events)."""
        path: Path = ()
        while isinstance(event, SubagentUpdate):
            path = (*path, event.task_id)
            event = event.event
        handler = self._handlers.get(type(event))
        if handler is None:
            return
        try:
            handler(event, path)
        except Exception:  # a tracing fault must not break the run
            log.exception("tracing failed on %s", type(event).__name__)

    # -- runs -----------------------------------------------------------------------------

    def _run_started(self, event: RunStarted, path: Path) -> None:
        provider, _, model = event.model.partition("/")
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.agent.name": event.agent,
            "harness_nb.run.id": event.run_id,
            **self.attributes,
        }
        if event.session_id:
            attributes["gen_ai.conversation.id"] = event.session_id
        if path:
            attributes["harness_nb.task.id"] = path[-1]
        if self.content:
            attributes["gen_ai.input.messages"] = said.text_message("user", event.prompt)
        span = self.tracer.start_span(
            f"invoke_agent {event.agent}", context=self._parent(path), kind=SpanKind.INTERNAL, attributes=attributes
        )
        context = trace.set_span_in_context(span)
        self._runs[path] = _Run(span, context, otel_context.attach(context), event.session_id)

    def _parent(self, path: Path) -> Context | None:
        """The context a run at ``path`` starts in: the current one when it holds a span (the
        tool call that started it, or the program's own span), else the span of the nearest
        run of this launch that carries its events."""
        if trace.get_current_span().get_span_context().is_valid:
            return None
        for depth in range(len(path) - 1, -1, -1):
            outer = self._runs.get(path[:depth])
            if outer is not None:
                return outer.context
        return None

    def _run_ended(self, event: RunFinished | RunFailed, path: Path) -> None:
        """End the run's span with its usage and how it ended; its tool calls that never
        finished (the run was interrupted mid-call) end with it, marked so."""
        run = self._runs.pop(path, None)
        if run is None:
            return
        for tool in run.tools.values():  # not detached: their tokens belong to tasks that are gone
            tool.span.set_attribute("error.type", "interrupted")
            tool.span.set_status(Status(StatusCode.ERROR, "interrupted"))
            tool.span.end()
        span, usage = run.span, event.usage
        attributes = _usage(usage)
        attributes["harness_nb.turns"] = usage.turns
        attributes["harness_nb.tool_calls"] = usage.tool_calls
        if isinstance(event, RunFinished):
            attributes["harness_nb.stop_reason"] = event.stop_reason
            if self.content:
                attributes["gen_ai.output.messages"] = said.text_message("assistant", event.final_text, event.stop_reason)
        else:
            attributes["error.type"] = "interrupted" if event.interrupted else event.error.partition(":")[0] or "_OTHER"
            span.set_status(Status(StatusCode.ERROR, said.bounded(event.error)))
        span.set_attributes(attributes)
        span.end()
        otel_context.detach(run.token)  # RunStarted and its end are emitted by the same task

    # -- model calls ----------------------------------------------------------------------

    def _model_called(self, event: ModelCallFinished, path: Path) -> None:
        """The call's span, made whole at once: it has ended, so every attribute is known when
        the span starts (cheaper than setting them one by one, and a sampler sees them all)."""
        run = self._runs.get(path)
        if run is None:
            return
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": event.provider,
            "gen_ai.request.model": event.model,
            "gen_ai.request.stream": event.streamed,
        }
        if run.conversation:
            attributes["gen_ai.conversation.id"] = run.conversation
        attributes.update(_server(event.server))
        if self.content:
            attributes["gen_ai.system_instructions"] = said.system_instructions(event.system)
            attributes["gen_ai.input.messages"] = said.input_messages(event.messages)
            attributes["gen_ai.tool.definitions"] = said.tool_definitions(event.tools)
        failure = ("interrupted" if event.error in INTERRUPTED else event.error) if event.error else ""
        if failure:
            attributes["error.type"] = failure
        else:
            if event.response_model:
                attributes["gen_ai.response.model"] = event.response_model
            attributes["gen_ai.response.finish_reasons"] = (said.finish_reason(event.stop_reason),)
            if event.usage is not None:
                attributes.update(_usage(event.usage))
            if self.content:
                attributes["gen_ai.output.messages"] = said.output_messages(event.answer, event.stop_reason)
        span = self.tracer.start_span(
            f"chat {event.model}",
            context=run.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=event.started,
        )
        if failure:
            span.set_status(Status(StatusCode.ERROR, failure))
        span.end()

    # -- tool calls -----------------------------------------------------------------------

    def _tool_started(self, event: ToolCallStarted, path: Path) -> None:
        run = self._runs.get(path)
        if run is None:
            return
        call = event.call
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = said.dumped_arguments(call)
        span = self.tracer.start_span(
            f"execute_tool {call.name}",
            context=run.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        # current in this task until the call ends: whatever the call starts nests under it
        token = otel_context.attach(trace.set_span_in_context(span))
        run.tools[call.id] = _Tool(span, token)

    def _tool(self, path: Path, call_id: str) -> _Tool | None:
        run = self._runs.get(path)
        return run.tools.get(call_id) if run is not None else None

    def _approval_asked(self, event: ApprovalRequested, path: Path) -> None:
        tool = self._tool(path, event.call.id)
        if tool is None:
            return
        tool.span.set_attribute("harness_nb.approval.risk", event.risk)
        if self.content:
            tool.span.set_attribute("harness_nb.approval.reason", said.bounded(event.reason))

    def _approval_decided(self, event: ApprovalDecided, path: Path) -> None:
        """``approved``; ``denied`` by the person; ``refused`` with nobody to ask (no channel,
        a background task, a wait that timed out)."""
        tool = self._tool(path, event.call.id)
        if tool is None:
            return
        tool.approval = "approved" if event.approved else "denied" if event.by_person else "refused"
        tool.span.set_attribute("harness_nb.approval", tool.approval)
        if self.content and event.feedback:
            tool.span.set_attribute("harness_nb.approval.feedback", said.bounded(event.feedback))

    def _effects(self, event: EffectsRecorded, path: Path) -> None:
        tool = self._tool(path, event.call.id)
        if tool is None:
            return
        if event.checkpoint is not None:
            tool.span.set_attribute("harness_nb.checkpoint", event.checkpoint)
        if self.content and event.line:
            tool.span.set_attribute("harness_nb.effects", said.bounded(event.line))

    def _tool_finished(self, event: ToolCallFinished, path: Path) -> None:
        run = self._runs.get(path)
        tool = run.tools.pop(event.call.id, None) if run is not None else None
        if tool is None:
            return
        span = tool.span
        attributes: dict[str, AttributeValue] = {} if tool.approval else {"harness_nb.approval": "not_asked"}
        if event.is_error:
            kind = "denied" if tool.approval in ("denied", "refused") else "tool_error"
            attributes["error.type"] = kind
            span.set_status(Status(StatusCode.ERROR, said.bounded(event.result) if self.content else kind))
        elif self.content:
            attributes["gen_ai.tool.call.result"] = said.result(event.result)
        span.set_attributes(attributes)
        span.end()
        otel_context.detach(tool.token)  # both ends of a call are emitted by its own task

    # -- along the way --------------------------------------------------------------------

    def _injected(self, event: MessagesInjected, path: Path) -> None:
        run = self._runs.get(path)
        if run is not None:
            attributes: dict[str, AttributeValue] = {"harness_nb.messages": len(event.texts)}
            if self.content:
                attributes["harness_nb.texts"] = [said.bounded(t) for t in event.texts]
            run.span.add_event("harness_nb.messages_injected", attributes)

    def _compacted(self, event: Compacted, path: Path) -> None:
        run = self._runs.get(path)
        if run is not None:
            run.span.add_event(
                "harness_nb.compacted",
                {
                    "harness_nb.reason": event.reason,
                    "harness_nb.cleared": event.cleared,
                    "harness_nb.summarised": event.summarised,
                    "harness_nb.tokens_before": event.tokens_before,
                    "harness_nb.tokens_after": event.tokens_after,
                },
            )

    def _budget_warning(self, event: BudgetWarning, path: Path) -> None:
        run = self._runs.get(path)
        if run is not None:
            run.span.add_event(
                "harness_nb.budget_warning",
                {"harness_nb.limit": event.limit, "harness_nb.spent": event.spent, "harness_nb.budget": event.budget},
            )


def _usage(usage: Usage) -> dict[str, AttributeValue]:
    """The conventions' token counts (``input_tokens`` with the cached ones, as they ask) and
    our cost, when known."""
    found: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        found["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        found["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if usage.cost is not None:
        found["harness_nb.cost_usd"] = usage.cost
    if usage.unreported_calls:
        found["harness_nb.usage.unreported_calls"] = usage.unreported_calls
    return found


@functools.lru_cache(maxsize=64)
def _server(url: str) -> tuple[tuple[str, AttributeValue], ...]:
    """``server.address`` and ``server.port`` of a base URL (none offline); a run asks the
    same few servers on every call."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ()
    return (("server.address", parts.hostname), ("server.port", port)) if parts.hostname else ()
