"""``ProviderOptions`` through ``create_provider``: over real HTTP each option reaches the
request body in each API's own words, ``streaming=False`` makes plain requests, a bad key
or value is one ``ConfigError`` naming it, and offline models take what applies to them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import ConfigError, ToolSpec, UserMessage
from harness_nb.providers import ModelRequest, ProviderOptions, create_provider
from harness_nb.providers.base import JsonAnswer
from harness_nb.testing.fake_server import FakeLLMServer
from provider_support import collect

pytestmark = pytest.mark.usefixtures("no_provider_env")

SPEC = ToolSpec(name="lookup", description="Look up.", parameters={"type": "object"})
REQUEST = ModelRequest(system="s", messages=[UserMessage(content="hi")], tools=[SPEC])
OPTIONS: dict[str, Any] = {"temperature": 0.3, "max_tokens": 256, "tool_choice": "required", "extra": {"top_p": 0.9, "seed": 1}}

# (model, the body fields OPTIONS become on that API)
APIS = [
    ("openai/gpt-4o", {"temperature": 0.3, "max_completion_tokens": 256, "tool_choice": "required", "top_p": 0.9, "seed": 1}),
    ("openai-compatible/m", {"temperature": 0.3, "max_tokens": 256, "tool_choice": "required", "top_p": 0.9, "seed": 1}),
    ("anthropic/claude-x", {"temperature": 0.3, "max_tokens": 256, "tool_choice": {"type": "any"}, "top_p": 0.9, "seed": 1}),
]


def subset(body: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    return {k: body.get(k) for k in keys}


@pytest.mark.parametrize(("model", "expected"), APIS)
@pytest.mark.parametrize("as_model", [False, True])
async def test_options_reach_the_request_body(model: str, expected: dict[str, Any], as_model: bool) -> None:
    options = ProviderOptions(**OPTIONS) if as_model else OPTIONS
    async with FakeLLMServer([{"text": "a"}, {"text": "b"}]) as srv, create_provider(
        model, api_key="k", base_url=srv.url, options=options
    ) as p:
        _, streamed = await collect(p, REQUEST)
        plain = await p.complete(REQUEST)
    assert (streamed.message.content, plain.message.content) == ("a", "b")
    for request in srv.requests:
        assert subset(request.body, expected) == expected
    assert srv.requests[0].body["stream"] is True and "stream" not in srv.requests[1].body


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-x"])
async def test_a_request_s_own_values_win_over_the_options(model: str) -> None:
    field = "max_completion_tokens" if model.startswith("openai") else "max_tokens"
    async with FakeLLMServer([{"text": "a"}]) as srv, create_provider(
        model, api_key="k", base_url=srv.url, options={"max_tokens": 256, "temperature": 0.3}
    ) as p:
        await p.complete(ModelRequest(system="", messages=[UserMessage(content="x")], max_tokens=50, temperature=0.0))
    body = srv.requests[0].body
    assert (body[field], body["temperature"]) == (50, 0.0)


@pytest.mark.parametrize("model", ["openai/gpt-4o", "ollama/m", "anthropic/claude-x"])
async def test_streaming_off_makes_plain_requests_even_through_stream(model: str) -> None:
    async with FakeLLMServer([{"text": "plain answer"}]) as srv, create_provider(
        model, api_key="k", base_url=srv.url, options={"streaming": False}
    ) as p:
        assert p.streaming is False  # what the engine reads to choose complete()
        chunks, response = await collect(p, REQUEST)
    assert chunks == ["plain answer"] and response.message.content == "plain answer"
    body = srv.requests[0].body
    assert "stream" not in body and "stream_options" not in body


def test_anthropic_sends_tool_choice_only_when_set() -> None:
    plain = create_provider("anthropic/claude-x", api_key="k")
    assert "tool_choice" not in plain.body(REQUEST, stream=False)  # type: ignore[attr-defined]
    for setting, sent in [("auto", "auto"), ("required", "any"), ("none", "none")]:
        chosen = create_provider("anthropic/claude-x", api_key="k", options={"tool_choice": setting})
        assert chosen.body(REQUEST, stream=False)["tool_choice"] == {"type": sent}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"temprature": 0.5}, "unknown provider option 'temprature' (did you mean temperature?). Valid options: context_window,"),
        ({"temperature": 3}, "provider option temperature=3: Input should be less than or equal to 2"),
        ({"max_tokens": 0}, "provider option max_tokens=0: Input should be greater than 0"),
        ({"tool_choice": "any"}, "provider option tool_choice='any': write required (harness_nb's words are auto"),
        ({"tool_choice": "look up"}, "tool_choice='look up': give auto, required, none, or a tool's name"),
        ({"structured_output": "xml"}, "provider option structured_output='xml': Input should be 'json_schema' or 'tool'"),
        ({"empty_content": None, "streaming": "sometimes"}, "provider option streaming='sometimes'"),
        ({"extra": {"temperature": 1}}, "'temperature' has its own option: set temperature instead"),
        ({"extra": {"messages": []}}, "'messages' is written by the provider itself"),
    ],
)
@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-x", "scripted/s.yaml"])
def test_a_bad_key_or_value_is_one_config_error_naming_it(options: dict[str, Any], says: str, model: str) -> None:
    with pytest.raises(ConfigError) as info:
        create_provider(model, api_key="k", options=options)
    assert says in str(info.value)


# A tool's name as tool_choice, in each API's words (OpenAI's ChatCompletionNamedToolChoice,
# Anthropic's ToolChoiceTool), over real HTTP, streamed and plain.
NAMED = [
    ("openai/gpt-4o", {"type": "function", "function": {"name": "lookup"}}),
    ("openai-compatible/m", {"type": "function", "function": {"name": "lookup"}}),
    ("anthropic/claude-x", {"type": "tool", "name": "lookup"}),
]


@pytest.mark.parametrize(("model", "sent"), NAMED)
async def test_a_tool_s_name_forces_that_tool_in_each_api_s_words(model: str, sent: dict[str, Any]) -> None:
    call = {"name": "lookup", "arguments": {"q": "x"}}
    async with FakeLLMServer([{"tool_calls": [call]}, {"tool_calls": [call]}, {"text": "b"}]) as srv, create_provider(
        model, api_key="k", base_url=srv.url, options={"tool_choice": "lookup"}
    ) as p:
        _, streamed = await collect(p, REQUEST)
        plain = await p.complete(REQUEST)
        await p.complete(ModelRequest(system="", messages=[UserMessage(content="no tools")]))
    assert [c.name for c in streamed.message.tool_calls] == ["lookup"] == [c.name for c in plain.message.tool_calls]
    assert [r.body["tool_choice"] for r in srv.requests[:2]] == [sent, sent]
    assert "tool_choice" not in srv.requests[2].body  # never without tools


@pytest.mark.parametrize(("model", "sent"), NAMED)
async def test_a_request_s_tool_choice_wins_over_the_option(model: str, sent: dict[str, Any]) -> None:
    forced = ModelRequest(system="s", messages=[UserMessage(content="hi")], tools=[SPEC], tool_choice="lookup")
    async with FakeLLMServer([{"text": "a"}]) as srv, create_provider(
        model, api_key="k", base_url=srv.url, options={"tool_choice": "none"}
    ) as p:
        await p.complete(forced)
    assert srv.requests[0].body["tool_choice"] == sent


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-x"])
async def test_a_tool_choice_naming_a_tool_not_offered_is_one_clear_error_and_no_request(model: str) -> None:
    async with FakeLLMServer([{"text": "a"}]) as srv, create_provider(
        model, api_key="k", base_url=srv.url, options={"tool_choice": "lokup"}
    ) as p:
        with pytest.raises(ConfigError) as info:
            await p.complete(REQUEST)
    assert str(info.value) == (
        "tool_choice names the tool 'lokup' (did you mean lookup?), which this request does not offer "
        "(it offers: lookup); name an offered tool, or set auto / required / none"
    )
    assert srv.requests == []


async def test_a_forced_tool_goes_to_anthropic_without_thinking_which_the_api_refuses_beside_it() -> None:
    thinking = ModelRequest(system="s", messages=[UserMessage(content="hi")], tools=[SPEC], effort="high")
    p = create_provider("anthropic/claude-sonnet-4-5", api_key="k")
    assert "thinking" in p.body(thinking, stream=False)  # type: ignore[attr-defined]
    for choice in ("required", "lookup"):
        body = p.body(replace(thinking, tool_choice=choice), stream=False)  # type: ignore[attr-defined]
        assert "thinking" not in body and body["tool_choice"]["type"] in ("any", "tool")


SCHEMA = {"type": "object", "properties": {"label": {"enum": ["bug", "question"]}}, "required": ["label"]}


async def test_a_json_answer_goes_as_response_format_unless_the_server_has_no_json_schema_mode() -> None:
    asked = ModelRequest(system="s", messages=[UserMessage(content="hi")], json_answer=JsonAnswer("row", SCHEMA, strict=True))
    async with FakeLLMServer([{"text": '{"label": "bug"}'}, {"text": "{}"}, {"text": "{}"}]) as srv:
        for model, options in [("openai/gpt-4o", {}), ("openai-compatible/m", {"structured_output": "tool"}), ("anthropic/c", {})]:
            async with create_provider(model, api_key="k", base_url=srv.url, options=options) as p:
                assert p.structured_output == ("json_schema" if model == "openai/gpt-4o" else "tool")
                await p.complete(asked)
    wanted = {"type": "json_schema", "json_schema": {"name": "row", "schema": SCHEMA, "strict": True}}
    assert srv.requests[0].body["response_format"] == wanted
    assert ["response_format" in r.body for r in srv.requests[1:]] == [False, False]
    with pytest.raises(ConfigError, match="anthropic/c has no JSON-schema mode here"):
        create_provider("anthropic/c", api_key="k", options={"structured_output": "json_schema"})


def test_options_must_be_a_mapping_and_each_given_once() -> None:
    with pytest.raises(ConfigError, match="provider options must be a mapping .* not str"):
        create_provider("openai/gpt-4o", api_key="k", options="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="provider option streaming given twice"):
        create_provider("openai/gpt-4o", api_key="k", options={"streaming": False}, streaming=True)


def test_option_keywords_are_a_checked_shorthand() -> None:
    provider = create_provider("openai/gpt-4o", api_key="k", streaming=False, max_retries=1)
    assert provider.streaming is False and provider.retry.max_retries == 1  # type: ignore[attr-defined]


async def test_context_window_is_kept_on_every_kind_of_provider(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("- text: hi\n")
    (tmp_path / "c.jsonl").write_text("")
    options = {"context_window": 32768}
    providers = [
        create_provider("openai/gpt-4o", api_key="k", options=options),
        create_provider("anthropic/claude-x", api_key="k", options=options),
        create_provider("openai/gpt-4o", api_key="k", options=options, record_to="r.jsonl", workdir=tmp_path),
        create_provider("scripted/s.yaml", workdir=tmp_path, options=options),
        create_provider("replay/c.jsonl", workdir=tmp_path, options=options),
    ]
    assert [p.context_window for p in providers] == [32768] * 5
    # without the option: the known model's window, or none for a model nobody knows
    assert create_provider("openai/gpt-4o", api_key="k").context_window == 128_000
    assert create_provider("anthropic/claude-x", api_key="k").context_window is None
    for p in providers:
        await p.aclose()


async def test_offline_models_take_streaming_and_ignore_what_shapes_server_requests(tmp_path: Path) -> None:
    """One set of options serves a notebook whether it runs live or replays offline."""
    (tmp_path / "s.yaml").write_text("- text: hi\n")
    options = {"streaming": False, "temperature": 0.2, "tool_choice": "none", "extra": {"seed": 1}}
    scripted = create_provider("scripted/s.yaml", workdir=tmp_path, options=options)
    assert scripted.streaming is False
    assert (await scripted.complete(REQUEST)).message.content == "hi"
