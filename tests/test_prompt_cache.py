"""Prompt caching over real HTTP against the fake server: the breakpoints Anthropic
requests carry, the cache usage each API reports (and the fake server reports like it),
its price, and the identical prefix that subagents of one definition share."""

from __future__ import annotations

import json

import pytest

from harness_nb.core import (
    PRICES,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    TurnFinished,
    Usage,
    UserMessage,
)
from harness_nb.engine import AgentEngine, PromptBuilder
from harness_nb.harness import Harness
from harness_nb.providers import ModelRequest, create_provider
from harness_nb.testing import FakeLLMServer
from harness_nb.testing.fake_server import count_tokens
from harness_nb.tools import ToolContext, ToolRegistry, tool

EPHEMERAL = {"type": "ephemeral"}
SPECS = [
    ToolSpec(name="grep", description="Search.", parameters={"type": "object"}),
    ToolSpec(name="read_file", description="Read.", parameters={"type": "object"}),
]
HISTORY = [
    UserMessage(content="Where is x defined?"),
    AssistantMessage(content="Searching.", tool_calls=(ToolCall(id="t1", name="grep", arguments='{"p": "x"}'),)),
    ToolResultMessage(tool_call_id="t1", name="grep", content="a.py:3"),
    AssistantMessage(content="", tool_calls=(ToolCall(id="t2", name="read_file", arguments='{"path": "a.py"}'),)),
    ToolResultMessage(tool_call_id="t2", name="read_file", content="x = 1"),
]


@tool(read_only=True)
async def echo(ctx: ToolContext, text: str) -> str:
    """Return the text."""
    return text


async def test_anthropic_request_body_carries_four_breakpoints(no_provider_env):
    async with FakeLLMServer([{"text": "ok"}]) as srv, create_provider(
        "anthropic/claude-sonnet-4-5", api_key="k", base_url=srv.url
    ) as p:
        await p.complete(ModelRequest(system="Be brief.", messages=HISTORY, tools=SPECS))
    assert srv.requests[0].body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Where is x defined?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Searching."},
                    {"type": "tool_use", "id": "t1", "name": "grep", "input": {"p": "x"}},
                ],
            },
            # where the previous request ended: this request reads up to here
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py:3", "cache_control": EPHEMERAL}],
            },
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "a.py"}}]},
            # the latest turn: the next request reads up to here
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "x = 1", "cache_control": EPHEMERAL}],
            },
        ],
        "system": [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}],
        "tools": [
            {"name": "grep", "description": "Search.", "input_schema": {"type": "object"}},
            {"name": "read_file", "description": "Read.", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL},
        ],
    }
    # the plain wire forms stay unmarked: the marked ones are cached beside them
    assert "cache_control" not in json.dumps(HISTORY[-1].wire["anthropic"])
    assert HISTORY[-1].wire["anthropic:marked"]["cache_control"] == EPHEMERAL
    assert "cache_control" not in SPECS[0].wire["anthropic:json"].decode()


async def test_a_marked_turn_is_encoded_once_and_reused_as_the_previous_turn(no_provider_env):
    history = list(HISTORY)
    async with create_provider("anthropic/claude-sonnet-4-5", api_key="k", base_url="http://127.0.0.1:9") as p:
        first = p.body(ModelRequest(system="s", messages=history, tools=SPECS), stream=False)
        marked = history[-1].wire["anthropic:marked:json"]
        history += [AssistantMessage(content="x = 1 in a.py."), UserMessage(content="Thanks.")]
        second = p.body(ModelRequest(system="s", messages=history, tools=SPECS), stream=False)
    assert history[-3].wire["anthropic:marked:json"] is marked  # the latest turn then, the one before now
    assert second["tools"].parts[-1] is first["tools"].parts[-1]
    assert second["messages"][-3]["content"][-1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in json.dumps(second["messages"][:-3])


async def test_a_first_turn_has_no_earlier_turn_to_mark(no_provider_env):
    async with FakeLLMServer([{"text": "ok"}]) as srv, create_provider(
        "anthropic/claude-sonnet-4-5", api_key="k", base_url=srv.url
    ) as p:
        await p.complete(ModelRequest(system="", messages=[UserMessage(content="hi")]))
    body = srv.requests[0].body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}]
    assert "system" not in body and "tools" not in body


async def test_prompt_caching_can_be_turned_off(no_provider_env):
    async with FakeLLMServer([{"text": "ok"}], cache_min_tokens=0) as srv, create_provider(
        "anthropic/claude-sonnet-4-5", api_key="k", base_url=srv.url, options={"prompt_caching": False}
    ) as p:
        response = await p.complete(ModelRequest(system="Be brief.", messages=HISTORY, tools=SPECS))
    assert "cache_control" not in json.dumps(srv.requests[0].body)
    assert srv.requests[0].body["system"] == "Be brief."
    assert (response.usage.cache_read_tokens, response.usage.cache_write_tokens) == (0, 0)
    assert not p.cache_writes


def conversation(turns: int) -> list[dict]:
    echo_step = {"text": "Echoing.", "tool_calls": [{"name": "echo", "arguments": {"text": "hello " * 40}}]}
    return [echo_step] * turns + [{"text": "done"}]


def per_call(events: list) -> list[Usage]:
    """Each call's usage, from the running totals of the TurnFinished events."""
    totals = [e.usage for e in events if isinstance(e, TurnFinished)]
    out, before = [], Usage()
    for total in totals:
        out.append(
            Usage(
                input_tokens=total.input_tokens - before.input_tokens,
                output_tokens=total.output_tokens - before.output_tokens,
                cache_read_tokens=total.cache_read_tokens - before.cache_read_tokens,
                cache_write_tokens=total.cache_write_tokens - before.cache_write_tokens,
            )
        )
        before = total
    return out


@pytest.mark.parametrize("streaming", [True, False])
async def test_each_anthropic_call_reads_what_the_previous_one_wrote_and_it_is_priced(tmp_path, streaming, no_provider_env):
    async with FakeLLMServer(conversation(3), cache_min_tokens=0) as srv, create_provider(
        "anthropic/claude-sonnet-4-5", api_key="k", base_url=srv.url, options={"streaming": streaming}
    ) as provider:
        engine = AgentEngine(
            provider,
            ToolRegistry([echo]),
            prompt_builder=PromptBuilder("You echo.", workdir=tmp_path, environment=False),
            workdir=tmp_path,
        )
        events: list = []
        result = await engine.run("Echo three times.", on_event=events.append)
    calls = per_call(events)
    assert len(calls) == 4
    assert calls[0].cache_read_tokens == 0 and calls[0].cache_write_tokens > 0
    for before, now in zip(calls, calls[1:]):
        # the whole prompt of the call before (its last breakpoint) is read back
        assert now.cache_read_tokens == before.cache_read_tokens + before.cache_write_tokens
        assert now.cache_write_tokens > 0
    price = PRICES["claude-sonnet-4-5"]
    expected = 0.0
    for usage in calls:
        expected += (
            usage.input_tokens * 3.0 + usage.output_tokens * 15.0 + usage.cache_read_tokens * 0.3 + usage.cache_write_tokens * 3.75
        ) / 1_000_000
    assert (price.cache_read, price.cache_write) == (0.3, 3.75)
    assert result.usage.cost == expected


async def test_the_fake_server_caches_only_prefixes_of_the_minimum_length(no_provider_env):
    long_system = "Rules. " * 1_000  # about 1,750 tokens
    async with FakeLLMServer([{"text": "a"}, {"text": "b"}]) as srv, create_provider(
        "anthropic/claude-sonnet-4-5", api_key="k", base_url=srv.url
    ) as p:
        short = await p.complete(ModelRequest(system="Short.", messages=[UserMessage(content="hi")]))
        first = await p.complete(ModelRequest(system=long_system, messages=[UserMessage(content="hi")]))
    assert (short.usage.cache_read_tokens, short.usage.cache_write_tokens) == (0, 0)
    assert first.usage.cache_write_tokens >= 1_024 and first.usage.cache_read_tokens == 0


@pytest.mark.parametrize("streaming", [True, False])
async def test_openai_reports_its_automatic_cache_as_cache_reads(streaming, no_provider_env):
    """prompt_tokens_details.cached_tokens is part of prompt_tokens; ours are apart."""
    system = "Context. " * 800  # about 1,800 tokens: above OpenAI's 1,024-token minimum
    request = ModelRequest(system=system, messages=[UserMessage(content="hi")])
    async with FakeLLMServer([{"text": "a"}, {"text": "b"}]) as srv, create_provider(
        "openai/gpt-4.1", api_key="k", base_url=srv.url + "/v1", options={"streaming": streaming}
    ) as p:
        first = await p.complete(request)
        second = await p.complete(ModelRequest(system=system, messages=[UserMessage(content="hi again")]))
    assert first.usage.cache_read_tokens == 0
    prompt = count_tokens(srv.requests[1].body)  # the fake server's count of a prompt
    cached = second.usage.cache_read_tokens
    assert cached > 1_024 and cached % 128 == 0  # in 128-token steps, as OpenAI reports it
    assert second.usage.input_tokens + cached == prompt  # prompt_tokens holds the cached part
    assert second.usage.cache_write_tokens == 0


async def test_subagents_of_one_definition_send_the_same_prefix_and_share_the_cache(tmp_path, monkeypatch, no_provider_env):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    delegate = [
        {"match": "MAINPROMPT", "tool_calls": [{"name": "task", "arguments": {"subagent_type": "explore", "prompt": "find alpha"}}]},
        {"match": "find alpha", "text": "alpha is in a.py"},
        {"match": "MAINPROMPT", "tool_calls": [{"name": "task", "arguments": {"subagent_type": "explore", "prompt": "find beta"}}]},
        {"match": "find beta", "text": "beta is in b.py"},
        {"match": "MAINPROMPT", "text": "Both found."},
    ]
    async with FakeLLMServer(delegate, cache_min_tokens=0) as srv:
        h = Harness("anthropic/claude-sonnet-4-5", workdir=tmp_path, base_url=srv.url, include_user_agents=False, sandbox="off")
        async with h:
            result = await h.run("MAINPROMPT: find alpha and beta")
            entries = h.tracker.list()
    assert result.final_text == "Both found."
    children = [r.body for r in srv.requests if "find" in json.dumps(r.body["messages"][0]) and "MAINPROMPT" not in json.dumps(r.body["messages"][0])]
    assert len(children) == 2
    first, second = children
    assert json.dumps(first["system"]) == json.dumps(second["system"])
    assert json.dumps(first["tools"]) == json.dumps(second["tools"])
    assert [t["name"] for t in first["tools"]] == [t["name"] for t in second["tools"]]
    alpha, beta = (e.usage for e in entries)
    assert alpha.cache_read_tokens == 0
    assert beta.cache_read_tokens > 0  # the tools and system prompt, written by alpha
