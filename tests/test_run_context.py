"""One run, one context (issue #8): what belongs to a run — its provider, limits, approval
channel and usage account — is passed to it, so overlapping runs cannot see each other's.
Also the loop's own defects found in review: the shipped bash's timeout, background modes,
impossible limits, empty answers, duplicate call ids, a parallel fan-out that all failed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness_nb import Harness
from harness_nb.core import ConfigError, ToolResultMessage
from harness_nb.engine import AgentEngine, Limits
from harness_nb.testing import FakeLLMServer, ScriptedProvider
from harness_nb.tools import ToolContext, ToolRegistry, tool
from harness_nb.tools.builtin import builtin_tools
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)


def call(name: str, **args: object) -> dict:
    return {"name": name, "arguments": args}


def scripted(tmp_path: Path, script, **kw) -> tuple[Harness, ScriptedProvider]:
    provider = ScriptedProvider(script)
    h = Harness(provider, workdir=tmp_path, include_user_agents=False, approval_policy="never", **kw)
    OPEN.append(h)
    return h, provider


def results(messages) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


# -- 1. a per-run model stays with the work that run launched --------------------------------


async def test_a_background_task_keeps_the_per_run_model_after_the_run_ends(tmp_path, monkeypatch):
    """Before: the override provider was swapped onto the shared engine and closed when the
    run ended, so the task failed with "provider used after aclose()" or ran the default."""
    gate = asyncio.Event()

    @tool(read_only=True)
    async def wait_for_gate(ctx: ToolContext) -> str:
        """Wait until the test opens the gate."""
        await gate.wait()
        return "gate open"

    steps = [
        {"match": "start", "tool_calls": [call("task", subagent_type="general-purpose", prompt="inspect later", background=True)]},
        {"match": "start", "text": "Started it."},
        {"match": "inspect later", "tool_calls": [call("wait_for_gate")]},
        {"match": "inspect later", "text": "inspected"},
    ]
    async with FakeLLMServer(steps) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        h = Harness(
            "openai-compatible/default-model",
            workdir=tmp_path,
            tools=[wait_for_gate],
            include_user_agents=False,
            approval_policy="never",
        )
        OPEN.append(h)
        result = await h.run("start it", model="openai-compatible/other-model")
        assert result.model == "openai-compatible/other-model"
        gate.set()  # the task's second model call comes after its launching run has ended
        entry = await h.tracker.wait("bg-1", timeout=10)
        assert (entry.status, entry.result) == ("completed", "inspected")
        models = [(r.body["messages"][-1]["content"][:20], r.body["model"]) for r in srv.requests]
    assert {m for _, m in models} == {"other-model"}, models
    assert len(models) == 4


# -- 2. usage belongs to the run that spent it -----------------------------------------------


async def test_background_usage_bills_the_launching_run_never_a_later_one(tmp_path):
    gate = asyncio.Event()

    @tool(read_only=True)
    async def hold(ctx: ToolContext) -> str:
        """Wait for the gate."""
        await gate.wait()
        return "released"

    @tool(read_only=True)
    async def release(ctx: ToolContext) -> str:
        """Open the gate and wait for the background task to end."""
        gate.set()
        await h.tracker.wait("bg-1", timeout=10)
        return "it finished"

    spend = lambda n: {"input_tokens": n, "output_tokens": 0}  # noqa: E731
    h, _ = scripted(
        tmp_path,
        {
            "main": [
                {"match": "first", "tool_calls": [call("task", subagent_type="general-purpose", prompt="slow job", background=True)], "usage": spend(1)},
                {"match": "first", "text": "launched", "usage": spend(2)},
                {"match": "second", "tool_calls": [call("release")], "usage": spend(3)},
                # its prompt is now the task's completion, injected when the task ended
                {"text": "second done", "usage": spend(4)},
            ],
            "general-purpose": [
                {"tool_calls": [call("hold")], "usage": spend(500)},
                {"text": "slow job done", "usage": spend(5000)},
            ],
        },
        tools=[hold, release],
    )
    first = await h.run("first")
    second = await h.run("second")  # the background task finishes during this run
    assert h.tracker.get("bg-1").result == "slow job done"
    assert second.usage.input_tokens == 3 + 4  # before the fix: 5,507
    assert first.account.usage.input_tokens == 1 + 2 + 500 + 5000  # credited after it ended
    assert second.account.usage.input_tokens == 3 + 4
    assert h.usage.input_tokens == 1 + 2 + 3 + 4 + 500 + 5000
    assert h.tracker.get("bg-1").usage.input_tokens == 5500


async def test_overlapping_runs_keep_their_own_approval_channel(tmp_path):
    """A background task launched with one run's channel asks that channel, even after
    another run with another channel has started."""
    asked: list[str] = []
    gate = asyncio.Event()

    def channel(name: str):
        async def answer(call, reason, risk):  # type: ignore[no-untyped-def]
            from harness_nb.engine import Approved

            asked.append(name)
            return Approved()

        return answer

    @tool
    async def risky(ctx: ToolContext) -> str:
        """Something that asks."""
        return "done"

    @tool(read_only=True)
    async def hold(ctx: ToolContext) -> str:
        """Wait for the gate."""
        await gate.wait()
        return "released"

    from harness_nb.engine import Ask, Hook

    class AskRisky(Hook):
        async def before_tool(self, call, ctx):  # type: ignore[no-untyped-def]
            from harness_nb.engine import ALLOW

            return Ask("risky", "high") if call.name == "risky" else ALLOW

    h, _ = scripted(
        tmp_path,
        {
            "main": [
                {"match": "one", "tool_calls": [call("task", subagent_type="general-purpose", prompt="job", background=True)]},
                {"match": "one", "text": "launched"},
                {"match": "two", "text": "two done"},
            ],
            "general-purpose": [{"tool_calls": [call("hold")]}, {"tool_calls": [call("risky")]}, {"text": "job done"}],
        },
        tools=[hold, risky],
        background_approvals="ask",
        hooks=[AskRisky()],
    )
    await h.run("one", approval=channel("cell-1"))
    await h.run("two", approval=channel("cell-2"))
    gate.set()
    await h.tracker.wait("bg-1", timeout=10)
    assert asked == ["cell-1"]


# -- 3. the shipped bash keeps its own timeout ------------------------------------------------


def test_the_shipped_bash_declares_its_own_timeout():
    assert {t.name: t.timeout_param for t in builtin_tools()}["bash"] == "timeout"


async def test_the_shipped_bash_runs_past_the_engines_tool_timeout_when_asked(tmp_path):
    h, _ = scripted(
        tmp_path,
        [{"tool_calls": [call("bash", command="sleep 0.6; echo finished", timeout=30)]}, {"text": "ok"}],
        tool_timeout=0.2,
    )
    result = await h.run("go")
    (out,) = results(result.messages)
    assert not out.is_error, out.content
    assert out.content.startswith("finished")


# -- 4. background with tasks or a chain -------------------------------------------------------


async def test_background_with_tasks_starts_each_as_its_own_background_task(tmp_path):
    h, _ = scripted(
        tmp_path,
        {
            "main": [
                {
                    "tool_calls": [
                        call(
                            "task",
                            background=True,
                            tasks=[
                                {"subagent_type": "general-purpose", "prompt": "alpha"},
                                {"subagent_type": "general-purpose", "prompt": "beta"},
                            ],
                        )
                    ]
                },
                {"text": "both launched"},
            ],
            "general-purpose": [{"match": "alpha", "text": "A"}, {"match": "beta", "text": "B"}],
        },
    )
    result = await h.run("go")
    (out,) = results(result.messages)
    assert out.content.splitlines() == ['<task id="bg-1" state="running"/>', '<task id="bg-2" state="running"/>']
    for task_id, text in (("bg-1", "A"), ("bg-2", "B")):
        assert (await h.tracker.wait(task_id, timeout=10)).result == text


async def test_background_with_a_chain_is_refused_not_run_in_the_foreground(tmp_path):
    h, provider = scripted(
        tmp_path,
        {
            "main": [
                {"tool_calls": [call("task", background=True, chain=[{"subagent_type": "general-purpose", "prompt": "x"}])]},
                {"text": "ok"},
            ]
        },
    )
    result = await h.run("go")
    (out,) = results(result.messages)
    assert out.is_error and "a chain runs in the foreground" in out.content
    assert h.tracker.list() == []


# -- 6. impossible limits -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_turns": 0}, "max_turns must be a whole number above 0"),
        ({"max_turns": -1}, "max_turns must be a whole number above 0"),
        ({"token_budget": -5}, "token_budget must be a whole number above 0"),
        ({"tool_timeout": 0}, "tool_timeout must be a number above 0"),
        ({"wall_time": -1.0}, "wall_time must be a number above 0"),
        ({"max_concurrency": 0}, "max_concurrency must be a whole number above 0"),
    ],
)
def test_impossible_limits_are_refused_when_the_harness_is_made(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Harness(workdir=tmp_path, **kwargs)


async def test_an_impossible_per_run_limit_is_refused_before_the_run(tmp_path):
    h, provider = scripted(tmp_path, [{"text": "never"}])
    with pytest.raises(ConfigError, match="max_turns must be a whole number above 0, not 0"):
        await h.run("go", max_turns=0)
    assert provider.requests == []


def test_limits_refuse_a_bool_for_a_number():
    with pytest.raises(ConfigError):
        Limits(max_turns=True)


# -- 10. smaller defects of the loop ----------------------------------------------------------


@tool(read_only=True)
async def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text."""
    return text


async def test_an_empty_answer_is_asked_for_once_more():
    provider = ScriptedProvider([{"text": ""}, {"text": "here it is"}])
    engine = AgentEngine(provider, ToolRegistry([echo]))
    result = await engine.run("go")
    assert (result.final_text, result.stop_reason) == ("here it is", "end_turn")
    provider.assert_complete()


async def test_two_empty_answers_end_the_run_with_a_clear_stop():
    provider = ScriptedProvider([{"text": "Looking.", "tool_calls": [call("echo", text="x")]}, {"text": ""}, {"text": ""}])
    engine = AgentEngine(provider, ToolRegistry([echo]))
    result = await engine.run("go")
    assert result.stop_reason == "empty_answer"
    assert result.final_text == (
        "Looking.\n\n[stopped: the model returned an empty answer (no text and no tool calls) twice]"
    )
    assert engine.session.messages[-1].role == "tool"  # nothing empty was added to the history


async def test_duplicate_tool_call_ids_in_one_answer_get_unique_ids():
    provider = ScriptedProvider(
        [
            {"tool_calls": [{**call("echo", text="a"), "id": "c1"}, {**call("echo", text="b"), "id": "c1"}]},
            {"text": "done"},
        ]
    )
    engine = AgentEngine(provider, ToolRegistry([echo]))
    result = await engine.run("go")
    assistant = [m for m in result.messages if m.role == "assistant"][0]
    assert [c.id for c in assistant.tool_calls] == ["c1", "c1-2"]
    assert [(r.tool_call_id, r.content) for r in results(result.messages)] == [("c1", "a"), ("c1-2", "b")]
    second_request = provider.requests[1]
    assert [r.tool_call_id for r in results(second_request.messages)] == ["c1", "c1-2"]


async def test_a_parallel_task_whose_every_subtask_failed_is_an_error(tmp_path):
    h, _ = scripted(
        tmp_path,
        {
            "main": [
                {
                    "tool_calls": [
                        call(
                            "task",
                            tasks=[
                                {"subagent_type": "general-purpose", "prompt": "one"},
                                {"subagent_type": "general-purpose", "prompt": "two"},
                            ],
                        )
                    ]
                },
                {"text": "ok"},
            ],
            "general-purpose": [{"match": "one", "error": "boom 1"}, {"match": "two", "error": "boom 2"}],
        },
    )
    result = await h.run("go")
    (out,) = results(result.messages)
    assert out.is_error
    assert out.content.startswith("error: every one of the 2 parallel tasks failed:")
    assert "boom 1" in out.content and "boom 2" in out.content


# -- 8. a provider built by hand is recorded too ----------------------------------------------


async def test_a_provider_instance_is_recorded_when_record_to_is_set(tmp_path):
    from harness_nb.providers import create_provider
    from harness_nb.providers.cassette import request_hash

    async with FakeLLMServer([{"text": "hello there"}]) as srv:
        hand_made = create_provider("openai-compatible/tiny", base_url=srv.url + "/v1", options={"temperature": 0.1})
        h = Harness(hand_made, workdir=tmp_path, record_to="cassettes/c.jsonl", include_user_agents=False)
        OPEN.append(h)
        result = await h.run("say hello")
    assert result.final_text == "hello there"
    import json

    (line,) = [json.loads(x) for x in (tmp_path / "cassettes/c.jsonl").read_text().splitlines()]
    assert line["response"]["message"]["content"] == "hello there"
    assert line["hash"] == request_hash(line["request"])
    # and the cassette replays the run offline
    replay = Harness("replay/cassettes/c.jsonl", workdir=tmp_path, include_user_agents=False)
    OPEN.append(replay)
    assert (await replay.run("say hello")).final_text == "hello there"


async def test_configure_changes_only_later_runs_and_can_unset_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key-000")
    h = Harness("openai/gpt-4o-mini", workdir=tmp_path, include_user_agents=False)
    OPEN.append(h)
    before = h.run_context()
    h.configure(model="anthropic/claude-haiku-4-5", max_turns=7, provider_options={"temperature": 0.5})
    after = h.run_context()
    assert (before.provider.model_id, before.limits.max_turns) == ("openai/gpt-4o-mini", 50)
    assert (after.provider.model_id, after.limits.max_turns) == ("anthropic/claude-haiku-4-5", 7)
    assert before.provider is not after.provider
    with pytest.raises(ConfigError, match="unknown provider option 'temprature'"):
        h.configure(max_turns=9, provider_options={"temprature": 1})
    assert h.settings.limits.max_turns == 7  # a bad value changes nothing
    h.configure(model="")
    assert h.model is None
    with pytest.raises(ConfigError, match="no model configured"):
        h.run_context()
