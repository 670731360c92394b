"""Tracing (``tracing/``): the spans of traced runs, caught by the SDK's in-memory exporter
behind the process's tracer provider — their tree (a run, its tool calls and model calls, a
foreground and a background subagent, a teammate), their GenAI semantic-convention
attributes, the approval outcome, interrupted runs; what was said left out by default and
scrubbed when asked for; and, in fresh processes, the provider of our own configured by the
``OTEL_*`` variables and nothing of OpenTelemetry loaded with tracing off."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from harness_nb.core import (
    AssistantMessage,
    ConfigError,
    ModelCallFinished,
    ProviderError,
    RunFinished,
    RunStarted,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
    UserMessage,
)
from harness_nb.core.secret import SECRETS
from harness_nb.engine import Approved, Ask, Denied, Hook
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition
from harness_nb.tools import ToolContext, tool
from harness_nb.tracing.spans import SpanTree
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from tracing_support import everything_said, named, parent_of, run_in_fresh_process, spans, tree  # noqa: F401  (spans: a fixture)

USAGE = {"input_tokens": 1_000, "output_tokens": 200}
PRICES = {"script": {"input": 2.0, "output": 10.0}}  # USD per million tokens
CALL_COST = (1_000 * 2.0 + 200 * 10.0) / 1e6


@tool(read_only=True)
async def read_file(ctx: ToolContext, path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
async def bash(ctx: ToolContext, command: str) -> str:
    """Run a command."""
    return f"ran {command}"


@tool
async def wait_a_bit(ctx: ToolContext, seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "waited"


class AskForBash(Hook):
    async def before_tool(self, call, ctx):
        return Ask("bash needs approval", "high") if call.name == "bash" else await super().before_tool(call, ctx)


def call(tool_name: str, /, **args: object) -> dict:
    return {"name": tool_name, "arguments": args}


def step(**fields: object) -> dict:
    return {"usage": USAGE, **fields}


def harness(tmp_path: Path, script, *, tools=(read_file, bash, wait_a_bit), **kw) -> tuple[Harness, ScriptedProvider]:
    provider = ScriptedProvider(script)
    kw.setdefault("tracing", "otel")
    h = Harness(
        provider, workdir=tmp_path, tools=list(tools), include_user_agents=False, approval_policy="never",
        prices=PRICES, **kw,
    )
    h.registry.register(SubAgentDefinition(name="reader", description="Reads.", system_prompt="You read.", tools=["read_file"]))
    h.registry.register(SubAgentDefinition(name="scout", description="Scouts.", system_prompt="You scout.", tools=["read_file"]))
    OPEN.append(h)
    return h, provider


def reads(path: str, answer: str) -> list[dict]:
    """A subagent's script: read ``path``, then answer."""
    return [step(tool_calls=[call("read_file", path=path)]), step(text=answer)]


DELEGATING = {
    "main": [
        step(tool_calls=[call("read_file", path="a.txt")]),
        step(tool_calls=[call("task", subagent_type="reader", prompt="read b.txt", description="fg")]),
        step(tool_calls=[call("task", subagent_type="scout", prompt="read c.txt", background=True)]),
        step(text="All done."),
    ],
    "reader": reads("b.txt", "b says hi"),
    "scout": reads("c.txt", "c says hi"),
}


def subagent(name: str) -> tuple:
    """A subagent run's spans: two model calls around one ``read_file``."""
    return (f"invoke_agent {name}", [("chat script", []), ("execute_tool read_file", []), ("chat script", [])])


async def test_a_run_its_tools_and_its_foreground_and_background_subagents_make_one_tree(tmp_path, spans):
    h, provider = harness(tmp_path, DELEGATING)
    result = await h.run("Read three files", trace_attributes={"harness_nb.notebook.execution_count": 7})
    await h.tracker.wait("bg-1", 5)
    provider.assert_complete()
    found = spans.get_finished_spans()
    assert tree(found) == [
        (
            "invoke_agent main",
            [
                ("chat script", []),
                ("execute_tool read_file", []),
                ("chat script", []),
                ("execute_tool task", [subagent("reader")]),
                ("chat script", []),
                ("execute_tool task", [subagent("scout")]),  # outlives the call and the run: still its child
                ("chat script", []),
            ],
        )
    ]
    assert len({s.context.trace_id for s in found}) == 1
    root = named(found, "invoke_agent main")[0].attributes
    assert root["gen_ai.operation.name"] == "invoke_agent"
    assert (root["gen_ai.provider.name"], root["gen_ai.request.model"]) == ("scripted", "script")
    assert root["gen_ai.conversation.id"] == h.session.id
    assert root["harness_nb.run.id"] == result.run_id
    assert root["harness_nb.notebook.execution_count"] == 7
    assert root["harness_nb.stop_reason"] == "end_turn"
    # the run's usage is its own four calls and the foreground subagent's two, billed to it
    assert root["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens == 6_000
    assert root["harness_nb.cost_usd"] == pytest.approx(result.usage.cost)
    reader, scout = named(found, "invoke_agent reader")[0], named(found, "invoke_agent scout")[0]
    assert (reader.attributes["harness_nb.task.id"], scout.attributes["harness_nb.task.id"]) == ("fg-1", "bg-1")
    assert reader.attributes["gen_ai.agent.name"] == "reader"
    assert reader.attributes["gen_ai.conversation.id"] == f"{h.session.id}.fg-1"
    assert reader.attributes["harness_nb.notebook.execution_count"] == 7  # the cell that launched it


async def test_model_calls_and_tool_calls_carry_the_conventions_attributes(tmp_path, spans):
    h, _ = harness(tmp_path, {"main": [step(tool_calls=[call("read_file", path="a.txt")]), step(text="ok")]})
    result = await h.run("go")
    found = spans.get_finished_spans()
    first_chat = named(found, "chat script")[0]
    assert first_chat.kind.name == "CLIENT"
    chat = first_chat.attributes
    assert chat["gen_ai.operation.name"] == "chat"
    assert (chat["gen_ai.provider.name"], chat["gen_ai.request.model"]) == ("scripted", "script")
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (1_000, 200)
    assert chat["harness_nb.cost_usd"] == pytest.approx(CALL_COST)
    assert chat["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert chat["gen_ai.conversation.id"] == h.session.id
    assert named(found, "chat script")[1].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    tool_span = named(found, "execute_tool read_file")[0]
    assert tool_span.kind.name == "INTERNAL"
    called = result.messages[1].tool_calls[0]
    assert tool_span.attributes["gen_ai.tool.call.id"] == called.id
    assert tool_span.attributes["gen_ai.tool.name"] == "read_file"
    assert tool_span.attributes["harness_nb.approval"] == "not_asked"
    assert tool_span.status.status_code.name == "UNSET"
    # each span lasts as long as its operation: the tool call falls between the two model calls
    first, second = named(found, "chat script")
    assert first.end_time <= tool_span.start_time <= tool_span.end_time <= second.start_time


async def test_the_approval_outcome_is_an_attribute_and_a_denied_call_an_error(tmp_path, spans):
    answers = [Approved(), Denied.by_the_person("not that one")]

    async def channel(call, reason, risk):
        return answers.pop(0)

    h, _ = harness(
        tmp_path,
        {"main": [step(tool_calls=[call("bash", command="ls")]), step(tool_calls=[call("bash", command="rm x")]), step(text="ok")]},
        hooks=[AskForBash()],
    )
    await h.run("go", approval=channel)
    approved, denied = named(spans.get_finished_spans(), "execute_tool bash")
    assert approved.attributes["harness_nb.approval"] == "approved"
    assert approved.attributes["harness_nb.approval.risk"] == "high"
    assert "error.type" not in approved.attributes
    assert denied.attributes["harness_nb.approval"] == "denied"
    assert denied.attributes["error.type"] == "denied"
    assert denied.status.status_code.name == "ERROR"
    assert "not that one" not in everything_said(spans.get_finished_spans())  # the person's reason is content


async def test_a_teammate_spawned_by_a_traced_run_traces_its_turns_under_that_call(tmp_path, spans):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                step(tool_calls=[call("task", subagent_type="reader", prompt="count rows", team_name="t", name="alice")]),
                step(text="alice is on it"),
            ],
            "alice": reads("rows.csv", "3 rows"),
        },
        teams=True,
    )
    await h.run("get alice to count")
    assert h.teams is not None
    await h.teams.wait_idle("alice", turns=1, timeout=5)
    found = spans.get_finished_spans()
    alice = named(found, "invoke_agent alice")
    assert len(alice) == 1
    spawn = parent_of(found, alice[0])
    assert spawn is not None and spawn.name == "execute_tool task"
    assert parent_of(found, spawn).name == "invoke_agent main"
    assert [s.name for s in found if parent_of(found, s) is alice[0]] == ["chat script", "execute_tool read_file", "chat script"]
    provider.assert_complete()


async def test_an_interrupted_run_ends_its_spans_marked_interrupted(tmp_path, spans):
    h, _ = harness(tmp_path, {"main": [step(tool_calls=[call("wait_a_bit", seconds=30)]), step(text="never")]})
    run = asyncio.create_task(h.run("wait"))
    deadline = time.monotonic() + 5
    while not named(spans.get_finished_spans(), "chat script") and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # into the tool call
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    found = spans.get_finished_spans()
    tool_span, root = named(found, "execute_tool wait_a_bit")[0], named(found, "invoke_agent main")[0]
    assert tool_span.attributes["error.type"] == root.attributes["error.type"] == "interrupted"
    assert root.status.status_code.name == "ERROR"
    assert tree(found) == [("invoke_agent main", [("chat script", []), ("execute_tool wait_a_bit", [])])]


async def test_a_failed_model_call_and_the_run_it_ends_are_errors(tmp_path, spans):
    h, _ = harness(tmp_path, {"main": [{"error": "the server is overloaded", "status": 529}]})
    with pytest.raises(ProviderError):
        await h.run("go")
    found = spans.get_finished_spans()
    chat, root = named(found, "chat script")[0], named(found, "invoke_agent main")[0]
    assert chat.attributes["error.type"] == "529"  # the provider's status: what a trace groups failures by
    assert "gen_ai.usage.input_tokens" not in chat.attributes
    assert root.attributes["error.type"] == "ProviderError"
    assert root.status.status_code.name == chat.status.status_code.name == "ERROR"
    assert "the server is overloaded" in root.status.description


async def test_run_stream_and_direct_subagent_runs_are_traced_too(tmp_path, spans):
    h, _ = harness(tmp_path, {"main": [step(text="streamed")], "reader": [step(text="direct")]})
    kinds = [type(e).__name__ async for e in h.run_stream("go")]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    await h.run_subagent("reader", "go on")
    assert tree(spans.get_finished_spans()) == [
        ("invoke_agent main", [("chat script", [])]),
        ("invoke_agent reader", [("chat script", [])]),
    ]


async def test_what_was_said_is_left_out_unless_asked_for(tmp_path, spans):
    script = {"main": [step(text="ANSWER-9f3", tool_calls=[call("read_file", path="ARG-51c")]), step(text="ANSWER-2d7")]}
    h, _ = harness(tmp_path, script)
    await h.run("PROMPT-7b1")
    said = everything_said(spans.get_finished_spans())
    for marker in ("PROMPT-7b1", "ANSWER-9f3", "ANSWER-2d7", "ARG-51c", "contents of"):
        assert marker not in said
    keys = {k for s in spans.get_finished_spans() for k in (s.attributes or {})}
    assert not keys & {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


@tool(read_only=True)
async def read_env(ctx: ToolContext, name: str) -> str:
    """Read an environment variable."""
    return f"{name}={os.environ.get(name, '')}"


async def test_content_asked_for_is_recorded_with_every_key_masked(tmp_path, spans, monkeypatch):
    token = "tok-5b2f9c1e8d7a6b5c4d3e2f1a"
    monkeypatch.setenv("REPORTS_API_TOKEN", token)
    leaked = "sk-proj-" + "Q7x" * 16  # shaped like an OpenAI key: the model says it
    script = {
        "main": [
            step(text="Reading it.", tool_calls=[call("read_env", name="REPORTS_API_TOKEN")]),
            step(text=f"The token is there; also {leaked}."),
        ]
    }
    h, _ = harness(tmp_path, script, tools=(read_env,), tracing_content=True)
    await h.run(f"Is the token set? Mine is {token}")
    found = spans.get_finished_spans()
    said = everything_said(found)
    assert token not in said and leaked not in said
    assert "[redacted]" in said
    tool_span = named(found, "execute_tool read_env")[0].attributes
    assert tool_span["gen_ai.tool.call.result"] == "REPORTS_API_TOKEN=[redacted]"
    assert json.loads(tool_span["gen_ai.tool.call.arguments"]) == {"name": "REPORTS_API_TOKEN"}
    second = named(found, "chat script")[1].attributes
    inputs = json.loads(second["gen_ai.input.messages"])
    assert [m["role"] for m in inputs] == ["user", "assistant", "tool"]
    assert inputs[1]["parts"][1] == {
        "type": "tool_call", "id": inputs[2]["parts"][0]["id"], "name": "read_env", "arguments": {"name": "REPORTS_API_TOKEN"}
    }
    output = json.loads(second["gen_ai.output.messages"])
    assert output[0]["finish_reason"] == "stop" and "[redacted]" in output[0]["parts"][0]["content"]
    assert json.loads(second["gen_ai.system_instructions"])[0]["type"] == "text"
    assert json.loads(second["gen_ai.tool.definitions"])[0] == {"type": "function", "name": "read_env"}
    root = named(found, "invoke_agent main")[0].attributes
    assert json.loads(root["gen_ai.input.messages"])[0]["parts"][0]["content"] == "Is the token set? Mine is [redacted]"


def test_the_span_tree_itself_scrubs_what_an_event_carries(spans):
    """An observer given raw events (a key in a model's answer, in a tool's result) records
    none of it: the tracer scrubs, whatever scrubbed before it."""
    from harness_nb.tracing.provider import tracer

    key = "ghp_" + "A1b2C3d4E5f6" * 3
    SECRETS.add(key)
    spans_made = SpanTree(tracer(), content=True)
    leaking = ToolCall(id="c1", name="read_file", arguments=json.dumps({"path": key}))
    for event in (
        RunStarted(run_id="r", model="openai/gpt-x", prompt=key),
        ModelCallFinished(
            provider="openai", model="gpt-x", started=time.time_ns(), server="https://api.example.com/v1",
            messages=(UserMessage(content=key),), answer=AssistantMessage(content=key, tool_calls=(leaking,)),
            stop_reason="tool_use", usage=Usage(input_tokens=5, output_tokens=1),
        ),
        ToolCallStarted(call=leaking),
        ToolCallFinished(call=leaking, result=f"the key is {key}"),
        RunFinished(final_text=key, stop_reason="end_turn", usage=Usage()),
    ):
        spans_made.see(event)
    found = spans.get_finished_spans()
    assert len(found) == 3 and not spans_made.running
    said = everything_said(found)
    assert key not in said and said.count("[redacted]") >= 6
    chat = named(found, "chat gpt-x")[0].attributes
    assert (chat["server.address"], chat["server.port"]) == ("api.example.com", 443)


ONE_RUN = """
import asyncio, sys
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider

async def main():
    script = [{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"text": "done"}]
    async with Harness(ScriptedProvider(script), workdir=".", include_user_agents=False, tracing=%r) as h:
        await h.run("list the files")
    print("LOADED" if any(m.startswith("opentelemetry") for m in sys.modules) else "NOT LOADED")

asyncio.run(main())
"""


def test_tracing_off_loads_nothing_of_opentelemetry(tmp_path):
    done = run_in_fresh_process(tmp_path, ONE_RUN % "off")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "NOT LOADED"


def test_without_a_provider_of_the_programs_the_otel_variables_configure_ours(tmp_path):
    done = run_in_fresh_process(
        tmp_path, ONE_RUN % "otel", OTEL_TRACES_EXPORTER="console", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=ci"
    )
    assert done.returncode == 0, done.stderr
    # the console exporter prints each span as JSON, when the harness closes at the latest
    printed = [json.loads(chunk) for chunk in _json_objects(done.stdout)]
    assert sorted(s["name"] for s in printed) == ["chat script", "chat script", "execute_tool ls", "invoke_agent main"]
    resource = printed[0]["resource"]["attributes"]
    assert resource["service.name"] == "harness_nb" and resource["deployment.environment"] == "ci"
    assert done.stdout.strip().splitlines()[-1] == "LOADED"


def _json_objects(text: str) -> list[str]:
    """The top-level ``{…}`` blocks of the console exporter's output."""
    found, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "{":
            depth, start = depth + 1, i if depth == 0 else start
        elif char == "}":
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def test_an_exporter_it_cannot_use_is_one_clear_error(tmp_path):
    done = run_in_fresh_process(tmp_path, ONE_RUN % "otel", OTEL_EXPORTER_OTLP_PROTOCOL="http/json")
    assert done.returncode != 0
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json': harness_nb sends 'http/protobuf'" in done.stderr


def test_the_setting_is_checked_when_made():
    from harness_nb.settings import RunSettings

    assert RunSettings().tracing.mode == "off" and RunSettings().tracing.content is False
    with pytest.raises(ConfigError, match="tracing must be one of 'off', 'otel', not 'on'"):
        RunSettings().changed(tracing="on")
    assert RunSettings().changed(tracing="otel", tracing_content=True).tracing.content is True
