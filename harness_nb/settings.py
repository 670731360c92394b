"""``RunSettings``: every setting of a harness, stated once, as one checked value.

    from harness_nb import Harness, RunSettings
    h = Harness(model="openai/gpt-4o-mini", max_turns=10)          # keywords, or
    h = Harness(settings=RunSettings(model="openai/gpt-4o-mini", max_turns=10))
    h.configure(budget_usd=0.50)                                   # one change, or
    h.apply(h.settings.changed(budget_usd=0.50, approval_policy="always"))

Each setting is one field here, with its default and its help text (field metadata);
``SETTINGS`` lists them by name. The keywords of ``Harness`` and ``configure``, the
notebook's ``%config HarnessNB`` traits and their help, and the documentation's settings table are made
from these fields or checked against them. Related settings sit in frozen groups
(``subagents``, ``sandbox``, ``mcp``, ``checkpoints``, ``tracing``), but every setting keeps
one flat name — ``sandbox_network``, ``mcp_servers`` — that keywords, ``changed`` and
``%config`` use; a group's own switch is named after it (``sandbox`` is the sandbox's mode,
``checkpoints`` whether there are any, ``tracing`` where spans go).

Most settings apply to the runs that start after ``Harness.apply``: each run (and each
background task it launches) keeps the settings it started with. Settings marked
``built`` (``Setting.built``: the sandbox, agent folders, checkpoints, transcripts, …)
shape what a harness is built from, so they take effect when one is built: ``apply``
refuses a change to one, and the notebook builds a new harness when one changes.

A ``RunSettings`` is checked when it is made: an impossible limit, an unknown choice, a bad
permission rule, price, provider option, MCP server or sandbox limit is a ``ConfigError``
naming it, so a value that exists can always be applied (only the tool names are checked
by the harness, against its tools). Conventions, the same in Python and in ``%config``:
an optional number of ``0`` is none (no budget, the model's own window); ``""`` and empty
lists or mappings are none too (``tools=()``: every tool); in ``changed`` a value of
``None`` is no change.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .core import ConfigError, PriceTable, SettingFix
from .engine import BackgroundApprovals, CompactionPolicy, Delegation, Limits
from .mcp import DEFAULT_START_TIMEOUT, check_servers
from .permissions.mode import Policy
from .permissions.rule import parse_rules
from .providers.options import ProviderOptions, ReplayPace
from .sandbox import DEFAULT_MAX_FILE_MB, SandboxLimits, SandboxMode
from .setting import Setting, about, describe
from .tracing import INSTALL as INSTALL_OTEL

__all__ = [
    "MODEL_VARIABLE",
    "NO_MODEL_MESSAGE",
    "SETTINGS",
    "ApprovalPolicy",
    "CheckpointSettings",
    "McpSettings",
    "RunSettings",
    "SandboxSettings",
    "Setting",
    "SubagentSettings",
    "TracingMode",
    "TracingSettings",
    "default_model",
    "no_model_error",
    "no_setting",
]

ApprovalPolicy = Policy
TracingMode = Literal["off", "otel"]

MODEL_VARIABLE = "HARNESS_NB_MODEL"
NO_MODEL_MESSAGE = (
    "no model configured. The model setting is provider/model: 'openai/gpt-4o-mini', 'anthropic/…', "
    f"'ollama/…', 'openai-compatible/…' (offline: 'scripted/<script.yaml>' or 'replay/<cassette.jsonl>'); "
    f"the {MODEL_VARIABLE} environment variable gives it a default."
)


def no_model_error() -> ConfigError:
    """The error of a harness asked to run with no model: ``NO_MODEL_MESSAGE``, with the
    setting that fixes it (each front end says it its own way: ``SettingFix``)."""
    error = ConfigError(NO_MODEL_MESSAGE)
    error.fix = SettingFix("model", "openai/gpt-4o-mini", "configure one")
    return error

def default_model() -> str | None:
    """The model of a harness told none: ``$HARNESS_NB_MODEL`` (``None`` when unset or
    empty). The one place that variable is read."""
    return os.environ.get(MODEL_VARIABLE) or None


@dataclass(frozen=True)
class SubagentSettings:
    """How subagents are run. The first three are fixed with each run that launches one
    (``RunSettings.delegation``); the limits are built into the harness."""

    budget_usd: float | None = field(
        default=None,
        metadata=about(
            "Most US dollars each subagent run may spend (0 or None: no cap of its own), clamped to what its "
            "parent has left; an agent file's maxBudgetUsd caps it too.",
            name="subagent_budget_usd",
        ),
    )
    background_approvals: BackgroundApprovals = field(
        default="deny",
        metadata=about(
            "Background subagents: 'deny' the calls that would ask (fail closed) and offer no ask_person, or 'ask' "
            "where the launching run asks (in a notebook, the launching cell), for approvals and questions alike.",
        ),
    )
    allow_bypass_permissions: bool = field(
        default=False,
        metadata=about(
            "Let an agent file's permissionMode: bypassPermissions take effect (its subagent then asks for nothing; "
            "deny rules, ask rules and agent and settings files still hold). Off: such an agent runs under the usual "
            "policy, with a warning.",
        ),
    )
    max_depth: int = field(default=3, metadata=about("Most levels of subagents below the main agent.", built=True))
    max_concurrency: int = field(
        default=4, metadata=about("Most subagents of one parallel task call running at once.", built=True)
    )
    max_background: int = field(
        default=8,
        metadata=about("Most background subagents running at once; the others wait, queued.", built=True),
    )

    def __post_init__(self) -> None:
        _check(self, "subagents")


@dataclass(frozen=True)
class SandboxSettings:
    """How ``bash`` runs (``sandbox/bubblewrap.py``); built into the harness."""

    mode: SandboxMode = field(
        default="auto",
        metadata=about(
            "How bash runs: 'auto' (in a bubblewrap sandbox where it works, else unsandboxed with a notice), "
            "'bwrap' (always; refused where bubblewrap cannot work), 'off'.",
            name="sandbox",
            built=True,
        ),
    )
    network: bool = field(
        default=False,
        metadata=about("Let sandboxed bash commands use the network.", name="sandbox_network", built=True),
    )
    limits: Mapping[str, Any] | SandboxLimits | None = field(
        default=None,
        metadata=about(
            "What one bash command may use, over the defaults: {'processes': 1024, 'address_space': '<the machine's "
            "memory, at least 8G>', 'file_size': '16G', 'cpu_seconds': 'timeout'} ('timeout': the command's timeout "
            "times the cores; None lifts a limit). E.g. {'processes': 4096, 'file_size': '64G'}.",
            name="sandbox_limits",
            built=True,
        ),
    )

    def __post_init__(self) -> None:
        _check(self, "sandbox")
        SandboxLimits.of(self.limits)


@dataclass(frozen=True)
class McpSettings:
    """The MCP servers given in code or ``%config`` (``mcp/``); applied to the harness's
    servers, which restart as needed at the next run."""

    servers: Mapping[str, Any] | None = field(
        default=None,
        metadata=about(
            "MCP servers, in Claude Code's .mcp.json format, on top of <workdir>/.mcp.json and ~/.harness_nb/mcp.json: "
            "{'github': {'type': 'http', 'url': 'https://…/mcp', 'headers': {'Authorization': 'Bearer "
            "${GITHUB_TOKEN}'}}, "
            "'files': {'command': 'npx', 'args': [...]}}. Trusted (you wrote them). Their tools are "
            "mcp__<server>__<tool>; %mcp lists them.",
            name="mcp_servers",
        ),
    )
    trust: tuple[str, ...] = field(
        default=(),
        metadata=about(
            "Names of project MCP servers (<workdir>/.mcp.json, inline ones in agent files under the workdir) "
            "trusted to start whatever they run; the others wait for %mcp trust NAME.",
            name="mcp_trust",
        ),
    )
    start_timeout: float = field(
        default=DEFAULT_START_TIMEOUT,
        metadata=about(
            "Seconds an MCP server may take to start (spawn or connect, handshake, tool list).",
            name="mcp_start_timeout",
        ),
    )

    def __post_init__(self) -> None:
        _check(self, "mcp")
        if self.servers:
            check_servers(self.servers)


@dataclass(frozen=True)
class CheckpointSettings:
    """The workdir's checkpoints (``sandbox/checkpoints/checkpoint.py``); built into the harness."""

    enabled: bool = field(
        default=True,
        metadata=about(
            "Checkpoint the workdir before every tool call that can change files (a shadow git repository under "
            "~/.harness_nb/checkpoints): each call's effects are shown with an undo, rewind goes back, and a change "
            "to a path only you may change that you did not approve is reverted at once. Kernel state is not covered.",
            name="checkpoints",
            built=True,
        ),
    )
    max_mb: float = field(
        default=DEFAULT_MAX_FILE_MB,
        metadata=about(
            "Files larger than this (MB) are recorded by size and time only: a rewind cannot bring them back.",
            name="checkpoint_max_mb",
            built=True,
        ),
    )

    def __post_init__(self) -> None:
        _check(self, "checkpoints")


@dataclass(frozen=True)
class TracingSettings:
    """OpenTelemetry traces of the runs (``tracing/``): fixed with each run as it starts."""

    mode: TracingMode = field(
        default="off",
        metadata=about(
            "'otel': send each run's spans (invoke_agent, chat, execute_tool; GenAI semantic conventions) to "
            "OpenTelemetry: the program's tracer provider if it set one, else OTLP/HTTP configured by the OTEL_* "
            "variables (OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318). Needs "
            "pip install 'harness_nb[otel]'. 'off': nothing is loaded.",
            name="tracing",
        ),
    )
    content: bool = field(
        default=False,
        metadata=about(
            "Also record what was said on the spans: prompts, answers, tool arguments and results (keys masked). "
            "Off: only names, ids, models, token counts, costs, timings and outcomes.",
            name="tracing_content",
        ),
    )

    def __post_init__(self) -> None:
        _check(self, "tracing")
        if self.mode == "otel" and not _installed("opentelemetry.sdk"):
            raise ConfigError(f"tracing='otel' needs OpenTelemetry: {INSTALL_OTEL}")


@dataclass(frozen=True)
class RunSettings:
    """Every setting of a harness (see the module doc). Checked when made; the checked forms
    the harness uses are ``limits``, ``price_table``, ``options`` and ``delegation``."""

    model: str | None = field(
        default=None,
        metadata=about(
            "provider/model: 'openai/gpt-4o-mini', 'anthropic/claude-sonnet-4-5', 'ollama/qwen2.5:7b', "
            "'openai-compatible/<name>', 'scripted/<script.yaml>', 'replay/<cassette.jsonl>'. None or '': not "
            f"configured (${MODEL_VARIABLE} when a harness is given none).",
        ),
    )
    approval_policy: ApprovalPolicy = field(
        default="allowlist",
        metadata=about(
            "When a tool call asks first: 'allowlist' (anything not known to be safe: shell commands that are not "
            "read-only — in the sandbox, those that destroy data in the workdir — run_python, writes to agent, skill "
            "and settings files), 'always' (every tool that changes something), 'never'.",
        ),
    )
    allow: tuple[str, ...] = field(
        default=(),
        metadata=about(
            "Permission rules that let calls run without asking, Claude Code style: ['Bash(git status:*)', "
            "'Bash(npm run test)', 'Write(data/**)', 'WebFetch', 'mcp__server__*']. Deny rules win. Added to those "
            "of .claude/settings.json and .harness_nb/settings.json.",
        ),
    )
    deny: tuple[str, ...] = field(
        default=(),
        metadata=about(
            "Permission rules that refuse calls, whatever else allows them: ['Bash(rm:*)', 'Read(.env)'].",
        ),
    )
    max_turns: int = field(default=50, metadata=about("Most LLM calls one run may make."))
    max_repeated_calls: int | None = field(
        default=3,
        metadata=about(
            "A run that calls one tool with the same arguments and gets the same result this many times is told "
            "once, then stopped if it repeats it again (0 or None: never).",
        ),
    )
    max_turns_without_text: int | None = field(
        default=25,
        metadata=about(
            "A run that makes this many turns of tool calls in a row without a word for you is told once, then "
            "stopped if its next answer is tool calls alone (0 or None: never). A small model that cannot read "
            "its tool results loops on calls that all differ: this stops it.",
        ),
    )
    token_budget: int | None = field(
        default=None,
        metadata=about(
            "Most tokens one run may use, its subagents included, cached prompt tokens counted (0 or None: no "
            "budget). Checked before each model call: the call that would pass it is not made.",
        ),
    )
    budget_usd: float | None = field(
        default=None,
        metadata=about(
            "Most US dollars one run may spend, its subagents included (0 or None: no budget). Checked before each "
            "model call against that call's estimated cost: the call that would pass it is not made.",
        ),
    )
    wall_time: float | None = field(default=None, metadata=about("Seconds one run may take (0 or None: no limit)."))
    tool_timeout: float = field(
        default=60.0,
        metadata=about(
            "Seconds one tool call may take (bash's own timeout argument aside): run_python is then interrupted as "
            "the stop button does, other tools are stopped.",
        ),
    )
    max_parallel_tool_calls: int = field(
        default=8,
        metadata=about(
            "Most tool calls of one run, its subagents' included, executing at once; the others wait their turn in "
            "the order the model made them.",
        ),
    )
    prices: Mapping[str, Any] | None = field(
        default=None,
        metadata=about(
            "Your own prices, USD per million tokens, on top of the built-in list: {'my-model': {'input': 0.5, "
            "'output': 1.5, 'cache_read': 0.05, 'cache_write': 0.625}} (cache prices default to 0.1x and 1.25x the "
            "input price; 'batch': the share a batch request costs, 0.5 unless given).",
        ),
    )
    provider_options: Mapping[str, Any] | ProviderOptions | None = field(
        default=None,
        metadata=about(
            "Options for every model the harness makes, e.g. {'temperature': 0.2, 'max_tokens': 2048}: the fields of "
            "harness_nb.providers.options.ProviderOptions (streaming, max_tokens, temperature, tool_choice, timeout, "
            "max_retries, extra, ...).",
        ),
    )
    context_window: int | None = field(
        default=None,
        metadata=about(
            "The model's context window in tokens, for compaction (0 or None: the model's own, from the table of "
            "known models or what an OpenAI-compatible server reports). Set it for Ollama, which does not say.",
        ),
    )
    compact_threshold: float = field(
        default=0.8,
        metadata=about(
            "Compact the conversation when the next request would fill more than this fraction of the context "
            "window: old tool results become stubs, then the oldest turns a summary.",
        ),
    )
    replay_pace: ReplayPace | None = field(
        default=None,
        metadata=about(
            "How fast a 'replay/' model answers: 'instant' (every answer at once; None: that, or provider_options' "
            "pace), 'recorded' (the wait for the first token, the streaming and the tools' pauses as recorded) or a "
            "speed factor (2: twice as fast, 0.5: half as fast).",
        ),
    )
    tools: tuple[str, ...] | None = field(
        default=None,
        metadata=about(
            "Offer the main agent only these tools (names, e.g. ['read_file', 'grep', 'bash']): every tool's schema "
            "is sent with every call, which a small local model's context may not hold. Empty: every tool.",
        ),
    )
    system_prompt: str | None = field(
        default=None,
        metadata=about("The main agent's system prompt (None: the built-in one).", built=True),
    )
    skills: tuple[str, ...] = field(
        default=(),
        metadata=about(
            "Skills preloaded whole into the main agent's prompt (the others are listed by name and loaded on "
            "demand by the skill tool).",
            built=True,
        ),
    )
    agent_dirs: tuple[str, ...] = field(
        default=(),
        metadata=about("Extra folders of agent files (*.md), kept read-only to commands.", built=True),
    )
    include_user_agents: bool = field(
        default=True,
        metadata=about(
            "Also use the person's own agents, skills, permission rules and MCP servers: ~/.harness_nb/agents, "
            "~/.claude/agents, ~/.claude/skills, ~/.claude/settings.json, ~/.harness_nb/mcp.json.",
            built=True,
        ),
    )
    offload_chars: int = field(
        default=20_000,
        metadata=about(
            "Tool results (and background results and messages) longer than this go to .harness_nb/offload/; the "
            "model sees head, tail and path.",
            built=True,
        ),
    )
    record_to: str | None = field(
        default=None,
        metadata=about(
            "Append every real model request and response to this cassette (JSONL; relative to the workdir) for "
            "later replay, with how each answer streamed (for replay_pace).",
            built=True,
        ),
    )
    transcripts: bool = field(
        default=True,
        metadata=about("Keep each conversation in .harness_nb/sessions/<id>.jsonl (to resume).", built=True),
    )
    teams: bool = field(
        default=False,
        metadata=about(
            "Let the main agent start teams of long-lived teammates (team_create, task with team_name); off, their "
            "tools are not offered (every schema offered goes with every call).",
            built=True,
        ),
    )
    ray_address: str | None = field(
        default=None,
        metadata=about(
            "The Ray cluster a map with backend='ray' runs its rows on: 'ray://head:10001', 'auto', ... (None or '': "
            "$RAY_ADDRESS, else a Ray instance started on this machine; see Map over rows).",
        ),
    )
    subagents: SubagentSettings = field(default_factory=SubagentSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    mcp: McpSettings = field(default_factory=McpSettings)
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    tracing: TracingSettings = field(default_factory=TracingSettings)

    limits: Limits = field(init=False, repr=False, compare=False)
    price_table: PriceTable = field(init=False, repr=False, compare=False)
    options: ProviderOptions = field(init=False, repr=False, compare=False)
    """``provider_options`` with ``context_window`` and ``replay_pace`` folded in, validated."""
    delegation: Delegation = field(init=False, repr=False, compare=False)
    """How the subagents of a run started with these settings are set up."""

    def __post_init__(self) -> None:
        _check(self, None)
        parse_rules(self.allow, "allow")
        parse_rules(self.deny, "deny")
        CompactionPolicy(threshold=self.compact_threshold)
        _set(
            self,
            "limits",
            Limits(
                max_turns=self.max_turns,
                token_budget=self.token_budget,
                budget_usd=self.budget_usd,
                wall_time=self.wall_time,
                tool_timeout=self.tool_timeout,
                max_parallel_tool_calls=self.max_parallel_tool_calls,
                max_repeated_calls=self.max_repeated_calls,
                max_turns_without_text=self.max_turns_without_text,
            ),
        )
        _set(self, "price_table", PriceTable.of(self.prices))
        own: dict[str, Any] = {"context_window": self.context_window} if self.context_window else {}
        if self.replay_pace is not None:
            own["replay_pace"] = self.replay_pace
        _set(self, "options", ProviderOptions.of(self.provider_options, **own))
        group = self.subagents
        delegation = Delegation(group.budget_usd, group.background_approvals, group.allow_bypass_permissions)
        _set(self, "delegation", delegation)

    def changed(self, **changes: Any) -> RunSettings:
        """These settings with ``changes`` made, by flat name (a change of ``None`` is no
        change; the conventions of the module doc apply). ``ConfigError`` for a name that is
        no setting (naming the closest), or a value that cannot be one (nothing is changed
        then)."""
        for name in changes:
            if name not in SETTINGS:
                raise ConfigError(no_setting(name))
        top: dict[str, Any] = {}
        grouped: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            if value is not None:
                setting = SETTINGS[name]
                (top if setting.group is None else grouped.setdefault(setting.group, {}))[setting.field] = value
        for group, values in grouped.items():
            top[group] = replace(getattr(self, group), **values)
        return replace(self, **top)

    def compaction(self, offload_dir: Path) -> CompactionPolicy:
        """The compaction policy of these settings, keeping cleared results in ``offload_dir``."""
        return CompactionPolicy(threshold=self.compact_threshold, offload_dir=offload_dir, window=self.context_window)

    def built_values(self) -> tuple[Any, ...]:
        """The values of the ``built`` settings: two harnesses built from settings with equal
        ones are built alike."""
        return tuple(s.value(self) for s in SETTINGS.values() if s.built)


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is missing
        return False


def no_setting(name: str) -> str:
    """What to say of a setting name that is none (naming the closest)."""
    close = difflib.get_close_matches(name, list(SETTINGS), n=1)
    hint = f"did you mean {close[0]}?" if close else f"the settings are {', '.join(SETTINGS)}"
    return f"no setting {name}; {hint}"


def _set(holder: Any, name: str, value: Any) -> None:
    object.__setattr__(holder, name, value)  # frozen: normalised in place, once, when made


def _check(holder: Any, group: str | None) -> None:
    """Normalise and check the settings ``holder`` (a group, or ``RunSettings`` itself) holds."""
    for setting in _IN_GROUP[group]:
        _set(holder, setting.field, setting.checked(getattr(holder, setting.field)))


_GROUPS = {
    "subagents": SubagentSettings,
    "sandbox": SandboxSettings,
    "mcp": McpSettings,
    "checkpoints": CheckpointSettings,
    "tracing": TracingSettings,
}


_IN_GROUP: dict[str | None, list[Setting]] = {None: describe(RunSettings, None)}
_IN_GROUP.update({group: describe(holder, group) for group, holder in _GROUPS.items()})

SETTINGS: dict[str, Setting] = {s.name: s for listed in _IN_GROUP.values() for s in listed}
"""Every setting by its flat name, in the order of the fields (groups last)."""
