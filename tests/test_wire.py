"""Request bodies joined from cached encodings: the bytes are the body's JSON, a history is
encoded once per message (not once per call), and a list changed after the fact is
encoded afresh rather than sent stale."""

from __future__ import annotations

import json

import pytest

from harness_nb.core import AssistantMessage, SystemMessage, ToolCall, ToolResultMessage, ToolSpec, UserMessage
from harness_nb.providers.base import ModelRequest
from harness_nb.providers.factory import create_provider
from harness_nb.providers.wire import EncodedList, encode_body

SPEC = ToolSpec(name="echo", description="Echo «text».", parameters={"type": "object", "properties": {"text": {"type": "string"}}})


def history() -> list:
    return [
        UserMessage(content="Say it twice — in two calls."),
        AssistantMessage(
            content="",
            tool_calls=(
                ToolCall(id="c1", name="echo", arguments='{"text": "a"}'),
                ToolCall(id="c2", name="echo", arguments='{"text": "b"}'),
            ),
        ),
        ToolResultMessage(tool_call_id="c1", name="echo", content="a"),
        ToolResultMessage(tool_call_id="c2", name="echo", content="b", is_error=True),
        SystemMessage(content="Background task bg-1 finished."),
        UserMessage(content="Now once more."),
    ]


@pytest.mark.parametrize("model", ["openai/m", "openai-compatible/m", "anthropic/m"])
@pytest.mark.parametrize("stream", [False, True])
async def test_encoded_body_is_the_body(model: str, stream: bool) -> None:
    async with create_provider(model, api_key="k", base_url="http://127.0.0.1:9") as provider:
        body = provider.body(ModelRequest(system="Be brief.", messages=history(), tools=[SPEC]), stream=stream)
    assert isinstance(body["messages"], EncodedList) and isinstance(body["tools"], EncodedList)
    assert json.loads(encode_body(body)) == body
    # Byte for byte what httpx's json= would have sent.
    assert encode_body(body) == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("model", ["openai/m", "anthropic/m"])
async def test_history_is_encoded_once_per_message(model: str) -> None:
    messages = [m for m in history() if not isinstance(m, SystemMessage)]
    key = "openai:empty_string:json" if model.startswith("openai") else "anthropic:json"
    async with create_provider(model, api_key="k", base_url="http://127.0.0.1:9") as provider:
        first = provider.body(ModelRequest(system="s", messages=messages, tools=[SPEC]), stream=False)
        stored = [m.wire[key] for m in messages]
        messages.append(AssistantMessage(content="Done."))
        second = provider.body(ModelRequest(system="s", messages=messages, tools=[SPEC]), stream=False)
    # The next call reuses each message's encoding (the very same bytes), adding one new.
    assert all(m.wire[key] is old for m, old in zip(messages, stored, strict=False))
    assert key in messages[-1].wire
    assert second["tools"].parts[0] is first["tools"].parts[0]
    assert json.loads(encode_body(second)) == second


def test_a_list_changed_after_encoding_is_encoded_afresh() -> None:
    items = EncodedList([{"a": 1}], [b'{"a":1}'])
    items.append({"b": 2})
    body = {"messages": items, "plain": [1, 2], "text": "é"}
    assert json.loads(encode_body(body)) == {"messages": [{"a": 1}, {"b": 2}], "plain": [1, 2], "text": "é"}
