"""The context window over real HTTP, against the fake LLM server: what an OpenAI-compatible
server says of its window (asked once, bounded, never fatal), each API's "too long" error
classified and never retried as a transient failure, and a 200-cell session with 20 KB tool
results run to the end on a server that enforces its window — on the OpenAI wire (a vLLM
that reports its window), the Anthropic wire (the harness told a window larger than the
server's) and a llama.cpp that says nothing until it refuses a request."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_nb import Harness
from harness_nb.core import (
    Compacted,
    CompactionStarted,
    ContextMeasured,
    Event,
    ProviderError,
    RunFailed,
    ToolResultMessage,
    UserMessage,
)
from harness_nb.engine.compaction.summary import is_summary
from harness_nb.engine.session import load_transcript
from harness_nb.providers import create_provider, window
from harness_nb.providers.http import RetryPolicy
from harness_nb.testing import FakeLLMServer
from harness_nb.testing.fake_server import count_tokens
from harness_nb.tools import ToolContext, tool

KEY = "sk-ant-test-0123456789abcdefghij"
NO_RETRY = RetryPolicy(max_retries=2, base_delay=0.0)


def compatible(url: str, **options: Any) -> Any:
    return create_provider("openai-compatible/fake", base_url=url + "/v1", retry=NO_RETRY, options=options)


# -- what the server says ---------------------------------------------------------------------


@pytest.mark.parametrize(("server", "asked"), [("vllm", ["/v1/models"]), ("llamacpp", ["/v1/models", "/props"])])
async def test_the_window_an_openai_compatible_server_reports(server: str, asked: list[str]) -> None:
    async with FakeLLMServer([], server=server, context_window=4096) as srv:  # type: ignore[arg-type]
        provider = compatible(srv.url)
        assert provider.context_window is None
        assert await provider.discover_window() == 4096
        assert await provider.discover_window() == 4096  # asked once
        await provider.aclose()
    assert [r.path for r in srv.info_requests] == asked


async def test_a_server_that_says_nothing_leaves_the_window_unknown_or_the_known_models() -> None:
    async with FakeLLMServer([], server="llamacpp", context_window=4096, report_window=False) as srv:
        provider = compatible(srv.url)
        assert await provider.discover_window() is None
        assert [r.path for r in srv.info_requests] == ["/v1/models", "/props", "/slots"]
        proxied = create_provider("openai-compatible/gpt-4o", base_url=srv.url + "/v1")
        assert await proxied.discover_window() == 128_000  # a proxy's known model name
        assert await proxied.discover_window() == 128_000  # ... on every call, the server's silence kept
        given = compatible(srv.url, context_window=2048)
        assert await given.discover_window() == 2048  # the option wins, nothing asked
        for p in (provider, proxied, given):
            await p.aclose()
    assert len(srv.info_requests) == 6


async def test_asking_is_bounded_in_time_and_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window, "_PROBE_SECONDS", 0.2)

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json={})

    hanging = create_provider("openai-compatible/m", base_url="http://s/v1", transport=httpx.MockTransport(slow))
    assert await hanging.discover_window() is None

    def huge(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b'{"data": [' + b" " * (5 << 20) + b"]}")

    flooding = create_provider("openai-compatible/m", base_url="http://s/v1", transport=httpx.MockTransport(huge))
    assert await flooding.discover_window() is None
    for p in (hanging, flooding):
        await p.aclose()


async def test_eight_providers_of_one_server_ask_it_once_and_two_servers_twice() -> None:
    async with (
        FakeLLMServer([], server="vllm", context_window=4096) as one,
        FakeLLMServer([], server="vllm", context_window=8192) as two,
    ):
        providers = [compatible(one.url) for _ in range(8)] + [compatible(two.url) for _ in range(8)]
        windows = await asyncio.gather(*(p.discover_window() for p in providers))  # all at once: one in flight
        for p in providers:
            await p.aclose()
    assert windows == [4096] * 8 + [8192] * 8
    assert [r.path for r in one.info_requests] == [r.path for r in two.info_requests] == ["/v1/models"]


async def test_a_kept_window_is_asked_again_after_its_time_and_each_key_has_its_own() -> None:
    now = [0.0]
    lookups = window.WindowLookups(ttl=600, clock=lambda: now[0])
    async with FakeLLMServer([], server="vllm", context_window=4096) as srv, httpx.AsyncClient() as client:
        key = lookups.key(srv.url + "/v1", "fake", "sk-one-0123456789")
        assert await lookups.window(key, client) == 4096
        now[0] = 599.0
        assert await lookups.window(key, client) == 4096  # kept
        assert len(srv.info_requests) == 1
        now[0] = 601.0
        assert await lookups.window(key, client) == 4096  # its time is up: asked again
        assert len(srv.info_requests) == 2
        other = lookups.key(srv.url + "/v1", "fake", "sk-two-0123456789")
        assert other != key and "sk-one" not in repr(key)
        assert await lookups.window(other, client) == 4096
        assert len(srv.info_requests) == 3


async def test_a_too_long_error_makes_the_server_asked_again() -> None:
    from harness_nb.providers import ModelRequest

    async with FakeLLMServer([{"text": "never"}], server="llamacpp", context_window=20) as srv:
        first, later = compatible(srv.url), compatible(srv.url)
        assert await first.discover_window() == 20
        assert await later.discover_window() == 20
        assert [r.path for r in srv.info_requests] == ["/v1/models", "/props"]  # asked once for both
        with pytest.raises(ProviderError):
            await first.complete(ModelRequest(system="s", messages=[UserMessage(content="x" * 400)]))
        assert await later.discover_window() == 20  # forgotten: asked again (a restarted server)
        for p in (first, later):
            await p.aclose()
    assert [r.path for r in srv.info_requests] == ["/v1/models", "/props"] * 2


async def test_a_server_that_did_not_answer_is_asked_again_next_time() -> None:
    async with FakeLLMServer([], server="vllm", context_window=4096, info_failures=1) as srv:
        first, second = compatible(srv.url), compatible(srv.url)
        assert await first.discover_window() is None  # a 500: not an answer to keep
        assert await first.discover_window() is None  # ... nor to ask again every call of this provider
        assert await second.discover_window() == 4096
        for p in (first, second):
            await p.aclose()
    assert [r.path for r in srv.info_requests] == ["/v1/models"] * 2


# -- each API's too-long error --------------------------------------------------------------


@pytest.mark.parametrize("server", ["openai", "vllm", "llamacpp", "anthropic"])
async def test_each_apis_too_long_answer_is_a_context_length_error(server: str, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    flavour = "openai" if server == "anthropic" else server
    async with FakeLLMServer([{"text": "never"}], context_window=20, server=flavour) as srv:  # type: ignore[arg-type]
        if server == "anthropic":
            provider = create_provider("anthropic/claude-fake", base_url=srv.url, retry=NO_RETRY)
        else:
            provider = compatible(srv.url)
        from harness_nb.core import UserMessage as U
        from harness_nb.providers import ModelRequest

        with pytest.raises(ProviderError) as caught:
            await provider.complete(ModelRequest(system="s", messages=[U(content="x" * 400)]))
        await provider.aclose()
    error = caught.value
    assert (error.kind, error.status, error.context_window, error.retryable) == ("context_length", 400, 20, False)
    assert "too long for the model's context window" in str(error)
    assert len(srv.requests) == 1 and srv.remaining == 1  # not retried, and no step used


# -- the long session ------------------------------------------------------------------------

CELLS = 200
RESULT = 20_480  # characters each table has: over offload_chars, so offloaded too


@tool(read_only=True)
async def table(ctx: ToolContext, part: int) -> str:
    """Return one part of a large table."""
    row = f"{part:06d},alpha,beta,gamma,delta,{'x' * 40}\n"
    return (row * (RESULT // len(row) + 1))[:RESULT]


def is_result(message: dict[str, Any]) -> bool:
    """The last message of a request is a tool result, on either wire."""
    if message.get("role") == "tool":
        return True
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def responder() -> Any:
    """Answers every request as a model would: a summary when asked for one (no tools
    offered), a call of ``table`` to a prompt, a short answer to a result."""
    parts = itertools.count()

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return {"text": "Record: the person asked for parts of a table; the agent fetched and read them."}
        if is_result(body["messages"][-1]):
            return {"text": "done"}
        return {"tool_calls": [{"name": "table", "arguments": {"part": next(parts)}}]}

    return answer


WINDOW = 12_000


@pytest.mark.parametrize(
    ("api", "server", "report", "told"),
    [
        ("openai-compatible", "vllm", True, None),  # the server reports its window
        ("anthropic", "openai", True, 2 * WINDOW),  # the harness is told too large a window
        ("openai-compatible", "llamacpp", False, None),  # nobody says until the server refuses
    ],
    ids=["openai-wire-vllm", "anthropic-wire", "openai-wire-llamacpp-silent"],
)
async def test_a_200_cell_session_on_a_server_enforcing_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: str, server: str, report: bool, told: int | None
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    events: list[Event] = []
    async with FakeLLMServer(
        [responder()], loop=True, context_window=WINDOW, server=server, report_window=report  # type: ignore[arg-type]
    ) as srv:
        base = srv.url + ("/v1" if api == "openai-compatible" else "")
        async with Harness(
            f"{api}/fake-model",
            workdir=tmp_path,
            base_url=base,
            extra_tools=[table],
            context_window=told,
            include_user_agents=False,
            sandbox="off",
        ) as h:
            for cell in range(CELLS):
                result = await h.run(f"cell {cell}: fetch the next part of the table", on_event=events.append)
                assert (result.final_text, result.stop_reason) == ("done", "end_turn"), cell
            session, compacted = h.session, list(h.session.messages)
            history = list(h.session.history)

    assert not [e for e in events if isinstance(e, RunFailed)]
    done = [e for e in events if isinstance(e, Compacted)]
    started = [e for e in events if isinstance(e, CompactionStarted)]
    assert len(started) == len(done) > 10
    assert sum(d.cleared for d in done) > CELLS / 2 and any(d.summarised for d in done)
    too_long = [e for e in started if e.reason == "context_length"]
    if told is None and report:
        assert not too_long  # a reported window: compacted before, never refused
    else:
        assert len(too_long) == 1  # refused once; the stated window was learnt from the error
    gauge = [e for e in events if isinstance(e, ContextMeasured)]
    assert gauge[-1].window == WINDOW and all(e.tokens <= WINDOW for e in gauge[-50:])

    answered = [r for r in srv.requests if r.body.get("tools")]
    assert len(answered) == 2 * CELLS + len(too_long)
    assert max(count_tokens(r.body) for r in srv.requests[-100:]) <= WINDOW

    # the transcript holds every message of every run, and the compactions
    assert session.transcript is not None
    on_disk = load_transcript(session.transcript)
    assert len(on_disk) == 4 * CELLS and on_disk == history
    prompts = [m.content for m in on_disk if isinstance(m, UserMessage)]
    assert prompts == [f"cell {c}: fetch the next part of the table" for c in range(CELLS)]
    results = [m for m in on_disk if isinstance(m, ToolResultMessage)]
    assert len(results) == CELLS and all("read it with read_file" in m.content for m in results)
    rows = [json.loads(line) for line in session.transcript.read_text().splitlines()]
    assert sum(r["type"] == "compaction" for r in rows) == len([d for d in done if d.cleared or d.summarised])
    assert load_transcript(session.transcript, compacted=True) == compacted
    assert is_summary(compacted[0])
    offloaded = tmp_path / ".harness_nb" / "offload"
    assert len(list(offloaded.glob("*.txt"))) == CELLS  # each whole table, once


async def test_the_window_is_asked_while_the_skills_are_read_not_after(tmp_path: Path) -> None:
    """A run's first call needs both the skills read from disk and the server's window: the
    window is asked while the skills are still being read (a gate holds them), so eight
    harnesses started at once wait for the slower of the two, not for both in turn."""
    from harness_nb.engine import AgentEngine, PromptBuilder
    from harness_nb.tools import ToolRegistry

    gate = asyncio.Event()

    class GatedPrompt(PromptBuilder):
        async def refresh(self, tools: Any = None) -> None:
            await gate.wait()  # the skills take a while to read
            await super().refresh(tools)

    async with FakeLLMServer([{"text": "done"}], server="vllm", context_window=4096) as srv:
        provider = compatible(srv.url)
        engine = AgentEngine(provider, ToolRegistry(), prompt_builder=GatedPrompt("Be brief.", workdir=tmp_path))
        run = asyncio.create_task(engine.run("hi"))

        async def window_asked() -> None:
            while not srv.info_requests:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(window_asked(), 10)  # the window was asked while the gate was shut
        assert not srv.requests and not run.done()
        gate.set()
        result = await run
        await provider.aclose()
    assert result.final_text == "done"
    assert [r.path for r in srv.info_requests] == ["/v1/models"]  # asked once, before the first call
