"""Record a real provider (over the fake server) to a cassette, replay it offline, and
explain a replay miss by the part of the request that differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import (
    AssistantMessage,
    ConfigError,
    ProviderError,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from harness_nb.core.environment import environment_line
from harness_nb.engine.prompt import PromptBuilder
from harness_nb.providers import (
    ModelRequest,
    ModelResponse,
    RecordingProvider,
    ReplayProvider,
    TextChunk,
    create_provider,
    recording,
)
from harness_nb.providers.base import Provider
from harness_nb.providers.cassette import first_difference, request_hash
from harness_nb.testing import ScriptedProvider
from harness_nb.testing.fake_server import FakeLLMServer

pytestmark = pytest.mark.usefixtures("no_provider_env")

KEY = "sk-cassette-0123456789abcdef"
READ = ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})
GREP = ToolSpec(name="grep", description="Search.", parameters={"type": "object"})


def conversation(workdir: Path, system: str | None = None) -> list[ModelRequest]:
    """Two turns of one run: a tool call, then the final answer."""
    system = system or f"You are a helper. Working directory: {workdir}"
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


STEPS: list[dict[str, Any]] = [
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


def system_prompt(workdir: Path, *, python: str, system: str, today: str, skill: str = "Use tabs.") -> str:
    """The engine's system prompt, built on a given machine and day."""
    builder = PromptBuilder(
        "You are a helper.",
        workdir=workdir,
        skills=["style"],
        skill_texts={"style": skill},
        environment_line=lambda: environment_line(python, system, today),
    )
    return builder.build()


async def test_a_cassette_replays_on_another_day_and_another_machine(tmp_path: Path) -> None:
    workdir = tmp_path / "class"
    recorded_prompt = system_prompt(workdir, python="3.11.7", system="Linux", today="2026-12-01")
    cassette = tmp_path / "lesson.jsonl"
    async with FakeLLMServer(STEPS) as srv:
        recorder = RecordingProvider(create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url), cassette, workdir=workdir)
        recorded = await run(recorder, conversation(workdir, recorded_prompt))
        await recorder.aclose()
    # The cassette keeps what was really sent.
    line = json.loads(cassette.read_text().splitlines()[0])
    assert "Environment: Python 3.11.7 on Linux; today is 2026-12-01." in line["request"]["system"]

    later_prompt = system_prompt(workdir, python="3.13.1", system="Darwin", today="2027-03-15")
    replay = ReplayProvider(cassette, workdir=workdir)
    replayed = await run(replay, conversation(workdir, later_prompt))
    assert [("".join(c), r.message, r.usage) for c, r in replayed] == [("".join(c), r.message, r.usage) for c, r in recorded]

    # A real change to the prompt (after the environment line) still misses, and the
    # message points at it, not at the date.
    changed = system_prompt(workdir, python="3.13.1", system="Darwin", today="2027-03-15", skill="Use spaces.")
    with pytest.raises(ProviderError) as info:
        await replay.complete(conversation(workdir, changed)[0])
    message = str(info.value)
    assert "the system prompt differs at char" in message and "Use tabs." in message and "Use spaces." in message
    assert "2026-12-01" not in message and "2027-03-15" not in message


def test_the_hash_and_the_difference_leave_out_only_the_environment_line() -> None:
    def record(system: str) -> dict:
        return {"system": system, "messages": [], "tools": []}

    monday = record("Be brief.\n\n" + environment_line("3.11.7", "Linux", "2026-12-01") + "\n\nSkills.")
    tuesday = record("Be brief.\n\n" + environment_line("3.12.0", "Windows", "2026-12-02") + "\n\nSkills.")
    assert request_hash(monday) == request_hash(tuesday)
    assert monday["system"] != tuesday["system"]  # hashing does not change the record
    other = record("Be brief.\n\n" + environment_line("3.11.7", "Linux", "2026-12-01") + "\n\nSkills!")
    assert request_hash(monday) != request_hash(other)
    difference = first_difference(monday, other)
    assert "the system prompt differs" in difference and "Skills.'" in difference and "Skills!'" in difference
    assert "2026-12-01" not in difference  # the window shows the placeholder, not a day


async def test_recording_wraps_a_real_provider_instance(tmp_path: Path) -> None:
    async with FakeLLMServer([{"text": "recorded"}]) as srv:
        inner = create_provider("anthropic/claude-x", api_key=KEY, base_url=srv.url, options={"context_window": 200_000})
        provider = recording(inner, "cassettes/run.jsonl", workdir=tmp_path)
        assert isinstance(provider, RecordingProvider) and provider.inner is inner
        assert (provider.model_id, provider.context_window) == ("anthropic/claude-x", 200_000)
        assert recording(provider, tmp_path / "cassettes" / "run.jsonl") is provider  # already recording there
        await provider.complete(ModelRequest(system="s", messages=[UserMessage(content="hi")]))
        await provider.aclose()
    [line] = (tmp_path / "cassettes" / "run.jsonl").read_text().splitlines()
    assert json.loads(line)["response"]["message"]["content"] == "recorded"


async def test_recording_leaves_offline_providers_and_no_cassette_alone(recorded: Path, tmp_path: Path) -> None:
    scripted = ScriptedProvider([{"text": "hi"}])
    replay = ReplayProvider(recorded)
    assert recording(scripted, tmp_path / "c.jsonl") is scripted
    assert recording(replay, recorded) is replay
    live = create_provider("openai/gpt-4o", api_key=KEY)
    assert recording(live, None) is live
    await scripted.complete(ModelRequest(system="", messages=[UserMessage(content="x")]))
    assert not (tmp_path / "c.jsonl").exists()
    await live.aclose()


def test_replay_is_named_after_the_cassette_path_as_written(recorded: Path) -> None:
    workdir = recorded.parents[1]
    replay = ReplayProvider("cassettes/demo.jsonl", workdir=workdir)
    assert replay.model_id == "replay/cassettes/demo.jsonl" and replay.path == recorded
