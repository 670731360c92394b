"""Record a real provider (over the fake server) to a cassette, replay it offline, and
explain a replay miss by the part of the request that differs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_nb.core import AssistantMessage, ConfigError, ProviderError, ToolCall, ToolResultMessage, ToolSpec, UserMessage
from harness_nb.providers import ModelRequest, ModelResponse, RecordingProvider, ReplayProvider, TextChunk, create_provider
from harness_nb.providers.base import Provider
from harness_nb.testing.fake_server import FakeLLMServer

pytestmark = pytest.mark.usefixtures("no_provider_env")

KEY = "sk-cassette-0123456789abcdef"
READ = ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})
GREP = ToolSpec(name="grep", description="Search.", parameters={"type": "object"})


def conversation(workdir: Path) -> list[ModelRequest]:
    """Two turns of one run: a tool call, then the final answer."""
    system = f"You are a helper. Working directory: {workdir}"
    first = [UserMessage(content="What is in notes.txt?")]
    call = ToolCall(id="call_fake1", name="read_file", arguments='{"path": "notes.txt"}')
    second = [
        *first,
        AssistantMessage(content="Reading.", tool_calls=(call,)),
        ToolResultMessage(tool_call_id="call_fake1", name="read_file", content="buy milk"),
    ]
    return [
        ModelRequest(system=system, messages=first, tools=[READ, GREP], agent="main"),
        ModelRequest(system=system, messages=second, tools=[READ, GREP], agent="main"),
    ]


async def run(provider: Provider, requests: list[ModelRequest]) -> list[tuple[list[str], ModelResponse]]:
    results = []
    for request in requests:
        chunks, response = [], None
        async for item in provider.stream(request):
            if isinstance(item, TextChunk):
                chunks.append(item.text)
            else:
                response = item
        assert response is not None
        results.append((chunks, response))
    return results


STEPS = [
    {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "The file says to buy milk.", "usage": {"input_tokens": 50, "output_tokens": 8}},
]


@pytest.fixture
async def recorded(tmp_path: Path) -> Path:
    """A cassette recorded from the fake server through the OpenAI provider."""
    workdir = tmp_path / "teacher"
    async with FakeLLMServer(STEPS) as srv:
        provider = create_provider(
            "openai/gpt-4o", api_key=KEY, base_url=srv.url, record_to="cassettes/demo.jsonl", workdir=workdir
        )
        assert isinstance(provider, RecordingProvider)
        # It looks like the provider it wraps.
        assert (provider.name, provider.model_id, provider.streaming) == ("openai", "openai/gpt-4o", True)
        await run(provider, conversation(workdir))
        await provider.aclose()
    return workdir / "cassettes" / "demo.jsonl"


async def test_record_then_replay_round_trip(recorded: Path, tmp_path: Path) -> None:
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert len(lines) == 2
    assert lines[0]["request"]["system"] == "You are a helper. Working directory: {workdir}"
    assert lines[0]["agent"] == "main" and lines[0]["model"] == "openai/gpt-4o"
    assert [t["name"] for t in lines[0]["request"]["tools"]] == ["read_file", "grep"]
    assert KEY not in recorded.read_text()

    # Replayed on another machine: another working directory, no key, no server.
    student = tmp_path / "student"
    replay = create_provider(f"replay/{recorded}", workdir=student)
    assert isinstance(replay, ReplayProvider)
    (chunks1, first), (chunks2, second) = await run(replay, conversation(student))
    assert first.message.tool_calls == (ToolCall(id="call_fake1", name="read_file", arguments='{"path": "notes.txt"}'),)
    assert "".join(chunks1) == "Reading."
    assert len(chunks2) > 1 and "".join(chunks2) == "The file says to buy milk."
    assert second.message.content == "The file says to buy milk."
    assert second.usage.input_tokens == 50
    assert (await replay.complete(conversation(student)[1])).message.content == "The file says to buy milk."


async def test_replay_ignores_the_model_name_and_answers_repeats_in_order(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    request = ModelRequest(system="s", messages=[UserMessage(content="roll a die")])
    async with FakeLLMServer([{"text": "4"}, {"text": "2"}]) as srv:
        recorder = create_provider("anthropic/claude-x", api_key=KEY, base_url=srv.url, record_to=cassette)
        for _ in range(2):
            await recorder.complete(request)
        await recorder.aclose()
    replay = ReplayProvider(cassette)
    answers = [(await replay.complete(request)).message.content for _ in range(3)]
    assert answers == ["4", "2", "2"]  # in recorded order, then the last one again


async def miss(recorded: Path, request: ModelRequest) -> str:
    replay = ReplayProvider(recorded, workdir=recorded.parents[1])
    with pytest.raises(ProviderError) as info:
        await replay.complete(request)
    assert info.value.provider == "replay"
    return str(info.value)


async def test_miss_names_the_differing_message(recorded: Path) -> None:
    request = conversation(recorded.parents[1])[1]
    changed = list(request.messages)
    changed[2] = ToolResultMessage(tool_call_id="call_fake1", name="read_file", content="buy oat milk")
    message = await miss(recorded, ModelRequest(system=request.system, messages=changed, tools=request.tools))
    assert "Nearest: line 2" in message
    assert "messages[2].content: recorded 'buy milk' vs now 'buy oat milk'" in message


async def test_miss_names_the_tools(recorded: Path) -> None:
    request = conversation(recorded.parents[1])[0]
    extra = ToolSpec(name="bash", description="Run.", parameters={"type": "object"})
    message = await miss(recorded, ModelRequest(system=request.system, messages=request.messages, tools=[READ, GREP, extra]))
    assert "tools: recorded [read_file, grep] vs now [read_file, grep, bash]" in message


async def test_miss_names_the_system_prompt_position(recorded: Path) -> None:
    request = conversation(recorded.parents[1])[0]
    message = await miss(recorded, ModelRequest(system="You are a HELPER.", messages=request.messages, tools=request.tools))
    assert "the system prompt differs at char 10" in message


async def test_miss_names_a_longer_history(recorded: Path) -> None:
    request = conversation(recorded.parents[1])[1]
    longer = [*request.messages, UserMessage(content="and then?")]
    message = await miss(recorded, ModelRequest(system=request.system, messages=longer, tools=request.tools))
    assert "messages: recorded 3 vs now 4 (first extra: user 'and then?')" in message


def test_missing_or_broken_cassette(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found: record one first"):
        create_provider("replay/nowhere.jsonl", workdir=tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"request": {}}\n')
    replay = ReplayProvider(bad)
    with pytest.raises(ConfigError, match="line 1 is not a recorded call"):
        replay._load()


async def test_empty_cassette_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ProviderError, match="the cassette is empty"):
        await ReplayProvider(empty).complete(ModelRequest(system="", messages=[UserMessage(content="x")]))


async def test_replaying_with_recording_still_on_does_not_append_to_the_cassette(recorded: Path, tmp_path: Path) -> None:
    """A class replays the teacher's notebook with the teacher's `record_to` still set: the
    cassette must not grow with its own replayed answers."""
    before = recorded.read_bytes()
    replay = create_provider(f"replay/{recorded}", record_to=recorded, workdir=tmp_path)
    assert isinstance(replay, ReplayProvider)
    await run(replay, conversation(tmp_path))
    assert recorded.read_bytes() == before
    (tmp_path / "s.yaml").write_text("- text: hi\n")
    scripted = create_provider("scripted/s.yaml", record_to="c.jsonl", workdir=tmp_path)
    assert not isinstance(scripted, RecordingProvider)
