"""Tools: one definition gives the model its description and schema and runs the call.

A tool is either a typed async function decorated with ``@tool`` (its docstring is the
description, its parameters become a pydantic model and so a JSON schema) or a small
``Tool`` subclass. ``invoke`` is the single boundary where arguments are validated and
every failure becomes a result the model can read.

Every schema offered is sent with every call, so each is kept to what changes what the
model does: the description says when to use the tool and what comes back; the schema
leaves out what a model cannot act on (titles, ``additionalProperties``, a ``null``
alternative for an optional argument, which is left out instead). A tool that cannot be
used yet (``Tool.usable``) is not offered at all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ..core import DisplayData, Event, HarnessError, ImagePart, ToolCall, ToolSpec, UnknownNameError, escape_surrogates


class CallOrder:
    """The calls of one model turn that take effect in the order the model made them,
    while they still run side by side: the delegation tool numbers its tasks (bg-1, bg-2,
    …) by it, so the numbers follow the calls and not which call's permission check
    happened to finish first (each runs on a worker thread). ``wait_turn(call_id)``
    returns once every earlier call in the order has passed its turn (``pass_turn``) or
    ended (the engine passes it then); a call not in the order never waits."""

    def __init__(self, call_ids: Iterable[str] = ()) -> None:
        self._ids = list(dict.fromkeys(call_ids))
        self._passed = {call_id: asyncio.Event() for call_id in self._ids}

    async def wait_turn(self, call_id: str) -> None:
        if call_id not in self._passed:
            return
        for earlier in self._ids[: self._ids.index(call_id)]:
            await self._passed[earlier].wait()

    def pass_turn(self, call_id: str) -> None:
        event = self._passed.get(call_id)
        if event is not None:
            event.set()


@dataclass(slots=True)
class ToolContext:
    """What a running tool may use: the working directory, the call, the calling agent, the
    event sink, the tool itself, and ``parent``: the calling run as a subagent would inherit
    it (an ``engine.ParentContext``, typed loosely so that tools need not import the engine;
    the delegation tool starts its subagents from it). ``roots`` are folders outside the
    workdir that the file tools may use too (a subagent's memory folder). ``order``: the
    turn's calls of ``in_call_order`` tools, for effects that must follow the calls' order.
    ``ask``: for a tool that asks the person itself (``Tool.asks_itself``), why the hooks
    would ask (``ask_risk``: how risky they judged it); ``None`` when they let the call run
    unasked.

    Read it, never assign to it: the hooks around the call read the same one (a changed
    copy is ``dataclasses.replace(ctx, ...)``). Not a frozen dataclass, whose checked
    construction cost ~2 µs on every tool call, against ~0.5 µs."""

    workdir: Path
    call: ToolCall
    agent: str = "main"
    emit: Callable[[Event], Any] = lambda _event: None
    tool: Tool | None = None
    parent: Any = None
    roots: tuple[Path, ...] = ()
    order: CallOrder = field(default_factory=CallOrder)
    ask: str | None = None
    ask_risk: str = "medium"


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool may return instead of plain text: the ``text`` the model reads, the
    ``images`` it sees when its model takes images (a text placeholder otherwise), and
    ``displays`` the cell shows the person (a DataFrame's HTML) and the model never sees.
    See ``core.media`` for the bounds."""

    text: str
    images: tuple[ImagePart, ...] = ()
    displays: tuple[DisplayData, ...] = ()


@dataclass(slots=True)
class ToolOutcome:
    """The text the model sees for one call, whether it is an error, and the images and
    displays that go with it. A hook that changes the text keeps the rest
    (``with_content``)."""

    content: str
    is_error: bool = False
    duration: float = 0.0
    images: tuple[ImagePart, ...] = ()
    displays: tuple[DisplayData, ...] = ()

    def with_content(self, content: str) -> ToolOutcome:
        """This outcome with ``content`` as its text; images, displays and the rest kept."""
        return dataclasses.replace(self, content=content)


class Tool(ABC):
    """Base class for tools. Set ``name``, ``description`` and ``Params`` and implement ``run``.

    ``read_only`` tools never change files or state; ``long_running`` tools (the delegation
    tool) escape the per-tool timeout; ``coordination`` tools are never given to a subagent;
    ``in_call_order`` tools take their turn in ``ToolContext.order`` (see ``CallOrder``);
    ``changes_files`` overrides whether the tool is ``effectful``; ``foreground_only`` tools
    (they block the person's kernel or write into their notebook) go to a subagent that
    runs unwatched — in the background, as a map row — only when its agent file names them;
    ``watched_only`` tools never do, even when named (they act on the page of the cell
    running now, which is not an unwatched run's, and a card of their own would pass
    ``background_approvals`` by).
    ``asks_itself`` tools show the person a card of their own (the notebook's diff in the
    cell), or ask the run's channel themselves once they know what to show
    (``notebook_run``: the source it read; ``engine.hook.ask_channel``): when the hooks
    would ask, the call runs with ``ToolContext.ask`` set instead of going to the approval
    channel, and the tool asks, waits (its own timeout: the per-tool one does not apply
    then) and emits the ``ApprovalDecided``; deny rules and modes refuse it as any other
    call.
    """

    name: str
    description: str
    Params: type[BaseModel]
    read_only: bool = False
    long_running: bool = False
    coordination: bool = False
    in_call_order: bool = False
    changes_files: bool | None = None
    foreground_only: bool = False
    watched_only: bool = False
    asks_itself: bool = False
    # The name of a parameter holding the tool's own timeout in seconds (bash has one): the
    # engine then waits that long (plus a margin) instead of cutting it off earlier.
    timeout_param: str | None = None

    _spec: ToolSpec | None = None

    @property
    def sandboxed(self) -> bool:
        """Whether the operating system confines what this tool's calls can do (``bash``
        bound to an active ``Sandbox``): a permission policy may then let more run unasked."""
        return False

    @property
    def effectful(self) -> bool:
        """Whether a call may change files in the workdir, so that the workdir is
        checkpointed around it (``sandbox.checkpoints.checkpoint``): ``changes_files`` when set, else
        every tool that is not read-only, coordination or long-running (a subagent's own
        calls are checkpointed one by one)."""
        if self.changes_files is not None:
            return self.changes_files
        return not (self.read_only or self.coordination or self.long_running)

    def usable(self) -> bool:
        """Whether the model can use this tool now. One that cannot yet (``skill`` with no
        skill installed, ``task_output`` before any background task) is left out of the
        requests, which carry every offered schema on every call; called anyway, it runs."""
        return True

    def spec(self) -> ToolSpec:
        """The model-facing definition (cached: schemas are built once)."""
        if self._spec is None:
            self._spec = ToolSpec(
                name=self.name, description=self.description, parameters=_schema(self.Params)
            )
        return self._spec

    @abstractmethod
    async def run(self, params: Any, ctx: ToolContext) -> str | ToolOutput:
        """Do the work and return the text the model reads (or a ``ToolOutput``: text with
        images and displays). Raise ``ToolError`` to refuse."""

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


class _ParamsBase(BaseModel):
    model_config = ConfigDict(extra="forbid")


_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], str] = weakref.WeakKeyDictionary()


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, without what the model cannot act on (see the
    module doc): arguments are still checked against the whole model. Made once per model
    (pydantic takes ~0.5 ms a schema, and every harness makes its own file tools over the
    same models); each caller gets a copy of its own."""
    known = _SCHEMAS.get(model)
    if known is None:
        known = _SCHEMAS[model] = json.dumps(_made_schema(model))
    return json.loads(known)


def _made_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("additionalProperties", None)
    for name, prop in list(schema.get("properties", {}).items()):
        prop.pop("title", None)
        schema["properties"][name] = _without_null(prop)
    return schema


def _without_null(prop: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` with ``default: null`` as X alone: leaving the argument out
    means null."""
    options = prop.get("anyOf")
    if "default" not in prop or prop["default"] is not None or not isinstance(options, list) or len(options) != 2:
        return prop
    kept = [o for o in options if o != {"type": "null"}]
    if len(kept) != 1:
        return prop
    rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
    return {**kept[0], **rest}


class FunctionTool(Tool):
    """A tool made from ``async def fn(ctx: ToolContext, <typed params>) -> str`` (or
    ``-> ToolOutput``)."""

    def __init__(
        self,
        fn: Callable[..., Awaitable[str | ToolOutput]],
        *,
        name: str | None = None,
        read_only: bool = False,
        long_running: bool = False,
        coordination: bool = False,
        timeout_param: str | None = None,
        foreground_only: bool = False,
        watched_only: bool = False,
        usable: Callable[[], bool] | None = None,
        changes_files: bool | None = None,
        asks_itself: bool = False,
    ) -> None:
        self.fn = fn
        self.foreground_only = foreground_only
        self.watched_only = watched_only
        self.changes_files = changes_files
        self.asks_itself = asks_itself
        self._usable = usable
        self.timeout_param = timeout_param
        self.name = name or fn.__name__
        self.description = _unwrapped(inspect.cleandoc(fn.__doc__ or ""))
        if not self.description:
            raise TypeError(f"tool {self.name!r} needs a docstring: it is what the model reads")
        self.read_only = read_only
        self.long_running = long_running
        self.coordination = coordination
        self.Params = _params_model(fn, self.name)

    def usable(self) -> bool:
        return self._usable() if self._usable is not None else True

    async def run(self, params: Any, ctx: ToolContext) -> str | ToolOutput:
        # The fields straight from the model's dict (which holds them alone: its model forbids
        # extras): ``dict(params)`` asks the model for ``keys`` first, which pydantic answers
        # by raising an AttributeError it formats in Python (~4 µs a call).
        return await self.fn(ctx, **params.__dict__)


def _unwrapped(doc: str) -> str:
    """A docstring as a description: each paragraph on one line (the model gains nothing from
    the source's line breaks, and each costs a byte on every call)."""
    return "\n\n".join(" ".join(p.split()) for p in doc.strip().split("\n\n") if p.strip())


# (code, name) -> (what else shapes the model, the model); bounded by the functions in the code
_PARAMS: dict[tuple[Any, str], tuple[tuple[Any, ...], type[BaseModel]]] = {}


def _params_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """The arguments' model of ``fn``, shared by every tool made from the same code with
    the same annotations and defaults: a harness makes its coordination and file tools
    from closures of its own, and pydantic takes ~0.5 ms a model (~3 ms a harness)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return _made_params_model(fn, name)
    shape = (dict(getattr(fn, "__annotations__", None) or {}), fn.__defaults__, fn.__kwdefaults__)
    known = _PARAMS.get((code, name))
    try:
        if known is not None and known[0] == shape:
            return known[1]
    except Exception:  # noqa: BLE001 - a default that cannot be compared: a model of its own
        return _made_params_model(fn, name)
    model = _made_params_model(fn, name)
    _PARAMS[code, name] = (shape, model)
    return model


def _made_params_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].name != "ctx":
        raise TypeError(f"tool function {name!r} must take `ctx` as its first parameter")
    for p in params[1:]:
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints.get(p.name, Any), default)
    camel = "".join(part.title() for part in name.split("_")) + "Params"
    return create_model(camel, __base__=_ParamsBase, **fields)


def tool(
    fn: Callable[..., Awaitable[str | ToolOutput]] | None = None,
    *,
    name: str | None = None,
    read_only: bool = False,
    long_running: bool = False,
    coordination: bool = False,
    timeout_param: str | None = None,
    foreground_only: bool = False,
    watched_only: bool = False,
    usable: Callable[[], bool] | None = None,
    changes_files: bool | None = None,
    asks_itself: bool = False,
) -> Any:
    """Decorator: turn a typed async function into a ``FunctionTool`` (``usable``: whether
    it can be used now, see ``Tool.usable``; the other flags as on ``Tool``)."""

    def wrap(f: Callable[..., Awaitable[str | ToolOutput]]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            read_only=read_only,
            long_running=long_running,
            coordination=coordination,
            timeout_param=timeout_param,
            foreground_only=foreground_only,
            watched_only=watched_only,
            usable=usable,
            changes_files=changes_files,
            asks_itself=asks_itself,
        )

    return wrap(fn) if fn is not None else wrap


class ToolRegistry:
    """An ordered set of tools by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, t: Tool) -> None:
        """Add or replace a tool."""
        self._tools[t.name] = t

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The schemas offered to the model: the tools it can use now (``Tool.usable``)."""
        return [t.spec() for t in self._tools.values() if t.usable()]

    def with_tool(self, t: Tool) -> ToolRegistry:
        """A new registry: this one with ``t`` in place of the tool of its name (or last)."""
        made = ToolRegistry()
        made._tools = {**self._tools, t.name: t}  # a dict copy: ~0.1 µs, where adding one by one takes ~1 µs a tool
        return made

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A new registry holding only the named tools that exist here (order kept)."""
        wanted = set(names)
        return ToolRegistry(t for n, t in self._tools.items() if n in wanted)

    def pick(self, names: Iterable[str]) -> list[Tool]:
        """The named tools, in this registry's order. A name not here is an
        ``UnknownNameError`` listing the names there are."""
        wanted = set(names)
        for name in wanted:
            if name not in self._tools:
                raise UnknownNameError("tool", name, self._tools)
        return [t for n, t in self._tools.items() if n in wanted]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({', '.join(self._tools)})"


def own_timeout(t: Tool, call: ToolCall) -> float | None:
    """The timeout a call asks the tool itself to apply (its ``timeout_param``), if any."""
    if t.timeout_param is None:
        return None
    try:
        value = call.parsed_arguments().get(t.timeout_param)
    except ValueError:
        return None
    if value is None:
        field = t.Params.model_fields.get(t.timeout_param)
        value = field.default if field is not None else None
    return float(value) if isinstance(value, int | float) else None


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _params(t: Tool, call: ToolCall) -> BaseModel | ToolOutcome:
    """``call``'s arguments checked against ``t.Params``, or the error outcome that tells
    the model what is wrong with them. Arguments that pass are parsed and checked in one
    step (pydantic reads the JSON itself); any that do not are parsed and checked again,
    apart, for the message: the outcome is the same either way."""
    try:
        return t.Params.model_validate_json(call.arguments)
    except ValidationError:
        pass
    try:
        raw = call.parsed_arguments()
    except ValueError as exc:
        return ToolOutcome(f"error: {exc}. Send the arguments as one JSON object.", True)
    try:
        return t.Params.model_validate(raw)
    except ValidationError as exc:
        fields = ", ".join(t.Params.model_fields) or "none"
        return ToolOutcome(
            f"error: bad arguments for {t.name}: {_validation_message(exc)}; call it again with arguments "
            f"its schema allows ({fields})",
            True,
        )


async def invoke(t: Tool, call: ToolCall, ctx: ToolContext) -> ToolOutcome:
    """Validate ``call``'s arguments against ``t`` and run it. Every failure except
    cancellation becomes an error outcome the model can read and act on."""
    start = time.perf_counter()
    params = _params(t, call)
    if isinstance(params, ToolOutcome):
        return params
    try:
        content = await t.run(params, ctx)
    except HarnessError as exc:  # ToolError and friends: messages written for the model
        return ToolOutcome(escape_surrogates(f"error: {exc}"), True, time.perf_counter() - start)
    except Exception as exc:  # a crashing tool must not crash the loop
        return ToolOutcome(
            escape_surrogates(
                f"error: {t.name} failed: {type(exc).__name__}: {exc} (a fault in the tool, not in the call: "
                "do it another way, or tell the person)"
            ),
            True,
            time.perf_counter() - start,
        )
    # A non-UTF-8 name in any tool's output reaches the model as visible text (\xff).
    duration = time.perf_counter() - start
    if isinstance(content, ToolOutput):
        return ToolOutcome(escape_surrogates(content.text), False, duration, content.images, content.displays)
    return ToolOutcome(escape_surrogates(content), False, duration)
