"""The provider interface every LLM client implements.

A provider turns a ``ModelRequest`` (system prompt, history, tool specs) into a
``ModelResponse`` (one assistant message, usage, stop reason). ``stream`` yields
``TextChunk``s while the answer arrives and ends with the ``ModelResponse``.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ..core import AssistantMessage, Message, ToolSpec, Usage
from .options import ProviderOptions, StructuredOutput
from .window import TokenRatio


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    """Ask for the answer's text as a JSON value matching ``schema`` (an object's JSON
    Schema), through the server's JSON-schema mode (OpenAI's ``response_format``), for a
    provider whose ``structured_output`` is ``"json_schema"``. ``name`` names the format
    (letters, digits, ``_`` and ``-``); ``strict`` asks the server to hold the answer to
    the schema exactly (OpenAI's strict mode takes only a subset of JSON Schema)."""

    name: str
    schema: Mapping[str, Any]
    strict: bool = False


@dataclass(slots=True)
class ModelRequest:
    """One LLM call. ``agent`` names the calling agent (scripted models key on it);
    ``effort`` is its reasoning effort (``low``/``medium``/``high``/``max``, an agent
    file's ``effort``), sent where the model has such a parameter (``effort.py``).
    ``tool_choice`` (``auto``, ``required``, ``none`` or an offered tool's name) wins over
    the provider's option; ``json_answer`` asks for a JSON answer of a schema (see
    ``JsonAnswer``; only a ``json_schema`` provider sends it)."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    agent: str = "main"
    max_tokens: int | None = None
    temperature: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    effort: str | None = None
    tool_choice: str | None = None
    json_answer: JsonAnswer | None = None


@dataclass(slots=True, frozen=True)
class TextChunk:
    """A piece of answer text as it streams in."""

    text: str


class ModelResponse(BaseModel):
    """A whole answer. ``stop_reason`` is normalised: ``end_turn``, ``tool_use``,
    ``max_tokens``, ``refusal`` (or the server's own word for anything else). ``notices``
    say what the provider learnt of its server while answering (``quirks.py``), for the
    engine to tell the person once; they are not part of the answer (never recorded)."""

    message: AssistantMessage
    usage: Usage
    stop_reason: str = "end_turn"
    model: str = ""
    notices: tuple[str, ...] = Field(default=(), exclude=True)


StreamItem = TextChunk | ModelResponse


class Provider(ABC):
    """An LLM client. Subclasses implement at least one of ``complete`` / ``stream``.

    ``streaming`` says whether the engine should ``stream`` (else ``complete``);
    ``context_window`` is the model's context size in tokens when known (the option, else
    what the provider knows of the model: see ``discover_window``); ``token_ratio`` is
    this model's characters per token, calibrated by the engine from reported usage;
    ``offline`` marks a provider that answers without a server (never recorded to a
    cassette); ``cache_writes`` one that writes each prompt to a prompt cache at the
    cache-write price (Anthropic with ``cache_control``), which a budget's estimate of a
    call counts; ``vision`` whether the model is sent the images of tool results (else a
    text placeholder for each: ``ImagePart.placeholder``), the ``vision`` option's value
    when set, else the provider's default. ``structured_output`` is how a structured
    answer is asked of it: ``"json_schema"`` (it sends a request's ``json_answer``) or
    ``"tool"`` (it has no such mode: the caller offers an answer tool and forces it with
    ``tool_choice``)."""

    name: ClassVar[str] = "provider"
    offline: ClassVar[bool] = False
    streaming: bool = True
    context_window: int | None = None
    cache_writes: bool = False
    vision: bool = True
    structured_output: StructuredOutput = "tool"

    def __init__(self, model: str, *, options: ProviderOptions | None = None) -> None:
        self.model = model
        self.token_ratio = TokenRatio()
        if options is not None:
            if options.streaming is not None:
                self.streaming = options.streaming
            self.context_window = options.context_window
            if options.vision is not None:
                self.vision = options.vision

    async def discover_window(self) -> int | None:
        """The model's context window in tokens, or ``None`` when unknown. By default
        ``context_window``; a provider that can ask its server (an OpenAI-compatible one)
        does so through ``window.WINDOWS``, which asks each server once for the process."""
        return self.context_window

    def learn_window(self, tokens: int) -> None:
        """Take the window a server stated (in a too-long error): the server knows best."""
        self.context_window = tokens

    def output_limit(self, request: ModelRequest) -> int | None:
        """The most output tokens an answer to ``request`` may have (the ``max_tokens`` the
        provider sends), ``None`` when the provider sends no limit. Budgets count it."""
        return request.max_tokens

    @property
    def model_id(self) -> str:
        """The ``provider/model`` string this provider answers for."""
        return f"{self.name}/{self.model}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Return the whole answer (default: collect ``stream``)."""
        response: ModelResponse | None = None
        async for item in self.stream(request):
            if isinstance(item, ModelResponse):
                response = item
        if response is None:  # pragma: no cover - a broken subclass
            raise RuntimeError(f"{type(self).__name__}.stream ended without a response")
        return response

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        """Yield text chunks, then the ``ModelResponse`` (default: one chunk from ``complete``)."""
        response = await self.complete(request)
        if response.message.content:
            yield TextChunk(response.message.content)
        yield response

    async def aclose(self) -> None:
        """Release connections. Safe to call twice."""

    async def __aenter__(self) -> Provider:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id}>"


def under(workdir: Path | None, path: str | Path) -> Path:
    """``path`` (``~`` expanded) taken relative to ``workdir`` unless it is absolute."""
    p = Path(path).expanduser()
    return p if p.is_absolute() or workdir is None else Path(workdir) / p
