"""OpenAI Chat Completions: ``openai/``, ``openai-compatible/`` and ``ollama/`` models.

One wire format, three ways to reach it: OpenAI itself (key required), any server that
speaks Chat Completions (vLLM, SGLang, LM Studio, a LiteLLM proxy; base URL required) and
Ollama's OpenAI-compatible endpoint at ``$OLLAMA_HOST/v1`` (no key).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx

from ..core import (
    AssistantMessage,
    ConfigError,
    Message,
    ProviderError,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    new_id,
)
from ..core.media import with_placeholders
from .base import ModelRequest, ModelResponse
from .effort import openai_effort
from .http import HTTPProvider, Payload, RetryPolicy, stream_cut
from .options import TOOL_CHOICE_WORDS, EmptyContent, ProviderOptions, chosen_tool
from .window import WINDOWS, WindowUnansweredError, known_window
from .wire import EncodedList, Histories, History, encoded_message, to_json

STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def wire_messages(
    system: str,
    messages: Sequence[Message],
    empty_content: EmptyContent,
    *,
    vision: bool = True,
    histories: Histories | None = None,
) -> EncodedList:
    """The ``messages`` array: the system prompt first, then the history. Each message's
    form and its JSON encoding are cached on the message, so a long history is neither
    rebuilt nor re-encoded on every turn.

    A ``tool`` message holds text only, so with ``vision`` the images of tool results go
    as ``image_url`` parts of one ``user`` message after the run of results they belong
    to (a message between two results would part them from their call); without it each
    image is a text placeholder in its result. With ``histories``, the encoding of a history
    that continues one encoded before continues from there (``wire.Histories``)."""
    key = f"openai:{empty_content}" if vision else f"openai:{empty_content}:text"
    key_json = f"{key}:json"
    done = histories.start(messages, key) if histories is not None else History([], [], [], [])
    out = EncodedList(done.forms, done.parts)
    with_images: list[ToolResultMessage] = done.pending  # results of the current run that hold images
    for message in messages[len(done.messages) :]:
        if with_images and not isinstance(message, ToolResultMessage):
            _append_images(out, with_images)
            with_images = []
        cache = message.wire
        form, data = cache.get(key), cache.get(key_json)
        if form is None or data is None:
            # Both are made before either is stored: a failure in between must not leave
            # a form without its encoding for every later request to trip over.
            form = _wire_message(message, empty_content, vision)
            data = to_json(form)
            cache[key], cache[key_json] = form, data
        out.append(form)
        out.parts.append(data)
        if vision and isinstance(message, ToolResultMessage) and message.images:
            with_images.append(message)
    if histories is not None:
        histories.keep(messages, key, History(list(messages), list(out), list(out.parts), list(with_images)))
    if with_images:
        _append_images(out, with_images)
    if system:
        head, encoded = encoded_message("system", system)
        out.insert(0, head)
        out.parts.insert(0, encoded)
    return out


def _append_images(out: EncodedList, results: Sequence[ToolResultMessage]) -> None:
    """One ``user`` message holding the images of ``results``, each result's introduced by
    a line naming its call (the parts and their encodings cached on each result)."""
    content: list[dict[str, Any]] = []
    encoded: list[bytes] = []
    for result in results:
        cache = result.wire
        parts, data = cache.get("openai:images"), cache.get("openai:images:json")
        if parts is None or data is None:
            count = len(result.images)
            label = f"The image{'s' if count > 1 else ''} from the {result.name} result (call {result.tool_call_id}):"
            parts = [{"type": "text", "text": label}]
            parts += [{"type": "image_url", "image_url": {"url": image.data_url()}} for image in result.images]
            data = b",".join(to_json(p) for p in parts)
            cache["openai:images"], cache["openai:images:json"] = parts, data
        content.extend(parts)
        encoded.append(data)
    out.append({"role": "user", "content": content})
    out.parts.append(b'{"role":"user","content":[' + b",".join(encoded) + b"]}")


def _wire_message(message: Message, empty_content: EmptyContent, vision: bool = True) -> dict[str, Any]:
    if isinstance(message, ToolResultMessage):
        content = message.content
        if message.images and not vision:
            content = with_placeholders(content, message.images)
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, AssistantMessage) and message.tool_calls:
        wire: dict[str, Any] = {"role": "assistant"}
        # An assistant turn that is only tool calls: "" is accepted everywhere (OpenAI
        # too); null makes llama.cpp answer 500 and others 400; a few want no key at all.
        if message.content:
            wire["content"] = message.content
        elif empty_content == "null":
            wire["content"] = None
        elif empty_content == "empty_string":
            wire["content"] = ""
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        return wire
    return {"role": message.role, "content": message.content}


def wire_tools(tools: Sequence[ToolSpec]) -> EncodedList:
    """The ``tools`` array (each tool's form and encoding cached on its spec)."""
    out = EncodedList()
    for spec in tools:
        cache = spec.wire
        form, data = cache.get("openai"), cache.get("openai:json")
        if form is None or data is None:
            function = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
            form = {"type": "function", "function": function}
            data = to_json(form)
            cache["openai"], cache["openai:json"] = form, data
        out.append(form)
        out.parts.append(data)
    return out


def usage_of(raw: Mapping[str, Any] | None) -> Usage:
    """Normalised usage: ``prompt_tokens`` includes the part read from OpenAI's automatic
    prompt cache (``prompt_tokens_details.cached_tokens``), our ``input_tokens`` do not —
    that part is ``cache_read_tokens``. A server that sent none gives
    ``Usage(unreported_calls=1)``. The engine prices it (from the run's price table)."""
    if not raw:
        return Usage(unreported_calls=1)
    cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0) - cached,
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def _arguments(value: Any) -> str:
    # Some compatible servers send the arguments as an object instead of JSON text.
    return value if isinstance(value, str) else json.dumps(value)


def _response(
    *,
    text: str,
    refusal: str,
    calls: list[ToolCall],
    finish: str | None,
    usage: Mapping[str, Any] | None,
    model: str,
) -> ModelResponse:
    stop = STOP_REASONS.get(finish or "stop", finish or "end_turn")
    if refusal:
        stop = "refusal"
    elif calls and stop == "end_turn":
        stop = "tool_use"  # some servers say "stop" even when they called tools
    return ModelResponse(
        message=AssistantMessage(content=text or refusal, tool_calls=tuple(calls)),
        usage=usage_of(usage),
        stop_reason=stop,
        model=model,
    )


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def done(self) -> ToolCall:
        return ToolCall(
            id=self.id or new_id("call"), name=self.name, arguments="".join(self.arguments) or "{}"
        )


class ChatStream:
    """Assembles Chat Completions chunks into one answer: text deltas, tool calls whose
    ``arguments`` arrive in fragments keyed by ``index``, a usage-only last chunk, ``[DONE]``."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.done = False

    def feed(self, chunk: Any) -> str:
        """Take one chunk (``None`` for ``[DONE]``); return the text it adds."""
        if chunk is None:
            self.done = True
            return ""
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        added = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # only one choice is ever requested
            delta = choice.get("delta") or {}
            if delta.get("content"):
                added.append(delta["content"])
            if delta.get("refusal"):
                self.refusal.append(delta["refusal"])
            for position, fragment in enumerate(delta.get("tool_calls") or []):
                call = self.calls.setdefault(fragment.get("index", position), _Call())
                call.id = call.id or fragment.get("id") or ""
                function = fragment.get("function") or {}
                call.name = call.name or function.get("name") or ""
                if function.get("arguments"):
                    call.arguments.append(_arguments(function["arguments"]))
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        self.text.extend(added)
        return "".join(added)

    def response(self, cut: str | None) -> ModelResponse:
        """The whole answer; ``StreamCutError`` if the server never said it had finished."""
        calls = [self.calls[i].done() for i in sorted(self.calls)]
        text = "".join(self.text)
        if self.finish is None and not self.done:
            raise stream_cut(self.provider, cut, text, calls, missing="a finish_reason or [DONE]")
        return _response(
            text=text,
            refusal="".join(self.refusal),
            calls=calls,
            finish=self.finish,
            usage=self.usage,
            model=self.model,
        )


def wire_tool_choice(request: ModelRequest, option: str | None) -> str | dict[str, Any]:
    """``tool_choice`` as Chat Completions takes it: a word (default ``auto``), or a tool's
    name as ``{"type": "function", "function": {"name": …}}``."""
    choice = chosen_tool(request.tool_choice or option, [t.name for t in request.tools]) or "auto"
    if choice in TOOL_CHOICE_WORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


class OpenAIProvider(HTTPProvider):
    """OpenAI's Chat Completions API (``openai/<model>``).

    The key comes from ``api_key`` or ``OPENAI_API_KEY``; the base URL from ``base_url``,
    ``OPENAI_BASE_URL`` or the default. ``options`` (see ``ProviderOptions``) shape every
    request: an assistant turn made only of tool calls has ``content: ""`` unless
    ``empty_content`` says otherwise, ``tool_choice`` (default ``"auto"``) goes with every
    offer of tools (llama-cpp-python ignores ``tools`` without it), a request's
    ``json_answer`` goes as ``response_format`` (unless ``structured_output`` is
    ``"tool"``, for a server without a JSON-schema mode), ``extra`` fields are
    added to the body, and ``stream_usage=False`` leaves out ``stream_options`` for servers
    that reject it (usage is then unreported). The context window is the option's, else
    that of a known model (``window.CONTEXT_WINDOWS``)."""

    name: ClassVar[str] = "openai"
    endpoint: ClassVar[str] = "/chat/completions"
    key_hint: ClassVar[str] = "OPENAI_API_KEY (or the api_key setting)"
    base_url_hint: ClassVar[str] = "the base URL (OPENAI_BASE_URL or the base_url setting)"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    # Newer OpenAI models only accept max_completion_tokens; other servers know max_tokens.
    max_tokens_field: ClassVar[str] = "max_completion_tokens"
    # Whether the server may say its context window (``GET /v1/models``, llama.cpp's /props).
    asks_window: ClassVar[bool] = False

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
        options: ProviderOptions | None = None,
    ) -> None:
        super().__init__(
            model,
            base_url=self._base_url(base_url, model),
            api_key=self._key(api_key, model),
            transport=transport,
            retry=retry,
            options=options,
        )
        self.empty_content: EmptyContent = self.options.empty_content or "empty_string"
        self.structured_output = self.options.structured_output or "json_schema"
        self._histories = Histories()
        asking = self.asks_window and self.context_window is None
        self._window_key = WINDOWS.key(self.base_url, model, self.api_key()) if asking else None
        self._window_settled = not asking  # the option's, a stated one, or the server unanswering
        self._window_stated = False
        # Looked up once: a server that reports no window falls back to it on every call.
        self._known_window = known_window(model) if self.context_window is None else None
        if self.context_window is None and not self.asks_window:
            self.context_window = self._known_window

    async def discover_window(self) -> int | None:
        """The context window: the option's, else (a server that may say it) what the
        server reports (``window.WINDOWS``: asked once for every provider of the process,
        kept ten minutes), else that of a known model name (a proxy's ``gpt-4o``), else
        ``None``. A server that does not answer is asked once by this provider."""
        if self._window_settled or self._window_key is None:
            return self.context_window
        try:
            reported = await WINDOWS.window(self._window_key, self._client)
        except WindowUnansweredError:
            reported = None
            self._window_settled = True
        if not self._window_stated:  # a too-long error may have said it meanwhile
            self.context_window = reported or self._known_window
        return self.context_window

    def learn_window(self, tokens: int) -> None:
        """Take the window a server stated (in a too-long error) over what it reported."""
        super().learn_window(tokens)
        self._window_settled = self._window_stated = True

    def api_error(
        self, status: int | None, kind: str, detail: str, *, retry_after: float | None = None, body: Any = None
    ) -> ProviderError:
        """The base's error; a too-long one also makes every provider of this server ask it
        its window again (a llama.cpp restarted with another size), this one included."""
        error = super().api_error(status, kind, detail, retry_after=retry_after, body=body)
        if error.kind == "context_length" and self._window_key is not None:
            WINDOWS.forget(self._window_key)
            self._window_settled = self._window_stated
        return error

    # Resolved before Provider.__init__ runs, hence ``model`` as a parameter.
    def _key(self, api_key: str | None, model: str) -> str | None:
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ConfigError(
                f"no API key for {self.name}/{model}: set OPENAI_API_KEY (or the api_key setting)"
            )
        return key

    def _base_url(self, base_url: str | None, model: str) -> str:
        return base_url or os.environ.get("OPENAI_BASE_URL") or str(self.default_base_url)

    def headers(self) -> dict[str, str]:
        key = self.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def event_error(self, payload: Payload) -> ProviderError | None:
        error = payload.data.get("error") if isinstance(payload.data, dict) else None
        if not error:
            return None
        if isinstance(error, dict):
            kind = str(error.get("type") or error.get("code") or "")
            return self.api_error(None, kind, str(error.get("message") or ""), body=payload.data)
        return self.api_error(None, "", str(error))

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The request body for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(
                request.system, request.messages, self.empty_content, vision=self.vision, histories=self._histories
            ),
        }
        options = self.options
        if request.tools:
            body["tools"] = wire_tools(request.tools)
            body["tool_choice"] = wire_tool_choice(request, options.tool_choice)
        if request.json_answer is not None and self.structured_output == "json_schema":
            answer = request.json_answer
            schema = {"name": answer.name, "schema": dict(answer.schema), "strict": answer.strict}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        max_tokens, temperature = self.sampling(request)
        if max_tokens:
            body[self.max_tokens_field] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        if effort := openai_effort(self.model, request.effort):
            body["reasoning_effort"] = effort
        if stream:
            body["stream"] = True
            if options.stream_usage is not False:
                body["stream_options"] = {"include_usage": True}
        body.update(options.extra)
        return body

    def assembler(self) -> ChatStream:
        """A fresh assembler of one streamed answer."""
        return ChatStream(self.name, self.model)

    def answer(self, data: Any) -> ModelResponse:
        """The answer in a plain response's JSON."""
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices:
            raise ProviderError(
                f"the answer has no choices: {self.scrub(json.dumps(data)[:300])}",
                provider=self.name,
            )
        message = choices[0].get("message") or {}
        calls = [
            ToolCall(
                id=c.get("id") or new_id("call"),
                name=(c.get("function") or {}).get("name") or "",
                arguments=_arguments((c.get("function") or {}).get("arguments") or "{}"),
            )
            for c in message.get("tool_calls") or []
        ]
        return _response(
            text=message.get("content") or "",
            refusal=message.get("refusal") or "",
            calls=calls,
            finish=choices[0].get("finish_reason"),
            usage=data.get("usage"),
            model=data.get("model") or self.model,
        )


class OpenAICompatibleProvider(OpenAIProvider):
    """Any server speaking Chat Completions (``openai-compatible/<model>``): vLLM, SGLang,
    LM Studio, a LiteLLM proxy. Needs a base URL; the key is optional. The context window
    is the option's, else what the server reports (see ``window.probe_window``)."""

    name: ClassVar[str] = "openai-compatible"
    default_base_url: ClassVar[str | None] = None
    vision = False  # many local servers serve text-only models: the vision option turns it on
    max_tokens_field: ClassVar[str] = "max_tokens"
    asks_window: ClassVar[bool] = True

    def _key(self, api_key: str | None, model: str) -> str | None:
        return api_key or os.environ.get("OPENAI_API_KEY") or None

    def _base_url(self, base_url: str | None, model: str) -> str:
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise ConfigError(
                f"{self.name}/{model} needs the server's base URL: set OPENAI_BASE_URL "
                "(e.g. http://localhost:8000/v1) or the base_url setting"
            )
        return url


class OllamaProvider(OpenAIProvider):
    """A model served by Ollama (``ollama/<model>``), via its OpenAI-compatible endpoint at
    ``$OLLAMA_HOST/v1`` (default ``http://localhost:11434``). No key is needed; an explicit
    ``api_key`` is sent (for a proxy), ``OPENAI_API_KEY`` is not, so a real OpenAI key never
    goes to a local server. Ollama does not report its context size (``num_ctx``) and cuts
    a longer prompt silently instead of failing: set the ``context_window`` option to it."""

    name: ClassVar[str] = "ollama"
    vision = False  # llava and friends take images (set the vision option); most models do not
    key_hint: ClassVar[str] = "the api_key setting (Ollama needs none; a proxy in front may)"
    base_url_hint: ClassVar[str] = "that Ollama runs (`ollama serve`) and OLLAMA_HOST"
    max_tokens_field: ClassVar[str] = "max_tokens"
    asks_window: ClassVar[bool] = True

    def _key(self, api_key: str | None, model: str) -> str | None:
        return api_key

    def _base_url(self, base_url: str | None, model: str) -> str:
        if base_url:
            return base_url
        host = os.environ.get("OLLAMA_HOST") or "http://localhost:11434"
        if "://" not in host:
            host = "http://" + host  # OLLAMA_HOST is often written as host:port
        return host.rstrip("/") + "/v1"
