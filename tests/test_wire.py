"""Request bodies joined from cached encodings: the bytes are the body's JSON, a history is
encoded once per message (not once per call), and a list changed after the fact is
encoded afresh rather than sent stale."""

from __future__ import annotations

import json

import pytest

from harness_nb.core import (
    AssistantMessage,
    ImagePart,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from harness_nb.providers import openai as openai_wire
from harness_nb.providers.base import ModelRequest
from harness_nb.providers.factory import create_provider
from harness_nb.providers.wire import EncodedList, Histories, encode_body

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


def test_a_continued_history_is_encoded_as_a_fresh_one() -> None:
    """``Histories`` continues the encoding of a history from the one before: whatever happens
    to the list between calls (messages added, one replaced in place as a rescrub or a
    compaction does, a result's images still waiting for their message), the request holds
    what encoding the list from scratch gives, with each message's own cached encoding."""
    image = ImagePart(media_type="image/png", data="aGk=")
    messages: list = history()
    histories = Histories()

    def both() -> tuple[bytes, bytes]:
        continued = openai_wire.wire_messages("s", messages, "empty_string", histories=histories)
        fresh = openai_wire.wire_messages("s", messages, "empty_string")
        assert continued == fresh
        return encode_body({"messages": continued}), encode_body({"messages": fresh})

    steps = [
        lambda: messages.append(AssistantMessage(content="", tool_calls=(ToolCall(id="c3", name="echo", arguments="{}"),))),
        lambda: messages.append(ToolResultMessage(tool_call_id="c3", name="echo", content="a plot", images=(image,))),
        lambda: messages.append(ToolResultMessage(tool_call_id="c4", name="echo", content="two", images=(image,))),
        lambda: messages.append(UserMessage(content="Look at both.")),
        lambda: messages.__setitem__(1, AssistantMessage(content="[compacted]")),  # edited in place
        lambda: messages.__delitem__(slice(2, 4)),
        lambda: None,
    ]
    for step in steps:
        step()
        continued, fresh = both()
        assert continued == fresh
    # The images of c3 and c4 went in one user message after both results, once.
    sent = json.loads(both()[0])["messages"]
    assert [m.get("tool_call_id") or m["role"] for m in sent[-5:]] == ["assistant", "c3", "c4", "user", "user"]
    assert [p["type"] for p in sent[-2]["content"]] == ["text", "image_url", "text", "image_url"]
    assert sent[-1]["content"] == "Look at both."
