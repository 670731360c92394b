"""The Chat Completions provider over real HTTP: the captured OpenAI streams, the fake
server's streamed and plain answers, the wire mapping, and the failure modes."""

from __future__ import annotations

import ssl
import subprocess
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
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from harness_nb.providers import ModelRequest, ModelResponse, create_provider
from harness_nb.providers.base import Provider
from harness_nb.providers.http import RetryPolicy, tls_context
from harness_nb.providers.openai import OpenAIProvider
from harness_nb.testing.fake_server import FakeLLMServer
from provider_support import CaptureReplayer
from provider_support import collect as collect_stream
from provider_support import pieces_transport as serve_in_pieces

pytestmark = pytest.mark.usefixtures("no_provider_env")

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
REQUEST = ModelRequest(system="You are terse.", messages=[UserMessage(content="Weather?")], tools=[WEATHER])


async def collect(provider: Provider, request: ModelRequest = REQUEST) -> tuple[list[str], ModelResponse]:
    return await collect_stream(provider, request)


def pieces_transport(data: bytes, size: int = 7) -> httpx.MockTransport:
    return serve_in_pieces(data, size)


ServeFixture = Callable[[str], Any]


@pytest.fixture(params=["mock_transport", "fake_server"])
async def serve_fixture(request: pytest.FixtureRequest, fixtures_dir: Path) -> AsyncIterator[ServeFixture]:
    """Stream a captured fixture file to a provider, through MockTransport or over loopback."""
    replay = CaptureReplayer(request.param, "openai/gpt-4o", api_key="sk-test", api_root="/v1", piece_size=7)

    async def serve(name: str) -> ModelResponse:
        data = (fixtures_dir / "openai-sse" / name).read_bytes()
        chunks, response = await replay(data, REQUEST)
        assert chunks == []  # these captured answers hold tool calls only
        return response

    yield serve
    await replay.aclose()


async def test_single_tool_call_stream(serve_fixture: ServeFixture) -> None:
    response = await serve_fixture("single_tool_call.txt")
    assert response.message.content == ""
    assert response.message.tool_calls == (
        ToolCall(
            id="call_c91SqDXlYFuETYv8mUHzz6pp",
            name="GetWeatherArgs",
            arguments='{"city":"Edinburgh","country":"UK","units":"c"}',
        ),
    )
    assert response.stop_reason == "tool_use"
    assert response.model == "gpt-4o-2024-08-06"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (76, 24)
    assert response.usage.cache_read_tokens == 0


async def test_parallel_tool_calls_stream(serve_fixture: ServeFixture) -> None:
    response = await serve_fixture("parallel_tool_calls.txt")
    assert response.message.tool_calls == (
        ToolCall(
            id="call_JMW1whyEaYG438VE1OIflxA2",
            name="GetWeatherArgs",
            arguments='{"city": "Edinburgh", "country": "GB", "units": "c"}',
        ),
        ToolCall(
            id="call_DNYTawLBoN8fj3KN6qU9N1Ou",
            name="get_stock_price",
            arguments='{"ticker": "AAPL", "exchange": "NASDAQ"}',
        ),
    )
    assert response.stop_reason == "tool_use"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (149, 60)


async def test_stream_ended_cleanly_without_done_or_finish_reason(fixtures_dir: Path) -> None:
    data = (fixtures_dir / "openai-sse" / "single_tool_call.txt").read_bytes()
    truncated = data[: data.index(b'"finish_reason":"tool_calls"') - 300]
    truncated = truncated[: truncated.rindex(b"\n\n") + 2]  # ends cleanly between events
    async with OpenAIProvider("gpt-4o", api_key="sk-test", transport=pieces_transport(truncated)) as p:
        with pytest.raises(StreamCutError) as info:
            await collect(p)
    message = str(info.value)
    assert "the server ended the stream without a finish_reason or [DONE]" in message
    assert "GetWeatherArgs" in message and "characters of arguments" in message
    assert not info.value.retryable  # the same server will do it again


async def test_streamed_text_and_tool_calls_from_fake_server() -> None:
    steps = [
        {
            "text": "Let me look that up for you.",
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Edinburgh"}, "id": "call_1"},
                {"name": "get_weather", "arguments": {"city": "Paris"}},
            ],
            "usage": {"input_tokens": 30, "output_tokens": 12, "cache_read_tokens": 20},
        }
    ]
    async with FakeLLMServer(steps) as srv, create_provider("openai/gpt-4o", api_key="k", base_url=srv.url) as p:
        chunks, response = await collect(p)
    assert len(chunks) > 1 and "".join(chunks) == "Let me look that up for you."
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
        ("call_1", "get_weather", '{"city": "Edinburgh"}'),
        ("call_fake1", "get_weather", '{"city": "Paris"}'),
    ]
    # prompt_tokens counts the cached part; ours does not.
    assert (response.usage.input_tokens, response.usage.cache_read_tokens, response.usage.output_tokens) == (30, 20, 12)
    body = srv.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_non_streaming_tool_calls() -> None:
    steps = [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_9"}]}]
    async with FakeLLMServer(steps) as srv, create_provider("openai/gpt-4o", api_key="k", base_url=srv.url) as p:
        response = await p.complete(REQUEST)
    assert response.message.tool_calls == (ToolCall(id="call_9", name="get_weather", arguments='{"city": "Oslo"}'),)
    assert response.message.content == ""
    assert response.stop_reason == "tool_use"
    assert "stream" not in srv.requests[0].body


@pytest.mark.parametrize(
    ("stop", "expected"),
    [("end_turn", "end_turn"), ("max_tokens", "max_tokens"), ("refusal", "refusal")],
)
async def test_stop_reasons_are_normalised(stop: str, expected: str) -> None:
    steps = [{"text": "x", "stop_reason": stop}] * 2  # fake server sends stop/length/content_filter
    async with FakeLLMServer(steps) as srv, create_provider("openai/gpt-4o", api_key="k", base_url=srv.url) as p:
        assert (await p.complete(REQUEST)).stop_reason == expected
        assert (await collect(p))[1].stop_reason == expected


HISTORY = [
    UserMessage(content="What's the weather in Paris and Oslo?"),
    AssistantMessage(
        tool_calls=(
            ToolCall(id="c1", name="get_weather", arguments='{"city": "Paris"}'),
            ToolCall(id="c2", name="get_weather", arguments='{"city": "Oslo"}'),
        )
    ),
    ToolResultMessage(tool_call_id="c1", name="get_weather", content="sunny"),
    ToolResultMessage(tool_call_id="c2", name="get_weather", content="error: no data", is_error=True),
]


async def test_wire_mapping() -> None:
    request = ModelRequest(system="Be brief.", messages=HISTORY, tools=[WEATHER], max_tokens=100, temperature=0.2)
    async with FakeLLMServer([{"text": "ok"}]) as srv, create_provider(
        "openai/gpt-4o", api_key="k", base_url=srv.url
    ) as p:
        await p.complete(request)
    body = srv.requests[0].body
    assert body["model"] == "gpt-4o"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What's the weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "error: no data"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": WEATHER.parameters},
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["max_completion_tokens"] == 100 and body["temperature"] == 0.2
    assert srv.requests[0].headers["authorization"] == "Bearer k"


async def test_every_request_carries_the_key_and_the_json_type_streamed_or_not() -> None:
    """The headers are the client's, set once: a later request, streamed or plain, still has them."""
    async with FakeLLMServer([{"text": "one"}, {"text": "two"}, {"text": "three"}]) as srv, create_provider(
        "openai/gpt-4o", api_key="k", base_url=srv.url
    ) as p:
        await p.complete(REQUEST)
        await collect(p)
        await p.complete(REQUEST)
    assert len(srv.requests) == 3
    for request in srv.requests:
        assert request.headers["authorization"] == "Bearer k"
        assert request.headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("model", "setting", "shape"),
    [
        ("openai/m", None, {"content": ""}),
        ("openai-compatible/m", None, {"content": ""}),
        ("ollama/m", None, {"content": ""}),
        ("openai/m", "null", {"content": None}),
        ("openai/m", "empty_string", {"content": ""}),
        ("openai/m", "omit", {}),
    ],
)
async def test_empty_content_shapes(model: str, setting: str | None, shape: dict[str, Any]) -> None:
    options = {"empty_content": setting} if setting else {}
    async with FakeLLMServer([{"text": "ok"}]) as srv, create_provider(
        model, api_key="k", base_url=srv.url, options=options
    ) as p:
        await p.complete(ModelRequest(system="", messages=HISTORY[:3]))
    assistant = srv.requests[0].body["messages"][1]
    assert {k: v for k, v in assistant.items() if k == "content"} == shape
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]


def test_bad_empty_content_setting() -> None:
    with pytest.raises(ConfigError, match="empty_content='none': Input should be 'empty_string', 'omit' or 'null'"):
        create_provider("openai/m", api_key="k", options={"empty_content": "none"})


async def test_compatible_servers_get_max_tokens_and_no_key_when_none_set() -> None:
    async with FakeLLMServer([{"text": "ok"}]) as srv, create_provider(
        "openai-compatible/meta-llama/Llama-3-8B", base_url=srv.url + "/v1"
    ) as p:
        response = await p.complete(ModelRequest(system="", messages=[UserMessage(content="hi")], max_tokens=50))
    assert response.message.content == "ok"
    request = srv.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "meta-llama/Llama-3-8B" and request.body["max_tokens"] == 50
    assert "authorization" not in request.headers


def test_keys_and_base_urls_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        create_provider("openai/gpt-4o")
    with pytest.raises(ConfigError, match="needs the server's base URL: set OPENAI_BASE_URL"):
        create_provider("openai-compatible/m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11434")
    assert create_provider("openai/gpt-4o").base_url == "https://api.openai.com/v1"  # type: ignore[attr-defined]
    ollama = create_provider("ollama/qwen2.5:7b")
    assert ollama.base_url == "http://gpu-box:11434/v1"  # type: ignore[attr-defined]
    assert ollama.model_id == "ollama/qwen2.5:7b"
    assert ollama.headers() == {}  # type: ignore[attr-defined]  # an OpenAI key never goes to Ollama
    monkeypatch.setenv("OPENAI_BASE_URL", "http://vllm:8000/v1/")
    compatible = create_provider("openai-compatible/m")
    assert compatible.base_url == "http://vllm:8000/v1"  # type: ignore[attr-defined]


async def test_drop_mid_stream_raises_stream_cut() -> None:
    async with FakeLLMServer([{"fault": "drop_mid_stream"}]) as srv, create_provider(
        "openai/gpt-4o", api_key="k", base_url=srv.url
    ) as p:
        with pytest.raises(StreamCutError) as info:
            await collect(p)
    assert "stream was cut" in str(info.value)
    assert "write_file" in str(info.value)
    assert len(srv.requests) == 1  # bytes had arrived: never retried


@pytest.mark.parametrize("streaming", [True, False])
async def test_malformed_json_is_a_provider_error(streaming: bool) -> None:
    async with FakeLLMServer([{"fault": "malformed_json"}]) as srv, create_provider(
        "openai/gpt-4o", api_key="k", base_url=srv.url
    ) as p:
        with pytest.raises(ProviderError, match="not JSON") as info:
            await (collect(p) if streaming else p.complete(REQUEST))
    assert not isinstance(info.value, StreamCutError)
    assert len(srv.requests) == 1


async def test_error_event_inside_a_stream() -> None:
    raw = (
        'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
        'data: {"error":{"message":"The server had an error","type":"server_error"}}\n\n'
    )
    async with FakeLLMServer([{"raw": raw}]) as srv, create_provider(
        "openai/gpt-4o", api_key="k", base_url=srv.url
    ) as p:
        with pytest.raises(ProviderError, match="The server had an error") as info:
            await collect(p)
    assert info.value.retryable and len(srv.requests) == 1


@pytest.mark.parametrize("streaming", [True, False])
async def test_unexpected_answer_shape_is_one_provider_error(streaming: bool) -> None:
    if streaming:
        step = {"raw": 'data: {"choices": "not a list"}\n\ndata: [DONE]\n\n'}
    else:
        step = {"raw": '{"choices": [{"message": "just text"}]}', "content_type": "application/json"}
    async with FakeLLMServer([step]) as srv, create_provider(
        "openai/gpt-4o", api_key="k", base_url=srv.url
    ) as p:
        with pytest.raises(ProviderError, match="unexpected shape"):
            await (collect(p) if streaming else p.complete(REQUEST))


async def test_stream_usage_can_be_left_out_for_servers_that_reject_it() -> None:
    async with FakeLLMServer([{"text": "ok"}]) as srv, create_provider(
        "openai-compatible/m", base_url=srv.url, options={"stream_usage": False}
    ) as p:
        chunks, response = await collect(p)
    assert "".join(chunks) == "ok"
    assert response.usage.unreported_calls == 1  # nobody said: estimated, and marked as such
    assert response.usage.tokens_label().endswith(" tokens (estimated)")
    assert "stream_options" not in srv.requests[0].body


async def two_turns(provider: Provider) -> tuple[ModelResponse, ModelResponse]:
    """Ask, run the tool call the model makes, ask again with the result."""
    history: list[Any] = [UserMessage(content="Weather in Oslo?")]
    _, first = await collect(provider, ModelRequest(system="Be brief.", messages=history, tools=[WEATHER]))
    call = first.message.tool_calls[0]
    history += [first.message, ToolResultMessage(tool_call_id=call.id, name=call.name, content="sunny")]
    _, second = await collect(provider, ModelRequest(system="Be brief.", messages=history, tools=[WEATHER]))
    return first, second


LLAMA_STEPS: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_1"}]},
    {"text": "Sunny in Oslo."},
]


async def test_openai_model_on_a_llama_cpp_like_server_holds_a_tool_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    """`openai/<model>` with OPENAI_BASE_URL pointed at llama.cpp: the tool-call turn goes
    back with content "" (null gets HTTP 500 there) and tools go with tool_choice."""
    async with FakeLLMServer(LLAMA_STEPS, strict=True) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        async with create_provider("openai/qwen2.5-7b-instruct") as p:
            first, second = await two_turns(p)
    assert [c.name for c in first.message.tool_calls] == ["get_weather"]  # tools were not ignored
    assert second.message.content == "Sunny in Oslo."
    assistant = srv.requests[1].body["messages"][2]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "call_1"
    assert [r.body["tool_choice"] for r in srv.requests] == ["auto", "auto"]


async def test_null_content_is_still_available_and_the_strict_server_rejects_it() -> None:
    async with FakeLLMServer(LLAMA_STEPS, strict=True) as srv, create_provider(
        "openai/m", api_key="k", base_url=srv.url, retry=RetryPolicy(max_retries=0), options={"empty_content": "null"}
    ) as p:
        with pytest.raises(ProviderError, match="Expected 'content' to be a string") as info:
            await two_turns(p)
    assert info.value.status == 500
    assert srv.requests[1].body["messages"][2]["content"] is None


@pytest.mark.parametrize(("setting", "sent"), [("required", "required"), ("none", "none")])
async def test_tool_choice_option(setting: str, sent: str) -> None:
    async with FakeLLMServer([{"text": "a"}, {"text": "b"}]) as srv, create_provider(
        "openai-compatible/m", base_url=srv.url, options={"tool_choice": setting}
    ) as p:
        await p.complete(REQUEST)
        await p.complete(ModelRequest(system="", messages=[UserMessage(content="no tools")]))
    assert srv.requests[0].body["tool_choice"] == sent
    assert "tool_choice" not in srv.requests[1].body  # never without tools (OpenAI rejects that)


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself, and its key (made by openssl)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_a_provider_trusts_the_ca_file_set_when_it_is_made(
    self_signed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Providers share one TLS context (loading the CA bundle per provider cost each harness
    about 20 ms), made again when SSL_CERT_FILE changes: a provider made before the server's
    CA is named refuses the server, one made after reaches it."""
    cert, key = self_signed
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with FakeLLMServer([{"text": "Hello over TLS."}], loop=True, tls=served) as server:
        url = server.url + "/v1"
        providers = [create_provider("openai-compatible/m", base_url=url, streaming=False, max_retries=0)]
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        providers += [create_provider("openai-compatible/m", base_url=url, streaming=False) for _ in range(2)]
        try:
            with pytest.raises(ProviderError, match="(?i)certificate"):
                await providers[0].complete(REQUEST)
            for provider in providers[1:]:
                assert (await provider.complete(REQUEST)).message.content == "Hello over TLS."
        finally:
            for provider in providers:
                await provider.aclose()


async def test_the_ca_certificates_load_at_the_first_tls_connection_only(
    self_signed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading them costs ~19 ms of CPU that a server speaking plain HTTP never needs: a
    conversation with one leaves the context empty; the first over TLS loads and uses them
    (streamed, as providers talk by default)."""
    cert, key = self_signed
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # a context of this test's own
    context = tls_context()
    async with FakeLLMServer([{"text": "Hello."}], loop=True) as plain:
        async with create_provider("openai-compatible/m", base_url=plain.url + "/v1") as provider:
            assert (await provider.complete(REQUEST)).message.content == "Hello."
    assert context.cert_store_stats()["x509"] == 0
    async with FakeLLMServer([{"text": "Hello over TLS."}], loop=True, tls=served) as secure:
        async with create_provider("openai-compatible/m", base_url=secure.url + "/v1") as provider:
            assert (await provider.complete(REQUEST)).message.content == "Hello over TLS."
    assert context.cert_store_stats()["x509"] == 1
