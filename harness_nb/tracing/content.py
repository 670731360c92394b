"""What a span records of what was said, when ``tracing_content`` asks for it: the JSON forms
of the GenAI semantic conventions (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, a tool call's arguments and
result), as JSON text (span attributes hold no structures yet). Every string passes
``SECRETS.scrub`` and each text is cut at ``MAX_TEXT`` characters: a span is no place for a
whole file, and a key must reach a trace no more than a model.

Nothing here is used with the setting off: the spans then carry no text that was said.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..core.message import AssistantMessage, Message, ToolCall, ToolResultMessage, ToolSpec
from ..core.secret import SECRETS

MAX_TEXT = 8_000
"""Characters kept of one text (a message, an argument value, a result); the rest is cut."""

FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_call", "max_tokens": "length", "refusal": "content_filter"}
"""The engine's stop reasons as the conventions name them (others pass as they are)."""


def finish_reason(stop_reason: str) -> str:
    """``stop`` for ``end_turn``, ``tool_call`` for ``tool_use``, … (``FINISH_REASONS``)."""
    return FINISH_REASONS.get(stop_reason, stop_reason)


def bounded(text: str) -> str:
    """``text`` scrubbed and cut at ``MAX_TEXT`` characters, saying how much was cut."""
    text = SECRETS.scrub(text)
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}[… {len(text) - MAX_TEXT:,} more characters]"


def _dumped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": bounded(content)}


def arguments(call: ToolCall) -> Any:
    """A call's arguments as an object (its text when it is no JSON), scrubbed and bounded."""
    try:
        value = json.loads(SECRETS.scrub_arguments(call.arguments))
    except ValueError:
        return bounded(call.arguments)
    return _bounded_strings(value)


def _bounded_strings(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else bounded(value)
    if isinstance(value, dict):
        return {k: _bounded_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded_strings(v) for v in value]
    return value


def _parts(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, ToolResultMessage):
        return [{"type": "tool_call_response", "id": message.tool_call_id, "response": bounded(message.content)}]
    parts = [_text(message.content)] if message.content else []
    if isinstance(message, AssistantMessage):
        parts += [
            {"type": "tool_call", "id": c.id, "name": c.name, "arguments": arguments(c)} for c in message.tool_calls
        ]
    return parts


def input_messages(messages: Sequence[Message]) -> str:
    """``gen_ai.input.messages``: the conversation sent, in order."""
    return _dumped([{"role": m.role, "parts": _parts(m)} for m in messages])


def output_messages(answer: AssistantMessage | None, stop_reason: str) -> str:
    """``gen_ai.output.messages``: the one answer (an empty list when there was none)."""
    if answer is None:
        return "[]"
    return _dumped([{"role": "assistant", "parts": _parts(answer), "finish_reason": finish_reason(stop_reason)}])


def text_message(role: str, text: str, stop_reason: str | None = None) -> str:
    """A one-message list of ``role`` saying ``text``: a run's prompt (its input) or its
    final text (its output, with ``stop_reason``)."""
    message: dict[str, Any] = {"role": role, "parts": [_text(text)] if text else []}
    if stop_reason is not None:
        message["finish_reason"] = finish_reason(stop_reason)
    return _dumped([message])


def system_instructions(system: str) -> str:
    """``gen_ai.system_instructions``: the system prompt, as one text part."""
    return _dumped([_text(system)] if system else [])


def tool_definitions(tools: Sequence[ToolSpec]) -> str:
    """``gen_ai.tool.definitions``: each tool's type and name (its description and schema are
    left out, as the conventions advise: they are large and the same on every call)."""
    return _dumped([{"type": "function", "name": t.name} for t in tools])


def result(text: str) -> str:
    """``gen_ai.tool.call.result``: a tool's result text, scrubbed and bounded."""
    return bounded(text)


def dumped_arguments(call: ToolCall) -> str:
    """``gen_ai.tool.call.arguments``: ``arguments`` as JSON text."""
    return _dumped(arguments(call))
