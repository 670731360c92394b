"""Every frontmatter field of a Claude Code agent file: read, and honoured or shown as not
supported (``tests/agent_files/fields``); the honoured ones checked through a real
``Harness`` against the fake LLM server on loopback — permission modes, background,
memory — and ``%agents`` showing each agent's effective tools and what it ignores."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import ToolResultMessage
from harness_nb.core.frontmatter import load_frontmatter
from harness_nb.harness import Harness
from harness_nb.notebook.widgets.agent_table import AgentTable, agent_row
from harness_nb.subagents import SubAgentDefinition, parse_agent_text, resolve_tools
from harness_nb.subagents.definition import CLAUDE_FIELDS, HONOURED, NOT_SUPPORTED, canonical_key
from harness_nb.subagents.loader import load_agent_file
from harness_nb.subagents.memory import PRELOAD_LINES
from harness_nb.testing import FakeLLMServer
from harness_nb.tools import FunctionTool, ToolContext
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

FIELDS = Path(__file__).parent / "agent_files" / "fields"


def frontmatter(path: Path) -> dict[str, Any]:
    return load_frontmatter(path.read_text().split("---\n")[1])


# ---------------------------------------------------------------------- every field


def test_the_fixture_with_every_field_names_every_claude_code_field() -> None:
    assert set(CLAUDE_FIELDS) <= set(frontmatter(FIELDS / "every-field.md"))
    assert set(CLAUDE_FIELDS.values()) == {HONOURED, NOT_SUPPORTED}


@pytest.mark.parametrize("path", sorted(FIELDS.glob("*.md")), ids=lambda p: p.name)
def test_every_field_of_every_fixture_is_accounted_for(path: Path) -> None:
    """Each key lands in a field of its own (and, when not acted on here, is listed as not
    supported, in the file's note and in %agents), or in ``extra`` with a note: none is
    dropped without a word."""
    result = load_agent_file(path, label=path.name)
    (defn,) = result.definitions
    note = result.warnings[0] if result.warnings else ""
    fields = set(SubAgentDefinition.model_fields)
    for key in frontmatter(path):
        canon = canonical_key(key)
        if canon in fields:
            camel = next((k for k in CLAUDE_FIELDS if canonical_key(k) == canon), None)
            if camel is not None and CLAUDE_FIELDS[camel] == NOT_SUPPORTED:
                assert camel in defn.unsupported() and camel in note, key
        else:
            assert key in defn.extra and repr(key) in note or key in note, key


def test_every_field_is_read_into_the_definition() -> None:
    (defn,) = load_agent_file(FIELDS / "every-field.md").definitions
    assert defn.tools == ["read_file", "grep", "glob", "bash", "write_file"]
    assert defn.delegation == ["Task(reviewer)"]
    assert (defn.model, defn.permission_mode, defn.max_turns, defn.skills) == ("sonnet", "acceptEdits", 30, ["release-notes"])
    assert (defn.memory, defn.background, defn.effort, defn.color) == ("project", True, "high", "cyan")
    assert defn.mcp_servers == ["github"]
    assert defn.hooks["PreToolUse"][0]["matcher"] == "Bash"
    assert (defn.isolation, defn.initial_prompt) == ("worktree", "Check the release branch.")
    assert defn.unsupported() == ["hooks", "isolation", "initialPrompt"]
    assert defn.extra == {}


def test_misspelt_fields_get_a_did_you_mean_warning(caplog: pytest.LogCaptureFixture) -> None:
    (defn,) = (result := load_agent_file(FIELDS / "misspelt.md", label="misspelt.md")).definitions
    (note,) = result.warnings
    assert "unknown key 'disalowedTools' kept in extra (did you mean disallowedTools?)" in note
    assert "unknown key 'maxturns' kept in extra (did you mean maxTurns?)" in note
    assert "unknown key 'colour' kept in extra (did you mean color?)" in note
    assert "unknown keys kept in extra: category" in note
    # a spelling Claude Code would not read is read here, with a warning that it would not
    assert "permission-mode read as permissionMode (Claude Code reads only permissionMode" in note
    assert defn.permission_mode == "plan" and defn.max_turns is None and defn.disallowed_tools == []


def test_a_misspelt_field_is_a_warning_in_the_log_not_just_a_note(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from harness_nb.subagents import AgentRegistry

    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "misspelt.md").write_text((FIELDS / "misspelt.md").read_text())
    with caplog.at_level(logging.INFO, logger="harness_nb.subagents"):
        AgentRegistry(tmp_path, include_user=False)
    assert [r.levelno for r in caplog.records if "did you mean" in r.getMessage()] == [logging.WARNING]


def test_values_a_field_cannot_take_are_dropped_with_a_note() -> None:
    (defn,) = (result := load_agent_file(FIELDS / "odd-values.md", label="odd.md")).definitions
    (note,) = result.warnings
    assert "permissionMode 'plann' is not one of default, acceptEdits, plan" in note and "(did you mean plan?)" in note
    assert "memory 'team' is not one of user, project, local; ignored" in note
    assert "effort 'extreme' is not one of low, medium, high, max; ignored" in note
    assert (defn.permission_mode, defn.memory, defn.effort) == (None, None, None)


def test_task_and_agent_entries_are_dropped_with_a_note() -> None:
    (defn,) = (result := load_agent_file(FIELDS / "only-delegation.md", label="d.md")).definitions
    assert defn.tools == [] and defn.delegation == ["Task", "Agent(reviewer)"]
    assert "tools: Task, Agent(reviewer) dropped: subagents never delegate here" in result.warnings[0]
    assert "no other tool is listed, so this agent gets no tools" in result.warnings[0]


def test_permission_mode_values_are_matched_in_any_case() -> None:
    text = "---\nname: x\ndescription: y\npermissionMode: AcceptEdits\nmemory: Local\neffort: HIGH\n---\n"
    (defn,) = parse_agent_text(text, source="x.md").definitions
    assert (defn.permission_mode, defn.memory, defn.effort) == ("acceptEdits", "local", "high")


# ---------------------------------------------------------------------- a real harness


def tool_call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "id": call_id}


def delegation(agent: str, child_steps: list[dict[str, Any]], **task: Any) -> list[dict[str, Any]]:
    """The main model delegates to ``agent``; the child takes ``child_steps``; the main model
    then answers "done"."""
    call = tool_call("task", "call_task", subagent_type=agent, prompt="do it", **task)
    return [{"text": "", "tool_calls": [call]}, *child_steps, {"text": "done"}]


def child_does(*calls: dict[str, Any]) -> list[dict[str, Any]]:
    """The child makes ``calls`` one after the other (one per turn), then finishes."""
    return [*({"text": "", "tool_calls": [call]} for call in calls), {"text": "child finished"}]


def agent_file(workdir: Path, name: str, front: str, body: str = "Do the work.") -> None:
    folder = workdir / ".claude" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(f"---\nname: {name}\ndescription: The {name} agent.\n{front}---\n{body}\n")


async def run_with(tmp_path: Path, steps: list[dict[str, Any]], **harness: Any) -> tuple[Harness, FakeLLMServer]:
    """A harness on the fake server runs "go" (background work it started is awaited)."""
    server = FakeLLMServer(steps)
    await server.start()
    h = Harness(
        "openai-compatible/test-model",
        workdir=tmp_path,
        base_url=server.url + "/v1",
        include_user_agents=False,
        sandbox="off",
        **harness,
    )
    OPEN.append(h)
    await h.run("go")
    for entry in h.tracker.list():
        await h.tracker.wait(entry.id, None)
    await server.aclose()
    return h, server


def child_results(server: FakeLLMServer) -> list[str]:
    """The outcomes of the child's calls, as its last request carried them (the request
    after it is the main agent's last)."""
    body = server.requests[-2].body
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def offered(server: FakeLLMServer, index: int) -> list[str]:
    return [t["function"]["name"] for t in server.requests[index].body.get("tools", [])]


async def test_plan_mode_offers_read_only_tools_and_denies_every_change(tmp_path: Path) -> None:
    agent_file(tmp_path, "planner", "permissionMode: plan\n")
    steps = delegation(
        "planner",
        child_does(
            tool_call("write_file", "w1", path="plan.txt", content="x"),
            tool_call("bash", "b1", command="touch made.txt"),
            tool_call("bash", "b2", command="ls"),
        ),
    )
    h, server = await run_with(tmp_path, steps, approval_policy="never")
    read_only = {t.name for t in h.tools if t.read_only and not t.coordination}
    assert set(offered(server, 1)) == {n for n in offered(server, 0) if n in read_only} | {"bash"}
    written, touched, listed = child_results(server)
    assert "unknown tool 'write_file'" in written
    assert "not a command known to be read-only; this agent may only read (permissionMode: plan)" in touched
    assert "error" not in listed.lower()
    assert not (tmp_path / "plan.txt").exists() and not (tmp_path / "made.txt").exists()


async def test_plan_mode_with_memory_writes_its_memory_and_nothing_else(tmp_path: Path) -> None:
    agent_file(tmp_path, "planner", "permissionMode: plan\nmemory: project\n")
    calls = child_does(
        tool_call("write_file", "w1", path=".claude/agent-memory/planner/MEMORY.md", content="- noted\n"),
        tool_call("write_file", "w2", path="plan.txt", content="x"),
    )
    _, server = await run_with(tmp_path, delegation("planner", calls), approval_policy="never")
    kept, refused = child_results(server)
    assert (tmp_path / ".claude/agent-memory/planner/MEMORY.md").read_text() == "- noted\n"
    assert "write_file changes files or state; this agent may only read (permissionMode: plan)" in refused
    assert not (tmp_path / "plan.txt").exists()


class Approvals:
    """An approval channel that approves every call it is asked about, and notes them."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, call: Any, reason: str, risk: str) -> Any:
        from harness_nb.engine import Approved

        self.asked.append(call.name)
        return Approved()


async def test_accept_edits_runs_file_edits_that_the_policy_would_ask_for(tmp_path: Path) -> None:
    agent_file(tmp_path, "editor", "permissionMode: acceptEdits\n")
    agent_file(tmp_path, "asker", "")
    approvals = Approvals()
    steps = delegation("editor", child_does(tool_call("write_file", "w1", path="notes.txt", content="kept")))
    await run_with(tmp_path, steps, approval_policy="always", approval=approvals)
    assert (tmp_path / "notes.txt").read_text() == "kept"
    assert approvals.asked == ["task"]  # "always" asks before delegating; the edit did not ask
    # under the same policy, an agent without the mode asks
    approvals = Approvals()
    steps = delegation("asker", child_does(tool_call("write_file", "w1", path="other.txt", content="yes")))
    await run_with(tmp_path, steps, approval_policy="always", approval=approvals)
    assert approvals.asked == ["task", "write_file"]


async def test_accept_edits_still_asks_before_agent_files_and_never_beats_a_deny_rule(tmp_path: Path) -> None:
    agent_file(tmp_path, "editor", "permissionMode: acceptEdits\n")
    calls = child_does(
        tool_call("write_file", "w1", path=".claude/agents/evil.md", content="---\nname: evil\n---\n"),
        tool_call("write_file", "w2", path="secret/plan.txt", content="x"),
    )
    _, server = await run_with(tmp_path, delegation("editor", calls), deny=["Write(secret/**)"])
    planted, denied = child_results(server)
    assert "no approval channel" in planted and not (tmp_path / ".claude" / "agents" / "evil.md").exists()
    assert "denied by the rule Write(secret/**)" in denied and not (tmp_path / "secret").exists()


@pytest.mark.parametrize("enabled", [True, False])
async def test_bypass_permissions_only_when_the_person_enabled_it(
    tmp_path: Path, enabled: bool, caplog: pytest.LogCaptureFixture
) -> None:
    agent_file(tmp_path, "bypasser", "permissionMode: bypassPermissions\n")
    calls = child_does(tool_call("bash", "b1", command="mkdir made"), tool_call("bash", "b2", command="mkdir agents/x"))
    (tmp_path / "agents").mkdir()
    with caplog.at_level(logging.WARNING, logger="harness_nb.subagents"):
        _, server = await run_with(tmp_path, delegation("bypasser", calls), allow_bypass_permissions=enabled)
    made, planted = child_results(server)
    assert (tmp_path / "made").is_dir() is enabled
    # agent and settings folders ask (and are denied with no channel) even so
    assert not (tmp_path / "agents" / "x").exists() and "no approval channel" in planted
    warned = [r.getMessage() for r in caplog.records if "bypassPermissions is not enabled" in r.getMessage()]
    assert bool(warned) is not enabled
    if not enabled:
        assert "no approval channel" in made


async def test_bypass_permissions_can_be_switched_on_later_with_configure(tmp_path: Path) -> None:
    agent_file(tmp_path, "bypasser", "permissionMode: bypassPermissions\n")
    h = Harness("openai-compatible/m", workdir=tmp_path, base_url="http://127.0.0.1:9/v1", include_user_agents=False)
    OPEN.append(h)
    row = agent_row(h.registry.get("bypasser"), h)
    assert ("mode", "bypassPermissions → default: permissionMode bypassPermissions is not enabled") == (
        row.notes[0][0],
        row.notes[0][1][: len("bypassPermissions → default: permissionMode bypassPermissions is not enabled")],
    )
    h.configure(allow_bypass_permissions=True)
    assert agent_row(h.registry.get("bypasser"), h).notes[0] == ("mode", "bypassPermissions")


async def test_dont_ask_denies_whatever_would_ask(tmp_path: Path) -> None:
    agent_file(tmp_path, "quiet", "permissionMode: dontAsk\n")
    calls = child_does(tool_call("bash", "b1", command="touch made.txt"), tool_call("write_file", "w1", path="ok.txt", content="x"))

    async def approve(call: Any, reason: str, risk: str) -> Any:
        from harness_nb.engine import Approved

        return Approved()

    _, server = await run_with(tmp_path, delegation("quiet", calls), approval=approve)
    asked, wrote = child_results(server)
    assert "this agent never asks (permissionMode: dontAsk)" in asked and not (tmp_path / "made.txt").exists()
    assert (tmp_path / "ok.txt").read_text() == "x"  # what runs without asking still runs


async def test_background_true_is_the_default_run_mode(tmp_path: Path) -> None:
    agent_file(tmp_path, "slow", "background: true\n")
    # the child and the main agent ask at the same time: each takes the step meant for it
    steps = [
        {"match": "go", "text": "", "tool_calls": [tool_call("task", "t1", subagent_type="slow", prompt="do it")]},
        {"match": "go", "text": "started it"},
        {"match": "do it", "text": "child finished"},
    ]
    h, server = await run_with(tmp_path, steps)
    (entry,) = h.tracker.list()
    assert entry.background
    assert [m for m in h.session.messages if isinstance(m, ToolResultMessage)][0].content == '<task id="bg-1" state="running"/>'
    # told otherwise, it runs in the foreground
    steps = delegation("slow", [{"text": "child finished"}], background=False)
    h, server = await run_with(tmp_path, steps)
    assert [e.background for e in h.tracker.list()] == [False]
    (task,) = [t["function"] for t in server.requests[0].body["tools"] if t["function"]["name"] == "task"]
    assert "- slow: The slow agent. (background by default)" in task["description"]


# ---------------------------------------------------------------------- memory


def memory_file(base: Path, name: str, scope_dir: str = "agent-memory") -> Path:
    return base / ".claude" / scope_dir / name / "MEMORY.md"


async def test_memory_preloads_the_first_200_lines(tmp_path: Path) -> None:
    agent_file(tmp_path, "keeper", "memory: project\n")
    memory = memory_file(tmp_path, "keeper")
    memory.parent.mkdir(parents=True)
    memory.write_text("".join(f"fact {n}\n" for n in range(1, 251)))
    _, server = await run_with(tmp_path, delegation("keeper", [{"text": "child finished"}]))
    system = server.requests[1].body["messages"][0]["content"]
    assert "## Your memory (project scope): .claude/agent-memory/keeper/MEMORY.md" in system
    assert f"fact {PRELOAD_LINES}\n" in system + "\n" and f"fact {PRELOAD_LINES + 1}\n" not in system + "\n"
    assert "50 more lines not shown" in system


async def test_the_agent_updates_its_memory_but_nothing_else_it_was_not_given(tmp_path: Path) -> None:
    """``tools: Read`` plus ``memory``: the write tools come with the memory, for the memory
    only; writing it does not ask although it lies under ``.claude/``, writing an agent file
    beside it still does (and is denied, with no channel)."""
    agent_file(tmp_path, "keeper", "tools: Read\nmemory: local\n")
    path = ".claude/agent-memory-local/keeper/MEMORY.md"
    calls = child_does(
        tool_call("write_file", "w1", path=path, content="- the tests live in tests/\n"),
        tool_call("edit_file", "e1", path=path, old_string="tests/", new_string="tests/ (pytest)"),
        tool_call("write_file", "w2", path="elsewhere.txt", content="x"),
        tool_call("write_file", "w3", path=".claude/agents/evil.md", content="x"),
    )
    _, server = await run_with(tmp_path, delegation("keeper", calls), approval_policy="allowlist")
    wrote, edited, elsewhere, planted = child_results(server)
    assert (tmp_path / path).read_text() == "- the tests live in tests/ (pytest)\n"
    assert "wrote" in wrote and "replaced 1 occurrence" in edited
    assert "may write only in its memory folder" in elsewhere and not (tmp_path / "elsewhere.txt").exists()
    assert not (tmp_path / ".claude" / "agents" / "evil.md").exists()
    assert {"read_file", "write_file", "edit_file"} <= set(offered(server, 1))


async def test_user_memory_lives_in_the_home_folder_and_is_writable_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, workdir = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    monkeypatch.setenv("HOME", str(home))
    agent_file(workdir, "keeper", "memory: user\n")
    target = memory_file(home, "keeper")
    calls = child_does(tool_call("write_file", "w1", path=str(target), content="- remembered\n"))
    _, server = await run_with(workdir, delegation("keeper", calls))
    assert target.read_text() == "- remembered\n"
    assert str(target) in server.requests[1].body["messages"][0]["content"]
    # another file outside the workdir stays out of reach
    calls = child_does(tool_call("write_file", "w1", path=str(home / "other.txt"), content="x"))
    _, server = await run_with(workdir, delegation("keeper", calls))
    assert "outside the working directory" in child_results(server)[0]


async def test_a_memory_folder_that_is_a_link_elsewhere_is_not_writable(tmp_path: Path) -> None:
    agent_file(tmp_path, "keeper", "memory: project\n")
    (tmp_path / ".claude" / "agent-memory").mkdir(parents=True)
    (tmp_path / ".claude" / "agent-memory" / "keeper").symlink_to(tmp_path / ".claude" / "agents")
    calls = child_does(tool_call("write_file", "w1", path=".claude/agent-memory/keeper/evil.md", content="x"))
    _, server = await run_with(tmp_path, delegation("keeper", calls))
    assert not (tmp_path / ".claude" / "agents" / "evil.md").exists()
    assert "no approval channel" in child_results(server)[0]
    assert "cannot be written here" in server.requests[1].body["messages"][0]["content"]


# ---------------------------------------------------------------------- %agents


async def kernel_stats(ctx: ToolContext) -> str:
    """Statistics of the kernel."""
    return "ok"


def test_agents_listing_shows_effective_tools_modes_and_what_is_ignored(tmp_path: Path) -> None:
    for path in FIELDS.glob("*.md"):
        folder = tmp_path / ".claude" / "agents"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / path.name).write_text(path.read_text())
    stats = FunctionTool(kernel_stats, read_only=True)
    h = Harness(
        "openai/gpt-5-mini",
        workdir=tmp_path,
        tools=["read_file", "grep", "bash", stats],
        include_user_agents=False,
        sandbox="off",
        api_key="sk-test",
    )
    OPEN.append(h)
    h.registry.register(SubAgentDefinition(name="globber", description="Globs.", tools=["kernel_*", "read_file"]))
    listing = repr(AgentTable(h))
    block = listing.split("release-checker  [")[1].split("\n\n")[0]
    # listed Read, Grep, Glob, Bash, Write: the main agent has no glob and no write_file here
    assert "    tools: read_file, grep, bash\n" in block
    assert "    model: sonnet → openai/gpt-5-mini\n" in block
    assert "    mode: acceptEdits\n" in block
    assert "    runs: in the background unless told otherwise\n" in block
    assert "    memory: project, .claude/agent-memory/release-checker/MEMORY.md\n" in block
    assert "    effort: high (reasoning_effort=high)\n" in block
    assert "    color: cyan\n" in block
    assert "    not supported here: hooks, isolation, initialPrompt\n" in block
    assert "    ignored: Task(reviewer) in tools (subagents never delegate)" in block
    assert "    budget: $0.5000 a run" in block
    assert "globber  [builtin]\n    tools: read_file, kernel_stats\n" in listing  # in the main agent's order
    assert "general-purpose  [builtin]\n    tools: (all of the main agent's) read_file, grep, bash, kernel_stats\n" in listing
    assert "plan-reviewer  [.claude/agents/plan-reviewer.md]\n    tools: (all of the main agent's) read_file, grep, bash, kernel_stats\n" in listing
    assert "misspelt  [" in listing and "    ignored: unknown keys category, colour, disalowedTools, maxturns" in listing
    html = AgentTable(h)._repr_html_()
    assert ">notes</th>" in html and "--hnb-agent:#6a1b9a;color:#6a1b9a'>@plan-reviewer</b>" in html  # purple
    assert html.startswith("<div class='hnb'><style>"), "in the style sheet that lightens it in a dark theme"


def test_effort_is_noted_as_not_sent_for_a_model_without_it(tmp_path: Path) -> None:
    h = Harness("openai/gpt-4o", workdir=tmp_path, include_user_agents=False, sandbox="off", api_key="sk-test")
    OPEN.append(h)
    row = agent_row(SubAgentDefinition(name="x", description="d", effort="low"), h)
    assert ("effort", "low (not sent: openai/gpt-4o has no reasoning-effort parameter)") in row.notes


def test_a_colour_that_is_not_a_colour_never_reaches_the_html(tmp_path: Path) -> None:
    h = Harness("openai/gpt-4o", workdir=tmp_path, include_user_agents=False, sandbox="off", api_key="sk-test")
    OPEN.append(h)
    h.registry.register(SubAgentDefinition(name="x", description="d", color='red" onmouseover="alert(1)'))
    html = AgentTable(h)._repr_html_()
    assert 'onmouseover="' not in html and "<b>@x</b>" in html


def test_resolve_tools_matches_glob_entries_and_plan_keeps_read_only_tools(tmp_path: Path) -> None:
    from harness_nb.tools.builtin import builtin_tools

    tools = builtin_tools()
    plan = SubAgentDefinition(name="p", description="d", permission_mode="plan")
    assert set(resolve_tools(plan, tools)) == {t.name for t in tools if t.read_only} | {"bash"}
    writer = SubAgentDefinition(name="w", description="d", tools=["*_file"], disallowed_tools=["edit_*"])
    assert resolve_tools(writer, tools) == ["read_file", "write_file"]
    assert json.dumps(resolve_tools(SubAgentDefinition(name="n", description="d", tools=[]), tools)) == "[]"


@pytest.mark.kernel
async def test_agents_magic_in_a_real_kernel_shows_effective_tools_and_the_bypass_setting(tmp_path: Path) -> None:
    from notebook_support import notebook

    agent_file(tmp_path, "reviewer", "tools: Read, Grep, WebFetch, Task\npermissionMode: bypassPermissions\nhooks: {Stop: []}\ncolor: green\n")
    async with notebook(tmp_path, [{"text": "hello"}]) as k:
        await k.run("%config HarnessNB.tools = ['read_file', 'bash']")
        listing = k.text(await k.run("%agents"))
        block = listing.split("reviewer  [.claude/agents/reviewer.md]\n")[1]
        assert block.startswith("    tools: read_file\n    model: inherit (scripted/script.yaml)\n")  # no grep offered
        assert "    mode: bypassPermissions → default: permissionMode bypassPermissions is not enabled" in block
        assert "    color: green\n" in block
        assert "    ignored: Task in tools (subagents never delegate)" in block
        assert "general-purpose  [builtin]\n    tools: (all of the main agent's) read_file, bash\n" in listing
        assert any(w.startswith("warning: .claude/agents/reviewer.md: ") and "WebFetch" in w for w in listing.splitlines())
        await k.run("%config HarnessNB.allow_bypass_permissions = True")
        assert "    mode: bypassPermissions\n" in k.text(await k.run("%agents"))


# ---------------------------------------------------------------------- effort on the wire


async def effort_run(
    tmp_path: Path, model: str, effort: str, steps: list[dict[str, Any]] | None = None, *, streaming: bool = True
) -> FakeLLMServer:
    agent_file(tmp_path, "thinker", f"effort: {effort}\n")
    api, _, _ = model.partition("/")
    async with FakeLLMServer(steps or delegation("thinker", [{"text": "child finished"}])) as server:
        base = server.url + ("/v1" if api != "anthropic" else "")
        h = Harness(model, workdir=tmp_path, base_url=base, api_key="sk-test", include_user_agents=False, sandbox="off")
        OPEN.append(h)
        h.provider.streaming = streaming
        await h.run("go")
    return server


@pytest.mark.parametrize(("model", "sent"), [("openai/gpt-5-mini", "high"), ("openai/o3", "high"), ("openai/gpt-4o", None)])
async def test_effort_is_openai_reasoning_effort_on_reasoning_models_only(tmp_path: Path, model: str, sent: str | None) -> None:
    server = await effort_run(tmp_path, model, "high")
    main, child = server.requests[0].body, server.requests[1].body
    assert "reasoning_effort" not in main  # the main agent has no effort of its own
    assert child.get("reasoning_effort") == sent


@pytest.mark.parametrize(
    ("model", "budget"), [("anthropic/claude-sonnet-4-5", 6144), ("anthropic/claude-opus-4-1", 6144), ("anthropic/claude-3-5-haiku", None)]
)
async def test_effort_is_anthropic_extended_thinking_on_models_that_think(tmp_path: Path, model: str, budget: int | None) -> None:
    server = await effort_run(tmp_path, model, "medium")
    main, child = server.requests[0].body, server.requests[1].body
    assert "thinking" not in main and main["max_tokens"] == 8192
    if budget is None:
        assert "thinking" not in child and child["max_tokens"] == 8192
    else:
        assert child["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert child["max_tokens"] == 8192 + budget and "temperature" not in child


THOUGHT = {"type": "thinking", "thinking": "Read it first.", "signature": "sig-123"}
HIDDEN = {"type": "redacted_thinking", "data": "opaque"}


def anthropic_answer(*content: dict[str, Any], stop: str) -> dict[str, Any]:
    body = {"id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": list(content),
            "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": 5}}
    return {"raw": json.dumps(body), "content_type": "application/json"}


def anthropic_stream(*content: dict[str, Any], stop: str) -> dict[str, Any]:
    events = [{"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 10}}}]
    for n, block in enumerate(content):
        if block["type"] == "thinking":
            events += [
                {"type": "content_block_start", "index": n, "content_block": {"type": "thinking", "thinking": ""}},
                {"type": "content_block_delta", "index": n, "delta": {"type": "thinking_delta", "thinking": block["thinking"]}},
                {"type": "content_block_delta", "index": n, "delta": {"type": "signature_delta", "signature": block["signature"]}},
            ]
        elif block["type"] == "tool_use":
            events += [
                {"type": "content_block_start", "index": n, "content_block": {**block, "input": {}}},
                {"type": "content_block_delta", "index": n, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
            ]
        else:
            events.append({"type": "content_block_start", "index": n, "content_block": block})
        events.append({"type": "content_block_stop", "index": n})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}}, {"type": "message_stop"}]
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return {"raw": raw, "content_type": "text/event-stream"}


@pytest.mark.parametrize("streaming", [False, True])
async def test_thinking_blocks_go_back_unchanged_with_their_turn(tmp_path: Path, streaming: bool) -> None:
    """With thinking on, the API wants a turn's thinking blocks back (signature and all)
    while its tool calls are answered; they are kept on the message, never shown."""
    (tmp_path / "a.txt").write_text("alpha\n")
    answer = anthropic_stream if streaming else anthropic_answer
    use = {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt"}}
    child = [answer(THOUGHT, HIDDEN, use, stop="tool_use"), answer({"type": "text", "text": "alpha"}, stop="end_turn")]
    steps = delegation("thinker", child)
    server = await effort_run(tmp_path, "anthropic/claude-sonnet-4-5", "low", steps, streaming=streaming)
    assistant = server.requests[2].body["messages"][1]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["thinking", "redacted_thinking", "tool_use"]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Read it first.", "signature": "sig-123"}
    assert assistant["content"][1] == HIDDEN
    assert "Read it first." not in json.dumps(server.requests[3].body)  # the main agent never sees it
