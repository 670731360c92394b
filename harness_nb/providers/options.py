"""``ProviderOptions``: the knobs a person may set on any model, as one typed value.

``create_provider(model, options=...)`` applies them to whichever provider it builds:

==============  ==============================================  ===============================
option          OpenAI-style (openai, openai-compatible,        Anthropic
                ollama)
==============  ==============================================  ===============================
streaming       ``False``: one plain JSON answer per call       the same
max_tokens      ``max_completion_tokens`` (OpenAI) or           ``max_tokens`` (default 8192)
                ``max_tokens`` (other servers)
temperature     ``temperature``                                 ``temperature``
tool_choice     sent whenever tools are offered; default        ``{"type": "auto" | "any" |
                ``"auto"``                                      "none"}``, only when set
empty_content   an assistant turn of tool calls only: ``""``    (not used)
                (default), no key (``"omit"``) or ``null``
stream_usage    ``False`` leaves out ``stream_options``         (not used)
prompt_caching  (not used: OpenAI caches long prompts           ``False``: no ``cache_control``
                by itself and reports ``cached_tokens``)        breakpoints (default: tools,
                                                                system, the last two turns)
extra           merged into every request body                  the same
max_retries     retries of a failure that may pass              the same
timeout         seconds per request (connecting: at most 10)    the same
context_window  stored as ``provider.context_window``           the same
vision          images of tool results as ``image_url`` parts   ``image`` blocks in the
                of a user message after the results (default:   ``tool_result`` (default
                on for openai, off for openai-compatible and    on); off: a text placeholder
                ollama); off: a text placeholder per image      per image
replay_pace     (not used)                                      (not used)
==============  ==============================================  ===============================

A value given with a request (``ModelRequest.max_tokens``, ``.temperature``) wins over the
option. Offline models (``scripted/``, ``replay/``) take ``streaming``, ``context_window``
and ``vision`` and ignore the rest: those shape a request to a server, and a scripted
or recorded answer is the same whatever they say, so one set of options serves a notebook
whether it runs live or replays. ``replay_pace`` is the one option only ``replay/`` takes:
``"instant"`` (the default), ``"recorded"`` (the live run's pace, as the cassette timed it)
or a speed factor (``2``: twice as fast, ``0.5``: half as fast); see ``providers/pace.py``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core import ConfigError

__all__ = ["EmptyContent", "ProviderOptions", "ReplayPace", "ToolChoice", "check_pace"]

EmptyContent = Literal["empty_string", "omit", "null"]
ToolChoice = Literal["auto", "required", "none"]
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
