"""What the main agent is told in a notebook, in a real ipykernel: the notebook's own system
prompt, with the kernel's libraries and variables last, read again as each run starts and
the same for every call of one run (the provider's prompt cache keeps it)."""

from __future__ import annotations

from typing import Any

import pytest
from notebook_support import HARNESS, kernel_json, notebook

from harness_nb.notebook.prompt import NOTEBOOK_PROMPT, STATE_MAX_CHARS

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
