"""The fake LLM server as a test helper: both APIs, both paths, streaming framing, the
script (faults, loop, exhaustion), request recording, thread mode and the command line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from harness_nb.testing.fake_server import FakeLLMServer


def sse_data(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


async def test_openai_stream_fragments_arguments_and_sends_usage() -> None:
    step = {"text": "Hi", "tool_calls": [{"name": "grep", "arguments": {"pattern": "a long pattern"}, "id": "c1"}]}
    async with FakeLLMServer([step]) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        body = {"model": "m", "messages": [], "stream": True, "stream_options": {"include_usage": True}}
        response = await client.post("/v1/chat/completions", json=body)
    assert response.headers["content-type"] == "text/event-stream"
    assert response.text.endswith("data: [DONE]\n\n")
    chunks = sse_data(response.text)
    fragments = [
        tc["function"]["arguments"]
        for c in chunks
        for ch in c["choices"]
        for tc in ch["delta"].get("tool_calls", [])
    ]
    assert fragments[0] == "" and len(fragments) > 2
    assert "".join(fragments) == '{"pattern": "a long pattern"}'
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


async def test_anthropic_stream_event_sequence() -> None:
    step = {"text": "Hi", "tool_calls": [{"name": "grep", "arguments": '{"pattern": "x"}'}]}
    async with FakeLLMServer([step]) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        response = await client.post("/messages", json={"model": "m", "messages": [], "stream": True})
    names = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == 2 and "ping" in names
    assert sse_data(response.text)[-2]["delta"]["stop_reason"] == "tool_use"


async def test_plain_answers_and_recorded_requests() -> None:
    steps = [{"text": "one"}, {"text": "two", "usage": {"input_tokens": 3, "output_tokens": 1}}]
    async with FakeLLMServer(steps) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        first = (await client.post("/chat/completions", json={"model": "m"}, headers={"Authorization": "Bearer k1"})).json()
        second = (await client.post("/v1/messages", json={"model": "m"}, headers={"x-api-key": "k2"})).json()
        exhausted = await client.post("/v1/messages", json={})
        missing = await client.post("/v1/embeddings", json={})
    assert first["choices"][0]["message"]["content"] == "one"
    assert second["content"] == [{"type": "text", "text": "two"}]
    assert second["usage"]["input_tokens"] == 3
    assert exhausted.status_code == 400 and "script exhausted after 2 steps" in exhausted.text
    assert missing.status_code == 404
    assert [r.path for r in srv.requests] == ["/chat/completions", "/v1/messages", "/v1/messages", "/v1/embeddings"]
    assert [r.api_key for r in srv.requests[:2]] == ["k1", "k2"]
    assert srv.requests[0].body == {"model": "m"}
    assert srv.remaining == 0


async def test_loop_cycles_and_add_appends() -> None:
    async with FakeLLMServer([{"text": "a"}, {"text": "b"}], loop=True) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        texts = [
            (await client.post("/v1/chat/completions", json={})).json()["choices"][0]["message"]["content"]
            for _ in range(5)
        ]
    assert texts == ["a", "b", "a", "b", "a"]


async def test_faults_answer_like_the_real_apis() -> None:
    steps = [
        {"fault": "rate_limit", "retry_after": 0.1},
        {"fault": "overloaded"},
        {"fault": "overloaded"},
        {"fault": "unauthorized", "echo_key": False},
        {"fault": "malformed_json"},
    ]
    async with FakeLLMServer(steps) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        limited = await client.post("/v1/chat/completions", json={})
        overloaded_openai = await client.post("/v1/chat/completions", json={})
        overloaded_anthropic = await client.post("/v1/messages", json={})
        unauthorized = await client.post("/v1/messages", json={}, headers={"x-api-key": "secret"})
        malformed = await client.post("/v1/messages", json={})
    assert limited.status_code == 429 and limited.headers["retry-after"] == "0.1"
    assert overloaded_openai.status_code == 503
    assert overloaded_anthropic.status_code == 529
    assert overloaded_anthropic.json()["error"]["type"] == "overloaded_error"
    assert unauthorized.status_code == 401 and "secret" not in unauthorized.text
    assert malformed.status_code == 200
    with pytest.raises(ValueError):
        malformed.json()


def test_in_thread_serves_sync_clients() -> None:
    with FakeLLMServer([{"text": "from a thread"}]).in_thread() as srv:
        response = httpx.post(srv.url + "/v1/chat/completions", json={"model": "m"})
    assert response.json()["choices"][0]["message"]["content"] == "from a thread"
    assert len(srv.requests) == 1


async def test_delay_does_not_block_other_connections() -> None:
    async with FakeLLMServer([{"text": "slow", "delay": 5}, {"text": "fast"}]) as srv:
        async with httpx.AsyncClient(base_url=srv.url) as slow_client, httpx.AsyncClient(base_url=srv.url) as fast_client:
            slow = asyncio.create_task(slow_client.post("/v1/chat/completions", json={}), name="slow-request")
            while not srv.requests:
                await asyncio.sleep(0.01)
            fast = await fast_client.post("/v1/chat/completions", json={})
            assert fast.json()["choices"][0]["message"]["content"] == "fast"
            slow.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow


def test_command_line(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "from the CLI"}]))
    process = subprocess.Popen(
        [sys.executable, "-m", "harness_nb.testing.fake_server", "--port", "0", "--script", str(script), "--loop"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        for _ in range(2):
            response = httpx.post(url + "/v1/messages", json={"model": "m"})
            assert response.json()["content"][0]["text"] == "from the CLI"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == 0


TOOLS = [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}]
CALL_STEP = {"tool_calls": [{"name": "grep", "arguments": {"pattern": "x"}, "id": "c1"}]}


async def test_strict_server_rejects_null_content_and_ignores_tools_without_tool_choice() -> None:
    """As particular as llama.cpp / llama-cpp-python, so providers can be tested against it."""
    null_turn = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
    steps = [{"text": "unused"}, CALL_STEP, CALL_STEP, {"text": "fine"}]
    async with FakeLLMServer(steps, strict=True) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        rejected = await client.post("/v1/chat/completions", json={"messages": [null_turn]})
        ignored = await client.post("/v1/chat/completions", json={"messages": [], "tools": TOOLS})
        called = await client.post("/v1/chat/completions", json={"messages": [], "tools": TOOLS, "tool_choice": "auto"})
        accepted = await client.post("/v1/chat/completions", json={"messages": [dict(null_turn, content="")]})
    assert rejected.status_code == 500 and "Expected 'content' to be a string" in rejected.text
    ignored_message = ignored.json()["choices"][0]["message"]
    assert "tool_calls" not in ignored_message and "grep" in ignored_message["content"]
    assert called.json()["choices"][0]["message"]["tool_calls"][0]["id"] == "c1"
    assert accepted.json()["choices"][0]["message"]["content"] == "fine"
    assert srv.remaining == 0  # a rejected request still used its step


async def test_lenient_server_takes_null_content() -> None:
    turn = {"role": "assistant", "content": None}
    async with FakeLLMServer([{"text": "ok"}]) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        response = await client.post("/v1/chat/completions", json={"messages": [turn]})
    assert response.status_code == 200


async def test_omit_usage_sends_none_on_either_api_streamed_or_not() -> None:
    step = {"text": "Hi", "omit_usage": True}
    async with FakeLLMServer([step] * 4) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        openai_plain = (await client.post("/v1/chat/completions", json={})).json()
        anthropic_plain = (await client.post("/v1/messages", json={})).json()
        stream = {"stream": True, "stream_options": {"include_usage": True}}
        openai_events = sse_data((await client.post("/v1/chat/completions", json=stream)).text)
        anthropic_events = sse_data((await client.post("/v1/messages", json={"stream": True})).text)
    assert "usage" not in openai_plain and "usage" not in anthropic_plain
    assert all("usage" not in event for event in openai_events)
    assert all("usage" not in event and "usage" not in event.get("message", {}) for event in anthropic_events)


async def test_end_early_closes_the_stream_cleanly_without_the_finishing_events() -> None:
    step = {"fault": "end_early", "text": "Hello"}
    async with FakeLLMServer([step, step]) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        body = {"stream": True, "stream_options": {"include_usage": True}}
        openai = await client.post("/v1/chat/completions", json=body)  # a complete chunked body
        anthropic = await client.post("/v1/messages", json={"stream": True})
    assert "[DONE]" not in openai.text
    chunks = sse_data(openai.text)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Hello"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    names = [line[7:] for line in anthropic.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-1] == "content_block_stop"
