"""What local and compatible servers get wrong, over real HTTP against the fake server: no
usage at all (counted as an unreported call, never as "0 tokens"), and a stream that ends
without saying it has finished, told apart from a connection that failed mid-stream."""

from __future__ import annotations

from typing import Any

import pytest

from harness_nb.core import StreamCutError, UserMessage
from harness_nb.providers import ModelRequest, ModelResponse, create_provider
from harness_nb.providers.base import Provider
from harness_nb.testing.fake_server import FakeLLMServer
from provider_support import collect

pytestmark = pytest.mark.usefixtures("no_provider_env")

REQUEST = ModelRequest(system="s", messages=[UserMessage(content="hi")])
MODELS = ["openai/gpt-4o", "openai-compatible/m", "anthropic/claude-sonnet-4-5"]


async def answer(provider: Provider, streaming: bool) -> ModelResponse:
    return (await collect(provider, REQUEST))[1] if streaming else await provider.complete(REQUEST)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("streaming", [True, False])
async def test_a_server_that_sends_no_usage_gives_an_unreported_call(model: str, streaming: bool) -> None:
    steps: list[dict[str, Any]] = [{"text": "no numbers", "omit_usage": True}, {"text": "numbers", "usage": {"input_tokens": 7, "output_tokens": 2}}]
    async with FakeLLMServer(steps) as srv, create_provider(model, api_key="k", base_url=srv.url) as p:
        silent = await answer(p, streaming)
        counted = await answer(p, streaming)
    assert silent.message.content == "no numbers"
    assert silent.usage.unreported_calls == 1 and silent.usage.total_tokens == 0
    assert silent.usage.cost is None  # not "$0.0000" for a priced model: nobody said
    assert silent.usage.tokens_label() == "usage not reported"
    assert (counted.usage.unreported_calls, counted.usage.input_tokens, counted.usage.output_tokens) == (0, 7, 2)


@pytest.mark.parametrize(("model", "missing"), [("openai/gpt-4o", "a finish_reason or [DONE]"), ("anthropic/claude-x", "message_stop")])
async def test_a_stream_the_server_ends_without_finishing_is_not_retryable(model: str, missing: str) -> None:
    steps = [{"fault": "end_early", "text": "Hello the"}, {"text": "never asked for"}]
    async with FakeLLMServer(steps) as srv, create_provider(model, api_key="k", base_url=srv.url) as p:
        with pytest.raises(StreamCutError) as info:
            await collect(p, REQUEST)
    error = info.value
    assert not error.retryable
    assert f"the server ended the stream without {missing}" in error.message
    assert "9 characters of text ('Hello the')" in error.message
    assert 'provider_options={"streaming": False}' in error.message
    assert "retry the request" not in error.message
    assert len(srv.requests) == 1


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-x"])
async def test_a_connection_that_fails_mid_stream_is_transient(model: str) -> None:
    async with FakeLLMServer([{"fault": "drop_mid_stream"}]) as srv, create_provider(model, api_key="k", base_url=srv.url) as p:
        with pytest.raises(StreamCutError) as info:
            await collect(p, REQUEST)
    error = info.value
    assert error.retryable
    assert "the response stream was cut (" in error.message and "retry the request" in error.message
    assert "streaming" not in error.message

