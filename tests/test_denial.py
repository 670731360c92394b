"""A denial people can explain (issue 12, item 4): the person's reason — typed into the
card, or after ``n`` at the terminal — reaches the model in the tool result, cleaned and
bounded, worded apart from a policy's denial; a subagent's denied call reaches the child
as its tool result and the parent in the task's result, foreground and background.

Over the scripted model: what each agent was sent is read back from its request records.
The card itself is tested in ``test_views.py``, in a real kernel in
``test_notebook_kernel.py``.
"""

from __future__ import annotations

import pytest

from harness_nb.core import ApprovalDecided, ToolCall, ToolResultMessage
from harness_nb.core.secret import SECRETS
from harness_nb.engine import AgentEngine, Approved, Ask, Denied, Hook, HookRegistry
from harness_nb.engine.hook import denial_line, denial_result, person_reason
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition
from harness_nb.textview import terminal_answer
from harness_nb.tools import ToolContext, ToolRegistry, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

REASON = "keep the raw data: it is the only copy"


@tool
async def bash(ctx: ToolContext, command: str) -> str:
    """Run a command."""
    return f"ran {command}"


class AskForBash(Hook):
    async def before_tool(self, call, ctx):
        return Ask("bash needs approval", "high") if call.name == "bash" else await super().before_tool(call, ctx)


def call(name: str, **args: object) -> dict:
    return {"name": name, "arguments": args}


def results(messages) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def answering(answer: Approved | Denied, asked: list[str] | None = None):
    async def channel(call, reason, risk):
        if asked is not None:
            asked.append(reason)
        return answer

    return channel


# ---------------------------------------------------------------------- the reason itself


def test_a_reason_is_kept_verbatim_when_it_is_plain():
    assert person_reason(REASON) == REASON
    assert person_reason("") == ""


def test_a_reason_loses_escapes_control_and_format_characters_and_is_bounded():
    typed = "\x1b[1;31mstop\x1b[0m\r\n\tthat\u202e\u200b\x07 \x1b]0;title\x07now \x9b2Jplease"
    assert person_reason(typed) == "stop that now please"
    long = person_reason("why " * 400)
    assert len(long) == 500 and long.endswith("…")
    assert person_reason(long) == long, "cleaning twice changes nothing"


def test_a_reason_with_a_secret_in_it_is_masked():
    key = "sk-proj-ReasonKey0123456789abcdefGHIJKLmnop"
    SECRETS.add(key)
    assert key not in person_reason(f"do not use {key} here")


def test_the_persons_denial_reads_apart_from_a_policys():
    assert denial_result(Denied.by_the_person(REASON)) == (
        f'error: the person denied this call. Their reason: "{REASON}". Do not retry it unchanged: '
        "take their reason into account."
    )
    assert "they gave no reason" in denial_result(Denied.by_the_person())
    assert denial_result(Denied("nobody answered within 5 s: denied")) == (
        "error: the call was denied: nobody answered within 5 s: denied. Do not retry it unchanged."
    )
    assert denial_result(None) == "error: the call was denied: no approval channel: denied. Do not retry it unchanged."


def test_a_denial_line_names_the_call_and_the_reason():
    rm = ToolCall(id="1", name="bash", arguments='{"command": "rm -rf data"}')
    assert denial_line(rm, REASON) == f"the person denied bash(command='rm -rf data'): {REASON}"
    assert denial_line(rm, "") == "the person denied bash(command='rm -rf data') (no reason given)"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("y", Approved()),
        (" YES ", Approved()),
        ("", Denied("", by_person=True)),
        ("n", Denied("", by_person=True)),
        ("n because the data is raw", Denied("because the data is raw", by_person=True)),
        ("no: keep it", Denied("keep it", by_person=True)),
        ("not the data folder", Denied("not the data folder", by_person=True)),
        ("n \x1b[31mred\x1b[0m", Denied("red", by_person=True)),
    ],
)
def test_a_terminal_answer_carries_the_reason_after_n(typed, expected):
    assert terminal_answer(typed) == expected


# ---------------------------------------------------------------------- one engine


async def test_the_persons_reason_reaches_the_model_in_the_next_request():
    provider = ScriptedProvider([{"tool_calls": [call("bash", command="rm -rf data")]}, {"text": "left it"}])
    # a channel of one's own that forgets to clean the reason: the engine cleans it
    channel = answering(Denied("\x1b[31mkeep\x1b[0m\nthe raw data", by_person=True))
    engine = AgentEngine(provider, ToolRegistry([bash]), hooks=HookRegistry([AskForBash()]), approval=channel)
    events: list = []
    await engine.run("clean up", on_event=events.append)
    (last,) = results(provider.requests[1].messages)
    assert last.startswith('error: the person denied this call. Their reason: "keep the raw data".')
    (decided,) = [e for e in events if isinstance(e, ApprovalDecided)]
    assert decided.by_person and not decided.approved and decided.feedback == "keep the raw data"


# ---------------------------------------------------------------------- subagents


def harness(tmp_path, script, **kw) -> tuple[Harness, ScriptedProvider]:
    provider = ScriptedProvider(script)
    h = Harness(
        provider,
        workdir=tmp_path,
        tools=[bash],
        include_user_agents=False,
        approval_policy="never",
        hooks=[AskForBash()],
        **kw,
    )
    h.registry.register(
        SubAgentDefinition(name="cleaner", description="Cleans.", system_prompt="You clean.", tools=["bash"])
    )
    OPEN.append(h)
    return h, provider


def task(**args: object) -> dict:
    return call("task", **args)


GLOSSING = {
    # the child's report does not mention the denial: the parent must learn it anyway
    "cleaner": [{"tool_calls": [call("bash", command="rm -rf data")]}, {"text": "Tidied what I could."}],
}


async def test_a_subagents_denied_call_reaches_the_child_and_the_parent(tmp_path):
    asked: list[str] = []
    h, provider = harness(
        tmp_path,
        {"main": [{"tool_calls": [task(subagent_type="cleaner", prompt="clean")]}, {"text": "ok"}], **GLOSSING},
    )
    h.approval = answering(Denied.by_the_person(REASON), asked)
    await h.run("go")
    assert asked == ["[cleaner] bash needs approval"]
    child = [r for r in provider.requests if r.agent == "cleaner"][1]
    assert results(child.messages) == [
        f'error: the person denied this call. Their reason: "{REASON}". Do not retry it unchanged: '
        "take their reason into account."
    ]
    parent = [r for r in provider.requests if r.agent == "main"][1]
    assert results(parent.messages) == [
        '<task id="fg-1" state="completed"><task_result>Tidied what I could.</task_result>\n'
        f"<denied_by_person>the person denied bash(command='rm -rf data'): {REASON}</denied_by_person></task>"
    ]
    entry = h.tracker.get("fg-1")
    assert entry.denials == [f"the person denied bash(command='rm -rf data'): {REASON}"]
    assert f"the person denied bash(command='rm -rf data'): {REASON}" in entry.log


async def test_a_policy_denial_of_a_subagents_call_is_not_reported_as_the_persons(tmp_path):
    h, provider = harness(
        tmp_path,
        {"main": [{"tool_calls": [task(subagent_type="cleaner", prompt="clean")]}, {"text": "ok"}], **GLOSSING},
    )
    h.approval = answering(Denied("nobody answered within 5 s: denied"))
    await h.run("go")
    parent = [r for r in provider.requests if r.agent == "main"][1]
    assert "denied_by_person" not in results(parent.messages)[0]
    assert h.tracker.get("fg-1").denials == []


async def test_every_chain_steps_denial_reaches_the_parent(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(chain=[{"subagent_type": "cleaner", "prompt": "a"}, {"subagent_type": "reader", "prompt": "b {previous}"}])]},
                {"text": "ok"},
            ],
            **GLOSSING,
            "reader": [{"text": "read it"}],
        },
    )
    h.registry.register(SubAgentDefinition(name="reader", description="Reads.", system_prompt="You read.", tools=[]))
    h.approval = answering(Denied.by_the_person())
    await h.run("go")
    parent = [r for r in provider.requests if r.agent == "main"][1]
    assert results(parent.messages) == [
        '<task id="fg-2" state="completed" steps="2"><task_result>read it</task_result>\n'
        "<denied_by_person>the person denied bash(command='rm -rf data') (no reason given)</denied_by_person></task>"
    ]


async def test_a_background_subagents_denial_reaches_the_parents_next_prompt(tmp_path):
    h, provider = harness(
        tmp_path,
        {
            "main": [
                {"tool_calls": [task(subagent_type="cleaner", prompt="clean", background=True)]},
                {"text": "started it"},
                {"text": "the person kept the data"},
            ],
            **GLOSSING,
        },
        background_approvals="ask",
    )
    h.approval = answering(Denied.by_the_person(REASON))
    await h.run("go")
    await h.tracker.wait("bg-1", 5)
    child = [r for r in provider.requests if r.agent == "cleaner"][1]
    assert f'Their reason: "{REASON}"' in results(child.messages)[0]
    await h.run("what happened?")
    last = [r for r in provider.requests if r.agent == "main"][-1]
    injected = "\n".join(str(m.content) for m in last.messages)
    assert (
        '<background-task-completed id="bg-1" agent="cleaner" status="completed">Tidied what I could.\n'
        f"<denied_by_person>the person denied bash(command='rm -rf data'): {REASON}</denied_by_person>"
        "</background-task-completed>"
    ) in injected
