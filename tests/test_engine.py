"""The agent loop over the scripted model: turns, concurrency, limits, approvals, events,
transcripts and cancellation."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading

import pytest

from harness_nb.core import (
    ApprovalDecided,
    ApprovalRequested,
    MessagesInjected,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolResultMessage,
    TurnFinished,
)
from harness_nb.engine import (
    ALLOW,
    AgentEngine,
    Approved,
    Ask,
    Denied,
    Deny,
    Hook,
    HookRegistry,
    Limits,
    MemorySession,
    OffloadHook,
)
from harness_nb.engine.session import load_transcript
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.tools import ToolContext, ToolRegistry, tool


@tool(read_only=True)
async def echo(ctx: ToolContext, text: str) -> str:
    """Return the text in capitals."""
    return text.upper()


@tool
async def nap(ctx: ToolContext, seconds: float, tag: str) -> str:
    """Sleep, then return the tag."""
    await asyncio.sleep(seconds)
    return tag


@tool
async def explode(ctx: ToolContext) -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


@tool
async def big(ctx: ToolContext, n: int) -> str:
    """Return n characters."""
    return "".join(chr(97 + i % 26) for i in range(n))


def call(name: str, **args: object) -> dict:
    return {"name": name, "arguments": args}


def make(script, *tools, **kw) -> tuple[AgentEngine, ScriptedProvider]:
    provider = ScriptedProvider(script)
    engine = AgentEngine(provider, ToolRegistry(tools or (echo,)), **kw)
    return engine, provider


async def test_multi_turn_with_parallel_tool_calls_runs_them_concurrently():
    starts: list[str] = []

    @tool
    async def slow(ctx: ToolContext, tag: str) -> str:
        """Sleep briefly."""
        starts.append(tag)
        await asyncio.sleep(0.2)
        starts.append(f"end-{tag}")
        return f"done {tag}"

    engine, provider = make(
        [
            {"text": "Two at once.", "tool_calls": [call("slow", tag="a"), call("slow", tag="b"), call("slow", tag="c")]},
            {"tool_calls": [call("echo", text="x")]},
            {"text": "All done."},
        ],
        slow,
        echo,
    )
    result = await engine.run("go")
    provider.assert_complete()
    assert result.final_text == "All done."
    assert result.turns == 3
    assert result.tool_calls == 4
    # all three started before any finished: they ran concurrently
    assert starts[:3] == ["a", "b", "c"]
    roles = [m.role for m in engine.session.messages]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "assistant", "tool", "assistant"]
    results = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == ["done a", "done b", "done c", "X"]
    # the model's second request carried the three results, in call order
    second = provider.requests[1].messages
    assert [m.content for m in second if isinstance(m, ToolResultMessage)] == ["done a", "done b", "done c"]


async def test_events_arrive_in_order_through_run_stream():
    engine, _ = make([{"text": "Looking.", "tool_calls": [call("echo", text="hi")]}, {"text": "Hi."}])
    kinds = [type(e).__name__ async for e in engine.run_stream("go")]
    assert kinds[0] == "RunStarted"
    assert kinds[-1] == "RunFinished"
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallFinished")
    assert kinds.count("TurnFinished") == 2
    assert "TextDelta" in kinds


async def test_tool_errors_unknown_tools_and_bad_arguments_become_results():
    engine, provider = make(
        [
            {
                "tool_calls": [
                    call("explode"),
                    call("nosuch", x=1),
                    {"name": "echo", "arguments": "{not json"},
                    call("echo", wrong=1),
                ]
            },
            {"text": "Recovered."},
        ],
        echo,
        explode,
    )
    result = await engine.run("go")
    assert result.final_text == "Recovered."
    outs = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)]
    assert all(o.is_error for o in outs)
    assert outs[0].content.startswith("error: explode failed: RuntimeError: kaboom (a fault in the tool")
    assert outs[1].content == "error: unknown tool 'nosuch'; available tools: echo, explode"
    assert outs[2].content.startswith("error: arguments are not valid JSON")
    assert "text: Field required" in outs[3].content and "wrong: Extra inputs are not permitted" in outs[3].content


async def test_max_turns_stops_the_run_with_a_clear_reason():
    engine, _ = make([{"tool_calls": [call("echo", text=str(i))]} for i in range(5)], limits=Limits(max_turns=3))
    result = await engine.run("loop")
    assert result.stop_reason == "max_turns"
    assert result.turns == 3
    assert "[stopped: reached max_turns (3)]" in result.final_text


async def test_token_budget_stops_the_run_before_the_call_that_would_pass_it():
    steps = [{"tool_calls": [call("echo", text="x")], "usage": {"input_tokens": 400, "output_tokens": 100}}] * 5
    engine, provider = make(steps, limits=Limits(token_budget=1200))
    result = await engine.run("spend")
    assert result.stop_reason == "token_budget"
    # call 3 would hold the 400 prompt tokens reported, the call and result added since and
    # up to 100 output tokens (the largest answer so far): more than the 200 left after 2 × 500
    assert result.turns == 2 and len(provider.requests) == 2
    assert result.usage.total_tokens == 1000
    assert re.search(r"next call may use 5\d\d tokens and this run has 200 of its 1,200-token budget left", result.final_text)


async def test_wall_time_limit_stops_a_slow_run_and_keeps_history_valid():
    engine, _ = make(
        [{"tool_calls": [call("nap", seconds=5, tag="z")]}],
        nap,
        limits=Limits(wall_time=0.3, tool_timeout=60),
    )
    result = await engine.run("slow")
    assert result.stop_reason == "wall_time"
    last = engine.session.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.is_error and "interrupted" in last.content


async def test_per_tool_timeout_becomes_an_error_result():
    engine, _ = make(
        [{"tool_calls": [call("nap", seconds=5, tag="z")]}, {"text": "ok"}],
        nap,
        limits=Limits(tool_timeout=0.1),
    )
    result = await engine.run("slow")
    outs = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)]
    assert outs[0].content == "error: nap timed out after 0.1 s"
    assert result.final_text == "ok"


async def test_long_running_tools_escape_the_tool_timeout():
    @tool(long_running=True)
    async def delegate(ctx: ToolContext) -> str:
        """Takes a while."""
        await asyncio.sleep(0.3)
        return "finished"

    engine, _ = make([{"tool_calls": [call("delegate")]}, {"text": "ok"}], delegate, limits=Limits(tool_timeout=0.05))
    await engine.run("go")
    outs = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)]
    assert outs[0].content == "finished"


class AskForEcho(Hook):
    async def before_tool(self, call, ctx):
        return Ask("echo is scary", "high") if call.name == "echo" else await super().before_tool(call, ctx)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Approved(), "HI"),
        (Denied("not today"), "error: the call was denied: not today. Do not retry it unchanged."),
        (None, "error: the call was denied: no approval channel: denied. Do not retry it unchanged."),
    ],
)
async def test_approval_allow_deny_and_no_channel(answer, expected):
    asked = []

    async def channel(call, reason, risk):
        asked.append((call.name, reason, risk))
        return answer

    events = []
    engine, _ = make(
        [{"tool_calls": [call("echo", text="hi")]}, {"text": "ok"}],
        hooks=HookRegistry([AskForEcho()]),
        approval=channel if answer is not None else None,
    )
    await engine.run("go", on_event=events.append)
    out = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)][0]
    assert out.content == expected
    requested = [e for e in events if isinstance(e, ApprovalRequested)]
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert len(requested) == 1 and requested[0].reason == "echo is scary" and requested[0].risk == "high"
    assert decided[0].approved is isinstance(answer, Approved)
    if answer is not None:
        assert asked == [("echo", "echo is scary", "high")]


class AskOrAllowOrDeny(Hook):
    """Asks for ``edit`` with "ask" in its text, denies it with "deny", allows it otherwise."""

    async def before_tool(self, call, ctx):
        text = call.parsed_arguments().get("text", "")
        if call.name != "edit":
            return await super().before_tool(call, ctx)
        return Ask("edits ask", "medium") if "ask" in text else Deny("no edits") if "deny" in text else ALLOW


async def test_a_tool_that_asks_itself_is_told_whether_to_ask_and_no_channel_is_used():
    """A tool with its own card (``asks_itself``, the notebook's diff) runs with
    ``ctx.ask`` when the hooks would ask — the approval channel is never called and the
    per-tool timeout does not cut its wait — with ``ctx.ask`` None when they allow, and
    not at all when they deny."""

    @tool(asks_itself=True)
    async def edit(ctx: ToolContext, text: str) -> str:
        """Edit with a card of its own."""
        await asyncio.sleep(0.2 if ctx.ask else 0)
        return f"asked: {ctx.ask}" if ctx.ask else "applied unasked"

    async def channel(call, reason, risk):
        raise AssertionError("the generic approval channel must not be used")

    events = []
    calls = [call("edit", text="please ask"), call("edit", text="allowed"), call("edit", text="deny it")]
    engine, _ = make(
        [{"tool_calls": calls}, {"text": "ok"}],
        edit,
        hooks=HookRegistry([AskOrAllowOrDeny()]),
        approval=channel,
        limits=Limits(tool_timeout=0.05),
    )
    await engine.run("go", on_event=events.append)
    outs = [m.content for m in engine.session.messages if isinstance(m, ToolResultMessage)]
    assert outs == ["asked: edits ask", "applied unasked", "error: denied: no edits"]
    requested = [e.call.arguments for e in events if isinstance(e, ApprovalRequested)]
    assert len(requested) == 1 and "please ask" in requested[0], "the view still sees the call wait for the person"


async def test_offload_hook_moves_big_results_to_a_file(tmp_path):
    engine, _ = make(
        [{"tool_calls": [{"name": "big", "arguments": {"n": 50_000}, "id": "call_big"}]}, {"text": "ok"}],
        big,
        hooks=HookRegistry([OffloadHook(tmp_path / ".harness_nb" / "offload", limit=1000, keep=100)]),
        workdir=tmp_path,
    )
    await engine.run("go")
    out = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)][0]
    saved = tmp_path / ".harness_nb" / "offload" / "call_big.txt"
    assert saved.read_text() == "".join(chr(97 + i % 26) for i in range(50_000))
    assert len(out.content) < 1000
    assert ".harness_nb/offload/call_big.txt" in out.content
    assert out.content.startswith("abcdefghij")


async def test_truncated_tool_call_from_max_tokens_gets_a_clear_error_result():
    engine, _ = make(
        [
            {"tool_calls": [{"name": "echo", "arguments": '{"text": "half'}], "stop_reason": "max_tokens"},
            {"text": "I will retry with less."},
        ]
    )
    result = await engine.run("go")
    out = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)][0]
    assert "hit max_tokens in the middle of this echo call" in out.content
    assert result.final_text == "I will retry with less."


async def test_injections_join_the_conversation_before_each_call():
    pending = ["<background-task-completed id=bg-1>done</background-task-completed>"]

    def source():
        out = list(pending)
        pending.clear()
        return out

    events = []
    engine, provider = make([{"tool_calls": [call("echo", text="a")]}, {"text": "ok"}], injectors=[source])
    await engine.run("go", on_event=events.append)
    first = provider.requests[0].messages
    assert first[-1].content == "<background-task-completed id=bg-1>done</background-task-completed>"
    assert len([e for e in events if isinstance(e, MessagesInjected)]) == 1
    # drained once: the second call carries it only as history
    assert sum("bg-1" in getattr(m, "content", "") for m in provider.requests[1].messages) == 1


async def test_transcript_on_disk_matches_the_run(tmp_path):
    path = tmp_path / "sessions" / "s.jsonl"
    engine, _ = make(
        [{"text": "Let me check.", "tool_calls": [call("echo", text="hi")]}, {"text": "Done."}],
        session=MemorySession("s", transcript=path),
    )
    result = await engine.run("go")
    engine.session.close()
    assert load_transcript(path) == engine.session.messages
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    finished = [r for r in rows if r["type"] == "run_finished"]
    assert finished[0]["usage"]["turns"] == 2 == result.usage.turns


@pytest.fixture
def fifo_transcript(tmp_path):
    """A transcript path that is a named pipe: opening it for writing blocks until a reader
    opens it, as on a stalled mount, but here the test decides when that ends. A watchdog
    opens it after 5 s, so that code blocking the event loop on it fails a test instead of
    hanging it."""
    path = tmp_path / "sessions" / "s.jsonl"
    path.parent.mkdir()
    os.mkfifo(path)
    opened = []
    watchdog = threading.Timer(5.0, lambda: opened.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK)))
    watchdog.start()
    yield path
    watchdog.cancel()
    for fd in opened:
        os.close(fd)


async def test_a_run_opens_its_transcript_off_the_event_loop(fifo_transcript):
    path = fifo_transcript
    order = []
    engine, _ = make([{"text": "Done."}], session=MemorySession("s", transcript=path))
    run = asyncio.create_task(engine.run("go", on_event=lambda e: order.append(type(e).__name__)))
    await asyncio.sleep(0.05)  # the run is opening its transcript: the loop still turns
    order.append("loop turned")
    reader = await asyncio.to_thread(open, path, encoding="utf-8")  # lets the open finish
    await run
    engine.session.close()
    with reader:
        lines = [json.loads(line)["type"] for line in (await asyncio.to_thread(reader.read)).splitlines()]
    assert order[: order.index("RunStarted")] == ["loop turned"]
    assert lines[0] == "run_started" and lines[-1] == "run_finished"


async def test_a_run_interrupted_while_its_transcript_opens_starts_nothing_and_leaves_no_file_open(fifo_transcript):
    path = fifo_transcript
    events = []
    engine, provider = make([{"text": "Done."}], session=MemorySession("s", transcript=path))
    run = asyncio.create_task(engine.run("go", on_event=events.append))
    await asyncio.sleep(0.05)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert events == [] and engine.session.messages == [] and provider.requests == []
    # the open finishes once a reader comes; the file it opened is closed (else read waits)
    with await asyncio.to_thread(open, path, encoding="utf-8") as reader:
        assert await asyncio.wait_for(asyncio.to_thread(reader.read), 5) == ""
    assert not engine.running


async def test_conversation_continues_across_runs():
    engine, provider = make([{"text": "First."}, {"text": "Second."}])
    await engine.run("one")
    await engine.run("two")
    assert [m.content for m in provider.requests[1].messages] == ["one", "First.", "two"]


async def test_cancellation_marks_the_run_interrupted_and_reraises():
    events = []
    engine, _ = make([{"tool_calls": [call("nap", seconds=10, tag="z")]}], nap)
    task = asyncio.create_task(engine.run("go", on_event=events.append))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert failed and failed[0].interrupted and failed[0].error == "interrupted"
    # history stays valid for the next run: the cut call has an error result
    last = engine.session.messages[-1]
    assert isinstance(last, ToolResultMessage) and "interrupted" in last.content
    assert not engine.running


async def test_a_second_concurrent_run_on_one_conversation_is_refused():
    from harness_nb.core import HarnessError

    engine, _ = make([{"tool_calls": [call("nap", seconds=0.2, tag="z")]}, {"text": "ok"}], nap)
    first = asyncio.create_task(engine.run("go"))
    await asyncio.sleep(0.05)
    with pytest.raises(HarnessError, match="already running"):
        await engine.run("again")
    assert (await first).final_text == "ok"


async def test_provider_errors_fail_the_run_with_an_event():
    from harness_nb.core import ProviderError

    events = []
    engine, _ = make([{"error": "upstream is down", "status": 503}])
    with pytest.raises(ProviderError, match="upstream is down"):
        await engine.run("go", on_event=events.append)
    assert isinstance(events[-1], RunFailed) and not events[-1].interrupted


async def test_a_broken_event_sink_does_not_break_the_run(caplog):
    def sink(event):
        raise ValueError("ui bug")

    engine, _ = make([{"text": "fine"}])
    result = await engine.run("go", on_event=sink)
    assert result.final_text == "fine"
    assert "event sink failed" in caplog.text


async def test_usage_accounting_counts_tokens_turns_tools_and_cost():
    provider = ScriptedProvider(
        [
            {"tool_calls": [call("echo", text="a")], "usage": {"input_tokens": 1000, "output_tokens": 10, "cache_read_tokens": 500}},
            {"text": "ok", "usage": {"input_tokens": 2000, "output_tokens": 20}},
        ],
        model="gpt-4o-mini",
    )
    engine = AgentEngine(provider, ToolRegistry([echo]))
    result = await engine.run("go")
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.turns, u.tool_calls) == (3000, 30, 500, 2, 1)
    assert u.wall_time > 0
    assert u.cost == pytest.approx((3000 * 0.15 + 30 * 0.60 + 500 * 0.075) / 1e6)


async def test_event_types_cover_a_whole_run():
    engine, _ = make([{"text": "a", "tool_calls": [call("echo", text="b")]}, {"text": "c"}])
    events = []
    await engine.run("go", on_event=events.append)
    types = {type(e) for e in events}
    assert {RunStarted, TextDelta, ToolCallStarted, ToolCallFinished, TurnFinished, RunFinished} <= types
    finished = [e for e in events if isinstance(e, ToolCallFinished)][0]
    assert finished.result == "B" and not finished.is_error


async def test_a_tool_with_its_own_timeout_is_not_cut_off_by_the_engine_first():
    @tool(timeout_param="timeout")
    async def patient(ctx: ToolContext, timeout: float = 0.3) -> str:
        """Sleeps for its own timeout, then reports."""
        await asyncio.sleep(timeout)
        return f"reported after {timeout} s"

    engine, _ = make(
        [{"tool_calls": [call("patient"), call("patient", timeout=0.2)]}, {"text": "ok"}],
        patient,
        limits=Limits(tool_timeout=0.05),
    )
    await engine.run("go")
    outs = [m.content for m in engine.session.messages if isinstance(m, ToolResultMessage)]
    assert outs == ["reported after 0.3 s", "reported after 0.2 s"]


async def test_a_run_that_stops_mid_stream_closes_the_model_stream_at_once():
    """When the run stops while the provider's stream is suspended between chunks (here a
    KeyboardInterrupt raised while a chunk is being shown), the stream — and so its HTTP
    response — is closed right away, not later by the garbage collector."""
    from harness_nb.providers.base import ModelRequest, Provider, TextChunk

    closed = asyncio.Event()

    class Slow(Provider):
        name = "slow"

        async def stream(self, request: ModelRequest):  # type: ignore[override]
            try:
                yield TextChunk("thinking…")
                await asyncio.sleep(60)
            finally:
                closed.set()

    def sink(event):
        if isinstance(event, TextDelta):
            raise KeyboardInterrupt

    engine = AgentEngine(Slow("m"), ToolRegistry([echo]))
    with pytest.raises(KeyboardInterrupt):
        await engine.run("go", on_event=sink)
    assert closed.is_set()
