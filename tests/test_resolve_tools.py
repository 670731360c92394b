"""resolve_tools: a subagent's tools only ever narrow down the delegation chain (DESIGN §4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_nb import Harness
from harness_nb.subagents.definition import SubAgentDefinition
from harness_nb.subagents.narrowing import resolve_tools as resolve
from harness_nb.tools import FunctionTool, Tool, ToolContext

POOL = ["read_file", "write_file", "bash", "edit_file", "task"]
# In these vectors the names below stand for tools flagged `coordination`, as the real ones
# are (test_the_harness_flags_every_coordination_tool checks that).
COORDINATION_TOOLS = frozenset({"task", "task_output", "task_stop", "send_message", "team_create", "ask_user"})


def agent(**fields: object) -> SubAgentDefinition:
    return SubAgentDefinition.model_validate({"name": "child", "description": "d", **fields})


async def _noop(ctx: ToolContext) -> str:
    """A stand-in tool."""
    return ""


def named_tools(names: list[str]) -> list[Tool]:
    return [FunctionTool(_noop, name=n, coordination=n in COORDINATION_TOOLS) for n in names]


def resolve_tools(defn: SubAgentDefinition, names: list[str]) -> list[str]:
    """resolve_tools over tools with these names (the vectors are written as names)."""
    return resolve(defn, named_tools(names))


def test_the_harness_flags_every_coordination_tool(tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = Harness(workdir=tmp_path, teams=True)
    flagged = {t.name for t in h.tools if t.coordination}
    assert flagged == {"task", "task_output", "task_stop", "send_message", "team_create"}
    assert resolve(agent(), h.tools) == [t.name for t in h.tools if not t.coordination]


def test_the_flag_decides_not_the_name() -> None:
    # A tool called "task" that is not a coordination tool is an ordinary tool, and a
    # coordination tool with any name is stripped: one source, the flag.
    plain_task = FunctionTool(_noop, name="task")
    sneaky = FunctionTool(_noop, name="helper", coordination=True)
    assert resolve(agent(), [plain_task, sneaky]) == ["task"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, {"bash", "edit_file", "read_file", "write_file"}),
        ({"tools": ["read_file", "nonexist"]}, {"read_file"}),
        ({"disallowed_tools": ["bash", "write_file"]}, {"edit_file", "read_file"}),
        ({"tools": ["read_file", "task"]}, {"read_file"}),
    ],
)
def test_design_vectors(fields: dict[str, object], expected: set[str]) -> None:
    assert set(resolve_tools(agent(**fields), POOL)) == expected


def test_keeps_the_parents_order_and_drops_duplicates() -> None:
    parent = ["grep", "read_file", "bash", "grep", "ls"]
    assert resolve_tools(agent(tools=["ls", "grep", "read_file"]), parent) == [
        "grep",
        "read_file",
        "ls",
    ]


def test_claude_code_names_resolve_against_ours() -> None:
    defn = agent(tools="Read, Bash(git:*), Task", disallowedTools="Write")
    assert resolve_tools(defn, [*POOL, "grep"]) == ["read_file", "bash"]


def test_empty_allowlist_gives_no_tools_and_none_inherits() -> None:
    assert resolve_tools(agent(tools=[]), POOL) == []
    assert resolve_tools(agent(tools=["WebFetch"]), POOL) == []
    assert resolve_tools(agent(tools=None), POOL) == POOL[:4]


def test_every_coordination_tool_is_stripped_even_when_allowed() -> None:
    parent = ["read_file", *sorted(COORDINATION_TOOLS)]
    defn = agent(tools=parent)
    assert resolve_tools(defn, parent) == ["read_file"]


NAMES = st.sampled_from(
    [*POOL, "glob", "grep", "ls", "list_variables", *sorted(COORDINATION_TOOLS), "junk", "Read"]
)
TOOL_LISTS = st.none() | st.lists(NAMES, max_size=8)
DEFINITIONS = st.builds(
    lambda tools, disallowed: agent(tools=tools, disallowed_tools=disallowed),
    TOOL_LISTS,
    st.lists(NAMES, max_size=5),
)


# No example database: these tests must not leave a .hypothesis folder in the repo.
@settings(database=None)
@given(parent=st.lists(NAMES, max_size=12), defn=DEFINITIONS)
def test_result_is_a_subset_of_the_parent_without_coordination(
    parent: list[str], defn: SubAgentDefinition
) -> None:
    result = resolve_tools(defn, parent)
    assert set(result) <= set(parent)
    assert not set(result) & COORDINATION_TOOLS
    assert not set(result) & set(defn.disallowed_tools)
    assert len(result) == len(set(result))
    # Order follows the parent: the result is a subsequence of the parent's list.
    positions = [parent.index(name) for name in result]
    assert positions == sorted(positions)


@settings(database=None)
@given(parent=st.lists(NAMES, max_size=12), first=DEFINITIONS, second=DEFINITIONS)
def test_a_grandchild_never_holds_more_than_its_parent(
    parent: list[str], first: SubAgentDefinition, second: SubAgentDefinition
) -> None:
    child = resolve_tools(first, parent)
    grandchild = resolve_tools(second, child)
    assert set(grandchild) <= set(child) <= set(parent)
    assert resolve_tools(first, child) == child  # resolving again is stable


def test_an_unwatched_subagent_gets_kernel_and_notebook_tools_only_when_its_file_names_them() -> None:
    """``run_python`` blocks the person's kernel and ``propose_cell`` writes into their
    notebook: a subagent nobody follows (background, map row, teammate) inherits neither;
    its agent file can still ask for one by name; a foreground one inherits both."""
    tools = [
        *named_tools(["read_file", "bash"]),
        FunctionTool(_noop, name="run_python", foreground_only=True),
        FunctionTool(_noop, name="propose_cell", foreground_only=True),
    ]
    assert resolve(agent(), tools, watched=False) == ["read_file", "bash"]
    assert resolve(agent(), tools) == ["read_file", "bash", "run_python", "propose_cell"]
    assert resolve(agent(tools=["read_file", "run_python"]), tools, watched=False) == ["read_file", "run_python"]
    assert resolve(agent(disallowedTools=["bash"]), tools, watched=False) == ["read_file"]


def test_the_notebook_tools_never_reach_an_unwatched_subagent_even_when_its_file_names_them() -> None:
    """The tools that act on the notebook's page (``watched_only``) reach a foreground
    subagent, and no background one, map row or teammate — not even one whose agent file
    names them (by name or by a pattern): the cell running then is not its own, and an
    edit's card would pass ``background_approvals`` by. The real tools carry the flag."""
    from harness_nb.notebook.bridge import NotebookBridge, notebook_tools
    from harness_nb.notebook.kernel.history import CellHistory

    bridge = NotebookBridge(None, page=lambda: None)
    page_tools = notebook_tools(bridge, None, history=CellHistory(None), approval_timeout=lambda: 1.0)
    names = [t.name for t in page_tools]
    assert names == ["notebook_read", "notebook_edit", "notebook_insert", "notebook_run"]
    tools = [*named_tools(["read_file"]), *page_tools]
    assert resolve(agent(tools=["read_file", *names]), tools) == ["read_file", *names]
    assert resolve(agent(), tools) == ["read_file", *names]
    for file in (agent(tools=["read_file", *names]), agent(tools=["read_file", "notebook_*"]), agent()):
        assert resolve(file, tools, watched=False) == ["read_file"]
