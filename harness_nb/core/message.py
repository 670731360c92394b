"""Conversation messages, tool calls and tool definitions.

Messages are immutable once made. Each carries a ``wire`` cache that a provider may use to
keep the message's request form, so a long history is not re-serialised from scratch on
every call.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from .media import ImagePart


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)

    @property
    def wire(self) -> dict[str, Any]:
        """Per-provider cache of this message's request form (keyed by wire format name)."""
        # Kept in pydantic's private-attribute dict, made on first use rather than declared
        # as a ``PrivateAttr``: pydantic sets a declared one up in Python on every instance
        # (~2 µs; an LLM call makes a tool call, an answer and a result), and read straight
        # from that dict, since ``self._wire`` would go through BaseModel.__getattr__ (~2.4
        # µs against ~0.1 µs) for every message of the history on every call. A copy
        # (``model_copy``) shares the cache, as it did the private attribute.
        private = self.__pydantic_private__
        if private is None:
            private = {"_wire": {}}
            object.__setattr__(self, "__pydantic_private__", private)
        return private["_wire"]

    def __eq__(self, other: object) -> bool:
        # Equal when the fields are equal: the wire cache is not part of a message's value.
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), *self.__dict__.values()))


class ToolCall(_Frozen):
    """A call the model asked for. ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict. Raises ``ValueError`` with a readable reason."""
        text = self.arguments.strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"arguments are not valid JSON ({exc.msg} at char {exc.pos}): {text[:200]!r}"
            ) from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return value

    def brief(self, width: int = 60) -> str:
        """``name(arg=…)`` shortened to ``width`` characters, for progress lines."""
        try:
            args = self.parsed_arguments()
            inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
        except ValueError:
            inner = self.arguments
        text = f"{self.name}({inner})"
        return text if len(text) <= width else text[: width - 1] + "…"


class SystemMessage(_Frozen):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    content: str


class Thinking(_Frozen):
    """One block of a model's extended thinking (Anthropic), kept so that it goes back
    unchanged with the rest of its turn: the API requires it while that turn's tool calls
    are answered, and checks ``signature``. A ``redacted_thinking`` block has only
    ``data``, its opaque payload."""

    text: str = ""
    signature: str = ""
    data: str = ""


class AssistantMessage(_Frozen):
    """One answer of the model: its text, its tool calls and, from a model that thinks
    (``effort`` on Anthropic), its thinking blocks, which are never shown."""

    role: Literal["assistant"] = "assistant"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: tuple[Thinking, ...] = ()


class ToolResultMessage(_Frozen):
    """A tool's answer to one call: ``content`` (text, what every model reads) and the
    ``images`` that go with it (see ``core.media``: sent as image parts to a model that
    takes images, as a text placeholder to one that does not)."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A result without images is dumped as before images existed: transcripts stay as
        # they were, and a cassette's request hashes do not change.
        data: dict[str, Any] = handler(self)
        if not self.images:
            data.pop("images", None)
        return data


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]
MessageT = TypeVar("MessageT", bound=SystemMessage | UserMessage | AssistantMessage | ToolResultMessage)
"""Any one kind of message (a function taking a ``MessageT`` returns the same kind)."""


class ToolSpec(_Frozen):
    """What the model is told about a tool: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
