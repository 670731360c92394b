"""What the main agent is told in a notebook, in a real ipykernel: the notebook's own system
prompt, with the kernel's libraries and variables last, read again as each run starts and
the same for every call of one run (the provider's prompt cache keeps it)."""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

import pytest

from harness_nb.notebook.prompt import NOTEBOOK_PROMPT, STATE_MAX_CHARS
from harness_nb.subagents.agent_map import MAP_ROW_PROMPT
from harness_nb.testing import FakeLLMServer
from notebook_support import HARNESS, kernel_json, notebook

pytestmark = pytest.mark.kernel

KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


async def _system_prompts(k: Any) -> list[str]:
    prompts: list[str] = await kernel_json(k, f"[r.system for r in {HARNESS}.provider.requests if r.agent == 'main']")
    return prompts


async def test_the_notebook_prompt_ends_with_the_kernel_as_each_run_starts(tmp_path):
    """The prompt is the notebook's, then the working directory and the environment, then
    the kernel: pandas with the kernel's own version, each variable with its type and
    shape, a credential-named one by its type only (its value never). A variable made by
    ``run_python`` during a run leaves that run's later call unchanged; the next run lists it."""
    script = {
        "agents": {
            "main": [
                {"tool_calls": [{"name": "run_python", "arguments": {"code": "made_by_agent = [1, 2, 3]"}}]},
                {"text": "Made it."},
                {"text": "Seen."},
            ]
        }
    }
    async with notebook(tmp_path, script) as k:
        await k.run("%config HarnessNB.approval_policy = 'never'")
        await k.run(
            "import pandas as pd\n"
            "weather = pd.DataFrame({'day': range(365), 'temp_c': 1.5, 'rain_mm': 0.0, 'wind': 2})\n"
            f"api_key = {KEY!r}"
        )
        pandas_version = await kernel_json(k, "__import__('pandas').__version__")
        await k.run("%%agent\nmake a list")
        await k.run("%%agent\nwhat is there now?")
        first, same_run, next_run = await _system_prompts(k)

    assert first.startswith(NOTEBOOK_PROMPT)
    kernel = first.index("## The kernel")
    assert first.index("Working directory:") < first.index("Environment: Python") < kernel
    section = first[kernel:]
    assert f"pandas {pandas_version}" in section
    assert "weather (DataFrame 365×4)" in section and "api_key (str value masked)" in section
    assert KEY not in first and "made_by_agent" not in first
    assert same_run == first, "the prompt changed within a run: the provider's prompt cache is lost"
    assert "made_by_agent (list len 3)" in next_run
    assert next_run[: next_run.index("## The kernel")] == first[:kernel], "the stable part changed"


async def test_the_kernel_section_stays_bounded_however_many_variables_there_are(tmp_path):
    script = {"agents": {"main": [{"text": "Many."}]}}
    async with notebook(tmp_path, script) as k:
        await k.run("for _n in range(500):\n    globals()[f'variable_with_a_long_name_{_n:03d}'] = _n")
        await k.run("%%agent\nhow many?")
        (prompt,) = await _system_prompts(k)
    section = prompt[prompt.index("## The kernel") :]
    assert len(section) <= STATE_MAX_CHARS + 200, len(section)
    assert "Variables (500): variable_with_a_long_name_000 (int)" in section
    assert section.rstrip().endswith("more.") and "variable_with_a_long_name_499" not in section


async def test_a_kernel_that_imported_no_data_library_yet_names_the_installed_versions(tmp_path):
    """Before the first ``import pandas`` the model is still told which pandas it writes for:
    the installed version, read from the distribution's metadata, nothing imported."""
    script = {"agents": {"main": [{"text": "Ready."}]}}
    async with notebook(tmp_path, script) as k:
        imported_before = await kernel_json(k, "'pandas' in __import__('sys').modules")
        await k.run("%%agent\nload data/sales.csv")
        (prompt,) = await _system_prompts(k)
        imported_after = await kernel_json(k, "'pandas' in __import__('sys').modules")
    section = prompt[prompt.index("## The kernel") :]
    assert not imported_before and not imported_after, "naming the version must not import pandas"
    assert f"Imported: no data libraries yet; installed: pandas {metadata.version('pandas')}" in section, section
    assert f"numpy {metadata.version('numpy')}" in section


def _task(agent: str, prompt: str, **more: Any) -> dict[str, Any]:
    return {"name": "task", "arguments": {"subagent_type": agent, "prompt": prompt, **more}}


def _size(value: Any) -> int:
    """Bytes of ``value`` as the OpenAI provider encodes it (compact UTF-8 JSON)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


async def test_the_default_main_request_is_lean_and_offers_only_tools_that_can_be_used(tmp_path):
    """In a kernel with the default settings, the main agent's first request to a real HTTP
    server carries at most 6 KB of tool schemas and 9 KB in all. No tool is offered that
    cannot be used: no ``skill`` without a skill, no team tools with teams off, no
    ``task_output`` / ``task_stop`` / ``send_message`` before a background task; once one
    has been started they are offered, and ``skill`` once a skill is installed."""
    steps = [
        {"match": "hi there", "text": "Hello."},
        {
            "match": "in the background",
            "tool_calls": [
                _task("explore", "count the csv files", background=True)
            ],
        },
        {"match": "count the csv files", "text": "3 files."},
        {"match": "in the background", "text": "Started it."},
        {"match": "anything else", "text": "No."},
    ]
    with FakeLLMServer(steps).in_thread() as srv:
        async with notebook(tmp_path, env={"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": "sk-test"}) as k:
            await k.run("%config HarnessNB.model = 'openai-compatible/test-model'")
            await k.run("import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south'], 'revenue': [1, 2]})")
            await k.run("%%agent\nhi there")
            await k.run("%%agent\nstart a check in the background")
            await k.run(f"await {HARNESS}.tracker.wait('bg-1', 20)")
            skill = tmp_path / ".claude" / "skills" / "tidy-data"
            skill.mkdir(parents=True)
            (skill / "SKILL.md").write_text("---\nname: tidy-data\ndescription: Tidy a table.\n---\nMelt it.\n")
            await k.run("%%agent\nanything else?")
    bodies = [r.body for r in srv.requests]
    first = bodies[0]
    tools, whole = _size(first["tools"]), _size(first)
    print(f"\nfirst main request: {whole:,} bytes, of which tools {tools:,} ({len(first['tools'])} tools)")
    for tool in first["tools"]:
        print(f"  {tool['function']['name']}: {_size(tool):,}")
    assert tools <= 6_144, f"the tools are {tools:,} bytes"
    assert whole <= 9_216, f"the first request is {whole:,} bytes"
    assert not {"skill", "team_create", "task_output", "task_stop", "send_message"} & set(_tool_names(first))
    assert {"run_python", "propose_cell", "inspect_variable", "task"} <= set(_tool_names(first))
    last = next(b for b in reversed(bodies) if "anything else?" in json.dumps(b))
    assert {"task_output", "task_stop", "send_message", "skill"} <= set(_tool_names(last))
    assert "team_create" not in _tool_names(last)


async def test_with_the_notebook_extension_the_request_stays_lean(tmp_path):
    """In a cell run from a page with the notebook extension, the first request offers
    ``notebook_read``, ``notebook_edit``, ``notebook_insert`` and ``notebook_run`` in place
    of ``notebook_history`` and ``propose_cell``, within 6.5 KB of tool schemas (the default
    request above: 14 tools, 5,986 bytes of them; ``ask_person``, offered to every run
    someone can answer, takes 358 of them and pushed this request past 6 KB)."""
    from harness_nb.testing.fake_page import FakePage, code

    with FakeLLMServer([{"match": "hi there", "text": "Hello."}]).in_thread() as srv:
        async with notebook(tmp_path, env={"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": "sk-test"}) as k:
            await k.run("%config HarnessNB.model = 'openai-compatible/test-model'")
            await k.run("import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south'], 'revenue': [1, 2]})")
            page = FakePage(k, [code("sales.head()")])
            page.connect()
            await k.finished(page.execute("%%agent\nhi there"))
    first = srv.requests[0].body
    tools, whole = _size(first["tools"]), _size(first)
    print(f"\nwith the extension: {whole:,} bytes, of which tools {tools:,} ({len(first['tools'])} tools)")
    for tool in first["tools"]:
        print(f"  {tool['function']['name']}: {_size(tool):,}")
    names = set(_tool_names(first))
    assert {"notebook_read", "notebook_edit", "notebook_insert", "notebook_run"} <= names
    assert not {"notebook_history", "propose_cell"} & names
    assert tools <= 6_656, f"the tools are {tools:,} bytes"
    assert whole <= 9_728, f"the first request is {whole:,} bytes"


async def _requests(k: Any, agent: str) -> list[dict[str, Any]]:
    """The scripted model's requests for ``agent``: system prompt, tool names, last user text."""
    found: list[dict[str, Any]] = await kernel_json(
        k,
        f"[{{'system': r.system, 'tools': [t.name for t in r.tools], 'prompt': r.messages[0].content}} "
        f"for r in {HARNESS}.provider.requests if r.agent == {agent!r}]",
    )
    return found


async def test_subagents_nobody_watches_get_no_kernel_or_notebook_tools_and_a_prompt_for_their_role(tmp_path):
    """A background general-purpose subagent and the rows of a map hold neither
    ``run_python`` (it would block the person's kernel) nor ``propose_cell`` (a cell the
    main agent never sees); a foreground one holds both. The background one's prompt says
    how it runs; a map row's prompt asks for the answer alone, as the row template does,
    instead of the general-purpose "concise report"."""
    script = {
        "agents": {
            "main": [
                {
                    "tool_calls": [
                        _task("general-purpose", "check the data"),
                        _task("general-purpose", "audit the data", background=True),
                    ],
                },
                {"text": "Checked, and the audit runs."},
            ],
            "general-purpose": [
                {"match": "check the data", "text": "Fine."},
                {"match": "audit the data", "text": "Audited."},
                {"match": "Ticket: refund", "text": "billing"},
                {"match": "Ticket: late", "text": "shipping"},
            ],
        }
    }
    async with notebook(tmp_path, script) as k:
        await k.run("%%agent\ncheck now and audit in the background")
        await k.run(f"await {HARNESS}.tracker.wait('bg-1', 20)")
        await k.run("tickets = ['refund', 'late']")
        template = "Route to one team: billing or shipping. Answer with the team only. Ticket: {value}"
        await k.run(f'%agent map --over tickets "{template}"')
        requests = await _requests(k, "general-purpose")
    by_prompt = {r["prompt"].split(". Ticket: ")[-1]: r for r in requests}
    foreground, background = by_prompt["check the data"], by_prompt["audit the data"]
    assert {"run_python", "propose_cell", "read_file"} <= set(foreground["tools"])
    for unwatched in (background, by_prompt["refund"], by_prompt["late"]):
        assert "read_file" in unwatched["tools"]
        assert not {"run_python", "propose_cell"} & set(unwatched["tools"]), unwatched["tools"]
    assert "You run in the background" in background["system"] and "are denied" in background["system"]
    assert "You run in the background" not in foreground["system"]
    row = by_prompt["refund"]["system"]
    assert row.startswith(MAP_ROW_PROMPT) and "concise report" not in row
