"""What a subagent is: ``SubAgentDefinition`` and the Claude Code compatibility rules.

A definition comes from code (the built-ins, ``AgentRegistry.register``) or from an agent
file (``loader.py``). Agent files written for Claude Code use its tool names and model
aliases, so the translation lives here, next to the model, and both paths share it.

Tool names (``normalize_tool_names``):

- Claude Code names map onto ours, case-insensitively: ``Read``/``NotebookRead`` ->
  ``read_file``, ``Write`` -> ``write_file``, ``Edit``/``MultiEdit`` -> ``edit_file``,
  ``Bash`` -> ``bash``, ``Glob`` -> ``glob``, ``Grep`` -> ``grep``, ``LS`` -> ``ls``.
- ``Task``/``Agent`` (also ``Task(reviewer)``, Claude Code's "which subagents it may
  start") are recognised and dropped into ``ToolNames.delegation``: subagents never
  delegate here, so the loader says so instead of calling them unknown.
- A permission pattern such as ``Bash(git:*)`` reduces to its tool (``bash``). harness_nb
  does not enforce command patterns, so the pattern is reported, not silently trusted.
- A lowercase ``snake_case`` name passes through unchanged: it is one of ours or a custom
  tool registered in code, and ``resolve_tools`` intersects with the parent's tools anyway.
  So does a glob of such names (``kernel_*``), matched against the parent's tools.
- An MCP tool name passes through too, patterns included: ``mcp__github__create_issue``,
  ``mcp__github__*``, ``mcp__github`` (every tool of that server); ``resolve_tools``
  matches them against the parent's MCP tools.
- Anything else (``WebFetch``, ``TodoWrite``, ...) names a tool harness_nb does not have
  and is dropped, with a note the loader turns into a warning.

Frontmatter fields: ``CLAUDE_FIELDS`` lists every field of a Claude Code agent file (as
documented late 2026) and what harness_nb does with it; each one has a field here, so
none is dropped. ``hooks``, ``isolation`` and ``initialPrompt`` are kept but not acted on
(``SubAgentDefinition.unsupported`` names them; ``%agents`` shows them).

``tools`` is ``None`` when nothing was listed (inherit every tool of the parent). A list,
even an empty one, is an allowlist: if every listed name was dropped the agent gets *no*
tools rather than all of them, so a typo or a foreign tool name fails closed. For the same
reason an explicit ``tools: []`` means "no tools"; leave the key out to inherit.
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..permissions.mode import PERMISSION_MODES, PermissionMode
from ..skills.skill import skill_name_problem
from ..tools.names import CLAUDE_TOOL_NAMES

logger = logging.getLogger("harness_nb.subagents")

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
NAME_RULE = "lowercase letters, digits and hyphens, starting with a letter or digit"

# Claude Code's model aliases, and the Anthropic model each stands for. The one table: the
# model resolver (``model.py``) applies it when the main model is an Anthropic one.
CLAUDE_MODEL_ALIASES: dict[str, str] = {
    "sonnet": "claude-sonnet-4-5",
    "opus": "claude-opus-4-1",
    "opusplan": "claude-opus-4-1",
    "haiku": "claude-haiku-4-5",
}

MemoryScope = Literal["user", "project", "local"]
Effort = Literal["low", "medium", "high", "max"]
MEMORY_SCOPES: tuple[str, ...] = get_args(MemoryScope)
EFFORTS: tuple[str, ...] = get_args(Effort)

HONOURED = "honoured"
NOT_SUPPORTED = "not supported here"
# Every frontmatter field of a Claude Code agent file (its spelling), and what harness_nb
# does with it. The one list: the loader's did-you-mean, docs/subagents.md's table and the test
# that every field is accounted for all read it.
CLAUDE_FIELDS: dict[str, str] = {
    "name": HONOURED,
    "description": HONOURED,
    "tools": HONOURED,
    "disallowedTools": HONOURED,
    "model": HONOURED,
    "permissionMode": HONOURED,
    "maxTurns": HONOURED,
    "skills": HONOURED,
    "mcpServers": HONOURED,
    "hooks": NOT_SUPPORTED,
    "memory": HONOURED,
    "background": HONOURED,
    "effort": HONOURED,
    "isolation": NOT_SUPPORTED,
    "initialPrompt": NOT_SUPPORTED,
    "color": HONOURED,
}
# harness_nb's own fields, beyond Claude Code's.
OWN_FIELDS: dict[str, str] = {"systemPrompt": HONOURED, "maxBudgetUsd": HONOURED}

# one of our names, or a glob of them (``kernel_*``), which ``resolve_tools`` matches
_OUR_TOOL_NAME = re.compile(r"^[a-z*?][a-z0-9_*?]*$")
MCP_TOOL_PATTERN = re.compile(r"^mcp__[A-Za-z0-9_*-]+$")
_DELEGATION_NAMES = frozenset({"task", "agent"})
_PATTERN = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*\((.*)\)\s*$", re.DOTALL)
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass
class ToolNames:
    """Result of ``normalize_tool_names``: our names, the names dropped because harness_nb
    has no such tool, the ``Tool(pattern)`` entries reduced to their whole tool, and the
    ``Task``/``Agent`` entries dropped because subagents never delegate."""

    names: list[str]
    dropped: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    delegation: list[str] = field(default_factory=list)


def split_names(raw: Any) -> list[str]:
    """Turn a comma string, a single string or a list into a list of stripped names.

    Commas inside a pattern's parentheses (``Bash(git add, git commit:*)``) do not split.
    """
    if raw is None:
        return []
    items = raw if isinstance(raw, list | tuple | set | frozenset) else [raw]
    out: list[str] = []
    for item in items:
        # A YAML list item may itself be a comma string ("- Read, Grep").
        out.extend(_split_top_level_commas(str(item)))
    return out


def _split_top_level_commas(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def normalize_tool_names(raw: Any) -> ToolNames:
    """Map a raw tool list (Claude Code or ours) onto harness_nb tool names, keeping order."""
    result = ToolNames(names=[])
    for item in split_names(raw):
        match = _PATTERN.match(item)
        name = match.group(1) if match else item
        if name.lower() in _DELEGATION_NAMES:
            result.delegation.append(item)
            continue
        mapped = CLAUDE_TOOL_NAMES.get(name.lower())
        if mapped is None and MCP_TOOL_PATTERN.match(name):
            mapped = name
        elif mapped is None and _OUR_TOOL_NAME.match(name) and not name.startswith("mcp__"):
            mapped = name
        if mapped is None:
            result.dropped.append(item)
            continue
        if match:
            result.patterns.append(item)
        if mapped not in result.names:
            result.names.append(mapped)
    return result


def normalize_model(raw: Any) -> tuple[str | None, str | None]:
    """Return ``(model, note)``: ``None`` means the parent's model.

    ``inherit`` and an empty value mean the parent's model. A bare Claude Code alias
    (``sonnet``, ``opus``, ``haiku``) is kept (lowercased) with a note: it means that
    Anthropic model when the main model is an Anthropic one, and the parent's model
    otherwise — agent collections written for Claude Code use aliases everywhere, and pinning
    them would make every such agent need an Anthropic key. Anything else
    (``openai/gpt-4o``) is kept as written.
    """
    if raw is None:
        return None, None
    text = str(raw).strip()
    if not text or text.lower() == "inherit":
        return None, None
    alias = CLAUDE_MODEL_ALIASES.get(text.lower())
    if alias is not None:
        return text.lower(), (
            f"model {text!r} is a Claude Code alias: anthropic/{alias} when the main model is an "
            "Anthropic one, else the parent's model (write provider/model to pin one)"
        )
    return text, None


def canonical_key(key: str) -> str:
    """``maxTurns``, ``max-turns`` and ``max_turns`` all become ``max_turns``."""
    return _CAMEL_BOUNDARY.sub("_", key.strip()).replace("-", "_").lower()


# canonical field name -> its Claude Code (camelCase) spelling
CAMEL_NAMES: dict[str, str] = {canonical_key(k): k for k in (*CLAUDE_FIELDS, *OWN_FIELDS)}


def normalize_permission_mode(raw: Any) -> tuple[PermissionMode | None, str | None]:
    """``(mode, note)``: Claude Code's ``permissionMode`` value, matched case-insensitively.
    A value it does not have is ``None`` (the parent's policy) with a note."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    text = str(raw).strip()
    for mode in get_args(PermissionMode):
        if text.lower() == mode.lower():
            return mode, None
    close = difflib.get_close_matches(text, PERMISSION_MODES, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return None, (
        f"permissionMode {text!r} is not one of {', '.join(PERMISSION_MODES)}{hint}; "
        "using the parent's policy"
    )


def normalize_choice(key: str, raw: Any, choices: tuple[str, ...]) -> tuple[str | None, str | None]:
    """``(value, note)`` for a field that takes one of ``choices`` (``memory``,
    ``effort``), matched case-insensitively; anything else is ``None`` with a note."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    text = str(raw).strip().lower()
    if text in choices:
        return text, None
    return None, f"{CAMEL_NAMES.get(key, key)} {raw!r} is not one of {', '.join(choices)}; ignored"


class SubAgentDefinition(BaseModel):
    """One kind of subagent: who it is, what it may use and how it is told to behave.

    ``description`` is what the main model reads when deciding whom to delegate to, so it
    is required. ``tools`` is an allowlist (``None`` = inherit the parent's tools, see the
    module docstring), ``disallowed_tools`` is always subtracted, ``model`` ``None`` means
    the parent's model, ``max_turns`` ``None`` means the engine's default,
    ``max_budget_usd`` (``maxBudgetUsd`` in a file) caps what one run of it may spend, in
    USD — clamped further to what its parent has left. ``mcp_servers`` (``mcpServers``)
    lists MCP servers for it: names of configured servers, or ``{name: config}`` inline
    configurations that live only while it runs (the runner gives it their tools, narrowed
    by ``tools`` / ``disallowed_tools`` like the rest). Keys the model does not know are
    kept in ``extra``. camelCase and snake_case keys are both accepted.

    Claude Code's other fields: ``permission_mode`` (``None``: the parent's policy; see
    ``subagents.narrowing.effective_mode``), ``background`` (its run mode when the caller
    does not say), ``memory`` (a ``MEMORY.md`` per scope, see ``subagents.memory``),
    ``effort`` (the provider's reasoning effort, where the model has one), ``color`` (its
    progress line's colour). ``hooks``, ``isolation`` and ``initial_prompt`` are kept, not acted on: ``unsupported``
    names the ones set. ``delegation`` keeps the ``Task``/``Agent`` entries of ``tools``,
    dropped because subagents never delegate.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description=f"Identifier: {NAME_RULE}.")
    description: str = Field(min_length=1)
    system_prompt: str = ""
    tools: list[str] | None = None
    disallowed_tools: list[str] = Field(default_factory=list)
    model: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    max_budget_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    skills: list[str] = Field(default_factory=list)
    mcp_servers: list[str | dict[str, Any]] = Field(default_factory=list)
    permission_mode: PermissionMode | None = None
    background: bool = False
    memory: MemoryScope | None = None
    effort: Effort | None = None
    color: str | None = None
    hooks: Any = None
    isolation: str | None = None
    initial_prompt: str | None = None
    delegation: list[str] = Field(default_factory=list)
    source: str = "builtin"
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _canonical_keys(cls, data: Any) -> Any:
        # Fold every spelling onto the field names; keys we do not know go to ``extra``
        # instead of failing, because agent files carry all sorts of tool-specific keys.
        if not isinstance(data, dict):
            return data
        known = set(cls.model_fields)
        out: dict[str, Any] = {}
        extra = dict(data.get("extra") or {})
        for key, value in data.items():
            if key == "extra":
                continue
            canon = canonical_key(str(key))
            if canon in known:
                out[canon] = value
            else:
                extra[str(key)] = value
        out["extra"] = extra
        return out

    @field_validator("name", mode="before")
    @classmethod
    def _check_name(cls, value: Any) -> Any:
        text = str(value).strip() if isinstance(value, str | int) else value
        if isinstance(text, str) and not re.match(NAME_PATTERN, text):
            raise ValueError(f"name {text!r} must be {NAME_RULE} (e.g. code-reviewer)")
        return text

    @field_validator("description", "system_prompt", mode="before")
    @classmethod
    def _strip_text(cls, value: Any) -> Any:
        if value is None:
            return ""
        return value.strip() if isinstance(value, str) else value

    @field_validator("tools", mode="before")
    @classmethod
    def _allowlist(cls, value: Any, info: ValidationInfo) -> list[str] | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        result = normalize_tool_names(value)
        if result.dropped:
            # The loader reports drops per file; this is for definitions built in code.
            logger.warning(
                "agent %r: tools: dropped names harness_nb has no tool for: %s",
                info.data.get("name", "?"),
                ", ".join(result.dropped),
            )
        return result.names

    @field_validator("disallowed_tools", mode="before")
    @classmethod
    def _denylist(cls, value: Any) -> list[str]:
        # Unknown names here would block tools we do not have; dropping them is harmless.
        return normalize_tool_names(value).names

    @field_validator("skills", mode="before")
    @classmethod
    def _skills(cls, value: Any) -> list[str]:
        names = split_names(value)
        for name in names:
            # A skill name is joined onto the skill folders: never let it be a path.
            if problem := skill_name_problem(name):
                raise ValueError(problem)
        return names

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _mcp_servers(cls, value: Any) -> list[str | dict[str, Any]]:
        # The shape only: names are looked up, and inline configurations checked, when the
        # agent runs (``SubagentRunner``), against the servers configured then.
        if value is None:
            return []
        if isinstance(value, dict):
            return [value]
        if isinstance(value, str):
            return list(split_names(value))
        if not isinstance(value, list):
            raise ValueError("mcpServers must be a list of server names or {name: config} entries")
        items: list[str | dict[str, Any]] = []
        for item in value:
            if isinstance(item, str) and item.strip():
                items.append(item.strip())
            elif isinstance(item, dict) and item:
                items.append(item)
            else:
                raise ValueError(f"mcpServers: {str(item)[:60]!r} is neither a server name nor {{name: config}}")
        return items

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> str | None:
        text = None if value is None else str(value).strip()
        return None if not text or text.lower() == "inherit" else text

    @field_validator("color", "isolation", "initial_prompt", mode="before")
    @classmethod
    def _string(cls, value: Any) -> str | None:
        # YAML reads "color: 0xff0000" or "color: 123" as a number; these are strings.
        return None if value is None else str(value)

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _permission_mode(cls, value: Any) -> Any:
        mode, note = normalize_permission_mode(value)
        if note:
            raise ValueError(note)
        return mode

    @field_validator("memory", "effort", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    def unsupported(self) -> list[str]:
        """The fields set here that harness_nb keeps but does not act on, in Claude Code's
        spelling (``hooks``, ``isolation``, ``initialPrompt``)."""
        values = {"hooks": self.hooks, "isolation": self.isolation, "initialPrompt": self.initial_prompt}
        return [name for name, value in values.items() if value not in (None, "", [], {})]

