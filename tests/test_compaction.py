"""Context accounting and compaction over the scripted model: the window table, the
calibrated estimate (incremental: never the whole history again), stubs before summaries,
tool calls never parted from their results, the summary marked as history, the retry after
a context-length error (once), ``Harness.compact()``, subagents, and the lean tool set."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness_nb import Harness
from harness_nb.core import (
    AssistantMessage,
    Compacted,
    CompactionStarted,
    ConfigError,
    ContextMeasured,
    Event,
    ProviderError,
    SubagentUpdate,
    ToolCall,
    ToolResultMessage,
    UnknownNameError,
    Usage,
    UserMessage,
)
from harness_nb.engine import (
    AgentEngine,
    CompactionPolicy,
    HookRegistry,
    Limits,
    MemorySession,
    OffloadHook,
    PromptBuilder,
    RunContext,
)
from harness_nb.engine import meter as meter_module
from harness_nb.engine.compaction.keeper import STUB_PREFIX, cut_points
from harness_nb.engine.compaction.summary import SUMMARISER_AGENT, is_summary
from harness_nb.engine.meter import ContextMeter
from harness_nb.engine.resume import repair_history
from harness_nb.engine.session import load_transcript
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.providers.window import TokenRatio, context_length_error, known_window
from harness_nb.tools import ToolContext, ToolRegistry, tool


@tool(read_only=True)
async def big(ctx: ToolContext, n: int, tag: str = "x") -> str:
    """Return n characters."""
    return (tag * n)[:n]


def read_step(n: int = 6_000, tag: str = "x") -> dict[str, Any]:
    return {"tool_calls": [{"name": "big", "arguments": {"n": n, "tag": tag}}]}


# a first prompt long enough that a summary of its turn is shorter than the turn itself
LONG_PROMPT = "{} — " + "read the data files one by one and report what each holds; " * 12


def summary_step(request: Any) -> dict[str, Any]:
    return {"text": f"The person asked for data; the agent read it ({len(request.messages[0].content)} chars)."}


_SESSIONS: list[MemorySession] = []


@pytest.fixture(autouse=True)
def close_sessions() -> Any:
    yield
    while _SESSIONS:
        _SESSIONS.pop().close()


def cells(count: int, size: int, *, summary: Any = summary_step, done: str = "done {cell}") -> ScriptedProvider:
    """A scripted model for ``count`` cells that each read ``size`` characters, then answer
    ``done`` (``{cell}`` is the cell's number); summaries from ``summary``."""
    steps: list[Any] = []
    for cell in range(count):
        steps += [read_step(size, tag=str(cell % 10)), {"text": done.format(cell=cell)}]
    return ScriptedProvider({"main": steps, SUMMARISER_AGENT: [summary] * 10})


def engine_for(provider: ScriptedProvider, tmp_path: Path, *, transcript: bool = True) -> AgentEngine:
    session = MemorySession("s1", transcript=tmp_path / "s1.jsonl" if transcript else None)
    _SESSIONS.append(session)
    return AgentEngine(
        provider,
        ToolRegistry([big]),
        hooks=HookRegistry([OffloadHook(tmp_path / "offload", limit=20_000)]),
        session=session,
        prompt_builder=PromptBuilder("You help.", workdir=tmp_path, environment=False),
        workdir=tmp_path,
    )


def context(provider: ScriptedProvider, offload: Path | None = None, **policy: Any) -> RunContext:
    return RunContext(provider, Limits(max_turns=20), compaction=CompactionPolicy(offload_dir=offload, **policy))


def valid_pairs(messages: list[Any]) -> bool:
    """Every tool result answers a call of the assistant message before it, and every call
    has its result: what every API requires."""
    repaired, changes = repair_history(messages)
    return changes == 0 and len(repaired) == len(messages)


# -- windows, ratios, errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("o4-mini", 200_000),
        ("o3", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5-mini-2025-08-07", 400_000),
        ("gpt-5-chat-latest", 128_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-opus-4-1", 200_000),
        ("claude-3-5-haiku-latest", 200_000),
        ("openai/gpt-4o", 128_000),  # as a proxy names it
        ("llama3.1:8b", None),
        ("gpt-4o-turbo-imaginary", 128_000),  # a dated or suffixed gpt-4o is still a gpt-4o
        ("claude-x", None),
    ],
)
def test_known_windows(model: str, window: int | None) -> None:
    assert known_window(model) == window


def test_the_ratio_is_learnt_from_usage_and_ignores_nonsense() -> None:
    ratio = TokenRatio()
    assert ratio.tokens(4_000) == 1_000  # four characters a token until told otherwise
    ratio.observe(3_000, 1_000)
    assert ratio.value == 3.0  # the first sample is taken as it is
    ratio.observe(6_000, 1_000)
    assert ratio.value == pytest.approx(4.0)  # then a third of the way to each
    ratio.observe(10, 1_000_000)  # 0.00001 characters a token: a broken server
    ratio.observe(1_000, 0)
    assert ratio.value == pytest.approx(4.0) and ratio.samples == 2


@pytest.mark.parametrize(
    ("message", "body", "window"),
    [
        ("This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens.",
         {"error": {"code": "context_length_exceeded", "type": "invalid_request_error"}}, 128_000),
        ("prompt is too long: 210000 tokens > 200000 maximum", None, 200_000),
        ("input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, decrease input length", None,
         200_000),
        ("the request exceeds the available context size, try increasing it",
         {"error": {"code": 400, "type": "exceed_context_size_error", "n_ctx": 4096}}, 4096),
        ("the request exceeds the available context size", None, None),
        ("The input (9000 tokens) is longer than the model's context length (8192 tokens).", None, 8192),
    ],
)
def test_each_vendors_too_long_error_is_recognised(message: str, body: Any, window: int | None) -> None:
    assert context_length_error(message, body) == (True, window)


@pytest.mark.parametrize("message", ["Rate limit reached", "Overloaded", "invalid api key", "max_tokens: too large"])
def test_other_errors_are_not_too_long(message: str) -> None:
    assert context_length_error(message) == (False, None)


# -- the estimate ---------------------------------------------------------------------------


def test_the_estimate_starts_from_the_last_answer_and_measures_only_what_was_added(monkeypatch) -> None:
    provider = ScriptedProvider()
    meter = ContextMeter()
    history: list[Any] = [UserMessage(content="u" * 4_000)]
    assert meter.estimate(history, 400, provider) == (400 + 4_000 + 12) // 4  # nothing reported yet

    meter.observe(Usage(input_tokens=900, cache_read_tokens=200, cache_write_tokens=50), provider)
    assert provider.token_ratio.samples == 1  # 4,412 characters held 1,150 tokens
    history.append(AssistantMessage(content="a" * 1_000))
    added = provider.token_ratio.tokens(1_012)
    assert meter.estimate(history, 400, provider) == 1_150 + added

    counted: list[Any] = []
    real = meter_module.message_chars
    monkeypatch.setattr(meter_module, "message_chars", lambda m: counted.append(m) or real(m))
    history += [UserMessage(content=f"turn {i}") for i in range(500)]
    meter.estimate(history, 400, provider)
    meter.observe(Usage(input_tokens=5_000), provider)
    history.append(UserMessage(content="one more"))
    meter.estimate(history, 400, provider)
    assert len(counted) == 501  # each message measured once, never the whole history again


def test_a_call_without_usage_keeps_the_estimate_going() -> None:
    provider = ScriptedProvider()
    meter = ContextMeter()
    history: list[Any] = [UserMessage(content="u" * 400)]
    meter.estimate(history, 0, provider)
    meter.observe(Usage(input_tokens=100), provider)
    history.append(UserMessage(content="v" * 400))
    first = meter.estimate(history, 0, provider)
    meter.observe(Usage(unreported_calls=1), provider)
    history.append(UserMessage(content="w" * 400))
    assert meter.estimate(history, 0, provider) > first


# -- compaction in a run ----------------------------------------------------------------------


async def test_old_results_become_stubs_first_then_the_oldest_turns_a_summary(tmp_path: Path) -> None:
    count = 60
    provider = cells(count, 2_000, done="cell {cell} done")
    provider.context_window = 3_000
    engine = engine_for(provider, tmp_path)
    events: list[Event] = []
    for cell in range(count):
        run = context(provider, tmp_path / "offload")
        result = await engine.run(f"cell {cell}: read it", on_event=events.append, context=run)
        assert result.final_text == f"cell {cell} done"
    assert not provider.remaining().get("main")

    kinds = [type(e).__name__ for e in events if isinstance(e, CompactionStarted | Compacted)]
    assert kinds[:2] == ["CompactionStarted", "Compacted"] and len(kinds) % 2 == 0
    done = [e for e in events if isinstance(e, Compacted)]
    assert done[0].cleared > 0 and done[0].summarised == 0  # stubs first
    assert any(d.summarised > 0 for d in done)  # a summary once the stubs are not enough
    asks = [r for r in provider.requests if r.agent == SUMMARISER_AGENT]
    assert asks and all(r.max_tokens == 3_000 // 8 for r in asks)  # a small window: the answer is capped
    assert all(d.tokens_after < d.tokens_before for d in done)
    measured = [e for e in events if isinstance(e, ContextMeasured)]
    assert measured and all(e.window == 3_000 for e in measured)

    # every request stayed within the window (the scripted model bills 4 characters a token)
    answered = [r for r in provider.requests if r.agent == "main"]
    assert max(len(r.system) + sum(len(m.content) for m in r.messages) for r in answered) // 4 < 3_000

    messages = engine.session.messages
    assert is_summary(messages[0]) and valid_pairs(messages)
    stubs = [m for m in messages if isinstance(m, ToolResultMessage) and m.content.startswith(STUB_PREFIX)]
    assert stubs
    for stub in stubs:  # each stub names the file that holds the whole result
        path = tmp_path / "offload" / f"{stub.tool_call_id}.txt"
        assert str(path.relative_to(tmp_path)) in stub.content and len(path.read_text()) == 2_000

    # the transcript keeps every message of every run, and says what was compacted
    on_disk = load_transcript(tmp_path / "s1.jsonl")
    assert len(on_disk) == count * 4 == len(engine.session.history)
    assert [m.content for m in on_disk if isinstance(m, UserMessage)] == [f"cell {c}: read it" for c in range(count)]
    rows = [json.loads(line) for line in (tmp_path / "s1.jsonl").read_text().splitlines()]
    assert sum(r["type"] == "compaction" for r in rows) == len(done)
    # and rebuilds the compacted history from those lines
    assert load_transcript(tmp_path / "s1.jsonl", compacted=True) == messages


async def test_the_summary_is_asked_of_the_model_and_marked_as_history(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        {
            "main": [read_step(), {"text": "one"}, read_step(), {"text": "two"}, {"text": "three"}],
            SUMMARISER_AGENT: [{"text": "The agent read the data twice."}],
        }
    )
    engine = engine_for(provider, tmp_path)
    for prompt in (LONG_PROMPT.format("first"), "second"):
        await engine.run(prompt, context=context(provider))
    done = await engine.compact(context=context(provider))
    assert done.reason == "requested" and done.summarised > 0 and done.cleared > 0
    assert done.tokens_after < done.tokens_before

    ask = next(r for r in provider.requests if r.agent == SUMMARISER_AGENT)
    assert not ask.tools and "never write instructions" in ask.system
    assert ask.max_tokens is None  # a reasoning model may think before it writes
    assert "User: first" in ask.messages[0].content

    record = engine.session.messages[0]
    assert isinstance(record, UserMessage)
    assert record.content.startswith("<conversation-summary>")
    assert "already done; do not redo any of it" in record.content
    assert "The agent read the data twice." in record.content
    assert record.content.rstrip().endswith("</conversation-summary>")
    await engine.run("third", context=context(provider))
    assert provider.requests[-1].messages[0] == record  # the next call starts from it


async def test_a_run_too_long_for_one_window_keeps_its_prompt_verbatim(tmp_path: Path) -> None:
    steps = [read_step(1_000, tag=str(i % 10)) for i in range(40)] + [{"text": "all read"}]
    provider = ScriptedProvider({"main": steps, SUMMARISER_AGENT: [summary_step] * 10})
    provider.context_window = 2_000
    engine = engine_for(provider, tmp_path)
    events: list[Event] = []
    # forty turns of calls without a word: the progress guard would stop it, which is not under test
    limits = Limits(max_turns=50, max_turns_without_text=None)
    run = RunContext(provider, limits, compaction=CompactionPolicy(offload_dir=tmp_path / "offload"))
    result = await engine.run("read the forty parts", on_event=events.append, context=run)
    assert result.final_text == "all read" and result.stop_reason == "end_turn"
    assert any(isinstance(e, Compacted) and e.summarised for e in events)
    last = provider.requests[-1].messages
    assert is_summary(last[0]) and last[1] == UserMessage(content="read the forty parts")
    assert valid_pairs(list(last))
    assert len(result.messages) == 1 + 40 * 2 + 1  # the run's own messages, uncompacted


def test_cut_points_never_part_a_call_from_its_results() -> None:
    rng = random.Random(7)
    for _ in range(200):
        history: list[Any] = []
        for turn in range(rng.randint(1, 12)):
            kind = rng.choice(["user", "answer", "calls"])
            if kind == "user":
                history.append(UserMessage(content=f"u{turn}"))
            elif kind == "answer":
                history.append(AssistantMessage(content=f"a{turn}"))
            else:
                calls = [ToolCall(id=f"c{turn}-{i}", name="big") for i in range(rng.randint(1, 3))]
                history.append(AssistantMessage(tool_calls=tuple(calls)))
                history += [ToolResultMessage(tool_call_id=c.id, name="big", content="r") for c in calls]
        for k in cut_points(history):
            summarised, kept = history[:k], history[k:]
            assert valid_pairs(summarised) and valid_pairs(kept) and kept


async def test_a_context_length_error_compacts_and_retries_once(tmp_path: Path) -> None:
    too_long = {"error": "prompt is too long: 9000 tokens > 6000 maximum", "status": 400}
    provider = ScriptedProvider(
        {
            "main": [read_step(), {"text": "one"}, read_step(), {"text": "two"}, too_long, {"text": "three"}],
            SUMMARISER_AGENT: [summary_step],
        }
    )
    engine = engine_for(provider, tmp_path)
    for prompt in (LONG_PROMPT.format("first"), "second"):
        await engine.run(prompt, context=context(provider))
    assert provider.context_window is None  # nobody said it yet
    events: list[Event] = []
    result = await engine.run("third", on_event=events.append, context=context(provider))
    assert result.final_text == "three"
    started = next(e for e in events if isinstance(e, CompactionStarted))
    assert started.reason == "context_length"
    assert provider.context_window == 6_000  # the error said so, and compaction used it
    assert is_summary(engine.session.messages[0])
    provider.assert_complete()


async def test_a_second_context_length_error_fails_the_run_clearly(tmp_path: Path) -> None:
    too_long = {"error": "the request exceeds the available context size, try increasing it", "status": 400}
    provider = ScriptedProvider(
        {"main": [read_step(), {"text": "one"}, too_long, too_long], SUMMARISER_AGENT: [summary_step]}
    )
    engine = engine_for(provider, tmp_path)
    await engine.run("first", context=context(provider))
    with pytest.raises(ProviderError) as caught:
        await engine.run("second", context=context(provider))
    assert caught.value.kind == "context_length"
    assert "does not fit the model's context window even after compacting" in str(caught.value)
    assert "%agent --new" in str(caught.value)
    assert str(caught.value).endswith(
        "To offer fewer tools, pass tools=['read_file', 'edit_file', 'grep', 'bash'] to Harness or Harness.configure"
    )
    provider.assert_complete()  # exactly one retry


async def test_a_too_long_error_with_nothing_to_compact_says_so(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"error": "prompt is too long: 900 tokens > 100 maximum", "status": 400}])
    engine = engine_for(provider, tmp_path)
    with pytest.raises(ProviderError, match="nothing left to compact"):
        await engine.run("hello", context=context(provider))


async def test_a_failed_summary_keeps_a_digest_and_the_run_goes_on(tmp_path: Path) -> None:
    provider = cells(20, 1_000, summary={"error": "server down", "status": 500})
    provider.context_window = 1_000
    engine = engine_for(provider, tmp_path)
    events: list[Event] = []
    for cell in range(20):
        await engine.run(f"cell {cell}", on_event=events.append, context=context(provider))
    noted = [e for e in events if isinstance(e, Compacted) and e.note]
    assert noted and "the summary call failed" in noted[0].note
    assert "The person asked: cell 0" in engine.session.messages[0].content


# -- the harness ------------------------------------------------------------------------------


async def test_harness_compact_on_request(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        {
            "main": [*(read_step(tag=str(i)) for i in range(4)), {"text": "one"}, {"text": "two"}],
            SUMMARISER_AGENT: [{"text": "Earlier, the agent read the data."}],
        }
    )
    async with Harness(provider, workdir=tmp_path, tools=[big], approval_policy="never", sandbox="off") as h:
        await h.run(LONG_PROMPT.format("first"))
        await h.run("second")
        seen: list[Event] = []
        done = await h.compact(on_event=seen.append)
        assert [type(e) for e in seen[:1]] == [CompactionStarted] and seen[-2] == done.model_copy(update={"usage": None})
        assert done.usage is not None and done.usage.turns == 1  # the summary call, for the view's header
        # all but the three latest results cleared; the first cell (10 messages) summarised
        assert done.cleared == 1 and done.summarised == 10
        messages = h.session.messages
        assert is_summary(messages[0]) and messages[1:] == [UserMessage(content="second"), AssistantMessage(content="two")]
        assert h.usage.turns == 7  # the summary call is billed like any other
        assert h.session.transcript is not None
        assert len(load_transcript(h.session.transcript)) == 12  # every message kept on disk
        line = next(json.loads(r) for r in h.session.transcript.read_text().splitlines() if '"compaction"' in r)
        (cleared,) = line["stubs"]
        assert (tmp_path / ".harness_nb" / "offload" / f"{cleared}.txt").read_text() == "0" * 6_000


async def test_harness_context_window_shortcut(tmp_path: Path) -> None:
    h = Harness("scripted/s.yaml", workdir=tmp_path, context_window=4096, sandbox="off")
    assert h.settings.options.context_window == 4096
    with pytest.raises(ConfigError, match="given twice"):
        Harness(workdir=tmp_path, context_window=4096, provider_options={"context_window": 2048}, sandbox="off")
    h.configure(context_window=0)
    assert h.settings.options.context_window is None
    h.configure(compact_threshold=0.6)
    (tmp_path / "s.yaml").write_text("- text: hi\n")
    assert h.run_context().compaction.threshold == 0.6
    with pytest.raises(ConfigError, match="compact_threshold"):
        h.configure(compact_threshold=1.5)
    await h.aclose()


async def test_subagents_compact_the_same_way(tmp_path: Path) -> None:
    child = [read_step(3_000, tag=str(i)) for i in range(6)] + [{"text": "child done"}]
    provider = ScriptedProvider(
        {
            "main": [
                {"tool_calls": [{"name": "task", "arguments": {"subagent_type": "general-purpose", "prompt": "read"}}]},
                {"text": "main done"},
            ],
            "general-purpose": child,
            SUMMARISER_AGENT: [summary_step] * 10,
        }
    )
    async with Harness(
        provider, workdir=tmp_path, tools=[big], context_window=3_000, approval_policy="never", sandbox="off"
    ) as h:
        events: list[Event] = []
        result = await h.run("delegate", on_event=events.append)
        assert result.final_text == "main done"
    child_events = [e.event for e in events if isinstance(e, SubagentUpdate)]
    assert any(isinstance(e, Compacted) for e in child_events)


def test_a_lean_tool_set_by_name(tmp_path: Path) -> None:
    h = Harness(workdir=tmp_path, tools=["read_file", "grep"], sandbox="off")
    assert h.tools.names() == ["read_file", "grep"]
    assert "bash" in h.tool_pool and "task" in h.tool_pool
    h.configure(tools=["read_file", "task"])
    assert h.tools.names() == ["read_file", "task"]
    h.configure(tools=[])
    assert h.tools.names() == h.tool_pool.names()
    with pytest.raises(UnknownNameError, match="unknown tool 'raed_file'; valid: ask_person, bash, edit_file"):
        h.configure(tools=["raed_file"])
    assert h.tools.names() == h.tool_pool.names()  # a refused value changes nothing
    with pytest.raises(UnknownNameError):
        Harness(workdir=tmp_path, tools=["nope"], sandbox="off")
    mine = Harness(workdir=tmp_path, tools=[big, "grep"], sandbox="off")
    assert mine.tools.names() == ["grep", "big"]


async def test_a_result_is_never_stubbed_without_its_whole_kept_on_disk(tmp_path: Path) -> None:
    (tmp_path / "not-a-folder").write_text("a file where the offload folder should be")
    provider = cells(6, 2_000)
    provider.context_window = 2_000
    engine = engine_for(provider, tmp_path)
    events: list[Event] = []
    for cell in range(6):
        run = context(provider, tmp_path / "not-a-folder")
        assert (await engine.run(f"cell {cell}", on_event=events.append, context=run)).final_text == f"done {cell}"
    assert not any(isinstance(e, Compacted) and e.cleared for e in events)
    assert any(isinstance(e, Compacted) and e.summarised for e in events)  # the summary still keeps it in
    assert not any(m.content.startswith(STUB_PREFIX) for m in engine.session.messages if isinstance(m, ToolResultMessage))


async def test_a_summary_no_shorter_than_what_it_replaces_is_not_applied(tmp_path: Path) -> None:
    """A requested compaction of a short conversation: a summary with its framing would be
    longer than the turns it replaces (once reported as "196 → 216 tokens"). The turns are
    kept, the numbers do not grow, and the note says why."""
    provider = ScriptedProvider({"main": [{"text": "hi"}, {"text": "ok"}], SUMMARISER_AGENT: [{"text": "Greetings."}]})
    engine = engine_for(provider, tmp_path)
    for prompt in ("hello", "thanks"):
        await engine.run(prompt, context=context(provider))
    kept = list(engine.session.messages)
    done = await engine.compact(context=context(provider))
    assert done.summarised == 0 and done.tokens_after <= done.tokens_before
    assert "no shorter" in done.note and "(" in done.describe()
    assert engine.session.messages == kept

