"""How many characters a request and an answer carry, and so how many tokens they are
estimated at: the count the context meter (``engine/meter.py``) and each provider's
``TokenRatio`` share, and the usage of a call whose server reported none.

Characters are counted the way the request carries them, roughly: a message's text, a tool
call's name and arguments, a tool's name, description and JSON schema, and an image at
four characters per token of its estimate (``ImagePart.token_estimate``; counted whether
or not the model takes images, so a text-only model's estimate is on the high side). The
ratio is learnt against the same count, so whatever the count leaves out (JSON
punctuation, role markers) is absorbed into it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..core import AssistantMessage, Message, ToolResultMessage, ToolSpec, Usage
from .window import TokenRatio

__all__ = [
    "IMAGE_CHARS_PER_TOKEN",
    "MESSAGE_OVERHEAD",
    "estimated_usage",
    "fixed_chars",
    "message_chars",
    "spec_chars",
]

MESSAGE_OVERHEAD = 12  # characters: a role and the separators around a message
IMAGE_CHARS_PER_TOKEN = 4  # an image's token estimate in the characters the ratio counts


def message_chars(message: Message) -> int:
    """The characters ``message`` adds to a request (cached on the message)."""
    cache = message.wire
    chars = cache.get("chars")
    if chars is None:
        chars = MESSAGE_OVERHEAD + len(message.content)
        if isinstance(message, AssistantMessage):
            chars += sum(len(c.id) + len(c.name) + len(c.arguments) for c in message.tool_calls)
        elif isinstance(message, ToolResultMessage):
            chars += len(message.tool_call_id)
            # An image is counted at its token estimate, in characters: not its base64
            # length, which is no measure of what the model reads.
            chars += sum(IMAGE_CHARS_PER_TOKEN * image.token_estimate() for image in message.images)
        cache["chars"] = chars
    return int(chars)


def spec_chars(spec: ToolSpec) -> int:
    """The characters a tool's definition adds to every request (cached on the spec)."""
    cache = spec.wire
    chars = cache.get("chars")
    if chars is None:
        chars = cache["chars"] = len(spec.name) + len(spec.description) + len(json.dumps(spec.parameters))
    return int(chars)


def fixed_chars(system: str, tools: Sequence[ToolSpec]) -> int:
    """The characters every request repeats: the system prompt and the tool definitions."""
    return len(system) + sum(spec_chars(s) for s in tools)


def estimated_usage(
    system: str, messages: Sequence[Message], tools: Sequence[ToolSpec], answer: AssistantMessage, ratio: TokenRatio
) -> Usage:
    """The usage of a call whose server reported none: the request's characters (``system``,
    ``messages``, ``tools``) and the ``answer``'s (its text, tool calls and thinking) over
    ``ratio``, at least one token each, marked as unreported (``Usage.unreported_calls``)
    so that every view says it is an estimate and no ratio learns from it."""
    sent = fixed_chars(system, tools) + sum(message_chars(m) for m in messages)
    received = message_chars(answer) + sum(len(t.text) for t in answer.thinking)
    return Usage(
        input_tokens=max(1, ratio.tokens(sent)), output_tokens=max(1, ratio.tokens(received)), unreported_calls=1
    )
