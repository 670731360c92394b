"""How the fake LLM server words its answers: the JSON bodies and the SSE events of the
OpenAI Chat Completions and Anthropic Messages APIs, built from a script step.

Streams fragment text and tool-call arguments over several events like the real APIs and
end with the usage chunk / ``message_stop``. A step with ``omit_usage`` gets no usage at
all, as from the many local servers that send none. A step without a scripted ``usage``
gets ``count_tokens`` of the request as its input, split the way each API reports prompt
caching (``fake_cache.py``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from .fake_cache import PromptCache

_OPENAI_STOP = {
    "end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
    "refusal": "content_filter",
}


class AnswerWriter:
    """Builds answers for one server; ids (``call_fake1``, ``msg_fake2`` …) are unique per
    writer, and ``cache`` is the prompt cache its answers' usage reports on."""

    def __init__(self, cache: PromptCache | None = None) -> None:
        self._ids = itertools.count(1)
        self.cache = cache or PromptCache()

    def usage(self, api: str, step: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, int] | None:
        """The usage of the answer to ``body``: the step's own (``input_tokens``,
        ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``), else an estimate —
        about four characters a token — with the cached part as the API would report it."""
        if step.get("omit_usage"):
            return None
        out_chars = len(step.get("text", "")) + len(json.dumps(step.get("tool_calls") or []))
        given = step.get("usage")
        prompt = count_tokens(body)
        if given:
            return {
                "input_tokens": int(given.get("input_tokens", prompt)),
                "output_tokens": int(given.get("output_tokens", out_chars // 4 + 1)),
                "cache_read_tokens": int(given.get("cache_read_tokens", 0)),
                "cache_write_tokens": int(given.get("cache_write_tokens", 0)),
            }
        if api == "anthropic":
            read, written = self.cache.anthropic(body)
        else:
            read, written = min(self.cache.openai(body), prompt), 0
        return {
            "input_tokens": max(prompt - read - written, 0),
            "output_tokens": out_chars // 4 + 1,
            "cache_read_tokens": read,
            "cache_write_tokens": written,
        }

    def calls(self, api: str, step: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        """``(id, name, arguments JSON text)`` for each tool call of a step."""
        prefix = "call_" if api == "openai" else "toolu_"
        out = []
        for call in step.get("tool_calls") or []:
            arguments = call.get("arguments", {})
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            out.append((call.get("id") or f"{prefix}fake{next(self._ids)}", call["name"], text))
        return out

    def body(self, api: str, step: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body of a plain (not streamed) answer to request ``body``."""
        text, calls, stop = step.get("text", ""), self.calls(api, step), _stop(step)
        usage, model = self.usage(api, step, body), body.get("model", "fake")
        answer: dict[str, Any]
        if api == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ]
            choice = {"index": 0, "message": message, "finish_reason": _OPENAI_STOP.get(stop, stop)}
            answer = {"id": f"chatcmpl-fake{next(self._ids)}", "object": "chat.completion",
                      "model": model, "choices": [choice]}
            if usage is not None:
                answer["usage"] = _openai_usage(usage)
            return answer
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": i, "name": n, "input": _object(a)} for i, n, a in calls
        ]
        answer = {"id": f"msg_fake{next(self._ids)}", "type": "message", "role": "assistant",
                  "model": model, "content": content, "stop_reason": stop, "stop_sequence": None}
        if usage is not None:
            answer["usage"] = _anthropic_usage(usage)
        return answer

    def events(
        self, api: str, step: Mapping[str, Any], body: Mapping[str, Any], *, finished: bool = True
    ) -> list[str]:
        """The SSE events of a streamed answer, as text; ``finished=False`` leaves out the
        events that say the answer is complete (finish_reason, usage, [DONE], message_stop)."""
        text, calls, stop = step.get("text", ""), self.calls(api, step), _stop(step)
        usage, model = self.usage(api, step, body), body.get("model", "fake")
        if api == "openai":
            if not (body.get("stream_options") or {}).get("include_usage"):
                usage = None
            ident = f"chatcmpl-fake{next(self._ids)}"
            events = _openai_events(ident, model, text, calls, stop, usage)
            return events if finished else events[: -(3 if usage is not None else 2)]
        events = _anthropic_events(f"msg_fake{next(self._ids)}", model, text, calls, stop, usage)
        return events if finished else events[:-2]


def _openai_events(
    ident: str, model: str, text: str, calls: list[tuple[str, str, str]], stop: str,
    usage: Mapping[str, int] | None,
) -> list[str]:
    base = {"id": ident, "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return sse(dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}]))

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(text, 16)]
    for index, (call_id, name, arguments) in enumerate(calls):
        function = {"name": name, "arguments": ""}
        events.append(chunk({"tool_calls": [
            {"index": index, "id": call_id, "type": "function", "function": function}
        ]}))
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(arguments, 8)
        ]
    events.append(chunk({}, _OPENAI_STOP.get(stop, stop)))
    if usage is not None:
        events.append(sse(dict(base, choices=[], usage=_openai_usage(usage))))
    return [*events, "data: [DONE]\n\n"]


def _anthropic_events(
    ident: str, model: str, text: str, calls: list[tuple[str, str, str]], stop: str,
    usage: Mapping[str, int] | None,
) -> list[str]:
    message: dict[str, Any] = {"id": ident, "type": "message", "role": "assistant", "model": model,
               "content": [], "stop_reason": None, "stop_sequence": None}
    if usage is not None:
        message["usage"] = dict(_anthropic_usage(usage), output_tokens=1)
    events = [sse({"type": "message_start", "message": message}, named=True)]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if text:
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(text, 16)]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call_id, name, arguments in calls:
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments, 8)]
        blocks.append(({"type": "tool_use", "id": call_id, "name": name, "input": {}}, deltas))
    for index, (block, deltas) in enumerate(blocks):
        start = {"type": "content_block_start", "index": index, "content_block": block}
        events.append(sse(start, named=True))
        if index == 0:
            events.append(sse({"type": "ping"}, named=True))
        events += [
            sse({"type": "content_block_delta", "index": index, "delta": d}, named=True)
            for d in deltas
        ]
        events.append(sse({"type": "content_block_stop", "index": index}, named=True))
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": None}}
    if usage is not None:
        delta["usage"] = {"output_tokens": usage["output_tokens"]}
    return [*events, sse(delta, named=True), sse({"type": "message_stop"}, named=True)]


# -- wire helpers --------------------------------------------------------------------------


def _stop(step: Mapping[str, Any]) -> str:
    return str(step.get("stop_reason") or ("tool_use" if step.get("tool_calls") else "end_turn"))


def count_tokens(body: Mapping[str, Any]) -> int:
    """The tokens a request holds, as the fake server counts them: a quarter of the
    characters of its system prompt, messages and tools as JSON. Deterministic, so a test
    can say exactly when a request is too long."""
    held = [body.get("system"), body.get("messages"), body.get("tools")]
    return len(json.dumps(held, ensure_ascii=False)) // 4


def _openai_usage(u: Mapping[str, int]) -> dict[str, Any]:
    prompt = u["input_tokens"] + u["cache_read_tokens"]  # OpenAI counts the cached part in
    return {"prompt_tokens": prompt, "completion_tokens": u["output_tokens"],
            "total_tokens": prompt + u["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": u["cache_read_tokens"]}}


def _anthropic_usage(u: Mapping[str, int]) -> dict[str, Any]:
    return {"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
            "cache_creation_input_tokens": u["cache_write_tokens"],
            "cache_read_input_tokens": u["cache_read_tokens"]}


def _object(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return {}


def too_long_error(flavour: str, tokens: int, window: int) -> dict[str, Any]:
    """The 400 body each API sends for a request of ``tokens`` over a ``window``."""
    if flavour == "anthropic":
        return error_body("anthropic", "invalid_request_error", f"prompt is too long: {tokens} tokens > {window} maximum")
    if flavour == "llamacpp":
        return {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                          "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": window}}
    if flavour == "vllm":
        return {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                "message": f"This model's maximum context length is {window} tokens. However, you requested "
                           f"{tokens} tokens in the messages. Please reduce the length of the messages."}
    message = (f"This model's maximum context length is {window} tokens. However, your messages resulted in "
               f"{tokens} tokens. Please reduce the length of the messages.")
    return {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}


def window_info(path: str, server: str, window: int | None) -> Any:
    """What ``GET path`` answers on a ``server`` of that kind (``None``: 404). ``window``
    ``None`` means the server does not say it."""
    if path.endswith("/models"):
        entry: dict[str, Any] = {"id": "fake", "object": "model", "owned_by": "fake"}
        if window is not None and server == "vllm":
            entry["max_model_len"] = window
        elif window is not None and server == "llamacpp":
            entry["meta"] = {"n_ctx_train": window * 4, "n_params": 1_000_000}
        elif server != "openai":
            return None
        return {"object": "list", "data": [entry]}
    if server != "llamacpp" or window is None:
        return None
    if path.endswith("/props"):
        return {"default_generation_settings": {"n_ctx": window}, "total_slots": 1}
    if path.endswith("/slots"):
        return [{"id": 0, "n_ctx": window, "is_processing": False}]
    return None


def error_body(api: str, kind: str, message: str) -> dict[str, Any]:
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None}}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(data: Mapping[str, Any], *, named: bool = False) -> str:
    # Anthropic names every event after its type; OpenAI sends bare data lines.
    head = f"event: {data['type']}\n" if named else ""
    return f"{head}data: {json.dumps(data)}\n\n"
