"""A setting that cannot be used fails the cell that set it, in a real ipykernel: the reply
is an error with one line naming the setting, the value and the fix; the old value stays,
and later runs use (and show) it. The same for ``%%agent --max-turns``.

The tests share one kernel (starting one per test is most of their time), each with a
fresh harness in it.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys

import pytest

from harness_nb.settings import SETTINGS
from harness_nb.testing.kernel_driver import Cell, KernelDriver
from notebook_support import HARNESS, error_name, fresh_harness, kernel_json, result_text, run_views, write_script

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]

OLD_MODEL = "scripted/old.yaml"


def assert_refused(k: KernelDriver, cell: Cell, *fragments: str) -> str:
    """The cell failed with a ``UsageError``: one line, no traceback, naming ``fragments``."""
    assert cell.status == "error" and error_name(cell) == "UsageError", k.error(cell)
    text = k.text(cell).strip()
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert "\n" not in text and "Traceback" not in text, text
    return text


async def setting(k: KernelDriver, name: str) -> str:
    """What ``%config HarnessNB.<name>`` shows (the value's repr)."""
    return result_text(await k.run(f"%config HarnessNB.{name}"))


async def test_a_model_that_cannot_work_fails_its_cell_and_the_old_one_keeps_running(kernel, tmp_path):
    """The bug: ``%config HarnessNB.model = "nope"`` reported ok while later runs used the
    old model under a header saying "nope"."""
    k = await fresh_harness(kernel, tmp_path)
    write_script(tmp_path, {"agents": {"main": [{"text": "answered by the old model"}] * 2}}, "old.yaml")
    await k.run(f"%config HarnessNB.model = {OLD_MODEL!r}")
    assert result_text(await k.run("%%agent\nhello")) == "answered by the old model"

    refused = await k.run('%config HarnessNB.model = "nope"', check=False)
    assert_refused(
        k, refused, "HarnessNB.model = 'nope'", "no provider prefix", "openai/gpt-4o-mini", f"stays {OLD_MODEL!r}"
    )

    assert await setting(k, "model") == repr(OLD_MODEL)
    assert result_text(await k.run("%%agent\nand again")) == "answered by the old model"
    assert OLD_MODEL in run_views(k)[-1].header


async def test_impossible_values_fail_their_cell_and_change_nothing(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path)
    cases = {
        "max_turns = 0": ["HarnessNB.max_turns = 0", "max_turns must be a whole number above 0", "stays 50"],
        "max_turns = -1": ["HarnessNB.max_turns = -1", "above 0"],
        "max_turns = 'many'": ["max_turns", "expected an int", "'many'", "stays 50"],
        "token_budget = -5": ["HarnessNB.token_budget = -5", "token_budget must be a whole number above 0", "stays 0"],
        "approval_timeout = 0": ["HarnessNB.approval_timeout = 0", "more than 0 seconds", "stays 300.0"],
        "offload_chars = 0": ["HarnessNB.offload_chars = 0", "offload_chars must be a whole number above 0"],
        "updates_per_second = 0": ["HarnessNB.updates_per_second = 0", "more than 0"],
        "context_window = -1": ["HarnessNB.context_window = -1", "context_window must be a whole number above 0", "stays 0"],
        "compact_threshold = 1.5": ["HarnessNB.compact_threshold = 1.5", "at most 1", "stays 0.8"],
        "compact_threshold = 0": ["HarnessNB.compact_threshold = 0", "above 0"],
        "tool_timeout = 0": ["HarnessNB.tool_timeout = 0", "tool_timeout must be a number above 0", "stays 60.0"],
        "max_parallel_tool_calls = 0": ["HarnessNB.max_parallel_tool_calls = 0", "above 0", "stays 8"],
        "max_background = 0": ["HarnessNB.max_background = 0", "max_background must be a whole number above 0"],
        "sandbox_limits = {'processes': 'many'}": ["HarnessNB.sandbox_limits", "processes", "stays {}"],
        "tools = ['raed_file']": ["HarnessNB.tools", "no tool named 'raed_file'", "did you mean 'read_file'?", "stays []"],
        "workdir = 'no-such-folder'": ["HarnessNB.workdir = 'no-such-folder'", "not a folder", "create it"],
        "approval_policy = 'sometimes'": ["approval_policy", "one of 'allowlist', 'always', 'never'", "'sometimes'"],
        "approval_policy = 'dangerous'": ["approval_policy 'dangerous' was renamed 'allowlist'", "stays 'allowlist'"],
        "allow = ['Bash(git status:*)', 'Bash(']": ["HarnessNB.allow", "'Bash(' is not a permission rule", "stays []"],
        "deny = ['run_python(x)']": ["HarnessNB.deny", "only Bash and the file tools", "stays []"],
        "max_turn = 5": ["no setting 'max_turn'", "did you mean HarnessNB.max_turns?"],
        "modle": ["no setting 'modle'", "did you mean HarnessNB.model?"],
        "model = ollama/llama3": ["name 'ollama' is not defined", "quote text"],
        "model = openai/gpt-4o-mini": ["invalid decimal literal", "quote text"],
    }
    before = {
        name: await setting(k, name) for name in ("max_turns", "token_budget", "workdir", "approval_policy", "allow")
    }
    for statement, fragments in cases.items():
        assert_refused(k, await k.run(f"%config HarnessNB.{statement}", check=False), *fragments)
    assert {name: await setting(k, name) for name in before} == before


async def test_good_values_and_other_config_lines_still_apply(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path)
    (tmp_path / "project").mkdir()
    await k.run("turns = 7\n%config HarnessNB.max_turns = turns")
    assert await setting(k, "max_turns") == "7"
    await k.run("%config HarnessNB.workdir = 'project'")
    assert await setting(k, "workdir") == "'project'"
    await k.run("%config HarnessNB.workdir = '.'")
    await k.run("%config HarnessNB.model = None")
    assert await setting(k, "model") == ""  # None has no Out[] value

    listing = "".join(k.text(await k.run("%config HarnessNB")).split())  # as wrapped, without the spaces
    for name, run_setting in SETTINGS.items():  # every setting, with its help
        assert f"HarnessNB.{name}=" in listing, name
        assert "".join(run_setting.help.split()) in listing, name
    await k.run("%config HistoryManager.db_log_output = True")
    assert result_text(await k.run("get_ipython().history_manager.db_log_output")) == "True"


async def test_provider_options_are_checked_when_set(kernel, tmp_path):
    """``HarnessNB.provider_options`` takes the fields of ``ProviderOptions``; a wrong key or
    value fails its cell, the ``.update(…)`` form included."""
    k = await fresh_harness(kernel, tmp_path)
    assert await setting(k, "provider_options") == "{}"
    cases = {
        "= {'temprature': 0.2}": ["unknown provider option 'temprature'", "did you mean temperature?", "stays {}"],
        "= {'temperature': 5}": ["provider option temperature=5", "stays {}"],
        "= 'fast'": ["provider_options", "expected a dict", "stays {}"],
        ".update({'max_tokens': 0})": ["provider option max_tokens=0", "stays {}"],
    }
    for statement, fragments in cases.items():
        assert_refused(k, await k.run(f"%config HarnessNB.provider_options {statement}", check=False), *fragments)
    await k.run("%config HarnessNB.provider_options = {'temperature': 0.2}")
    await k.run("%config HarnessNB.provider_options.update({'max_tokens': 256})")
    assert await setting(k, "provider_options") == "{'temperature': 0.2, 'max_tokens': 256}"


async def test_replay_pace_is_checked_when_set_and_reaches_the_replay(kernel, tmp_path):
    """``HarnessNB.replay_pace`` takes 'instant', 'recorded' or a speed factor; anything else
    fails its cell. The value set is the pace of the replay model the next run uses."""
    k = await fresh_harness(kernel, tmp_path)
    (tmp_path / "lesson.jsonl").write_text("")
    rule = "'instant', 'recorded' or a speed factor above 0"
    cases = {
        "'fast'": ["HarnessNB.replay_pace = 'fast'", rule, "stays None"],
        "0": ["HarnessNB.replay_pace = 0", rule, "stays None"],
        "-2": ["HarnessNB.replay_pace = -2", rule],
        "'2x'": ["HarnessNB.replay_pace = '2x'", rule],
        "[2]": ["replay_pace", "[2]", "stays None"],
    }
    for value, fragments in cases.items():
        assert_refused(k, await k.run(f"%config HarnessNB.replay_pace = {value}", check=False), *fragments)
    try:
        await k.run("%config HarnessNB.model = 'replay/lesson.jsonl'\n%config HarnessNB.replay_pace = 2")
        assert await setting(k, "replay_pace") == "2.0"
        assert await kernel_json(k, f"{HARNESS}.provider.pacer.factor") == 2.0
        await k.run("%config HarnessNB.replay_pace = 'recorded'")
        assert await kernel_json(k, f"{HARNESS}.provider.pacer.factor") == 1.0
        await k.run("%config HarnessNB.replay_pace = 'instant'")
        assert await kernel_json(k, f"{HARNESS}.provider.pacer is None") is True
    finally:  # the tests share one kernel
        await k.run("%config HarnessNB.replay_pace = None\n%config HarnessNB.model = None")


async def test_allow_rules_set_with_config_let_a_call_run_without_a_card(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path)
    (tmp_path / "made" / "by" / "rule").mkdir(parents=True)
    clean = {"name": "bash", "arguments": {"command": "rm -rf made"}}  # asks, sandboxed or not
    write_script(tmp_path, {"agents": {"main": [{"tool_calls": [clean]}, {"text": "cleaned"}]}}, "rule.yaml")
    await k.run("%config HarnessNB.model = 'scripted/rule.yaml'")
    await k.run("%config HarnessNB.allow = ['Bash(rm -rf made)']")
    assert result_text(await k.run("%%agent\nclean it")) == "cleaned"
    assert not (tmp_path / "made").exists(), "ran without a card"


async def test_budgets_and_prices_are_checked_when_set_and_then_used(kernel, tmp_path):
    """``budget_usd``, ``subagent_budget_usd`` and ``prices`` refuse what cannot work; a
    price set here prices the next run (its header shows the cost), and a budget stops the
    run before the call that would pass it."""
    k = await fresh_harness(kernel, tmp_path)
    cases = {
        "budget_usd = -1": ["HarnessNB.budget_usd = -1", "budget_usd must be a number above 0", "stays 0.0"],
        "subagent_budget_usd = -0.5": ["HarnessNB.subagent_budget_usd = -0.5", "stays 0.0"],
        "prices = {'m': {'input': 1}}": ["prices['m']: output: missing", "stays {}"],
        "prices = {'m': {'input': 1, 'output': 2, 'cahce_read': 0.1}}": ["cahce_read: unknown field", "stays {}"],
    }
    for statement, fragments in cases.items():
        assert_refused(k, await k.run(f"%config HarnessNB.{statement}", check=False), *fragments)

    spend = {"text": "Spent.", "tool_calls": [{"name": "ls", "arguments": {}}], "usage": {"input_tokens": 10_000, "output_tokens": 1_000}}
    write_script(tmp_path, {"agents": {"main": [spend, {"text": "done", "usage": {"input_tokens": 10_000, "output_tokens": 1_000}}] * 2}}, "priced.yaml")
    await k.run("%config HarnessNB.model = 'scripted/priced.yaml'")
    await k.run("%config HarnessNB.prices = {'scripted/priced.yaml': {'input': 1.0, 'output': 10.0}}")
    await k.run("%%agent\nspend a little")
    assert " s · $0.0400" in run_views(k)[-1].header  # two calls of $0.02 (then the context gauge)
    await k.run("%config HarnessNB.budget_usd = 0.03")
    stopped = result_text(await k.run("%%agent\nspend again"))
    assert re.search(r"next call may cost \$0\.020\d and this run has \$0\.0100 of its \$0\.0300 budget left", stopped)
    assert "stopped: budget_usd" in run_views(k)[-1].header


async def test_agent_max_turns_must_be_one_or_more(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path)
    write_script(tmp_path, {"agents": {"main": [{"text": "one turn was enough"}]}}, "once.yaml")
    await k.run("%config HarnessNB.model = 'scripted/once.yaml'")
    for value in ("0", "-1"):
        refused = await k.run(f"%%agent --max-turns {value}\nhello", check=False)
        assert_refused(k, refused, "--max-turns", f"got {value}", "max_turns must be a whole number above 0")
    assert_refused(k, await k.run("%agent --max-turns lots hello", check=False), "'lots' is not a whole number")
    assert result_text(await k.run("%%agent --max-turns 1\nhello")) == "one turn was enough"


async def test_a_bad_value_from_the_ipython_config_stops_loading(kernel, tmp_path):
    """A config file's value is checked when the extension loads: ``%load_ext`` fails with
    the same one line instead of a traceback, and nothing is half-registered."""
    k = await fresh_harness(kernel, tmp_path)
    await k.run("%unload_ext harness_nb")
    await k.run("get_ipython().config.HarnessNB.max_turns = 0")
    refused = await k.run("%load_ext harness_nb", check=False)
    assert_refused(k, refused, "harness_nb is not loaded", "HarnessNB.max_turns = 0", "must be a whole number above 0")
    assert error_name(await k.run("%%agent\nhello", check=False)) == "UsageError"  # no %%agent magic

    await k.run("del get_ipython().config.HarnessNB['max_turns']\n%load_ext harness_nb")
    assert await setting(k, "max_turns") == "50"


async def test_a_bad_value_from_the_environment_stops_loading(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "IPYTHONDIR": str(home / ".ipython"), "HARNESS_NB_APPROVAL_TIMEOUT": "-1"}
    async with KernelDriver(cwd=tmp_path, env=env) as k:
        refused = await k.run("%load_ext harness_nb", check=False)
        assert_refused(
            k, refused, "HarnessNB.approval_timeout = -1.0", "more than 0 seconds", "$HARNESS_NB_APPROVAL_TIMEOUT"
        )


async def test_a_number_the_environment_cannot_give_is_refused_not_replaced():
    """``HARNESS_NB_APPROVAL_TIMEOUT=soon`` used to mean a silent 300 s."""
    code = "from harness_nb.notebook.config import HarnessNB\nHarnessNB()"
    env = {**os.environ, "HARNESS_NB_APPROVAL_TIMEOUT": "soon"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env=env, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await process.communicate()
    assert process.returncode != 0
    assert "expected a float, not the str 'soon' (from $HARNESS_NB_APPROVAL_TIMEOUT)" in stderr.decode()


async def test_the_extension_keeps_its_state_on_its_magics_not_on_the_shell(kernel):
    """No monkey-patching: ``%load_ext`` adds no attribute to the shell; the state lives on
    the registered ``HarnessMagics`` (reached with ``harness_magics``), which ``%unload_ext``
    removes, so a second ``%load_ext`` starts afresh."""
    k = kernel
    find = "__import__('harness_nb.notebook').notebook.harness_magics(get_ipython())"
    await k.run("%unload_ext harness_nb")
    assert await kernel_json(k, f"{find} is None") is True
    await k.run("shell_attributes = set(vars(get_ipython()))")
    await k.run("%load_ext harness_nb")
    await k.run("1 + 1")  # a cell after loading: our pre/post_run_cell callbacks run
    added = await kernel_json(k, "sorted(set(vars(get_ipython())) - shell_attributes)")
    assert added == [], added
    registered = f"{find} is get_ipython().magics_manager.registry['HarnessMagics']"
    assert await kernel_json(k, registered) is True
    assert await kernel_json(k, f"{find}.controller.harness() is {HARNESS}") is True
