"""``RunSettings``: every setting as one checked value — what keywords make, what
``Harness(settings=…)`` takes, what ``configure`` and ``apply`` change, what the notebook's
``HarnessNB`` traits are made from (the documentation's table of them: tests/test_docs.py)."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from harness_nb import Harness, RunSettings
from harness_nb.core import ConfigError, UnknownNameError
from harness_nb.notebook.config import HarnessNB, notebook_default
from harness_nb.settings import SETTINGS, SandboxSettings, SubagentSettings
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
        include_user_agents=False,
        sandbox=SandboxSettings(mode="off"),
    )
    by_value = Harness(workdir=tmp_path, settings=settings)
    OPEN.append(by_value)
    assert by_keywords.settings == by_value.settings == settings
    for h in (by_keywords, by_value):
        context = h.run_context()
        assert (context.limits.max_turns, context.limits.budget_usd) == (7, 2.5)
        assert h.settings.options.context_window == 32_000 and h.settings.options.temperature == 0.2
        assert h.tools.names() == ["read_file", "ls"]
        assert h.settings.approval_policy == "always"
        assert h.settings.price_table.lookup("m") is not None and context.prices is h.settings.price_table


def test_keywords_change_the_settings_given_and_a_misspelt_one_names_the_closest(tmp_path):
    h = make(tmp_path, settings=RunSettings(max_turns=5, budget_usd=1.0), max_turns=9)
    assert (h.settings.max_turns, h.settings.budget_usd) == (9, 1.0)
    # a provider instance is the model of those settings
    h = make(tmp_path, model=ScriptedProvider([], model="own"), settings=RunSettings(max_turns=3))
    assert (h.model, h.settings.limits.max_turns) == ("scripted/own", 3)
    with pytest.raises(ConfigError, match=r"^no setting max_turn; did you mean max_turns\?$"):
        Harness(workdir=tmp_path, max_turn=9)
    with pytest.raises(ConfigError, match=r"^no setting sandbox_netwrok; did you mean sandbox_network\?$"):
        h.configure(sandbox_netwrok=True)
    with pytest.raises(ConfigError, match=r"^no setting colour; the settings are model, approval_policy, "):
        h.configure(colour="blue")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_turns": 0}, "max_turns must be a whole number above 0"),
        ({"token_budget": -5}, "token_budget must be a whole number above 0"),
        ({"budget_usd": -1}, "budget_usd must be a number above 0"),
        ({"subagent_budget_usd": -1.0}, "subagent_budget_usd must be a number above 0"),
        ({"tool_timeout": 0}, "tool_timeout must be a number above 0"),
        ({"context_window": -1}, "context_window must be a whole number above 0"),
        ({"compact_threshold": 1.5}, "compact_threshold must be a fraction above 0 and at most 1"),
        ({"approval_policy": "sometimes"}, "approval_policy must be one of 'allowlist', 'always', 'never'"),
        ({"approval_policy": "dangerous"}, "^approval_policy 'dangerous' was renamed 'allowlist'$"),
        ({"background_approvals": "maybe"}, "background_approvals must be one of 'deny', 'ask'"),
        ({"sandbox": "chroot"}, "sandbox must be one of 'auto', 'bwrap', 'off'"),
        ({"sandbox_network": "yes"}, "sandbox_network must be True or False"),
        ({"sandbox_limits": {"processes": -1}}, "processes"),
        ({"mcp_servers": {"x": {"type": "carrier-pigeon"}}}, "x"),
        ({"max_background": 0}, "max_background must be a whole number above 0"),
        ({"checkpoint_max_mb": 0}, "checkpoint_max_mb must be a number above 0"),
        ({"allow": ("nope(",)}, "allow: "),
        ({"deny": "Bash(rm:*)"}, "deny is a list of names"),
        ({"prices": {"m": {"input": 1}}}, r"prices\['m'\]: output: missing"),
        ({"provider_options": {"temprature": 1}}, "unknown provider option 'temprature'"),
        ({"replay_pace": "slowly"}, "replay_pace 'slowly' cannot be used"),
    ],
)
def test_a_value_that_cannot_be_a_setting_is_refused_when_made(values, message):
    with pytest.raises(ConfigError, match=message):
        RunSettings().changed(**values)


def test_groups_hold_their_settings_and_zero_is_none_everywhere():
    settings = RunSettings(subagents=SubagentSettings(budget_usd=0.5), budget_usd=0, wall_time=0)
    assert (settings.budget_usd, settings.wall_time) == (None, None)
    assert settings.delegation.budget_usd == 0.5 and SETTINGS["subagent_budget_usd"].value(settings) == 0.5
    assert settings.changed(subagent_budget_usd=0).subagents.budget_usd is None
    with pytest.raises(ConfigError, match="max_depth must be a whole number above 0"):
        SubagentSettings(max_depth=0)


def test_changed_ignores_none_reads_empty_as_none_and_refuses_unknown_names():
    base = RunSettings(model="scripted/a.yaml", token_budget=1_000, budget_usd=1.0, context_window=8_000)
    assert base.changed(max_turns=None, model=None) == base
    cleared = base.changed(token_budget=0, budget_usd=0, context_window=0, model="", tools=())
    assert (cleared.token_budget, cleared.budget_usd, cleared.context_window, cleared.model) == (None,) * 4
    assert cleared.tools is None and cleared.options.context_window is None
    assert base.options.context_window == 8_000
    with pytest.raises(ConfigError, match="no setting max_turn; did you mean max_turns"):
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
    assert h.settings is kept and h.settings.limits.max_turns == 4 and h.tools.names() == ["read_file"]
    h.configure(tools=[])
    assert "bash" in h.tools.names() and h.settings.tools is None


def test_a_setting_built_into_the_harness_is_refused_by_apply_and_changes_nothing(tmp_path):
    h = make(tmp_path, model=ScriptedProvider([]))
    kept = h.settings
    with pytest.raises(ConfigError, match="^max_background, sandbox_network take effect when a harness is built"):
        h.configure(max_turns=3, sandbox_network=True, max_background=2)
    assert h.settings is kept
    built = {s.name for s in SETTINGS.values() if s.built}
    assert {"sandbox", "agent_dirs", "include_user_agents", "checkpoints", "record_to", "max_background"} <= built
    assert not built & {"model", "approval_policy", "tools", "budget_usd", "mcp_servers", "background_approvals"}


def test_the_notebook_settings_make_one_value_with_zero_meaning_none():
    config = Config()
    config.HarnessNB.model = "scripted/nb.yaml"
    config.HarnessNB.token_budget = 0
    config.HarnessNB.budget_usd = 0.75
    config.HarnessNB.context_window = 0
    config.HarnessNB.allow = ["Bash(ls)"]
    config.HarnessNB.mcp_trust = ["files"]
    config.HarnessNB.include_user_agents = False
    settings = HarnessNB(config=config).run_settings(tools=["ls"])
    assert settings == RunSettings(model="scripted/nb.yaml", budget_usd=0.75, allow=("Bash(ls)",), tools=("ls",)).changed(
        mcp_trust=("files",), include_user_agents=False
    )
    assert HarnessNB(config=config).run_settings(tools=None).tools is None


def test_every_setting_is_a_notebook_trait_with_its_default_help_and_kind():
    """The traits are made from the fields; this holds them to each other, one by one."""
    traits = HarnessNB.class_traits(config=True)
    kinds = {
        "bool": "Bool",
        "int": "Int",
        "float": "Float",
        "text": "Unicode",
        "names": "List",
        "mapping": "Dict",
        "choice": "_SettingEnum",
        "pace": "Union",
    }
    for name, setting in SETTINGS.items():
        trait = traits[name]
        assert trait.help == setting.help, name
        assert type(trait).__name__ == kinds[setting.kind], name
        assert trait.default() == notebook_default(setting), name
        if setting.kind == "choice":
            assert tuple(trait.values) == setting.choices, name
    # no trait stands for a setting that is gone
    notebook_only = {"workdir", "approval_timeout", "unattended_approvals", "updates_per_second", "kernel_tools"}
    assert set(traits) == set(SETTINGS) | notebook_only
