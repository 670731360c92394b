"""Typed map outputs: ``h.map(agent, template, rows, output=...)``.

``output`` is a pydantic model, a mapping of field names to types
(``{"label": Literal["bug", "question"], "score": float}``) or the same written as text
(``"label:bug|question, score:float"``, what ``%agent map --output`` takes; one parser,
``output_fields``). ``RowOutput`` holds the model built from it and its JSON Schema.

How a row's final answer is made structured: its provider is wrapped (``AnswerShaper``) so
that every call of the row asks for the answer in the schema, the way that provider can:

- ``structured_output == "json_schema"`` (OpenAI-style servers): the request carries a
  ``JsonAnswer``, sent as ``response_format``; the model may call its tools as usual, and
  its final text is the JSON. The schema is sent strict when OpenAI's strict subset can
  hold it (every field required, no defaults, closed objects), else not strict.
- ``"tool"`` (Anthropic, and servers without a JSON-schema mode): the request offers one
  more tool, ``final_answer``, whose parameters are the schema, and forces a call
  (``tool_choice``: that tool by name when the row has no other tool, else ``required``).
  A ``final_answer`` call comes back to the engine as the answer's text (its arguments),
  so the run ends there like any final answer; other calls of the same answer are dropped.

Either way the text is validated by the model (``RowOutput.check``, a code fence around
the JSON tolerated); a row whose answer does not fit is asked once more, with the problem
(``fix_prompt``), and a second misfit fails the row with that problem as its error.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import json
import re
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, create_model
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from ..core import AssistantMessage, ConfigError, ToolSpec
from ..providers.base import JsonAnswer, ModelRequest, ModelResponse, Provider, StreamItem, TextChunk

__all__ = ["ANSWER_TOOL", "RESERVED_COLUMNS", "AnswerShaper", "RowOutput", "output_fields", "row_output"]

ANSWER_TOOL = "final_answer"
RESERVED_COLUMNS = ("error", "tokens", "cost", "attempts")
"""Columns ``MapResult.frame()`` adds beside the fields: no field may take their names."""

TYPE_NAMES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "list[str]": list[str],
    "list[int]": list[int],
    "list[float]": list[float],
}
_SPEC_EXAMPLE = "e.g. 'label:bug|question, score:float'"
_TYPES_LISTED = f"{', '.join(TYPE_NAMES)}, or choices a|b|c"
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n```$", re.DOTALL)
_MAX_PROBLEMS = 5

ANSWER_TOOL_DESCRIPTION = "Give this row's final answer: its fields. Call it once, when you are done."
JSON_NOTE = "Give your final answer as one JSON object with this row's fields, and nothing before or after it."
TOOL_NOTE = f"Give your final answer by calling {ANSWER_TOOL} with this row's fields; do not answer in text."


def output_fields(spec: str) -> dict[str, Any]:
    """The fields ``spec`` names (``"label:bug|question, score:float"``) as name → type: a
    type of ``TYPE_NAMES``, or two or more choices joined by ``|`` (a ``Literal`` of texts,
    or of whole numbers when every choice is one: ``rating:1|2|3``). A bad spec is one
    ``ConfigError`` naming the first problem and how to write it."""
    fields: dict[str, Any] = {}
    items = [item.strip() for item in spec.split(",")]
    if not any(items):
        raise ConfigError(f"the output names no field: give name:type pairs, {_SPEC_EXAMPLE}")
    for item in items:
        if not item:
            raise ConfigError(f"output {spec!r} has an empty field between commas; {_SPEC_EXAMPLE}")
        name, colon, kind = (part.strip() for part in item.partition(":"))
        if not colon or not kind:
            raise ConfigError(f"output field {name!r} has no type: write {name}:TYPE, TYPE being {_TYPES_LISTED}")
        _check_name(name)
        if name in fields:
            raise ConfigError(f"output field {name} is given twice")
        fields[name] = _field_type(name, kind)
    return fields


def _check_name(name: str) -> None:
    if not _FIELD_NAME.match(name):
        raise ConfigError(f"output field {name!r} is not a field name: use letters, digits and _ (not first a digit)")
    if name in RESERVED_COLUMNS:
        raise ConfigError(
            f"output field {name!r} would clash with the result's own {name} column "
            f"({', '.join(RESERVED_COLUMNS)}); rename the field"
        )


def _field_type(name: str, kind: str) -> Any:
    if kind in TYPE_NAMES:
        return TYPE_NAMES[kind]
    if "|" not in kind:
        close = difflib.get_close_matches(kind, list(TYPE_NAMES), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"output field {name}: {kind!r} is no type{hint}; use {_TYPES_LISTED}")
    choices = [choice.strip() for choice in kind.split("|")]
    if not all(choices):
        raise ConfigError(f"output field {name}: {kind!r} has an empty choice; write choices as a|b|c")
    if len(set(choices)) != len(choices):
        raise ConfigError(f"output field {name}: {kind!r} names a choice twice")
    if all(re.fullmatch(r"-?[0-9]+", choice) for choice in choices):  # a rating 1|2|3: whole numbers
        return Literal[tuple(int(choice) for choice in choices)]
    return Literal[tuple(choices)]


@dataclass(frozen=True, slots=True)
class RowOutput:
    """The shape of every row's answer: ``model`` validates it, ``schema`` (its JSON
    Schema) is what the model is asked to fill, ``strict`` whether OpenAI's strict mode
    can hold it, ``fingerprint`` a hash of the schema (a map's store key has it)."""

    model: type[BaseModel]
    schema: Mapping[str, Any]
    strict: bool
    fingerprint: str

    @property
    def columns(self) -> list[str]:
        """The field names, in order: the first columns of ``MapResult.frame()``."""
        return list(self.model.model_fields)

    def check(self, text: str) -> BaseModel | str:
        """``text`` (a JSON object, perhaps in a code fence) as the model, or what is wrong
        with it, as the model should read it."""
        raw = text.strip()
        if fenced := _FENCE.match(raw):
            raw = fenced.group(1).strip()
        try:
            return self.model.model_validate_json(raw)
        except ValidationError as exc:
            return _problems(exc)

    def fix_prompt(self, problem: str) -> str:
        """What a row whose answer did not fit is told before its second try."""
        return f"That answer does not fit this row's fields: {problem}. Give the whole answer again, corrected."

    def json_answer(self) -> JsonAnswer:
        return JsonAnswer("row_answer", self.schema, strict=self.strict)

    def answer_tool(self) -> ToolSpec:
        return ToolSpec(name=ANSWER_TOOL, description=ANSWER_TOOL_DESCRIPTION, parameters=dict(self.schema))


def row_output(output: type[BaseModel] | Mapping[str, Any] | str) -> RowOutput:
    """``output`` (see the module doc) as a ``RowOutput``; ``ConfigError`` when it is none
    of the three or names a field ``MapResult.frame()`` needs for itself."""
    if isinstance(output, str):
        output = output_fields(output)
    if isinstance(output, Mapping):
        if not output:
            raise ConfigError(f"the output names no field: give a mapping of field names to types, {_SPEC_EXAMPLE}")
        for name in output:
            _check_name(str(name))
        try:
            model: type[BaseModel] = create_model(
                "RowAnswer", **{str(name): (kind, ...) for name, kind in output.items()}
            )  # type: ignore[call-overload]
        except (TypeError, PydanticSchemaGenerationError, PydanticUserError) as exc:
            raise ConfigError(f"the output's types cannot be checked: {exc}".split("\n")[0]) from None
    elif isinstance(output, type) and issubclass(output, BaseModel):
        model = output
        for name in model.model_fields:
            _check_name(name)
    else:
        raise ConfigError(
            "output must be a pydantic model, a mapping of field names to types or a text such as "
            f"'label:bug|question, score:float', not {type(output).__name__}"
        )
    try:
        schema = model.model_json_schema()
    except (PydanticSchemaGenerationError, PydanticUserError) as exc:
        raise ConfigError(f"the output's JSON Schema cannot be made: {exc}".split("\n")[0]) from None
    closed, strict = strict_schema(schema)
    canonical = json.dumps(closed, sort_keys=True, separators=(",", ":"))
    return RowOutput(model, closed, strict, hashlib.sha256(canonical.encode()).hexdigest())


def strict_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """``schema`` with every object closed (``additionalProperties: false``), and whether
    OpenAI's strict mode can take it: every property required, no ``default``, no open
    mapping (``dict[str, X]``)."""
    closed = copy.deepcopy(dict(schema))
    strict = True

    def visit(node: Any) -> None:
        nonlocal strict
        if not isinstance(node, dict):
            return
        if "default" in node:
            strict = False
        if node.get("type") == "object":
            properties = node.get("properties")
            if not isinstance(properties, dict) or isinstance(node.get("additionalProperties"), dict):
                strict = False
            elif set(node.get("required", ())) != set(properties):
                strict = False
            if isinstance(properties, dict):
                node["additionalProperties"] = False
        for key in ("properties", "$defs", "definitions", "patternProperties"):
            for child in (node.get(key) or {}).values():
                visit(child)
        for key in ("items", "additionalProperties", "not"):
            visit(node.get(key))
        for key in ("anyOf", "allOf", "oneOf", "prefixItems"):
            for child in node.get(key) or ():
                visit(child)

    visit(closed)
    return closed, strict


def _problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:_MAX_PROBLEMS]:
        where = ".".join(str(part) for part in error["loc"]) or "the answer"
        message = str(error["msg"])
        if error["type"] not in ("missing", "json_invalid", "model_type"):
            shown = repr(error["input"])
            message += f" (got {shown if len(shown) <= 60 else shown[:59] + '…'})"
        parts.append(f"{where}: {message}")
    more = exc.error_count() - _MAX_PROBLEMS
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


class AnswerShaper(Provider):
    """``inner``, asking each call for the answer in ``output``'s shape (see the module
    doc). It looks like ``inner`` to the engine (model, window, prices, streaming) and does
    not close it: ``inner`` is shared with every other run of the harness."""

    def __init__(self, inner: Provider, output: RowOutput) -> None:
        super().__init__(inner.model)
        self.name = inner.name  # type: ignore[misc]  # callers branch on it (model aliases, prices)
        self.inner = inner
        self.output = output
        self.streaming = inner.streaming
        self.context_window = inner.context_window
        self.vision = inner.vision
        self.cache_writes = inner.cache_writes
        self.structured_output = inner.structured_output
        self.token_ratio = inner.token_ratio  # one calibration, whoever calls

    async def discover_window(self) -> int | None:
        self.context_window = await self.inner.discover_window()
        return self.context_window

    def learn_window(self, tokens: int) -> None:
        self.context_window = tokens
        self.inner.learn_window(tokens)

    def output_limit(self, request: ModelRequest) -> int | None:
        return self.inner.output_limit(request)

    def shaped(self, request: ModelRequest) -> ModelRequest:
        """``request`` asking for the answer in the output's shape."""
        if self.structured_output == "json_schema":
            return replace(request, system=f"{request.system}\n\n{JSON_NOTE}", json_answer=self.output.json_answer())
        if any(tool.name == ANSWER_TOOL for tool in request.tools):
            raise ConfigError(f"the row's agent has a tool named {ANSWER_TOOL}, the name a typed map's answer tool needs")
        choice = "required" if request.tools else ANSWER_TOOL
        tools = [*request.tools, self.output.answer_tool()]
        return replace(request, system=f"{request.system}\n\n{TOOL_NOTE}", tools=tools, tool_choice=choice)

    def answered(self, response: ModelResponse) -> ModelResponse:
        """``response`` with a ``final_answer`` call turned into the answer's text."""
        call = next((c for c in response.message.tool_calls if c.name == ANSWER_TOOL), None)
        if call is None:
            return response
        message = AssistantMessage(content=call.arguments, thinking=response.message.thinking)
        return response.model_copy(update={"message": message, "stop_reason": "end_turn"})

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self.answered(await self.inner.complete(self.shaped(request)))

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        async with contextlib.aclosing(self.inner.stream(self.shaped(request))) as items:
            async for item in items:
                yield item if isinstance(item, TextChunk) else self.answered(item)

    def __repr__(self) -> str:
        return f"<AnswerShaper {self.inner!r}>"
