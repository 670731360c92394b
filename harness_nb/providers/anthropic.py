"""Anthropic Messages API: ``anthropic/<model>``.

The wire format differs from Chat Completions in ways that matter: the system prompt is a
top-level field, tool results travel as ``tool_result`` blocks in a *user* message, roles
must alternate (so consecutive same-role messages are merged into one), tool-call
arguments are objects, and ``max_tokens`` is required.

Prompt caching (on unless ``ProviderOptions.prompt_caching`` is ``False``, or the server
refused the system prompt as blocks: ``quirks.py``): every request
marks ``cache_control: {"type": "ephemeral"}`` breakpoints on the last tool, on the system
prompt (sent as one text block), on the last block of the latest turn and on the last
block of the turn before it (where the previous request ended, which that request
wrote to the cache) — four, the API's most. So each call reads the tools, the system
prompt and the history up to the previous call from the cache (0.1× the input price) and
writes only what was added since (1.25×), however many blocks a turn added. Subagents of
one definition send the same tools and system prompt, so they share that part.

Extended thinking (a request's ``effort`` on a model that thinks, see ``effort.py``): the
body gets ``thinking: {type: enabled, budget_tokens}``, ``max_tokens`` grows by the budget
and no temperature is sent (the API allows none but 1). The thinking blocks of an answer
are kept on its message and go back first, unchanged, with that turn: while its tool calls
are answered the API requires them, signatures and all.
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
    SystemMessage,
    Thinking,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from ..core.media import with_placeholders
from .base import ModelRequest, ModelResponse
from .effort import thinking_budget
from .http import HTTPProvider, Payload, RetryPolicy, stream_cut
from .options import ProviderOptions, chosen_tool
from .quirks import SYSTEM_FORM, names_system_form
from .window import known_window
from .wire import EncodedList, to_json

API_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 8192
# ProviderOptions.tool_choice in the Messages API's words ("required" is "any" there; a
# tool's name is {"type": "tool", "name": …}).
TOOL_CHOICES = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
EPHEMERAL = {"type": "ephemeral"}


def wire_messages(
    system: str, messages: Sequence[Message], *, breakpoints: bool = False, vision: bool = True
) -> tuple[str, EncodedList]:
    """``(system, messages)`` for the API. Empty text blocks are dropped (the API rejects
    them), same-role neighbours merged, and a system message inside the history is added
    to the system prompt (the API has no other place for it). Each message's blocks and
    their JSON are cached on the message; merging only joins them.

    With ``breakpoints``, the last block of the latest turn and of the turn before it
    (``[-3]``: user turns alternate with the model's) carries ``cache_control``. The marked
    form is cached beside the plain one, so a message is encoded at most twice, ever.

    A tool result's images are ``image`` blocks in its ``tool_result`` content with
    ``vision``, text placeholders in it without."""
    key = "anthropic" if vision else "anthropic:text"
    systems = [system] if system else []
    out = EncodedList()
    blocks_json: list[list[bytes]] = []  # per message of ``out``: its blocks, encoded
    last: list[Message] = []  # per message of ``out``: the message its last block is from
    for message in messages:
        if isinstance(message, SystemMessage):
            systems.append(message.content)
            continue
        cache = message.wire
        form, data = cache.get(key), cache.get(f"{key}:json")
        if form is None or data is None:
            # Both are made before either is stored: a failure in between must not leave
            # a form without its encoding for every later request to trip over.
            form = _blocks(message, vision)
            data = b",".join(to_json(b) for b in form[1])
            cache[key], cache[f"{key}:json"] = form, data
        role, blocks = form
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # our own list, the cached one stays intact
            blocks_json[-1].append(data)
            last[-1] = message
        else:
            out.append({"role": role, "content": list(blocks)})
            blocks_json.append([data])
            last.append(message)
    for index in (-3, -1) if breakpoints else ():
        if len(out) >= -index:
            block, data = _marked(last[index], key)
            out[index]["content"][-1] = block
            blocks_json[index][-1] = data
    out.parts = [
        b'{"role":' + to_json(m["role"]) + b',"content":[' + b",".join(parts) + b"]}"
        for m, parts in zip(out, blocks_json, strict=True)
    ]
    return "\n\n".join(systems), out


def _marked(message: Message, key: str = "anthropic") -> tuple[dict[str, Any], bytes]:
    """``message``'s last block with ``cache_control``, and all its blocks so encoded
    (cached on the message beside the plain form, which ``key`` names)."""
    cache = message.wire
    block, data = cache.get(f"{key}:marked"), cache.get(f"{key}:marked:json")
    if block is None or data is None:
        blocks = cache[key][1]
        block = {**blocks[-1], "cache_control": EPHEMERAL}
        data = b",".join(to_json(b) for b in (*blocks[:-1], block))
        cache[f"{key}:marked"], cache[f"{key}:marked:json"] = block, data
    return block, data


def _result_content(message: ToolResultMessage, vision: bool) -> str | list[dict[str, Any]]:
    """A ``tool_result``'s content: its text, then its images as ``image`` blocks (with
    ``vision``) or as placeholders in the text (without)."""
    if not message.images:
        return message.content
    if not vision:
        return with_placeholders(message.content, message.images)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    blocks += [
        {"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.data}}
        for image in message.images
    ]
    return blocks


def _blocks(message: Message, vision: bool = True) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, ToolResultMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": _result_content(message, vision),
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    if isinstance(message, AssistantMessage):
        # thinking blocks go back first and unchanged: the API checks their signatures
        blocks: list[dict[str, Any]] = [_thinking_block(t) for t in message.thinking]
        blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            try:
                arguments = call.parsed_arguments()
            except ValueError:
                arguments = {}  # the engine already told the model its JSON was broken
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
            )
        return "assistant", [b for b in blocks if b.get("text") != ""]
    assert isinstance(message, UserMessage)
    return "user", [{"type": "text", "text": message.content}] if message.content else []


def _thinking_block(thinking: Thinking) -> dict[str, Any]:
    if thinking.data:
        return {"type": "redacted_thinking", "data": thinking.data}
    return {"type": "thinking", "thinking": thinking.text, "signature": thinking.signature}


def _thinking_of(block: Mapping[str, Any]) -> Thinking | None:
    """A thinking or redacted_thinking block of an answer, as kept on the message."""
    if block.get("type") == "thinking":
        return Thinking(text=str(block.get("thinking") or ""), signature=str(block.get("signature") or ""))
    if block.get("type") == "redacted_thinking":
        return Thinking(data=str(block.get("data") or ""))
    return None


def wire_tools(tools: Sequence[ToolSpec], *, mark_last: bool = False) -> EncodedList:
    """The ``tools`` array (each tool's form and encoding cached on its spec); with
    ``mark_last`` the last tool carries ``cache_control`` (that form cached too)."""
    out = EncodedList()
    for n, spec in enumerate(tools, start=1):
        key = "anthropic:marked" if mark_last and n == len(tools) else "anthropic"
        cache = spec.wire
        form, data = cache.get(key), cache.get(key + ":json")
        if form is None or data is None:
            form = {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
            if key == "anthropic:marked":
                form["cache_control"] = EPHEMERAL
            data = to_json(form)
            cache[key], cache[key + ":json"] = form, data
        out.append(form)
        out.parts.append(data)
    return out


def usage_of(raw: Mapping[str, Any] | None) -> Usage:
    """Normalised usage: Anthropic's ``input_tokens`` already leave out the tokens read from
    the prompt cache (``cache_read_input_tokens``) and written to it
    (``cache_creation_input_tokens``). A server that sent none gives
    ``Usage(unreported_calls=1)``. The engine prices it (from the run's price table)."""
    if not raw:
        return Usage(unreported_calls=1)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=int(raw.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(raw.get("cache_creation_input_tokens") or 0),
    )


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    initial_input: Any = None
    signature: str = ""
    data: str = ""  # a redacted_thinking block's payload


class MessageStream:
    """Assembles Messages API events into one answer: ``message_start`` (usage),
    ``content_block_start`` / ``_delta`` / ``_stop`` for text and tool_use blocks,
    ``message_delta`` (stop reason, output usage), ``message_stop``; ``ping`` is ignored.
    Thinking blocks (``thinking_delta``, ``signature_delta``; ``redacted_thinking``) are
    kept on the message, to go back with its turn, and never stream as text."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Any) -> str:
        """Take one event; return the text it adds."""
        if event is None:
            return ""  # a stray [DONE]: nothing to add
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            start = event.get("content_block") or {}
            block = self.blocks[event.get("index", len(self.blocks))] = _Block(
                kind=start.get("type", ""),
                id=start.get("id", ""),
                name=start.get("name", ""),
                initial_input=start.get("input"),
                data=str(start.get("data") or ""),
            )
            if block.kind == "thinking" and start.get("thinking"):
                block.text.append(str(start["thinking"]))
            if block.kind == "text" and start.get("text"):
                block.text.append(start["text"])
                return str(start["text"])
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            block = self.blocks.setdefault(event.get("index", 0), _Block(kind="text"))
            if delta.get("type") == "text_delta":
                block.text.append(delta.get("text", ""))
                return str(delta.get("text", ""))
            if delta.get("type") == "input_json_delta":
                block.text.append(delta.get("partial_json", ""))
            if delta.get("type") == "thinking_delta":
                block.text.append(delta.get("thinking", ""))
            if delta.get("type") == "signature_delta":
                block.signature += delta.get("signature", "")
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage.update(event.get("usage") or {})  # running totals: later values win
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def response(self, cut: str | None) -> ModelResponse:
        """The whole answer; ``StreamCutError`` if the server never said why it stopped."""
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        text = "".join("".join(b.text) for b in blocks if b.kind == "text")
        calls = [_tool_call(b) for b in blocks if b.kind == "tool_use"]
        if not self.stopped and self.stop_reason is None:
            raise stream_cut(self.provider, cut, text, calls, missing="message_stop")
        thinking = tuple(
            Thinking(data=b.data) if b.kind == "redacted_thinking" else Thinking(text="".join(b.text), signature=b.signature)
            for b in blocks
            if b.kind in ("thinking", "redacted_thinking")
        )
        return ModelResponse(
            message=AssistantMessage(content=text, tool_calls=tuple(calls), thinking=thinking),
            usage=usage_of(self.usage),
            stop_reason=self.stop_reason or "end_turn",
            model=self.model,
        )


def _tool_call(block: _Block) -> ToolCall:
    # The raw text is kept even when incomplete (cut by max_tokens): the engine turns it
    # into a readable error instead of the parser failing here.
    arguments = "".join(block.text)
    if not arguments:
        arguments = json.dumps(block.initial_input) if block.initial_input else "{}"
    return ToolCall(id=block.id, name=block.name, arguments=arguments)


class AnthropicProvider(HTTPProvider):
    """Anthropic's Messages API (``anthropic/<model>``).

    The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``; the base URL from ``base_url``,
    ``ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``. ``options`` (see
    ``ProviderOptions``) shape every request: ``max_tokens`` (required by the API) is the
    request's, else the option's, else 8192; ``tool_choice`` (the request's, else the
    option's) is sent only when set (the API's own default is auto; a forced call,
    ``required`` or a tool's name, goes without thinking, which the API refuses beside it);
    ``extra`` fields are added to the body. The Messages API has no JSON-schema mode here:
    a structured answer is asked for with a forced answer tool (``structured_output`` is
    ``"tool"``). The context window is the option's, else that of a known model
    (``window.CONTEXT_WINDOWS``)."""

    name: ClassVar[str] = "anthropic"
    endpoint: ClassVar[str] = "/v1/messages"
    key_hint: ClassVar[str] = "ANTHROPIC_API_KEY (or the api_key setting)"
    base_url_hint: ClassVar[str] = "the base URL (ANTHROPIC_BASE_URL or the base_url setting)"

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
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigError(
                f"no API key for anthropic/{model}: set ANTHROPIC_API_KEY (or the api_key setting)"
            )
        super().__init__(
            model,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
            api_key=key,
            transport=transport,
            retry=retry,
            options=options,
        )
        if self.context_window is None:
            self.context_window = known_window(model)
        if self.options.structured_output == "json_schema":
            raise ConfigError(
                f"anthropic/{model} has no JSON-schema mode here: a structured answer comes through a forced "
                "answer tool; leave the structured_output option unset (or 'tool')"
            )
        self.cache_writes = self.options.prompt_caching is not False

    @property
    def cache_writes(self) -> bool:
        """Whether requests mark prompt-cache breakpoints (and so write the cache): the
        ``prompt_caching`` option (on by default), unless this server refused the system
        prompt as blocks (``quirks.py``), which caching needs."""
        return self._caching and self.quirks.system_blocks

    @cache_writes.setter
    def cache_writes(self, value: bool) -> None:
        self._caching = value

    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.api_key() or "", "anthropic-version": API_VERSION}

    def event_error(self, payload: Payload) -> ProviderError | None:
        data = payload.data if isinstance(payload.data, dict) else {}
        if payload.event != "error" and data.get("type") != "error":
            return None
        error = data.get("error") or {}
        return self.api_error(
            None, str(error.get("type") or ""), str(error.get("message") or ""), body=payload.data
        )

    def api_error(
        self, status: int | None, kind: str, detail: str, *, retry_after: float | None = None, body: Any = None
    ) -> ProviderError:
        """The base's error; one that names the system prompt's form, from a server sent
        the prompt as blocks, is a ``system_form`` error: not retried as it was, but sent
        again with the prompt as plain text (``quirks.py``)."""
        error = super().api_error(status, kind, detail, retry_after=retry_after, body=body)
        refused = status not in (401, 403, 404, 429) and error.kind is None
        if refused and self.cache_writes and names_system_form(detail):
            return ProviderError(
                f"the server refused the system prompt as a list of blocks: {self.scrub(detail)}",
                provider=self.name,
                status=status,
                kind=SYSTEM_FORM,
            )
        return error

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The request body for ``request``."""
        caching = self.cache_writes
        system, messages = wire_messages(
            request.system, request.messages, breakpoints=caching, vision=self.vision
        )
        options = self.options
        tools = wire_tools(request.tools, mark_last=caching)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.output_limit(request),
            "messages": messages,
        }
        if system:
            body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}] if caching else system
        forced = False
        if tools:
            body["tools"] = tools
            choice = chosen_tool(request.tool_choice or options.tool_choice, [t.name for t in request.tools])
            if choice:
                body["tool_choice"] = TOOL_CHOICES.get(choice) or {"type": "tool", "name": choice}
                forced = choice not in ("auto", "none")
        temperature = self.sampling(request)[1]
        # the API refuses thinking with a forced tool call: such a call is sent without it
        budget = None if forced else thinking_budget(self.model, request.effort)
        if budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif temperature is not None:  # with thinking the API takes no temperature but 1
            body["temperature"] = temperature
        if stream:
            body["stream"] = True
        body.update(options.extra)
        return body

    def output_limit(self, request: ModelRequest) -> int:
        """The ``max_tokens`` sent with ``request`` (the API requires one): the request's,
        else the option's, else 8192 — plus the thinking budget of its ``effort``, which
        counts within ``max_tokens``, so that the answer keeps its own room."""
        return (self.sampling(request)[0] or DEFAULT_MAX_TOKENS) + (thinking_budget(self.model, request.effort) or 0)

    def assembler(self) -> MessageStream:
        """A fresh assembler of one streamed answer."""
        return MessageStream(self.name, self.model)

    def answer(self, data: Any) -> ModelResponse:
        """The answer in a plain response's JSON."""
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise ProviderError(
                f"the answer has no content: {self.scrub(json.dumps(data)[:300])}",
                provider=self.name,
            )
        text = "".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
        calls = [
            ToolCall(
                id=b.get("id", ""),
                name=b.get("name", ""),
                arguments=json.dumps(b.get("input") or {}),
            )
            for b in data["content"]
            if b.get("type") == "tool_use"
        ]
        model = data.get("model") or self.model
        thinking = tuple(t for b in data["content"] if (t := _thinking_of(b)) is not None)
        return ModelResponse(
            message=AssistantMessage(content=text, tool_calls=tuple(calls), thinking=thinking),
            usage=usage_of(data.get("usage")),
            stop_reason=data.get("stop_reason") or "end_turn",
            model=model,
        )
