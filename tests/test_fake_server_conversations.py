"""The fake LLM server under concurrent conversations (what the fan-out benchmark needs):
connections are served at the same time, and ``per_conversation`` gives each conversation
its own walk through the script however the requests interleave."""

from __future__ import annotations

import asyncio

import httpx

from harness_nb.testing.fake_server import FakeLLMServer

SCRIPT = [{"text": "first"}, {"text": "second"}, {"text": "last"}]


def history(turns: int) -> list[dict[str, str]]:
    """A conversation after ``turns`` answers: user, assistant, user, assistant, ..., user."""
    out = [{"role": "user", "content": "go"}]
    for n in range(turns):
        out += [{"role": "assistant", "content": f"answer {n}"}, {"role": "user", "content": "more"}]
    return out


async def test_per_conversation_steps_follow_each_conversations_turn() -> None:
    async with FakeLLMServer(SCRIPT, per_conversation=True) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        # Interleaved: conversation B starts while A is in the middle of the script.
        order = [0, 1, 0, 2, 1, 2]
        texts = [
            (await client.post("/v1/chat/completions", json={"messages": history(turn)})).json()["choices"][0][
                "message"
            ]["content"]
            for turn in order
        ]
        beyond = await client.post("/v1/messages", json={"messages": history(3)})
    assert texts == ["first", "second", "first", "last", "second", "last"]
    assert beyond.status_code == 400 and "script exhausted after 3 steps" in beyond.text
    assert srv.remaining == 0


async def test_per_conversation_loop_wraps_around() -> None:
    async with FakeLLMServer(SCRIPT, per_conversation=True, loop=True) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        answer = (await client.post("/v1/messages", json={"messages": history(4)})).json()
    assert answer["content"] == [{"type": "text", "text": "second"}]


async def test_concurrent_conversations_are_served_at_once() -> None:
    # Every request waits for a long delay; all eight must be received while the first is
    # still waiting, so the server takes connections concurrently (no timing asserted).
    steps = [{"text": "slow", "delay": 30}]
    async with FakeLLMServer(steps, per_conversation=True) as srv:
        async with httpx.AsyncClient(base_url=srv.url) as client:
            tasks = [
                asyncio.create_task(client.post("/v1/chat/completions", json={"messages": history(0)}), name=f"req-{n}")
                for n in range(8)
            ]
            async with asyncio.timeout(10):
                while len(srv.requests) < 8:
                    await asyncio.sleep(0.01)
            assert not any(t.done() for t in tasks)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def test_record_false_keeps_no_requests() -> None:
    async with FakeLLMServer(SCRIPT, record=False) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        await client.post("/v1/chat/completions", json={})
    assert srv.requests == [] and srv.remaining == 2
