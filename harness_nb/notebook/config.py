"""``HarnessNB``: the extension's settings as traitlets, so ``%config HarnessNB.model = …``
works and IPython config files can set them. Environment variables give the defaults.

A value a setting cannot take fails the cell that set it, and the old value stays in force:

- validators on the traits raise ``TraitError``; traitlets then rolls the whole update back
  and does not merge it into the settings' config;
- ``SettingsMagics`` replaces ``%config`` and turns that error into a ``UsageError`` (one
  line, no traceback). IPython's own ``%config`` (IPython 9, ``core/magics/config.py``)
  catches every exception raised while applying a value and only logs it, so with it the
  cell reports ok and the person believes the value was taken. Every line that does not
  set a ``HarnessNB`` setting still goes to IPython's magic.

Values from the environment (``$HARNESS_NB_*``) are checked when the settings are made,
because traitlets never validates defaults; a bad one stops ``%load_ext``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, Union, default, validate
from traitlets.config import Config, Configurable

from ..core import ConfigError, PriceTable
from ..engine import POLICIES, parse_rule
from ..mcp import check_servers
from ..providers.factory import parse_model
from ..providers.options import ProviderOptions, ReplayPace, check_pace
from ..settings import ApprovalPolicy, RunSettings
from ..subagents import BackgroundApprovals
from ..sandbox import DEFAULT_MAX_FILE_MB, SANDBOX_MODES, Sandbox, SandboxLimits


# The settings whose default comes from the environment, and from which variable.
ENVIRONMENT = {
    "model": "HARNESS_NB_MODEL",
    "workdir": "HARNESS_NB_WORKDIR",
    "approval_policy": "HARNESS_NB_APPROVAL_POLICY",
    "approval_timeout": "HARNESS_NB_APPROVAL_TIMEOUT",
    "unattended_approvals": "HARNESS_NB_UNATTENDED_APPROVALS",
    "background_approvals": "HARNESS_NB_BACKGROUND_APPROVALS",
    "record_to": "HARNESS_NB_RECORD_TO",
    "sandbox": "HARNESS_NB_SANDBOX",
}


def _env(setting: str, fallback: str | None = None) -> str | None:
    value = os.environ.get(ENVIRONMENT[setting])
    return value if value else fallback


# The number settings' ranges: the one place each rule is written (``%%agent --max-turns``
# uses ``number_problem`` too).
_NUMBER_RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "max_turns": (lambda n: n >= 1, "1 or more"),
    "token_budget": (lambda n: n >= 0, "0 (no budget) or more"),
    "budget_usd": (lambda n: n >= 0, "0 (no budget) or more US dollars"),
    "subagent_budget_usd": (lambda n: n >= 0, "0 (no budget) or more US dollars"),
    "offload_chars": (lambda n: n >= 1, "1 or more"),
    "approval_timeout": (lambda n: n > 0, "more than 0 seconds"),
    "updates_per_second": (lambda n: n > 0, "more than 0"),
    "max_background": (lambda n: n >= 1, "1 or more"),
    "context_window": (lambda n: n >= 0, "0 (the model's own window) or more tokens"),
    "compact_threshold": (lambda n: 0 < n <= 1, "a fraction of the window above 0 and at most 1 (e.g. 0.8)"),
    "mcp_start_timeout": (lambda n: n > 0, "more than 0 seconds"),
    "tool_timeout": (lambda n: n > 0, "more than 0 seconds"),
    "max_parallel_tool_calls": (lambda n: n >= 1, "1 or more"),
    "checkpoint_max_mb": (lambda n: n > 0, "more than 0 MB"),
}


# The mapping settings, each checked by what the harness makes of it (one rule, one place).
_CHECKED_MAPPINGS: dict[str, Callable[[Any], Any]] = {
    "provider_options": ProviderOptions.of,
    "prices": PriceTable.of,
    "mcp_servers": check_servers,
}


def number_problem(name: str, value: float) -> str | None:
    """Why ``value`` cannot be the number setting ``name`` (``None`` when it can)."""
    allowed, valid = _NUMBER_RULES[name]
    return None if allowed(value) else f"it must be {valid}"


def _rejected(proposal: Any, problem: str) -> TraitError:
    return TraitError(f"HarnessNB.{proposal.trait.name} = {proposal.value!r} cannot be used: {problem}")


class HarnessNB(Configurable):
    """Settings of the harness_nb notebook extension (see the module doc for how a bad value
    is refused)."""

    model = Unicode(
        _env("model"),
        allow_none=True,
        help="provider/model for %%agent, e.g. 'openai/gpt-4o-mini', 'anthropic/claude-sonnet-4-5', "
        "'ollama/qwen2.5:7b', 'scripted/<script.yaml>', 'replay/<cassette.jsonl>' ($HARNESS_NB_MODEL). "
        "Empty or None: not configured.",
    ).tag(config=True)
    workdir = Unicode(
        _env("workdir", "."),
        help="Working directory the agent's file tools are confined to: an existing folder "
        "(a relative one starts at the kernel's working directory).",
    ).tag(config=True)
    approval_policy = Enum(
        list(POLICIES),
        default_value=_env("approval_policy", "allowlist"),
        help="When to ask: 'allowlist' (anything not known to be safe: shell commands that are not "
        "read-only — in the sandbox, those that destroy data in the workdir — run_python, writes to "
        "agent, skill and settings files; 'dangerous' is its old name), 'always' (every tool that "
        "changes something), 'never'.",
    ).tag(config=True)
    allow = List(
        Unicode(),
        help="Permission rules that let calls run without asking, Claude Code style: "
        "['Bash(git status:*)', 'Bash(npm run test)', 'Write(data/**)', 'WebFetch', 'mcp__server__*']. "
        "Deny rules win. Added to those of .claude/settings.json and .harness_nb/settings.json.",
    ).tag(config=True)
    deny = List(
        Unicode(),
        help="Permission rules that refuse calls, whatever else allows them: ['Bash(rm:*)', 'Read(.env)'].",
    ).tag(config=True)
    # The static default is the real one: traitlets skips the check of a value equal to it
    # while the environment's default was never read (0.0 was accepted that way).
    approval_timeout = Float(
        300.0,
        help="Seconds an approval card waits for a click before the call is denied (default 300).",
    ).tag(config=True)
    unattended_approvals = Enum(
        ["deny", "approve"],
        default_value=_env("unattended_approvals", "deny"),
        help="Decision for approvals when the frontend cannot answer (nbclient, nbval, papermill: "
        "they send allow_stdin=false).",
    ).tag(config=True)
    background_approvals = Enum(
        ["deny", "ask"],
        default_value=_env("background_approvals", "deny"),
        help="Background subagents: 'deny' risky calls (fail closed) or 'ask' in the launching cell.",
    ).tag(config=True)
    allow_bypass_permissions = Bool(
        False,
        help="Let an agent file's permissionMode: bypassPermissions take effect (its subagent then asks for "
        "nothing; deny rules, ask rules and agent and settings files still hold). Off: such an agent runs "
        "under the usual policy, with a warning.",
    ).tag(config=True)
    max_turns = Int(50, help="Most LLM calls one run may make (1 or more).").tag(config=True)
    tool_timeout = Float(
        60.0,
        help="Seconds one tool call may take (bash's own timeout argument aside): run_python is then "
        "interrupted as the stop button does, other tools are stopped.",
    ).tag(config=True)
    max_parallel_tool_calls = Int(
        8,
        help="Most tool calls of one run, its subagents' included, executing at once (1 or more); the "
        "others wait their turn in the order the model made them.",
    ).tag(config=True)
    max_background = Int(
        8, help="Most background subagents running at once; the others wait, queued (1 or more)."
    ).tag(config=True)
    token_budget = Int(
        0,
        help="Most tokens one run may use, its subagents included, cached prompt tokens counted (0: no "
        "budget). Checked before each model call: the call that would pass it is not made.",
    ).tag(config=True)
    budget_usd = Float(
        0.0,
        help="Most US dollars one run may spend, its subagents included (0: no budget). Checked before "
        "each model call against that call's estimated cost: the call that would pass it is not made.",
    ).tag(config=True)
    subagent_budget_usd = Float(
        0.0,
        help="Most US dollars each subagent run may spend (0: no cap of its own), clamped to what its "
        "parent has left; an agent file's maxBudgetUsd caps it too.",
    ).tag(config=True)
    prices = Dict(
        help="Your own prices, USD per million tokens, on top of the built-in list: "
        "{'my-model': {'input': 0.5, 'output': 1.5, 'cache_read': 0.05, 'cache_write': 0.625}} "
        "(cache prices default to 0.1x and 1.25x the input price).",
    ).tag(config=True)
    agent_dirs = List(Unicode(), help="Extra folders of agent files (*.md).").tag(config=True)
    user_agents = Bool(
        True, help="Also load agent files from ~/.harness_nb/agents and ~/.claude/agents."
    ).tag(config=True)
    offload_chars = Int(20_000, help="Tool results longer than this go to .harness_nb/offload/.").tag(config=True)
    record_to = Unicode(
        _env("record_to"),
        allow_none=True,
        help="Append every real model request/response to this cassette (JSONL) for later replay, "
        "with how each answer streamed (for replay_pace).",
    ).tag(config=True)
    replay_pace = Union(
        [Unicode(), Float()],
        default_value="instant",
        help="How fast a 'replay/' model answers: 'instant' (every answer at once), 'recorded' (the "
        "wait for the first token, the streaming and the tools' pauses as recorded) or a speed factor "
        "(2: twice as fast, 0.5: half as fast).",
    ).tag(config=True)
    updates_per_second = Float(8.0, help="Most widget refreshes per second per run view.").tag(config=True)
    kernel_tools = Bool(True, help="Give the main agent list_variables, inspect_variable, run_python, notebook_history and propose_cell.").tag(
        config=True
    )
    context_window = Int(
        0,
        help="The model's context window in tokens, for compaction (0: the model's own, from the table of "
        "known models or what an OpenAI-compatible server reports). Set it for Ollama, which does not say.",
    ).tag(config=True)
    compact_threshold = Float(
        0.8,
        help="Compact the conversation when the next request would fill more than this fraction of the "
        "context window: old tool results become stubs, then the oldest turns a summary.",
    ).tag(config=True)
    tools = List(
        Unicode(),
        help="Offer the main agent only these tools (names, e.g. ['read_file', 'grep', 'bash']): every "
        "tool's schema is sent with every call, which a small local model's context may not hold. "
        "Empty: every tool.",
    ).tag(config=True)
    provider_options = Dict(
        help="Options for every model the harness makes, e.g. {'temperature': 0.2, 'max_tokens': 2048}: "
        "the fields of harness_nb.providers.options.ProviderOptions (streaming, max_tokens, temperature, "
        "tool_choice, timeout, max_retries, extra, ...).",
    ).tag(config=True)

    sandbox = Enum(
        list(SANDBOX_MODES),
        default_value=_env("sandbox", "auto"),
        help="How bash runs: 'auto' (in a bubblewrap sandbox where it works, else unsandboxed with a "
        "notice), 'bwrap' (always; refused where bubblewrap cannot work), 'off' ($HARNESS_NB_SANDBOX).",
    ).tag(config=True)
    sandbox_network = Bool(False, help="Let sandboxed bash commands use the network.").tag(config=True)
    sandbox_limits = Dict(
        help="What one bash command may use, over the defaults: {'processes': 1024, 'address_space': "
        "'<the machine's memory, at least 8G>', 'file_size': '16G', 'cpu_seconds': 'timeout'} ('timeout': the command's "
        "timeout times the cores; None lifts a limit). E.g. {'processes': 4096, 'file_size': '64G'}.",
    ).tag(config=True)
    mcp_servers = Dict(
        help="MCP servers, in Claude Code's .mcp.json format, on top of <workdir>/.mcp.json and "
        "~/.harness_nb/mcp.json: {'github': {'type': 'http', 'url': 'https://…/mcp', 'headers': "
        "{'Authorization': 'Bearer ${GITHUB_TOKEN}'}}, 'files': {'command': 'npx', 'args': [...]}}. "
        "Their tools are mcp__<server>__<tool>; %mcp lists them.",
    ).tag(config=True)
    mcp_trust = List(
        Unicode(),
        help="Names of project MCP servers (<workdir>/.mcp.json, inline ones in agent files under the "
        "workdir) trusted to start whatever they run; the others wait for %mcp trust NAME.",
    ).tag(config=True)
    mcp_start_timeout = Float(
        30.0, help="Seconds an MCP server may take to start (spawn or connect, handshake, tool list)."
    ).tag(config=True)

    checkpoints = Bool(
        True,
        help="Checkpoint the workdir before every tool call that can change files (a shadow git repository "
        "under ~/.harness_nb/checkpoints): each call's effects show under its line with an undo button, "
        "%agent --rewind goes back, and a change to a path only you may change that you did not approve is "
        "reverted at once. Kernel state is not covered.",
    ).tag(config=True)
    checkpoint_max_mb = Float(
        DEFAULT_MAX_FILE_MB,
        help="Files larger than this (MB) are recorded by size and time only: a rewind cannot bring them back.",
    ).tag(config=True)

    tool_names: Callable[[], list[str]] | None = None
    """The names ``tools`` may hold (set by the extension, which knows the harness's tools);
    without it, names are checked when the harness is built."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, variable in ENVIRONMENT.items():
            if not os.environ.get(variable):
                continue
            try:
                value = getattr(self, name)  # checks the type only
                if value == self.trait_defaults(name):  # not replaced by a config file
                    setattr(self, name, value)  # checks the rest: a default is never validated
            except TraitError as exc:
                raise TraitError(f"{str(exc).rstrip('.')} (from ${variable})") from None

    def run_settings(self, tools: Iterable[str] | None) -> RunSettings:
        """What these settings make of a run's settings, offering ``tools`` (names; ``None``:
        every tool). Here ``0`` means "none" for a budget and "the model's own" for
        ``context_window``; each value was checked when it was set."""
        # changed(): 0 as "none" is the run settings' own convention, written once there
        return RunSettings().changed(
            model=self.model or "",
            approval_policy=cast(ApprovalPolicy, self.approval_policy),
            allow=tuple(self.allow),
            deny=tuple(self.deny),
            background_approvals=cast(BackgroundApprovals, self.background_approvals),
            allow_bypass_permissions=self.allow_bypass_permissions,
            max_turns=self.max_turns,
            tool_timeout=self.tool_timeout,
            max_parallel_tool_calls=self.max_parallel_tool_calls,
            token_budget=self.token_budget,
            budget_usd=self.budget_usd,
            subagent_budget_usd=self.subagent_budget_usd,
            prices=self.prices,
            provider_options=self.provider_options,
            context_window=self.context_window,
            # the default is left to provider_options, which may name a pace of its own
            replay_pace=None if self.replay_pace == "instant" else cast(ReplayPace, self.replay_pace),
            compact_threshold=self.compact_threshold,
            tools=None if tools is None else tuple(tools),
        )

    @default("approval_timeout")
    def _approval_timeout_from_environment(self) -> Any:
        value = _env("approval_timeout")
        try:
            return float(value) if value else 300.0
        except ValueError:
            return value  # as given, so the setting refuses it (never a silent 300)

    @validate("model")
    def _check_model(self, proposal: Any) -> str | None:
        # Only the form is checked: scripted/ and replay/ files are read when a run starts,
        # so a notebook may set the model before it writes the script.
        if proposal.value:
            try:
                parse_model(proposal.value)
            except ConfigError as exc:
                raise _rejected(proposal, str(exc)) from None
        value: str | None = proposal.value
        return value

    @validate("workdir")
    def _check_workdir(self, proposal: Any) -> str:
        # Checked when set, so the cell that names a missing folder is the one that fails;
        # the harness checks again when it is built (the folder may be gone by then).
        folder = Path.cwd() / Path(proposal.value or ".").expanduser()
        if not folder.is_dir():
            raise _rejected(proposal, f"{folder} is not a folder; create it first or name another")
        value: str = proposal.value
        return value

    @validate(*_CHECKED_MAPPINGS)
    def _check_mapping(self, proposal: Any) -> dict[str, Any]:
        # kept as written (the harness makes the value from it), so %config shows it back
        try:
            _CHECKED_MAPPINGS[proposal.trait.name](proposal.value)
        except ConfigError as exc:
            raise _rejected(proposal, str(exc)) from None
        value: dict[str, Any] = proposal.value
        return value

    @validate("replay_pace")
    def _check_pace(self, proposal: Any) -> ReplayPace:
        try:
            return check_pace(proposal.value)
        except ValueError as exc:
            raise _rejected(proposal, str(exc)) from None

    @validate("tools")
    def _check_tools(self, proposal: Any) -> list[str]:
        names: list[str] = list(proposal.value)
        if self.tool_names is not None and names:
            known = self.tool_names()
            unknown = [n for n in names if n not in known]
            if unknown:
                close = difflib.get_close_matches(unknown[0], known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise _rejected(
                    proposal, f"no tool named {unknown[0]!r}{hint}; the tools are: {', '.join(known)}"
                )
        return names

    @validate("sandbox")
    def _check_sandbox(self, proposal: Any) -> str:
        # 'bwrap' is refused here, in the cell that asks for it, when bubblewrap cannot work
        try:
            if proposal.value == "bwrap":
                Sandbox.create("bwrap")
        except ConfigError as exc:
            raise _rejected(proposal, str(exc)) from None
        value: str = proposal.value
        return value

    @validate("sandbox_limits")
    def _check_sandbox_limits(self, proposal: Any) -> dict[str, Any]:
        try:
            SandboxLimits.of(proposal.value)
        except ConfigError as exc:
            raise _rejected(proposal, str(exc)) from None
        return dict(proposal.value)

    @validate("allow", "deny")
    def _check_rules(self, proposal: Any) -> list[str]:
        if isinstance(proposal.value, str):
            raise _rejected(proposal, "it is a list of rules, e.g. ['Bash(git status:*)']")
        for rule in proposal.value:
            try:
                parse_rule(rule)
            except ConfigError as exc:
                raise _rejected(proposal, str(exc)) from None
        value: list[str] = list(proposal.value)
        return value

    @validate(*_NUMBER_RULES)
    def _check_number(self, proposal: Any) -> float:
        problem = number_problem(proposal.trait.name, proposal.value)
        if problem is not None:
            raise _rejected(proposal, problem)
        value: float = proposal.value
        return value


# `%config HarnessNB.x` reads a setting; any longer line is a statement that sets it:
# `HarnessNB.x = …`, `HarnessNB.x.update({…})` (IPython's magic wants an "=" in it too).
_SETTING = re.compile(r"\s*HarnessNB\.(\w+)\b")
_READ = re.compile(r"^\w+\.\w+$")


@magics_class
class SettingsMagics(Magics):
    """``%config`` that fails its cell when a ``HarnessNB`` value is refused (see the module
    doc for why IPython's does not); everything else goes to IPython's ``%config``."""

    def __init__(self, shell: Any, settings: HarnessNB, ipython_config: Callable[[str], Any]) -> None:
        super().__init__(shell)
        self.settings = settings
        self.ipython_config = ipython_config

    # A method named ``config`` would hide the ``config`` trait every Magics has. (IPython
    # annotates ``line_magic`` as returning a union, so mypy cannot see it is a decorator here.)
    @line_magic("config")  # type: ignore[arg-type]
    def config_line(self, line: str) -> Any:
        """Configure IPython and harness_nb: ``%config HarnessNB`` lists the settings,
        ``%config HarnessNB.model`` shows one, ``%config HarnessNB.model = 'openai/gpt-4o-mini'``
        sets one (the value is a Python expression). A value harness_nb cannot use fails
        the cell and the old value stays. Other classes: as IPython's ``%config``."""
        found = _SETTING.match(line)
        if found is None:
            return self.ipython_config(line)
        name = found.group(1)
        settings = self.settings.trait_names(config=True)
        if name not in settings:
            close = difflib.get_close_matches(name, settings, n=1)
            hint = f"did you mean HarnessNB.{close[0]}? " if close else ""
            raise UsageError(f"HarnessNB has no setting {name!r}; {hint}see %config HarnessNB for the list")
        if _READ.match(line.strip()):
            return self.ipython_config(line)
        assert self.shell is not None  # registered magics always have one
        cfg = Config()
        try:
            # as IPython's magic does: the value may name the notebook's variables
            exec("cfg." + line.strip(), self.shell.user_ns, {"cfg": cfg})
        except (NameError, SyntaxError) as exc:
            raise UsageError(
                f"%config {line.strip()}: {exc}. The value is Python: quote text, e.g. "
                f"%config HarnessNB.model = 'openai/gpt-4o-mini'"
            ) from None
        try:
            self.settings.update_config(cfg)
        except TraitError as exc:
            kept = getattr(self.settings, name)
            raise UsageError(f"{str(exc).rstrip('.')}. HarnessNB.{name} stays {kept!r}") from None
