"""The agent sees the notebook: ``notebook_history`` (what ran, what it showed, what failed),
the last failed cell going with ``%%agent --fix``, ``%fix`` and a prompt about "the error",
and ``propose_cell`` handing code back as new cells — in a real ipykernel."""

from __future__ import annotations

from typing import Any

import pytest

from harness_nb.notebook.kernel.history import FIX_PROMPT, HISTORY_CHARS, TRACEBACK_CHARS, refers_to_error
from harness_nb.testing import FakeLLMServer
from harness_nb.testing.kernel_driver import Cell, KernelDriver
from notebook_support import (
    CONTROLLER,
    HARNESS,
    error_name,
    fresh_harness,
    kernel_json,
    last_user_text,
    model_requests,
    notebook,
    result_text,
    tool_results,
    wait_for_widget_text,
)

pytestmark = pytest.mark.kernel
# the tests taking the shared kernel run on its loop, the module's (the others are not async)
on_the_kernels_loop = pytest.mark.asyncio(loop_scope="module")


TOKEN = "wh-Zq81mXv0Lp3RtY7sKd"  # a credential the kernel's environment holds
CONTEXT = "--- notebook context (added by harness_nb): the last cell that failed"


def _history(call_id: str, last: int = 10) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "notebook_history", "arguments": {"last": last}}]}


def _assert_one_line_usage_error(k: KernelDriver, cell: Cell, fragment: str) -> None:
    assert error_name(cell) == "UsageError", k.error(cell)
    text = k.text(cell).strip()
    assert fragment in text and "\n" not in text and "Traceback" not in text, text


@on_the_kernels_loop
async def test_history_shows_what_ran_and_the_error_goes_with_fix(kernel, tmp_path):
    """``notebook_history`` shows the cells in order with their source, ``Out[n]`` and, for
    the cell that raised, its traceback from the cell's own frame (no IPython frames, no
    colour codes). ``--fix`` or ``%fix`` with no failed cell yet is one line; after the
    failure, ``%agent --fix``, ``%%agent --fix`` with instructions and a prompt saying "the
    error" carry that cell and its traceback; a prompt that does not, does not."""
    script = {
        "agents": {
            "main": [
                _history("history"),
                {"text": "f divides by zero."},
                {"text": "fixed (1)"},
                {"text": "fixed (2)"},
                {"text": "explained"},
                {"text": "hello"},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    for command in ("%agent --fix", "%fix"):
        _assert_one_line_usage_error(k, await k.run(command, check=False), "no cell has failed")
    await k.run("answer = 41")
    assert result_text(await k.run("answer + 1")) == "42"
    await k.run("def f(d):\n    return 1 / d")
    failed = await k.run("total = 10\nf(0)", check=False)
    assert error_name(failed) == "ZeroDivisionError"
    await k.run("%%agent\nwhat happened?")

    (history,) = tool_results((await model_requests(k, "main"))[1])
    assert history.index("answer = 41") < history.index("answer + 1") < history.index("total = 10")
    assert "Out[" in history and "]:\n42" in history
    assert "raised ZeroDivisionError:\ntotal = 10\nf(0)" in history
    assert "Cell In[" in history and "return 1 / d" in history and "ZeroDivisionError: division by zero" in history
    assert "interactiveshell.py" not in history and "\x1b[" not in history
    assert "(a prompt to an agent; its answer is in the conversation):\n%%agent\nwhat happened?" in history

    await k.run("%agent --fix")
    await k.run("%%agent --fix\nkeep f's name")
    await k.run("%%agent\nWhy does this error happen?")
    await k.run("%%agent\nsay hello")
    fix, fix_line, about, plain = [last_user_text(r) for r in (await model_requests(k, "main"))[2:]]
    for prompt in (fix, fix_line, about):
        assert CONTEXT in prompt and prompt.endswith("--- end of notebook context ---"), prompt
        assert "total = 10\nf(0)" in prompt and "ZeroDivisionError: division by zero" in prompt
        assert "return 1 / d" in prompt
    assert fix.startswith(FIX_PROMPT) and fix_line.startswith(f"{FIX_PROMPT}\n\nkeep f's name\n\n")
    assert about.startswith("Why does this error happen?\n\n")
    assert plain.strip() == "say hello"

    await k.run("%unload_ext harness_nb")
    hooks = await kernel_json(k, "[repr(f) for f in get_ipython().events.callbacks['post_run_cell']]")
    assert not [h for h in hooks if "harness_nb" in h], hooks
    assert error_name(await k.run("%fix", check=False)) == "UsageError"


@on_the_kernels_loop
async def test_a_cell_run_without_history_as_nbval_runs_it_is_still_the_error_to_fix(kernel, tmp_path):
    """nbval runs every cell with ``store_history=False``: no ``In`` entry, no number of its
    own. Its error still goes with ``%fix``, marked as unnumbered (IPython's count then is
    the next stored cell's, so it must not be shown as this cell's)."""
    script = {"agents": {"main": [{"text": "fixed"}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    failed = await k.run("price = '$12.50'\nfloat(price)", check=False, store_history=False)
    assert error_name(failed) == "ValueError"
    await k.run("%fix", store_history=False)
    (prompt,) = [last_user_text(r) for r in await model_requests(k, "main")]
    assert prompt.startswith(FIX_PROMPT)
    assert f"{CONTEXT} (run without a history number) ---\nprice = '$12.50'\nfloat(price)\n" in prompt
    assert "could not convert string to float: '$12.50'" in prompt


@pytest.mark.parametrize(
    ("prompt", "refers"),
    [
        ("fix the error", True),
        ("Why does this exception happen?", True),
        ("explain that traceback", True),
        ("what caused my last failure", True),
        ("look at the errors column", True),  # a false positive costs a few hundred tokens
        ("count the error codes in df", True),
        ("summarise the data", False),
        ("an error bar plot of df", False),
        ("error handling in pandas", False),
    ],
)
def test_what_counts_as_a_prompt_about_the_error(prompt, refers):
    assert refers_to_error(prompt) is refers


@on_the_kernels_loop
async def test_huge_outputs_and_tracebacks_stay_bounded_and_secrets_are_scrubbed(kernel, tmp_path):
    """A 200,000-character value, a 100,000-character error message and a deep recursion
    reach the model in a bounded history whose tracebacks keep their end (the error line);
    a credential in an exception message is masked in what is stored and in what is sent,
    by the history and by ``%fix``."""
    script = {"agents": {"main": [_history("history", 50), {"text": "seen"}, {"text": "fixed"}]}}
    k = await fresh_harness(kernel, tmp_path, script, env={"WAREHOUSE_TOKEN": TOKEN})
    await k.run("'v' * 200_000")
    await k.run("raise ValueError('y' * 100_000 + ' the end')", check=False)
    await k.run("def down(n):\n    return down(n + 1)\ndown(0)", check=False)
    await k.run("import os\nraise RuntimeError('login refused for ' + os.environ['WAREHOUSE_TOKEN'])", check=False)
    await k.run("%%agent\nlook at my notebook")

    (history,) = tool_results((await model_requests(k, "main"))[1])
    assert len(history) <= HISTORY_CHARS + 2 * TRACEBACK_CHARS, len(history)
    assert "characters not shown" in history and "y the end" in history
    assert "RecursionError: maximum recursion depth exceeded" in history
    assert "RuntimeError: login refused for " in history and TOKEN not in history

    stored = await kernel_json(k, f"[e.traceback for e in {CONTROLLER}.history.errors]")
    assert len(stored) == 3 and all(len(t) <= TRACEBACK_CHARS + 100 for t in stored)
    assert TOKEN not in stored[-1] and "RuntimeError: login refused for " in stored[-1]

    await k.run("%fix read the token again")
    fix = last_user_text((await model_requests(k, "main"))[2])
    assert fix.startswith(f"{FIX_PROMPT}\n\nread the token again\n\n{CONTEXT}, In [")
    assert "RuntimeError: login refused for " in fix and TOKEN not in fix


def _propose(call_id: str, code: str, explanation: str) -> dict[str, Any]:
    return {"id": call_id, "name": "propose_cell", "arguments": {"code": code, "explanation": explanation}}


def _next_inputs(cell: Cell) -> list[dict[str, Any]]:
    assert cell.reply is not None
    return [p for p in cell.reply["content"].get("payload", ()) if p.get("source") == "set_next_input"]


@on_the_kernels_loop
async def test_proposed_cells_appear_below_one_after_another(kernel, tmp_path):
    """``propose_cell`` runs nothing and asks nothing. Its cells come as ``set_next_input``
    payloads, one per execute reply (all a frontend makes a cell of): the first in the
    agent cell's reply, each next one in the reply of the proposal above it, once that one
    ran without error. The model is told, in one sentence, which proposal it is, its
    length, that it did not run and where it will appear."""
    script = {
        "agents": {
            "main": [
                {
                    "tool_calls": [
                        _propose("load", "ratio = 1 / zero\nratio", "Divide by zero.\nIt is the step you asked for."),
                        _propose("plot", "doubled = ratio * 2", "Double it."),
                    ]
                },
                {"text": "Two cells are below."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("zero = 0")
    run = await k.run("%%agent\nwrite me the next steps")
    assert result_text(run) == "Two cells are below."
    assert await kernel_json(k, "'ratio' in globals() or 'doubled' in globals()") is False
    assert await wait_for_widget_text(k, "Agent proposal 1 (2 lines) was not run")

    (first,) = _next_inputs(run)
    assert first["replace"] is False
    assert first["text"] == "# Agent proposal 1: Divide by zero.\n# It is the step you asked for.\nratio = 1 / zero\nratio"
    results = tool_results((await model_requests(k, "main"))[1])
    assert results == [
        "Agent proposal 1 (2 lines) was not run: it appears below the cell running now when it ends (or below "
        "the next cell run, if none is running), for the person to review and run.",
        "Agent proposal 2 (1 line) was not run: it appears below Agent proposal 1 once the person runs that one, "
        "for the person to review and run.",
    ]

    # The person runs the proposal: it fails, so the next one waits (a failed reply's
    # payload is dropped by the frontend); other cells do not release it.
    failed = await k.run(first["text"], check=False)
    assert error_name(failed) == "ZeroDivisionError" and _next_inputs(failed) == []
    assert _next_inputs(await k.run("zero = 4")) == []
    again = await k.run(first["text"])
    assert result_text(again) == "0.25"
    (second,) = _next_inputs(again)
    assert second["text"] == "# Agent proposal 2: Double it.\ndoubled = ratio * 2"
    assert _next_inputs(await k.run(second["text"])) == []
    assert await kernel_json(k, "doubled") == 0.5
    assert await kernel_json(k, f"len({HARNESS}.provider.requests)") == 2


async def test_fix_sends_the_columns_and_dtypes_of_the_tables_the_failing_line_names(tmp_path):
    """``weather["precip"]`` fails with a KeyError: ``%fix`` sends the model, over HTTP,
    the columns and dtypes ``weather`` had when the line failed — the right name is one
    step away without a look — and only the tables that line names (``sales`` is not)."""
    with FakeLLMServer([{"text": "Use precipitation_mm."}, {"text": "Same column."}]).in_thread() as srv:
        async with notebook(tmp_path, env={"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": "sk-test"}) as k:
            await k.run("%config HarnessNB.model = 'openai-compatible/test-model'")
            await k.run(
                "import pandas as pd\n"
                "weather = pd.DataFrame({'date': pd.to_datetime(['2024-01-01', '2024-01-02']),"
                " 'temp_c': [1.5, 2.0], 'precipitation_mm': [0.0, 3.2], 'station': ['a', 'b']})\n"
                "sales = pd.DataFrame({'revenue': [1, 2]})"
            )
            wide = "wide = pd.DataFrame({f'c{i}': [i] for i in range(100)})"
            failed = await k.run(f"{wide}\ntotal = weather['precip'].sum() + wide['nope'].sum()", check=False)
            assert error_name(failed) == "KeyError"
            await k.run("%fix")
            await k.run("%%agent\nwhy does this error happen?")
    prompts = [r.body["messages"][-1]["content"] for r in srv.requests]
    for prompt in prompts:
        tables = prompt[prompt.index("--- the tables its failing line names, as they were ---") :]
        assert "weather: DataFrame 2×4\n  date: datetime64" in tables
        assert "temp_c: float64, precipitation_mm: float64, station: " in tables
        assert "wide: DataFrame 1×100\n  c0: int64" in tables and "c39: int64, … and 60 more" in tables
        assert "sales" not in tables and tables.endswith("--- end of notebook context ---")
