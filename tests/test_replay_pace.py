"""A replay at the recorded pace: recording keeps each answer's timing (bounded), and a
replay with ``replay_pace`` waits the recorded delays, scaled, on an injected clock and
sleep, so these tests check the waits asked for without waiting (no wall-clock timing)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from harness_nb import Harness, RunSettings
from harness_nb.core import AssistantMessage, ConfigError, TextDelta, ToolCall, ToolResultMessage, UserMessage
from harness_nb.providers import ModelRequest, RecordingProvider, ReplayProvider, TextChunk, create_provider
from harness_nb.providers.cassette import request_record
from harness_nb.providers.options import ProviderOptions
from harness_nb.providers.pace import MAX_GAP, MAX_POINTS, AnswerTiming, merged
from harness_nb.testing.fake_server import FakeLLMServer
from harness_nb.tools.base import ToolContext, tool

pytestmark = pytest.mark.usefixtures("no_provider_env")

KEY = "sk-pace-0123456789abcdef"
TICK = 0.01


class FakeClock:
    """Time that moves by ``tick`` each time it is read, and when told (a tool ran, a sleep)."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 100.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingSleep:
    """An injected sleep: keeps the delays asked for and moves the clock by them."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.advance(seconds)


def measuring(clock: FakeClock, seconds: float) -> Any:
    """A tool that takes ``seconds`` on ``clock``: what the run's own side spends."""

    @tool(name="measure", read_only=True)
    async def measure(ctx: ToolContext) -> str:
        """Take the measurement."""
        clock.advance(seconds)
        return "42"

    return measure


STEPS: list[dict[str, Any]] = [
    {"text": "Measuring now.", "tool_calls": [{"name": "measure", "arguments": {}, "id": "call_m1"}]},
    {"text": "The measurement is 42, as the probe said it would be."},
]
PROMPT = "Measure it."


async def record_run(workdir: Path, cassette: Path, *, tool_seconds: float) -> Path:
    """A harness run over real HTTP (the fake server), recorded with a ticking fake clock."""
    clock = FakeClock(tick=TICK)
    async with FakeLLMServer(STEPS) as srv:
        live = create_provider("openai-compatible/teacher-model", api_key=KEY, base_url=srv.url + "/v1")
        recorder = RecordingProvider(live, cassette, workdir=workdir, clock=clock)
        async with harness(workdir, recorder, clock, tool_seconds) as h:
            result = await h.run(PROMPT)
    assert result.final_text == STEPS[1]["text"]
    return cassette


def harness(workdir: Path, provider: Any, clock: FakeClock, tool_seconds: float) -> Harness:
    return Harness(
        provider,
        workdir=workdir,
        extra_tools=[measuring(clock, tool_seconds)],
        tools=["measure"],
        approval_policy="never",
        include_user_agents=False,
        sandbox="off",
        transcripts=False,
    )


async def replay_run(workdir: Path, cassette: Path, pace: Any, *, tool_seconds: float) -> tuple[list[float], list[str]]:
    """Replay ``cassette`` through a harness at ``pace``: the waits asked for and the text
    chunks the run streamed."""
    clock = FakeClock()
    sleep = RecordingSleep(clock)
    options = ProviderOptions.of(replay_pace=pace)
    replay = ReplayProvider(cassette, workdir=workdir, options=options, clock=clock, sleep=sleep)
    chunks: list[str] = []
    async with harness(workdir, replay, clock, tool_seconds) as h:
        result = await h.run(PROMPT, on_event=lambda e: chunks.append(e.text) if isinstance(e, TextDelta) else None)
    assert result.final_text == STEPS[1]["text"]
    return sleep.delays, chunks


def timings(cassette: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["timing"] for line in cassette.read_text().splitlines()]


def expected_waits(timing: dict[str, Any], factor: float, *, tool_seconds: float) -> list[float]:
    """The waits a replay owes one recorded answer: what the replayed tools left of the
    gap, then each chunk's delay and the end, all divided by ``factor``."""
    waits = []
    if "gap" in timing:
        waits.append(timing["gap"] / factor - tool_seconds)
    waits += [delay / factor for _chars, delay in timing["chunks"] if delay]
    if timing["end"]:
        waits.append(timing["end"] / factor)
    return waits


async def test_a_recorded_run_replays_with_the_recorded_gaps(tmp_path: Path) -> None:
    workdir = tmp_path / "teacher"
    workdir.mkdir()
    cassette = await record_run(workdir, tmp_path / "lesson.jsonl", tool_seconds=2.0)
    first, second = timings(cassette)
    # Every clock read is one tick: each streamed chunk came one tick after the last; the
    # tool's 2 s (and one tick) lie between the first answer and the second request.
    assert first["chunks"] == [[len("Measuring now."), TICK]] and "gap" not in first
    assert [chars for chars, _ in second["chunks"]] == [16, 16, 16, len(STEPS[1]["text"]) - 48]
    assert all(delay == TICK for _chars, delay in second["chunks"])
    assert second["gap"] == pytest.approx(2.0 + TICK)

    # Replayed in a class where the tool takes 0.5 s: the replay waits the rest of the gap.
    for pace, factor in (("recorded", 1.0), (2, 2.0), (0.5, 0.5)):
        waits, chunks = await replay_run(workdir, cassette, pace, tool_seconds=0.5)
        expected = expected_waits(first, factor, tool_seconds=0) + expected_waits(second, factor, tool_seconds=0.5)
        assert waits == pytest.approx(expected), pace
        assert chunks == ["Measuring now.", *(STEPS[1]["text"][i : i + 16] for i in range(0, 64, 16))]

    # A tool slower now than when recorded is not waited for again.
    waits, _ = await replay_run(workdir, cassette, "recorded", tool_seconds=5.0)
    assert waits == pytest.approx(expected_waits(first, 1, tool_seconds=0) + expected_waits(second, 1, tool_seconds=0)[1:])


async def test_instant_replay_never_sleeps(tmp_path: Path) -> None:
    workdir = tmp_path / "teacher"
    workdir.mkdir()
    cassette = await record_run(workdir, tmp_path / "lesson.jsonl", tool_seconds=2.0)
    for pace in ("instant", None):
        waits, chunks = await replay_run(workdir, cassette, pace, tool_seconds=0.5)
        assert waits == []
        assert "".join(chunks) == STEPS[0]["text"] + STEPS[1]["text"]
    assert ReplayProvider(cassette).pacer is None  # the default


async def test_a_cassette_without_timing_replays_at_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    workdir = tmp_path / "teacher"
    workdir.mkdir()
    cassette = await record_run(workdir, tmp_path / "lesson.jsonl", tool_seconds=2.0)
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    old = tmp_path / "old.jsonl"  # as recorded before timing was kept
    old.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "timing"}) + "\n" for line in lines))
    waits, chunks = await replay_run(workdir, old, "recorded", tool_seconds=0.5)
    assert waits == [] and "".join(chunks) == STEPS[0]["text"] + STEPS[1]["text"]

    # A timing that is not one (edited by hand) is dropped with a warning; the rest stays paced.
    lines[1]["timing"] = {"chunks": [[5, -1]], "end": 0}
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with caplog.at_level(logging.WARNING, logger="harness_nb.providers"):
        waits, _ = await replay_run(workdir, edited, "recorded", tool_seconds=0.5)
    assert waits == pytest.approx(expected_waits(lines[0]["timing"], 1, tool_seconds=0))
    assert "edited.jsonl line 2: timing ignored (that answer replays at once)" in caplog.text


async def test_a_long_answer_keeps_a_bounded_timing(tmp_path: Path) -> None:
    text = "".join(f"word{i:05d} " for i in range(600))  # 6,000 characters, 375 streamed chunks
    cassette = tmp_path / "long.jsonl"
    request = ModelRequest(system="s", messages=[UserMessage(content="write a lot")])
    async with FakeLLMServer([{"text": text}]) as srv:
        recorder = RecordingProvider(
            create_provider("anthropic/claude-x", api_key=KEY, base_url=srv.url), cassette, clock=FakeClock(tick=TICK)
        )
        streamed = [item.text async for item in recorder.stream(request) if isinstance(item, TextChunk)]
        await recorder.aclose()
    assert len(streamed) == 375
    [timing] = timings(cassette)
    assert len(timing["chunks"]) == MAX_POINTS and len(json.dumps(timing)) < 800
    assert timing["chunks"][0] == [16, TICK]  # the time to first token is kept exact
    assert sum(chars for chars, _ in timing["chunks"]) == len(text)
    assert sum(delay for _, delay in timing["chunks"]) == pytest.approx(375 * TICK)

    clock = FakeClock()
    sleep = RecordingSleep(clock)
    replay = ReplayProvider(cassette, options=ProviderOptions.of(replay_pace=3), clock=clock, sleep=sleep)
    replayed = [item.text async for item in replay.stream(request) if isinstance(item, TextChunk)]
    assert "".join(replayed) == text and len(replayed) == MAX_POINTS
    assert sum(sleep.delays) == pytest.approx((375 + 1) * TICK / 3)  # the chunks and the end


async def test_the_time_to_first_token_is_what_the_server_took(tmp_path: Path) -> None:
    """On the real clock: the server's delays are lower bounds of what was recorded (the
    only reading of real time here, and one that cannot be early)."""
    cassette = tmp_path / "slow.jsonl"
    request = ModelRequest(system="s", messages=[UserMessage(content="slowly")])
    async with FakeLLMServer([{"text": "x" * 48, "delay": 0.05, "chunk_delay": 0.01}] * 2) as srv:
        recorder = RecordingProvider(create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url), cassette)
        await recorder.complete(request)  # not streamed: the whole answer is one wait
        async for _ in recorder.stream(request):
            pass
        await recorder.aclose()
    whole, streamed = timings(cassette)
    assert whole["chunks"] == [] and whole["end"] >= 0.05
    assert streamed["chunks"][0][1] >= 0.05
    assert all(delay >= 0.0095 for _chars, delay in streamed["chunks"][1:])


async def test_a_paced_complete_waits_the_whole_answer(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    call = ToolCall(id="call_1", name="measure", arguments="{}")
    first = ModelRequest(system="s", messages=[UserMessage(content="go")])
    timing = {"chunks": [[3, 0.4], [3, 0.1]], "end": 0.25}
    answer = {"message": {"content": "abcdef", "tool_calls": [call.model_dump()]}, "usage": {}}
    follow = {"message": {"content": "done"}, "usage": {}}
    second = ModelRequest(
        system="s",
        messages=[*first.messages, AssistantMessage(content="abcdef", tool_calls=(call,)), ToolResultMessage(tool_call_id="call_1", name="measure", content="42")],
    )
    lines = [
        {"request": request_record(first), "response": answer, "timing": timing},
        {"request": request_record(second), "response": follow, "timing": {"chunks": [], "end": 0.3, "gap": 1.0}},
    ]
    cassette.write_text("".join(json.dumps(line) + "\n" for line in lines))
    clock = FakeClock()
    sleep = RecordingSleep(clock)
    replay = ReplayProvider(cassette, options=ProviderOptions.of(replay_pace=2), clock=clock, sleep=sleep)
    await replay.complete(first)
    clock.advance(0.2)  # the tool, replayed
    chunks = [item async for item in replay.stream(second)]
    assert sleep.delays == pytest.approx([0.75 / 2, 1.0 / 2 - 0.2, 0.3 / 2])
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["done"]  # whole, after `end`


def test_schedule_follows_the_recorded_chunks_over_the_text_there_is() -> None:
    timing = AnswerTiming(chunks=((3, 0.5), (3, 0.2), (3, 0.1)), end=0.05)
    assert timing.schedule("abcdefghi") == ([("abc", 0.5), ("def", 0.2), ("ghi", 0.1)], 0.05)
    assert timing.schedule("abcdefghijkl") == ([("abc", 0.5), ("def", 0.2), ("ghijkl", 0.1)], 0.05)
    pieces, rest = timing.schedule("abcd")  # shorter (a redacted secret): the waits still add up
    assert pieces == [("abc", 0.5), ("d", 0.2)] and rest == pytest.approx(0.15)
    assert timing.schedule("") == ([], pytest.approx(0.85))
    assert AnswerTiming(end=0.7).schedule("whole") == ([("whole", 0.7)], 0.0)
    points = merged([(1, 0.5)] + [(2, 0.1)] * 10, limit=4)  # the first kept, the rest in even runs
    assert [chars for chars, _ in points] == [1, 6, 6, 8]
    assert [delay for _, delay in points] == pytest.approx([0.5, 0.3, 0.3, 0.4])
    with pytest.raises(ValueError):
        AnswerTiming(gap=MAX_GAP + 1)


def test_a_pace_is_checked_wherever_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "c.jsonl").write_text("")
    for bad in ("fast", 0, -2, "2x", float("inf"), True):
        with pytest.raises(ConfigError, match=r"replay_pace=.*it must be 'instant', 'recorded' or a speed factor above 0"):
            ProviderOptions.of(replay_pace=bad)
    with pytest.raises(ConfigError, match="replay_pace"):
        Harness("replay/c.jsonl", workdir=tmp_path, replay_pace="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="replay_pace given twice"):
        RunSettings(provider_options={"replay_pace": 2}, replay_pace=3)

    h = Harness("replay/c.jsonl", workdir=tmp_path, replay_pace=2, include_user_agents=False, sandbox="off")
    assert isinstance(h.provider, ReplayProvider) and h.provider.pacer is not None and h.provider.pacer.factor == 2
    h.configure(replay_pace="instant")
    assert isinstance(h.provider, ReplayProvider) and h.provider.pacer is None
    with pytest.raises(ConfigError, match="replay_pace given twice"):
        h.configure(provider_options={"replay_pace": "recorded"})
    h = Harness("replay/c.jsonl", workdir=tmp_path, provider_options={"replay_pace": "recorded"}, sandbox="off")
    assert isinstance(h.provider, ReplayProvider) and h.provider.pacer is not None and h.provider.pacer.factor == 1
