"""The Messages API provider over real HTTP: the captured Anthropic streams, the fake
server's answers, role merging and the wire mapping, error events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_nb.core import (
    AssistantMessage,
    ConfigError,
    ProviderError,
    StreamCutError,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from harness_nb.providers import (
    AnthropicProvider,
    ModelRequest,
    ModelResponse,
    create_provider,
)
from harness_nb.providers.base import Provider
from harness_nb.providers.http import RetryPolicy
from harness_nb.testing.fake_server import FakeLLMServer
from provider_support import CaptureReplayer
from provider_support import collect as collect_stream
from provider_support import pieces_transport as serve_in_pieces

pytestmark = pytest.mark.usefixtures("no_provider_env")

REQUEST = ModelRequest(system="Be helpful.", messages=[UserMessage(content="Weather in Paris?")])


async def collect(provider: Provider, request: ModelRequest = REQUEST) -> tuple[list[str], ModelResponse]:
    return await collect_stream(provider, request)


def pieces_transport(data: bytes, size: int = 5) -> httpx.MockTransport:
    return serve_in_pieces(data, size)


ServeFixture = Callable[[str], Any]


@pytest.fixture(params=["mock_transport", "fake_server"])
async def serve_fixture(request: pytest.FixtureRequest, fixtures_dir: Path) -> AsyncIterator[ServeFixture]:
    """Stream a captured fixture file to a provider, through MockTransport or over loopback."""
    replay = CaptureReplayer(request.param, "anthropic/claude-x", api_key="k", api_root="", piece_size=5)

    async def serve(name: str) -> tuple[list[str], ModelResponse]:
        data = (fixtures_dir / "anthropic-sse" / name).read_bytes()
        return await replay(data, REQUEST)

    yield serve
    await replay.aclose()


async def test_basic_response(serve_fixture: ServeFixture) -> None:
    chunks, response = await serve_fixture("basic_response.txt")
    assert chunks == ["Hello", " there", "!"]
    assert response.message == AssistantMessage(content="Hello there!")
    assert response.stop_reason == "end_turn"
    assert response.model == "claude-3-opus-latest"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 6)


async def test_tool_use_response(serve_fixture: ServeFixture) -> None:
    chunks, response = await serve_fixture("tool_use_response.txt")
    assert "".join(chunks) == "I'll check the current weather in Paris for you."
    assert response.message.content == "I'll check the current weather in Paris for you."
    assert response.message.tool_calls == (
        ToolCall(id="toolu_01NRLabsLyVHZPKxbKvkfSMn", name="get_weather", arguments='{"location": "Paris"}'),
    )
    assert response.stop_reason == "tool_use"
    assert response.model == "claude-sonnet-4-20250514"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (377, 65, 0, 0)


async def test_incomplete_partial_json_is_returned_not_raised(serve_fixture: ServeFixture) -> None:
    _, response = await serve_fixture("incomplete_partial_json_response.txt")
    assert response.stop_reason == "max_tokens"
    assert response.message.content == (
        "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a "
        "file called taxes.txt. Let me do that for you now."
    )
    (call,) = response.message.tool_calls
    assert (call.id, call.name) == ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file")
    assert call.arguments == (
        '{"filename": "taxes.txt", "lines_of_text": [\n'
        '"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s",\n'
        '"",\n"## INTRODUCTION",\n"",\n"Filing taxes'
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (450, 124)
    with pytest.raises(ValueError, match="arguments are not valid JSON"):
        call.parsed_arguments()


async def test_refusal_response(serve_fixture: ServeFixture) -> None:
    chunks, response = await serve_fixture("refusal_response.txt")
    assert chunks == []
    assert response.stop_reason == "refusal"
    assert response.message == AssistantMessage(content="")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 0)


async def test_stream_without_message_stop_is_cut(fixtures_dir: Path) -> None:
    data = (fixtures_dir / "anthropic-sse" / "tool_use_response.txt").read_bytes()
    truncated = data[: data.index(b'"partial_json":"ar"')]  # mid-event, mid-tool-call
    async with AnthropicProvider("claude-x", api_key="k", transport=pieces_transport(truncated)) as p:
        with pytest.raises(StreamCutError) as info:
            await collect(p)
    message = str(info.value)
    assert "stream was cut" in message and "connection closed inside an event" in message
    assert "get_weather with 15 characters of arguments" in message
    assert "48 characters of text" in message


async def test_streamed_and_plain_answers_from_fake_server() -> None:
    step = {
        "text": "Checking both cities.",
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "toolu_a"},
            {"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "toolu_b"},
        ],
        "usage": {"input_tokens": 40, "output_tokens": 9, "cache_read_tokens": 100},
    }
    async with FakeLLMServer([step, step]) as srv, create_provider(
        "anthropic/claude-x", api_key="k", base_url=srv.url
    ) as p:
        chunks, streamed = await collect(p)
        plain = await p.complete(REQUEST)
    assert len(chunks) > 1 and "".join(chunks) == "Checking both cities."
    for response in (streamed, plain):
        assert response.message.content == "Checking both cities."
        assert [(c.id, c.arguments) for c in response.message.tool_calls] == [
            ("toolu_a", '{"city": "Paris"}'),
            ("toolu_b", '{"city": "Oslo"}'),
        ]
        assert response.stop_reason == "tool_use"
        assert (response.usage.input_tokens, response.usage.cache_read_tokens, response.usage.output_tokens) == (40, 100, 9)
    headers = srv.requests[0].headers
    assert headers["x-api-key"] == "k" and headers["anthropic-version"] == "2023-06-01"
    assert srv.requests[0].path == "/v1/messages"


async def test_wire_mapping_merges_roles() -> None:
    spec = ToolSpec(name="get_weather", description="Weather.", parameters={"type": "object"})
    history = [
        UserMessage(content="Paris and Oslo?"),
        UserMessage(content="Quickly, please."),
        AssistantMessage(
            content="Looking.",
            tool_calls=(
                ToolCall(id="t1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="t2", name="get_weather", arguments='{"city": "Os'),  # cut JSON
            ),
        ),
        ToolResultMessage(tool_call_id="t1", name="get_weather", content="sunny"),
        ToolResultMessage(tool_call_id="t2", name="get_weather", content="error: bad JSON", is_error=True),
        SystemMessage(content="Background task bg-1 finished."),
        UserMessage(content="And Rome?"),
    ]
    # without the cache breakpoints (test_prompt_cache.py has those): only the mapping
    async with FakeLLMServer([{"text": "ok"}]) as srv, create_provider(
        "anthropic/claude-x", api_key="k", base_url=srv.url, options={"prompt_caching": False}
    ) as p:
        await p.complete(ModelRequest(system="Be brief.", messages=history, tools=[spec]))
    body = srv.requests[0].body
    assert body["system"] == "Be brief.\n\nBackground task bg-1 finished."
    assert body["max_tokens"] == 8192
    assert body["tools"] == [{"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}}]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Paris and Oslo?"}, {"type": "text", "text": "Quickly, please."}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "error: bad JSON", "is_error": True},
                {"type": "text", "text": "And Rome?"},
            ],
        },
    ]
    # The cached wire form of each message is not changed by merging.
    assert history[0].wire["anthropic"] == ("user", [{"type": "text", "text": "Paris and Oslo?"}])


async def test_max_tokens_from_request_and_setting() -> None:
    async with FakeLLMServer([{"text": "a"}, {"text": "b"}]) as srv, create_provider(
        "anthropic/claude-x", api_key="k", base_url=srv.url, options={"max_tokens": 1000}
    ) as p:
        await p.complete(REQUEST)
        await p.complete(ModelRequest(system="", messages=[UserMessage(content="x")], max_tokens=77))
    assert [r.body["max_tokens"] for r in srv.requests] == [1000, 77]
    assert "system" not in srv.requests[1].body


def test_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="set ANTHROPIC_API_KEY"):
        create_provider("anthropic/claude-x")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.local/anthropic")
    provider = create_provider("anthropic/claude-x")
    assert provider.base_url == "http://proxy.local/anthropic"  # type: ignore[attr-defined]


ERROR_EVENT = 'event: error\ndata: {"type":"error","error":{"type":"%s","message":"%s"}}\n\n'


async def test_error_event_first_is_retried_when_overloaded() -> None:
    sleeps: list[float] = []

    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    steps = [{"raw": ERROR_EVENT % ("overloaded_error", "Overloaded")}, {"text": "fine"}]
    async with FakeLLMServer(steps) as srv, create_provider(
        "anthropic/claude-x", api_key="k", base_url=srv.url, retry=RetryPolicy(sleep=sleep)
    ) as p:
        _, response = await collect(p)
    assert response.message.content == "fine"
    assert len(srv.requests) == 2 and len(sleeps) == 1


async def test_error_event_mid_stream_is_not_retried(fixtures_dir: Path) -> None:
    data = (fixtures_dir / "anthropic-sse" / "basic_response.txt").read_text()
    cut_at = data.index("event: content_block_stop")
    raw = data[:cut_at] + ERROR_EVENT % ("overloaded_error", "Overloaded")
    async with FakeLLMServer([{"raw": raw}, {"text": "never used"}]) as srv, create_provider(
        "anthropic/claude-x", api_key="k", base_url=srv.url
    ) as p:
        with pytest.raises(ProviderError, match="overloaded") as info:
            await collect(p)
    assert info.value.retryable
    assert len(srv.requests) == 1


async def test_invalid_request_error_event_is_not_retried() -> None:
    raw = ERROR_EVENT % ("invalid_request_error", "prompt is too long")
    async with FakeLLMServer([{"raw": raw}]) as srv, create_provider(
        "anthropic/claude-x", api_key="k", base_url=srv.url
    ) as p:
        with pytest.raises(ProviderError, match="too long for the model's context window. Server said: prompt is") as info:
            await collect(p)
    assert not info.value.retryable and len(srv.requests) == 1
    assert info.value.kind == "context_length"  # the engine compacts and retries, once


async def test_drop_mid_stream_raises_stream_cut() -> None:
    async with FakeLLMServer([{"fault": "drop_mid_stream"}]) as srv, create_provider(
        "anthropic/claude-x", api_key="k", base_url=srv.url
    ) as p:
        with pytest.raises(StreamCutError, match="stream was cut .* a call to write_file"):
            await collect(p)
    assert len(srv.requests) == 1
