"""Retries shared by both providers: what is retried, how long it waits (measured through
an injected sleep, never the wall clock), when it gives up, and what is never retried."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from harness_nb.core import ProviderError, StreamCutError, UserMessage
from harness_nb.providers import ModelRequest, TextChunk, create_provider
from harness_nb.providers.base import Provider
from harness_nb.providers.http import RetryPolicy, parse_retry_after
from harness_nb.testing.fake_server import FakeLLMServer

pytestmark = pytest.mark.usefixtures("no_provider_env")

REQUEST = ModelRequest(system="", messages=[UserMessage(content="hi")])
MODELS = ["openai/gpt-4o", "anthropic/claude-x"]


class Sleeps(list[float]):
    """An injectable sleep that records each delay instead of waiting."""

    async def __call__(self, delay: float) -> None:
        self.append(delay)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def provider(model: str, url: str, sleeps: Sleeps, **options: Any) -> Provider:
    return create_provider(model, api_key="k", base_url=url, retry=RetryPolicy(sleep=sleeps), **options)


async def answer(p: Provider, streaming: bool) -> str:
    if not streaming:
        return (await p.complete(REQUEST)).message.content
    text = ""
    async for item in p.stream(REQUEST):
        text += item.text if isinstance(item, TextChunk) else ""
    return text


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("streaming", [True, False])
async def test_rate_limit_honours_retry_after(model: str, streaming: bool, sleeps: Sleeps) -> None:
    steps = [{"fault": "rate_limit", "retry_after": 0.1}, {"fault": "rate_limit", "retry_after": 2}, {"text": "ok"}]
    async with FakeLLMServer(steps) as srv, provider(model, srv.url, sleeps) as p:
        assert await answer(p, streaming) == "ok"
    assert sleeps == [0.1, 2.0]
    assert len(srv.requests) == 3


@pytest.mark.parametrize("model", MODELS)
async def test_server_error_then_success(model: str, sleeps: Sleeps) -> None:
    async with FakeLLMServer([{"fault": "server_error"}, {"text": "ok"}]) as srv, provider(model, srv.url, sleeps) as p:
        assert await answer(p, True) == "ok"
    assert len(sleeps) == 1 and 0.25 <= sleeps[0] <= 0.5  # first backoff: 0.5 s jittered into [d/2, d]


@pytest.mark.parametrize("model", MODELS)
async def test_overloaded_then_success(model: str, sleeps: Sleeps) -> None:
    async with FakeLLMServer([{"fault": "overloaded"}, {"text": "ok"}]) as srv, provider(model, srv.url, sleeps) as p:
        assert await answer(p, False) == "ok"
    assert len(srv.requests) == 2 and len(sleeps) == 1


async def test_retries_are_bounded_and_the_error_carries_the_status(sleeps: Sleeps) -> None:
    async with FakeLLMServer([{"fault": "server_error"}], loop=True) as srv, provider(
        "openai/gpt-4o", srv.url, sleeps, max_retries=2
    ) as p:
        with pytest.raises(ProviderError) as info:
            await answer(p, True)
    error = info.value
    assert (error.status, error.provider, error.retryable) == (500, "openai", True)
    assert "gave up after 3 attempts" in str(error)
    assert len(srv.requests) == 3 and len(sleeps) == 2


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0)
    for attempt, ceiling in enumerate([0.5, 1.0, 2.0, 3.0, 3.0]):
        delays = [policy.delay(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert policy.delay(0, retry_after=1000) == policy.max_retry_after


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, {"error": {"message": "messages: field required", "type": "invalid_request_error"}}, "messages: field required"),
        (401, {"error": {"message": "bad key", "type": "authentication_error"}}, "check OPENAI_API_KEY"),
        (403, {"error": {"message": "forbidden", "type": "permission_error"}}, "check OPENAI_API_KEY"),
        (404, {"error": {"message": "The model `gpt-5x` does not exist"}}, "check the model name"),
    ],
)
async def test_client_errors_are_not_retried(status: int, body: dict[str, Any], expected: str, sleeps: Sleeps) -> None:
    step = {"raw": json.dumps(body), "status": status, "content_type": "application/json"}
    async with FakeLLMServer([step], loop=True) as srv, provider("openai/gpt-4o", srv.url, sleeps) as p:
        with pytest.raises(ProviderError, match=expected) as info:
            await answer(p, True)
    assert info.value.status == status and not info.value.retryable
    assert len(srv.requests) == 1 and sleeps == []


async def test_anthropic_auth_error_names_its_variable(sleeps: Sleeps) -> None:
    async with FakeLLMServer([{"fault": "unauthorized"}]) as srv, provider("anthropic/claude-x", srv.url, sleeps) as p:
        with pytest.raises(ProviderError, match="check ANTHROPIC_API_KEY") as info:
            await answer(p, False)
    assert info.value.status == 401 and sleeps == []


@pytest.mark.parametrize("model", ["openai/gpt-4o", "ollama/qwen2.5:7b"])
async def test_connect_error_is_retried_then_explained(model: str, closed_port: int, sleeps: Sleeps) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    async with provider(model, url, sleeps, max_retries=2) as p:
        with pytest.raises(ProviderError) as info:
            await answer(p, True)
    message = str(info.value)
    assert f"could not connect to {url}" in message and "is the server running?" in message
    assert "gave up after 3 attempts" in message
    assert info.value.status is None and len(sleeps) == 2
    assert isinstance(info.value.__cause__, httpx.ConnectError)  # translated, chained


async def test_nothing_is_retried_once_stream_bytes_arrived(sleeps: Sleeps) -> None:
    async with FakeLLMServer([{"fault": "drop_mid_stream"}, {"text": "never"}]) as srv, provider(
        "openai/gpt-4o", srv.url, sleeps
    ) as p:
        with pytest.raises(StreamCutError):
            await answer(p, True)
    assert len(srv.requests) == 1 and sleeps == []


async def test_dropped_connection_before_any_byte_is_retried(sleeps: Sleeps) -> None:
    attempts = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        if len(attempts) == 1:
            raise httpx.ReadTimeout("timed out waiting for the first byte", request=request)
        if len(attempts) == 2:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})

    p = create_provider("openai/gpt-4o", api_key="k", transport=httpx.MockTransport(handler), retry=RetryPolicy(sleep=sleeps))
    async with p:  # type: ignore[attr-defined]
        assert await answer(p, False) == "ok"
    assert len(attempts) == 3 and len(sleeps) == 2


async def test_retry_after_ms_and_http_date(sleeps: Sleeps) -> None:
    headers = iter([{"retry-after-ms": "250"}, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}])

    async def handler(request: httpx.Request) -> httpx.Response:
        extra = next(headers, None)
        if extra is not None:
            return httpx.Response(429, headers=extra, json={"error": {"message": "slow down"}})
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})

    p = create_provider("openai/gpt-4o", api_key="k", transport=httpx.MockTransport(handler), retry=RetryPolicy(sleep=sleeps))
    async with p:  # type: ignore[attr-defined]
        assert await answer(p, False) == "ok"
    assert sleeps == [0.25, 0.0]  # a date in the past means "now"


def test_parse_retry_after_forms() -> None:
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= (parse_retry_after({"retry-after": future}) or 0) <= 30
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


async def test_stream_reader_closes_when_the_consumer_stops_early() -> None:
    async with FakeLLMServer([{"text": "a long answer " * 20}, {"text": "second"}]) as srv:
        p = create_provider("openai/gpt-4o", api_key="k", base_url=srv.url)
        stream: AsyncIterator[Any] = p.stream(REQUEST)
        first = await anext(stream)
        assert isinstance(first, TextChunk)
        await stream.aclose()  # type: ignore[attr-defined]
        assert await answer(p, True) == "second"  # the client is still usable
        await p.aclose()


@pytest.mark.parametrize("status", [408, 409, 502, 504])
async def test_other_retryable_statuses(status: int, sleeps: Sleeps) -> None:
    step = {"raw": '{"error": {"message": "try again"}}', "status": status, "content_type": "application/json"}
    async with FakeLLMServer([step, {"text": "ok"}]) as srv, provider("openai/gpt-4o", srv.url, sleeps) as p:
        assert await answer(p, True) == "ok"
    assert len(srv.requests) == 2 and len(sleeps) == 1
