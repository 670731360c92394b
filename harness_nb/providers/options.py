"""``ProviderOptions``: the knobs a person may set on any model, as one typed value.

``create_provider(model, options=...)`` applies them to whichever provider it builds:

=================  ==========================================  ===============================
option             OpenAI-style (openai, openai-compatible,    Anthropic
                   ollama)
=================  ==========================================  ===============================
streaming          ``False``: one plain JSON answer per call   the same
max_tokens         ``max_completion_tokens`` (OpenAI) or       ``max_tokens`` (default 8192)
                   ``max_tokens`` (other servers)
temperature        ``temperature``                             ``temperature``
tool_choice        sent whenever tools are offered; default    ``{"type": "auto" | "any" |
                   ``"auto"``; a tool's name is sent as        "none"}``, only when set; a
                   ``{"type": "function", "function":          tool's name: ``{"type": "tool",
                   {"name": …}}``                              "name": …}``
structured_output  how a request's ``json_answer`` (a typed    only ``"tool"`` (the default):
                   map row's answer) is asked for:             a forced answer tool
                   ``"json_schema"`` (default:
                   ``response_format``) or ``"tool"`` (a
                   forced answer tool, for a server without
                   a JSON-schema mode)
empty_content      an assistant turn of tool calls only:       (not used)
                   ``""`` (default), no key (``"omit"``) or
                   ``null``
stream_usage       ``False`` leaves out ``stream_options``     (not used)
prompt_caching     (not used: OpenAI caches long prompts by    ``False``: no ``cache_control``
                   itself and reports ``cached_tokens``)       breakpoints (default: tools,
                                                               system, the last two turns)
extra              merged into every request body              the same
max_retries        retries of a failure that may pass          the same
timeout            seconds per request (connecting: at most    the same
                   10)
context_window     stored as ``provider.context_window``       the same
vision             images of tool results as ``image_url``     ``image`` blocks in the
                   parts of a user message after the results   ``tool_result`` (default
                   (default: on for openai, off for            on); off: a text placeholder
                   openai-compatible and ollama); off: a text  per image
                   placeholder per image
replay_pace        (not used)                                  (not used)
=================  ==========================================  ===============================

A value given with a request (``ModelRequest.max_tokens``, ``.temperature``,
``.tool_choice``) wins over the option. ``tool_choice`` naming a tool forces that tool on
every call that offers tools: one that offers others but not it is a ``ConfigError``
naming what it offers (``chosen_tool``), never a silent ``auto``. Offline models
(``scripted/``, ``replay/``) take ``streaming``, ``context_window`` and ``vision`` (and
``replay/`` the recorded model's ``structured_output``, so that typed map rows are asked
as they were recorded) and ignore the rest: those shape a request to a server, and a scripted or recorded answer is
the same whatever they say, so one set of options serves a notebook whether it runs live
or replays. ``replay_pace`` is the one option only ``replay/`` takes: ``"instant"`` (the
default), ``"recorded"`` (the live run's pace, as the cassette timed it) or a speed factor
(``2``: twice as fast, ``0.5``: half as fast); see ``providers/pace.py``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core import ConfigError

__all__ = [
    "TOOL_CHOICE_WORDS",
    "EmptyContent",
    "ProviderOptions",
    "ReplayPace",
    "StructuredOutput",
    "ToolChoice",
    "check_pace",
    "chosen_tool",
]

EmptyContent = Literal["empty_string", "omit", "null"]
ToolChoice = Literal["auto", "required", "none"] | str
"""One of ``TOOL_CHOICE_WORDS``, or the name of a tool the model must call."""
TOOL_CHOICE_WORDS = ("auto", "required", "none")
StructuredOutput = Literal["json_schema", "tool"]
# A tool name both APIs accept (OpenAI's function names; Anthropic's tool names).
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Other APIs' words for a choice: a person who writes one means ours, not a tool so named.
_FOREIGN_WORDS = {"any": "required", "tool": "a tool's name", "function": "a tool's name"}
ReplayPace = Literal["instant", "recorded"] | float
"""How fast ``replay/`` streams: at once, at the recorded pace, or that many times faster."""

_PACE_RULE = "it must be 'instant', 'recorded' or a speed factor above 0 (2: twice as fast, 0.5: half as fast)"


def check_pace(value: object) -> ReplayPace:
    """``value`` as a replay pace (a whole-number factor as a float); ``ValueError`` saying
    what a pace may be when it is none. The one rule for the option and the notebook setting."""
    if value in ("instant", "recorded"):
        return cast(ReplayPace, value)
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf:
        return float(value)
    raise ValueError(_PACE_RULE)

# Body fields that ``extra`` may not set: the provider writes them itself, or they have
# their own option (one place to say each thing).
_OWN_FIELDS = {
    "max_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "temperature": "temperature",
    "tool_choice": "tool_choice",
    "stream": "streaming",
    "stream_options": "stream_usage",
}
_PROVIDER_FIELDS = ("model", "messages", "system", "tools")


class ProviderOptions(BaseModel):
    """Options of one provider (see the module doc for what each does on each API).
    ``None`` means the provider's default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    streaming: bool | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    tool_choice: ToolChoice | None = None
    structured_output: StructuredOutput | None = None
    empty_content: EmptyContent | None = None
    stream_usage: bool | None = None
    prompt_caching: bool | None = None
    context_window: Annotated[int, Field(gt=0)] | None = None
    vision: bool | None = None
    max_retries: Annotated[int, Field(ge=0)] | None = None
    timeout: Annotated[float, Field(gt=0)] | None = None
    replay_pace: ReplayPace | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("extra")
    @classmethod
    def _no_owned_fields(cls, extra: dict[str, Any]) -> dict[str, Any]:
        for key in extra:
            if key in _OWN_FIELDS:
                raise ValueError(f"{key!r} has its own option: set {_OWN_FIELDS[key]} instead")
            if key in _PROVIDER_FIELDS:
                raise ValueError(f"{key!r} is written by the provider itself")
        return extra

    @field_validator("tool_choice")
    @classmethod
    def _choice(cls, choice: str | None) -> str | None:
        if choice is None or choice in TOOL_CHOICE_WORDS:
            return choice
        if choice in _FOREIGN_WORDS:
            raise ValueError(f"write {_FOREIGN_WORDS[choice]} (harness_nb's words are auto, required, none, or a tool's name)")
        if not _TOOL_NAME.match(choice):
            raise ValueError("give auto, required, none, or a tool's name (letters, digits, _ and -, at most 64)")
        return choice

    @field_validator("replay_pace", mode="plain")
    @classmethod
    def _pace(cls, value: object) -> ReplayPace | None:
        # plain: a union's per-member errors would read as two problems; this is one rule
        return None if value is None else check_pace(value)

    @classmethod
    def of(
        cls, options: ProviderOptions | Mapping[str, Any] | None = None, **more: Any
    ) -> ProviderOptions:
        """``options`` (a ``ProviderOptions``, a mapping or ``None``) plus ``more``, checked:
        a bad key or value is one ``ConfigError`` naming it."""
        if isinstance(options, ProviderOptions):
            given: dict[str, Any] = options.model_dump(exclude_unset=True)
        elif isinstance(options, Mapping):
            given = dict(options)
        elif options is None:
            given = {}
        else:
            raise ConfigError(
                f"provider options must be a mapping (e.g. {{'temperature': 0.2}}), "
                f"not {type(options).__name__}"
            )
        twice = sorted(set(given) & set(more))
        if twice:
            raise ConfigError(f"provider option {', '.join(twice)} given twice; give each once")
        try:
            return cls.model_validate({**given, **more})
        except ValidationError as exc:
            raise ConfigError(_explain(exc)) from None


def chosen_tool(choice: str | None, offered: Sequence[str]) -> str | None:
    """``choice`` (a request's tool choice, else the option's) checked against the tools a
    request ``offered``: a word passes, a tool's name must be among them — else a
    ``ConfigError`` naming the closest, since the API would refuse the request (or, with
    the tool missing, the model could never comply)."""
    if choice is None or choice in TOOL_CHOICE_WORDS or choice in offered:
        return choice
    close = difflib.get_close_matches(choice, [*offered, *TOOL_CHOICE_WORDS], n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    listing = ", ".join(offered) if offered else "none"
    raise ConfigError(
        f"tool_choice names the tool {choice!r}{hint}, which this request does not offer (it offers: {listing}); "
        "name an offered tool, or set auto / required / none"
    )


def _explain(exc: ValidationError) -> str:
    valid = sorted(ProviderOptions.model_fields)
    problems = []
    for error in exc.errors():
        name = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"unknown provider option {name!r}{hint}")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            shown = repr(error["input"])
            shown = shown if len(shown) <= 80 else shown[:79] + "…"
            problems.append(f"provider option {name}={shown}: {message}")
    unknown = any(error["type"] == "extra_forbidden" for error in exc.errors())
    listing = f". Valid options: {', '.join(valid)}" if unknown else ""
    return "; ".join(problems) + listing
