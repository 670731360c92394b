"""What local and compatible servers get wrong, over real HTTP against the fake server made
to do what llama.cpp's server and a LiteLLM proxy do (``testing/fake_quirks.py``): no usage
at all (estimated, and marked as an estimate, never "0 tokens"); a stream that ends without
saying it has finished, told apart from a connection that failed mid-stream; a stream that
sends nothing, or an empty answer, when tools are offered (asked again without streaming,
and that server not streamed to again); a system prompt refused as blocks (sent again as
text, prompt caching off for that server). What is learnt is said once."""

from __future__ import annotations

from typing import Any

import pytest

from harness_nb.core import StreamCutError, ToolSpec, UserMessage
from harness_nb.providers import ModelRequest, ModelResponse, create_provider
from harness_nb.providers.anthropic import AnthropicProvider
from harness_nb.providers.base import Provider
from harness_nb.providers.http import RetryPolicy
from harness_nb.providers.quirks import names_system_form
from harness_nb.providers.window import DEFAULT_CHARS_PER_TOKEN
from harness_nb.testing.fake_server import FakeLLMServer
from provider_support import collect

pytestmark = pytest.mark.usefixtures("no_provider_env")

REQUEST = ModelRequest(system="s", messages=[UserMessage(content="hi")])
LS = ToolSpec(name="ls", description="List a folder.", parameters={"type": "object", "properties": {}})
WITH_TOOLS = ModelRequest(system="You list folders.", messages=[UserMessage(content="what is here?")], tools=[LS])
MODELS = ["openai/gpt-4o", "openai-compatible/m", "anthropic/claude-sonnet-4-5"]
NO_WAIT = RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0)


async def answer(provider: Provider, streaming: bool, request: ModelRequest = REQUEST) -> ModelResponse:
    return (await collect(provider, request))[1] if streaming else await provider.complete(request)


# -- usage a server does not report ----------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("streaming", [True, False])
async def test_a_server_that_sends_no_usage_gets_an_estimate_marked_as_one(model: str, streaming: bool) -> None:
    text = "no numbers, " * 20
    steps: list[dict[str, Any]] = [{"text": text, "omit_usage": True}, {"text": "numbers", "usage": {"input_tokens": 7, "output_tokens": 2}}]
    async with FakeLLMServer(steps) as srv, create_provider(model, api_key="k", base_url=srv.url) as p:
        silent = await answer(p, streaming, WITH_TOOLS)
        counted = await answer(p, streaming)
    assert silent.message.content == text
    usage = silent.usage
    assert usage.unreported_calls == 1  # nobody said: the counts are ours
    sent = len(WITH_TOOLS.system) + len("what is here?") + len("ls") + len(LS.description)
    assert usage.input_tokens > sent / DEFAULT_CHARS_PER_TOKEN  # the request's characters, tool schema included
    assert len(text) / DEFAULT_CHARS_PER_TOKEN <= usage.output_tokens <= len(text) / DEFAULT_CHARS_PER_TOKEN + 5
    assert usage.tokens_label() == f"~{usage.total_tokens:,} tokens (estimated)"
    assert usage.cost is None  # the engine prices it, from the run's table
    assert (counted.usage.unreported_calls, counted.usage.input_tokens, counted.usage.output_tokens) == (0, 7, 2)


# -- a stream that ends before it finished -------------------------------------------------


@pytest.mark.parametrize(("model", "missing"), [("openai/gpt-4o", "a finish_reason or [DONE]"), ("anthropic/claude-x", "message_stop")])
async def test_a_stream_cut_after_some_text_is_an_error_naming_the_setting(model: str, missing: str) -> None:
    steps = [{"fault": "end_early", "text": "Hello the"}, {"text": "never asked for"}]
    async with FakeLLMServer(steps) as srv, create_provider(model, api_key="k", base_url=srv.url) as p:
        with pytest.raises(StreamCutError) as info:
            await collect(p, WITH_TOOLS)
        assert p.streaming  # nothing learnt: the text was shown, the answer is not asked for again
    error = info.value
    assert not error.retryable
    assert f"the server ended the stream without {missing}" in error.message
    assert "9 characters of text ('Hello the')" in error.message
    assert "retry the request" not in error.message
    assert error.fix is not None and (error.fix.setting, error.fix.value) == ("provider_options", {"streaming": False})
    assert str(error).endswith(
        "To turn streaming off, pass provider_options={'streaming': False} to Harness or Harness.configure"
    )
    assert len(srv.requests) == 1


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-x"])
async def test_a_connection_that_fails_mid_stream_is_transient(model: str) -> None:
    async with FakeLLMServer([{"fault": "drop_mid_stream"}]) as srv, create_provider(model, api_key="k", base_url=srv.url) as p:
        with pytest.raises(StreamCutError) as info:
            await collect(p, REQUEST)
    error = info.value
    assert error.retryable
    assert "the response stream was cut (" in error.message and "retry the request" in error.message
    assert error.fix is None and "streaming" not in str(error)


# -- a server that cannot stream when tools are offered -------------------------------------


@pytest.mark.parametrize("model", ["openai-compatible/smol", "anthropic/smol"])
@pytest.mark.parametrize("server", ["empty_body", "empty_answer"])  # llama.cpp itself; LiteLLM in front of it
async def test_a_server_that_sends_nothing_is_asked_again_without_streaming_and_remembered(model: str, server: Any) -> None:
    steps = [{"text": "Two files."}, {"text": "Still two."}, {"text": "A third provider."}]
    async with FakeLLMServer(steps, stream_tools=server) as srv:
        async with create_provider(model, api_key="k", base_url=srv.url) as p:
            chunks, first = await collect(p, WITH_TOOLS)
            assert (chunks, first.message.content) == (["Two files."], "Two files.")
            assert len(first.notices) == 1
            notice = first.notices[0]
            assert f"{model.split('/')[1]} at {srv.url} sent an empty streamed answer to a request offering tools" in notice
            assert "Streaming is off for this server from now on" in notice
            assert not p.streaming
            second = await answer(p, streaming=False, request=WITH_TOOLS)
            assert second.message.content == "Still two." and second.notices == ()
        # another provider of the same server and model (a subagent's, another harness's) knows
        async with create_provider(model, api_key="k", base_url=srv.url) as other:
            assert not other.streaming
            third = await answer(other, streaming=True, request=WITH_TOOLS)
            assert third.message.content == "A third provider." and third.notices == ()
        # the same server serving another model has not been found out
        async with create_provider(model + "-2", api_key="k", base_url=srv.url) as unrelated:
            assert unrelated.streaming
    assert [bool(r.body.get("stream")) for r in srv.requests] == [True, False, False, False]
    assert srv.remaining == 0


async def test_a_stream_that_sends_nothing_without_tools_is_asked_again_too() -> None:
    async with FakeLLMServer([{"raw": ""}, {"text": "plain"}]) as srv, create_provider("openai-compatible/m", base_url=srv.url) as p:
        _, response = await collect(p, REQUEST)
    assert response.message.content == "plain"
    assert "sent an empty streamed answer;" in response.notices[0]  # not said to be about tools
    assert "tool_choice" not in response.notices[0]
    assert [bool(r.body.get("stream")) for r in srv.requests] == [True, False]


async def test_an_empty_answer_without_tools_is_the_models_and_is_not_asked_again() -> None:
    async with FakeLLMServer([{"text": ""}]) as srv, create_provider("openai-compatible/m", base_url=srv.url) as p:
        _, response = await collect(p, REQUEST)
        assert p.streaming
    assert response.message.content == "" and response.notices == ()
    assert len(srv.requests) == 1  # the engine asks once more, as for any empty answer


async def test_an_empty_answer_that_stays_empty_unstreamed_teaches_nothing() -> None:
    async with FakeLLMServer([{"text": ""}, {"text": ""}]) as srv, create_provider("openai-compatible/m", base_url=srv.url) as p:
        _, response = await collect(p, WITH_TOOLS)
        assert p.streaming  # streaming was not the problem
    assert response.message.content == "" and response.notices == ()
    assert [bool(r.body.get("stream")) for r in srv.requests] == [True, False]


# -- a system prompt refused as blocks ----------------------------------------------------


@pytest.mark.parametrize("streaming", [True, False])
async def test_a_system_prompt_refused_as_blocks_is_sent_again_as_text_and_remembered(streaming: bool) -> None:
    steps = [{"text": "hello"}, {"text": "again"}]
    async with FakeLLMServer(steps, system_blocks=False) as srv:
        async with create_provider("anthropic/smol", api_key="k", base_url=srv.url, retry=NO_WAIT) as p:
            assert isinstance(p, AnthropicProvider) and p.cache_writes
            first = await answer(p, streaming, WITH_TOOLS)
            assert first.message.content == "hello"
            assert len(first.notices) == 1 and "refused the system prompt as a list of blocks" in first.notices[0]
            assert "Prompt caching is off for this server from now on" in first.notices[0]
            assert not p.cache_writes  # budgets no longer price the prompt as a cache write
        async with create_provider("anthropic/smol", api_key="k", base_url=srv.url) as other:
            second = await answer(other, streaming, WITH_TOOLS)
            assert second.message.content == "again" and second.notices == ()
    systems = [r.body["system"] for r in srv.requests]
    assert isinstance(systems[0], list) and systems[1:] == [WITH_TOOLS.system] * 2  # one refusal, not three retries
    assert "cache_control" not in str(srv.requests[2].body)


async def test_a_server_error_that_names_no_system_prompt_is_retried_as_it_was() -> None:
    steps = [{"fault": "server_error"}, {"text": "fine"}]
    async with FakeLLMServer(steps) as srv, create_provider("anthropic/claude-x", api_key="k", base_url=srv.url, retry=NO_WAIT) as p:
        response = await p.complete(REQUEST)
        assert p.cache_writes
    assert response.message.content == "fine" and response.notices == ()
    assert [type(r.body["system"]).__name__ for r in srv.requests] == ["list", "list"]


@pytest.mark.parametrize(
    ("detail", "names"),
    [
        ("10 validation errors: {'type': 'string_type', 'loc': ('body', 'messages', 0, "
         "'ChatCompletionRequestSystemMessage', 'content'), 'msg': 'Input should be a valid string'}", True),
        ("system: Input should be a valid string", True),
        ("messages.0.content: expected a string, the system role takes text only", True),
        ("Internal server error", False),
        ("upstream failed for {'messages': [{'role': 'system', 'content': [{'type': 'text'}]}]}", False),
        ("the system is overloaded", False),
        ("Rate limit reached", False),
    ],
)  # fmt: skip
def test_what_counts_as_an_error_naming_the_system_prompts_form(detail: str, names: bool) -> None:
    assert names_system_form(detail) is names
