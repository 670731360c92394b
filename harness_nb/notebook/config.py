"""``HarnessNB``: the extension's settings as traitlets, so ``%config HarnessNB.model = …``
works and IPython config files can set them. Environment variables give the defaults."""

from __future__ import annotations

import os

from traitlets import Bool, Enum, Float, Int, List, Unicode
from traitlets.config import Configurable


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value else default


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    try:
        return float(value) if value else default
    except ValueError:
        return default


class HarnessNB(Configurable):
    """Settings of the harness_nb notebook extension."""

    model = Unicode(
        _env("HARNESS_NB_MODEL"),
        allow_none=True,
        help="provider/model for %%agent, e.g. 'openai/gpt-4o-mini', 'anthropic/claude-sonnet-4-5', "
        "'ollama/qwen2.5:7b', 'scripted/<script.yaml>', 'replay/<cassette.jsonl>' ($HARNESS_NB_MODEL).",
    ).tag(config=True)
    workdir = Unicode(
        _env("HARNESS_NB_WORKDIR", "."), help="Working directory the agent's file tools are confined to."
    ).tag(config=True)
    approval_policy = Enum(
        ["dangerous", "always", "never"],
        default_value=_env("HARNESS_NB_APPROVAL_POLICY", "dangerous"),
        help="When to ask: 'dangerous' (risky shell commands and writes, run_python), 'always' "
        "(every tool that changes something), 'never'.",
    ).tag(config=True)
    approval_timeout = Float(
        _env_float("HARNESS_NB_APPROVAL_TIMEOUT", 300.0),
        help="Seconds an approval card waits for a click before the call is denied.",
    ).tag(config=True)
    unattended_approvals = Enum(
        ["deny", "approve"],
        default_value=_env("HARNESS_NB_UNATTENDED_APPROVALS", "deny"),
        help="Decision for approvals when the frontend cannot answer (nbclient, nbval, papermill: "
        "they send allow_stdin=false).",
    ).tag(config=True)
    background_approvals = Enum(
        ["deny", "ask"],
        default_value=_env("HARNESS_NB_BACKGROUND_APPROVALS", "deny"),
        help="Background subagents: 'deny' risky calls (fail closed) or 'ask' in the launching cell.",
    ).tag(config=True)
    max_turns = Int(50, help="Most LLM calls one run may make.").tag(config=True)
    token_budget = Int(0, help="Stop a run after this many tokens (0: no budget).").tag(config=True)
    agent_dirs = List(Unicode(), help="Extra folders of agent files (*.md).").tag(config=True)
    user_agents = Bool(
        True, help="Also load agent files from ~/.harness_nb/agents and ~/.claude/agents."
    ).tag(config=True)
    offload_chars = Int(20_000, help="Tool results longer than this go to .harness_nb/offload/.").tag(config=True)
    record_to = Unicode(
        _env("HARNESS_NB_RECORD_TO"),
        allow_none=True,
        help="Append every real model request/response to this cassette (JSONL) for later replay.",
    ).tag(config=True)
    updates_per_second = Float(8.0, help="Most widget refreshes per second per run view.").tag(config=True)
    kernel_tools = Bool(True, help="Give the main agent list_variables, inspect_variable and run_python.").tag(
        config=True
    )
