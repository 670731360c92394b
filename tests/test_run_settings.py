"""``RunSettings``: the settings a run starts from as one checked value — what keywords
make, what ``Harness(settings=…)`` takes, what ``configure`` and ``apply`` change, and what
the notebook's ``HarnessNB`` settings turn into."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from harness_nb import Harness, RunSettings
from harness_nb.core import ConfigError, UnknownNameError
from harness_nb.notebook.config import HarnessNB
from harness_nb.testing import ScriptedProvider
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)


def make(tmp_path, **kwargs) -> Harness:
    h = Harness(workdir=tmp_path, include_user_agents=False, sandbox="off", **kwargs)
    OPEN.append(h)
    return h


def test_keywords_and_one_settings_value_make_the_same_harness(tmp_path):
    (tmp_path / "a.yaml").write_text("agents: {main: [{text: hi}]}\n")
    by_keywords = make(
        tmp_path,
        model="scripted/a.yaml",
        max_turns=7,
        budget_usd=2.5,
        approval_policy="always",
        allow=["Bash(git status:*)"],
        prices={"m": {"input": 1, "output": 2}},
        provider_options={"temperature": 0.2},
        context_window=32_000,
        tools=["read_file", "ls"],
    )
    settings = RunSettings(
        model="scripted/a.yaml",
        max_turns=7,
        budget_usd=2.5,
        approval_policy="always",
        allow=("Bash(git status:*)",),
        prices={"m": {"input": 1, "output": 2}},
        provider_options={"temperature": 0.2},
        context_window=32_000,
        tools=("read_file", "ls"),
    )
    by_value = make(tmp_path, settings=settings)
    assert by_keywords.settings == by_value.settings == settings
    for h in (by_keywords, by_value):
        context = h.run_context()
        assert (context.limits.max_turns, context.limits.budget_usd) == (7, 2.5)
        assert h.provider_options.context_window == 32_000 and h.provider_options.temperature == 0.2
        assert h.tools.names() == ["read_file", "ls"]
        assert h.approval_policy == "always"
        assert h.prices.lookup("m") is not None and h.run_context().prices is h.prices


def test_settings_and_their_keywords_together_are_refused_naming_the_keyword(tmp_path):
    with pytest.raises(ConfigError, match=r"keywords max_turns.*settings\.changed\(max_turns=\.\.\.\)"):
        Harness(workdir=tmp_path, settings=RunSettings(max_turns=5), max_turns=9)
    # a provider instance with settings that name no model is the model of those settings
    h = make(tmp_path, model=ScriptedProvider([], model="own"), settings=RunSettings(max_turns=3))
    assert (h.model, h.limits.max_turns) == ("scripted/own", 3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_turns": 0}, "max_turns must be a whole number above 0"),
        ({"token_budget": -5}, "token_budget must be a whole number above 0"),
        ({"budget_usd": 0}, "budget_usd must be a number above 0"),
        ({"subagent_budget_usd": -1.0}, "subagent_budget_usd must be a number above 0"),
        ({"tool_timeout": 0}, "tool_timeout must be a number above 0"),
        ({"context_window": -1}, "context_window must be a whole number above 0"),
        ({"compact_threshold": 1.5}, "compact_threshold must be a fraction above 0 and at most 1"),
        ({"approval_policy": "sometimes"}, "approval_policy must be one of 'allowlist'"),
        ({"background_approvals": "maybe"}, "background_approvals must be 'deny' or 'ask'"),
        ({"allow": ("nope(",)}, "allow: "),
        ({"deny": "Bash(rm:*)"}, "deny is a list of names"),
        ({"prices": {"m": {"input": 1}}}, r"prices\['m'\]: output: missing"),
        ({"provider_options": {"temprature": 1}}, "unknown provider option 'temprature'"),
    ],
)
def test_a_value_that_cannot_be_a_setting_is_refused_when_made(values, message):
    with pytest.raises(ConfigError, match=message):
        RunSettings(**values)


def test_changed_ignores_none_reads_zero_as_none_and_refuses_unknown_names():
    base = RunSettings(model="scripted/a.yaml", token_budget=1_000, budget_usd=1.0, context_window=8_000)
    assert base.changed(max_turns=None, model=None) == base
    cleared = base.changed(token_budget=0, budget_usd=0, context_window=0, model="", tools=())
    assert (cleared.token_budget, cleared.budget_usd, cleared.context_window, cleared.model) == (None,) * 4
    assert cleared.tools is None and cleared.options.context_window is None
    assert base.options.context_window == 8_000
    with pytest.raises(ConfigError, match="no such run setting: max_turn; the settings are"):
        base.changed(max_turn=3)
    with pytest.raises(ConfigError, match="provider option"):
        RunSettings(provider_options={"context_window": 4_000}, context_window=8_000)


def test_apply_changes_later_runs_and_a_bad_tool_name_changes_nothing(tmp_path):
    h = make(tmp_path, model=ScriptedProvider([]))
    before = h.run_context()
    h.apply(h.settings.changed(max_turns=4, approval_policy="never", tools=("read_file",)))
    assert (before.limits.max_turns, h.run_context().limits.max_turns) == (50, 4)
    assert h.tools.names() == ["read_file"]
    kept = h.settings
    with pytest.raises(UnknownNameError, match="raed_file"):
        h.apply(kept.changed(max_turns=9, tools=("raed_file",)))
    assert h.settings is kept and h.limits.max_turns == 4 and h.tools.names() == ["read_file"]
    h.configure(tools=[])
    assert "bash" in h.tools.names() and h.settings.tools is None


def test_the_notebook_settings_make_one_value_with_zero_meaning_none():
    config = Config()
    config.HarnessNB.model = "scripted/nb.yaml"
    config.HarnessNB.token_budget = 0
    config.HarnessNB.budget_usd = 0.75
    config.HarnessNB.context_window = 0
    config.HarnessNB.allow = ["Bash(ls)"]
    settings = HarnessNB(config=config).run_settings(["ls"])
    assert settings == RunSettings(
        model="scripted/nb.yaml", budget_usd=0.75, allow=("Bash(ls)",), tools=("ls",)
    )
    assert HarnessNB(config=config).run_settings(None).tools is None
