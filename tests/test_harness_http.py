"""The whole harness over real HTTP: the engine, real providers and the built-in tools
against the fake LLM server on loopback (both APIs), including retries, secrets and the
transcript on disk."""

from __future__ import annotations

import json
import logging

import pytest

from harness_nb.core import RunFinished, ToolResultMessage
from harness_nb.engine.session import load_transcript
from harness_nb.harness import Harness
from harness_nb.providers import create_provider
from harness_nb.providers.http import RetryPolicy
from harness_nb.testing import FakeLLMServer

SECRET = "sk-test-0123456789abcdefghijklmnop"


def steps() -> list[dict]:
    return [
        {
            "text": "Reading both files.",
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "a.txt"}, "id": "call_a"},
                {"name": "read_file", "arguments": {"path": "b.txt"}, "id": "call_b"},
            ],
            "usage": {"input_tokens": 50, "output_tokens": 10},
        },
        {"text": "a says alpha, b says beta.", "usage": {"input_tokens": 80, "output_tokens": 8}},
    ]


@pytest.mark.parametrize("api", ["openai-compatible", "anthropic"])
@pytest.mark.parametrize("streaming", [True, False])
async def test_multi_turn_run_with_parallel_tool_calls_over_http(tmp_path, monkeypatch, api, streaming, no_provider_env):
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    async with FakeLLMServer(steps()) as srv:
        base = srv.url + ("/v1" if api == "openai-compatible" else "")
        h = Harness(f"{api}/test-model", workdir=tmp_path, base_url=base, include_user_agents=False)
        h.provider.streaming = streaming
        events = []
        async with h:
            result = await h.run("What do a.txt and b.txt say?", on_event=events.append)
    assert result.final_text == "a says alpha, b says beta."
    assert (result.usage.input_tokens, result.usage.output_tokens, result.turns, result.tool_calls) == (130, 18, 2, 2)
    outs = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(o.tool_call_id, o.content) for o in outs] == [("call_a", "     1\talpha"), ("call_b", "     1\tbeta")]
    # the second request carried both results, in call order, in the API's own shape
    body = srv.requests[1].body
    if api == "anthropic":
        blocks = body["messages"][-1]["content"]
        assert [(b["type"], b["tool_use_id"]) for b in blocks] == [("tool_result", "call_a"), ("tool_result", "call_b")]
    else:
        tail = body["messages"][-2:]
        assert [(m["role"], m["tool_call_id"]) for m in tail] == [("tool", "call_a"), ("tool", "call_b")]
    assert body.get("stream", False) is streaming
    assert isinstance(events[-1], RunFinished)


async def test_transient_server_errors_are_retried_inside_a_run(tmp_path, no_provider_env):
    script = [{"fault": "server_error"}, {"fault": "rate_limit", "retry_after": 0.01}, {"text": "fine"}]
    async with FakeLLMServer(script) as srv:
        provider = create_provider("openai-compatible/m", base_url=srv.url + "/v1", retry=RetryPolicy(base_delay=0.01))
        h = Harness(provider, workdir=tmp_path, include_user_agents=False)
        async with h:
            result = await h.run("hi")
    assert result.final_text == "fine"
    assert len(srv.requests) == 3


async def test_api_keys_never_reach_output_transcripts_events_or_logs(tmp_path, monkeypatch, caplog, no_provider_env):
    """The key is sent in the header and nowhere else — even when a tool prints it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo key=$OPENAI_API_KEY; cat .env"}}]},
        {"fault": "unauthorized"},  # the server echoes the key in its 401 body
    ]
    caplog.set_level(logging.DEBUG)
    events = []
    async with FakeLLMServer(script) as srv:
        # unsandboxed, so that `cat .env` can print the key for the masking to catch; the
        # command expands a variable, so it would ask: this test needs it to run
        h = Harness(
            "openai-compatible/m",
            workdir=tmp_path,
            base_url=srv.url + "/v1",
            include_user_agents=False,
            sandbox="off",
            approval_policy="never",
        )
        async with h:
            with pytest.raises(Exception) as info:
                await h.run("show me the environment", on_event=events.append)
            transcript = h.session.transcript
    assert srv.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    result = next(m for m in h.session.messages if isinstance(m, ToolResultMessage))
    assert result.content.startswith("key=\n")  # bash's environment holds no key
    assert "OPENAI_API_KEY=[redacted]" in result.content and SECRET not in result.content
    # the model saw the redacted text: the second request body holds no key
    assert SECRET not in json.dumps(srv.requests[1].body)
    assert transcript is not None and SECRET not in transcript.read_text()
    assert all(SECRET not in e.model_dump_json() for e in events)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert "OPENAI_API_KEY" in str(info.value)
    assert SECRET not in caplog.text
    assert SECRET not in repr(h) and SECRET not in repr(h.provider)
    assert load_transcript(transcript) == h.session.messages
