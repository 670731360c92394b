"""The whole harness against servers that behave as llama.cpp's and a LiteLLM proxy did in
issue 23, over loopback HTTP (``testing/fake_quirks.py``): the first question answers with
the defaults a new user has, what was learnt is said once for the kernel, a server that
reports no usage shows an estimate that budgets count, and an error a setting fixes is said
the way that works where the person is."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from harness_nb.cli import command_line_fix
from harness_nb.core import ConfigError, ServerAdapted, SettingFix
from harness_nb.harness import Harness
from harness_nb.notebook.config import config_line
from harness_nb.testing import FakeLLMServer
from harness_nb.textview import TextView

LISTING = {"name": "ls", "arguments": {"path": "."}, "id": "call_ls"}


def harness(model: str, srv: FakeLLMServer, tmp_path: Path, **settings: Any) -> Harness:
    root = "/v1" if model.startswith("openai") else ""
    return Harness(model, workdir=tmp_path, base_url=srv.url + root, api_key="sk-local-test", include_user_agents=False, **settings)


@pytest.mark.parametrize(
    ("model", "quirks"),
    [
        ("openai-compatible/smol", {"stream_tools": "empty_body"}),  # llama.cpp's own server
        ("openai-compatible/smol", {"stream_tools": "empty_answer"}),  # LiteLLM's OpenAI side in front of it
        ("anthropic/smol", {"stream_tools": "empty_answer", "system_blocks": False}),  # LiteLLM's Anthropic side
    ],
)
async def test_the_first_question_answers_with_the_defaults_and_what_was_learnt_is_said_once(
    tmp_path: Path, model: str, quirks: dict[str, Any]
) -> None:
    (tmp_path / "data.csv").write_text("a,b\n")
    steps = [{"text": "Looking.", "tool_calls": [LISTING]}, {"text": "One file: data.csv."}, {"text": "Still one file."}]
    out = io.StringIO()
    events: list[Any] = []
    view = TextView(out)

    def both(event: Any) -> None:
        events.append(event)
        view(event)

    async with FakeLLMServer(steps, **quirks) as srv, harness(model, srv, tmp_path) as h:
        first = await h.run("What is in this folder?", on_event=both)
        second = await h.run("And now?", on_event=both)
    assert (first.final_text, first.stop_reason) == ("One file: data.csv.", "end_turn")
    assert second.final_text == "Still one file."
    adapted = [e for e in events if isinstance(e, ServerAdapted)]
    learnt = 1 + (quirks.get("system_blocks") is False)
    assert len(adapted) == learnt  # once for the kernel, not once per run or call
    assert all(e.model == model for e in adapted)
    shown = out.getvalue()
    assert shown.count("⚠ smol at ") == learnt
    assert "Streaming is off for this server from now on" in shown
    assert srv.remaining == 0  # no answer was asked for twice but the empty ones


async def test_a_server_that_reports_no_usage_shows_an_estimate_that_budgets_count(tmp_path: Path) -> None:
    silent = [{"text": "Looking.", "tool_calls": [LISTING], "omit_usage": True}, {"text": "Done.", "omit_usage": True}]
    out = io.StringIO()
    async with FakeLLMServer(silent * 2) as srv, harness("openai/gpt-4o", srv, tmp_path) as h:
        result = await h.run("What is here?", on_event=TextView(out))
        usage = result.usage
        assert usage.unreported_calls == 2 and usage.total_tokens > 1_000  # 13 tool schemas were sent twice
        assert usage.tokens_label() == f"~{usage.total_tokens:,} tokens (estimated)"
        assert usage.cost_label().startswith("~$")  # priced, as an estimate
        assert f"── done · ~{usage.total_tokens:,} tokens (estimated) · 2 turns" in out.getvalue()
        # a budget that the first call's estimate fits, but not the second's on top of it
        first_call = usage.total_tokens // 2
        h.configure(token_budget=first_call + first_call // 2)
        budgeted = await h.run("What is here now?")
    assert budgeted.stop_reason == "token_budget"
    assert budgeted.turns == 1 and budgeted.usage.total_tokens > 0


def test_an_error_a_setting_fixes_names_it_the_way_that_works_where_the_person_is() -> None:
    fix = SettingFix("provider_options", {"streaming": False}, "turn streaming off")
    assert fix.keyword() == "pass provider_options={'streaming': False} to Harness or Harness.configure"
    assert config_line(fix) == "run %config HarnessNB.provider_options = {'streaming': False}"
    assert command_line_fix(SettingFix("model", "openai/gpt-4o-mini", "configure one")) == "pass --model openai/gpt-4o-mini"
    assert "no flag of python -m harness_nb sets provider_options" in command_line_fix(fix)


def test_no_model_names_the_setting_in_each_form(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _ = Harness(workdir=tmp_path, include_user_agents=False).provider
    error = info.value
    assert error.fix is not None and error.fix.setting == "model"
    assert str(error).startswith("no model configured.")
    assert "HARNESS_NB_MODEL" in str(error)
    assert str(error).endswith("To configure one, pass model='openai/gpt-4o-mini' to Harness or Harness.configure")
    in_notebook = error.explained(config_line)
    assert in_notebook.endswith("To configure one, run %config HarnessNB.model = 'openai/gpt-4o-mini'")
    assert "to Harness" not in in_notebook
