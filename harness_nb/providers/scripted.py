"""``ScriptedProvider``: an offline model that answers from a script.

A script is a list of steps, or a mapping of agent name to a list of steps (``"*"`` is
the fallback list for agents not named). A step is a dict::

    {"text": "I'll look.",                       # streamed as a few chunks
     "tool_calls": [{"name": "grep", "arguments": {"pattern": "TODO"}}],
     "match": "TODO",          # optional: only when the latest user message(s) contain this
     "usage": {"input_tokens": 10, "output_tokens": 5},   # optional: estimated otherwise
     "delay": 0.2,             # optional: seconds before answering (demos)
     "stop_reason": "end_turn",
     "error": "text"}          # optional: fail this call with a ProviderError (one that
                               # says the prompt is too long is a context-length error)

or a callable ``(ModelRequest) -> dict`` for tests that compute their answer. Steps are
used once each, in order (a ``match`` step is taken only by a matching request, which
keeps parallel subagents deterministic). ``assert_complete()`` fails when steps are left.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core import AssistantMessage, ConfigError, ProviderError, ToolCall, Usage, UserMessage
from ..core.imports import shielded_imports
from .base import ModelRequest, ModelResponse, Provider, StreamItem, TextChunk, under
from .options import ProviderOptions
from .window import context_length_error

Step = Mapping[str, Any] | Callable[[ModelRequest], Mapping[str, Any]]

_WORDS = re.compile(r"\S+\s*|\s+")


class ScriptedProvider(Provider):
    """An offline provider that replays a script of steps, per agent. Of ``options`` it
    takes ``streaming`` and ``context_window`` (the rest shape requests to a server)."""

    name = "scripted"
    offline = True

    def __init__(
        self,
        script: Sequence[Step] | Mapping[str, Sequence[Step]] = (),
        *,
        model: str = "script",
        chunk_delay: float = 0.0,
        options: ProviderOptions | None = None,
    ) -> None:
        super().__init__(model, options=options)
        self.chunk_delay = chunk_delay
        self._queues: dict[str, list[Step]] = {}
        if isinstance(script, Mapping):
            for agent, steps in script.items():
                self._queues[agent] = list(steps)
        else:
            self._queues["*"] = list(script)
        self.requests: list[ModelRequest] = []
        self._ids = 0

    @classmethod
    def from_file(
        cls, path: str | Path, *, workdir: Path | None = None, **keywords: Any
    ) -> ScriptedProvider:
        """Load a script from YAML or JSON: a list of steps, ``{"steps": [...]}`` or
        ``{"agents": {"main": [...], "explore": [...]}}`` (plus optional ``chunk_delay`` and
        ``model``); ``keywords`` go to the constructor. ``path`` is taken relative to
        ``workdir``; the model is named after the path as given
        (``scripted/scripts/demo.yaml``) unless the script names one."""
        p = under(workdir, path)
        if not p.is_file():
            raise ConfigError(f"scripted model file not found: {p}; give a path to a .yaml or .json script")
        text = p.read_text(encoding="utf-8")
        try:
            if p.suffix == ".json":
                data = json.loads(text)
            else:
                with shielded_imports():
                    import yaml

                data = yaml.safe_load(text)
        except Exception as exc:
            raise ConfigError(f"cannot parse scripted model file {p}: {exc}") from None
        if isinstance(data, Mapping):
            keywords.setdefault("chunk_delay", float(data.get("chunk_delay", 0.0)))
            keywords.setdefault("model", str(data.get("model", path)))
            if "agents" in data:
                return cls(data["agents"], **keywords)
            if "steps" in data:
                return cls(data["steps"], **keywords)
            raise ConfigError(f"{p}: a script needs a `steps:` list or an `agents:` mapping")
        if isinstance(data, list):
            keywords.setdefault("model", str(path))
            return cls(data, **keywords)
        raise ConfigError(f"{p}: a script must be a list of steps or a mapping, got {type(data).__name__}")

    def enqueue(self, *steps: Step, agent: str = "*") -> None:
        """Append steps for ``agent`` (``"*"``: any agent without its own list)."""
        self._queues.setdefault(agent, []).extend(steps)

    def remaining(self) -> dict[str, int]:
        """Unused steps per agent key."""
        return {k: len(v) for k, v in self._queues.items() if v}

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` when any step was not used."""
        left = self.remaining()
        if left:
            raise AssertionError(f"scripted model has unused steps: {left}")

    def _next_step(self, request: ModelRequest) -> Mapping[str, Any]:
        key = request.agent if request.agent in self._queues else "*"
        queue = self._queues.get(key, [])
        latest = _latest_prompt(request)
        for i, step in enumerate(queue):
            match = None if callable(step) else step.get("match")
            if match is None or str(match) in latest:
                del queue[i]
                return step(request) if callable(step) else step
        used = sum(1 for r in self.requests if r.agent == request.agent) - 1
        raise ProviderError(
            f"the script has no step left for agent {request.agent!r} (after {used} answers; "
            f"latest prompt {latest[:80]!r}). Add steps to the script or check `match` values.",
            provider=self.name,
        )

    def _record(self, request: ModelRequest) -> None:
        # the engine passes its live history; keep the messages as they were at this call
        self.requests.append(replace(request, messages=list(request.messages)))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self._record(request)
        step = self._next_step(request)
        if step.get("delay"):
            await asyncio.sleep(float(step["delay"]))
        if step.get("error"):
            message = str(step["error"])
            too_long, stated = context_length_error(message)
            raise ProviderError(
                message,
                provider=self.name,
                status=step.get("status"),
                kind="context_length" if too_long else None,
                context_window=stated,
            )
        return self._response(request, step)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        response = await self.complete(request)
        for piece in _WORDS.findall(response.message.content):
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield TextChunk(piece)
        yield response

    def _response(self, request: ModelRequest, step: Mapping[str, Any]) -> ModelResponse:
        text = str(step.get("text", ""))
        calls = []
        for raw in step.get("tool_calls", ()):
            self._ids += 1
            args = raw.get("arguments", {})
            calls.append(
                ToolCall(
                    id=str(raw.get("id") or f"call_{self._ids}"),
                    name=str(raw["name"]),
                    arguments=args if isinstance(args, str) else json.dumps(args),
                )
            )
        usage_data = step.get("usage")
        if usage_data:
            usage = Usage(**usage_data)
        else:  # a deterministic estimate (4 characters a token) so budgets can be exercised
            chars_in = len(request.system) + sum(len(_text_of(m)) for m in request.messages)
            chars_out = len(text) + sum(len(c.arguments) for c in calls)
            usage = Usage(input_tokens=chars_in // 4 + 1, output_tokens=chars_out // 4 + 1)
        stop = step.get("stop_reason") or ("tool_use" if calls else "end_turn")
        return ModelResponse(
            message=AssistantMessage(content=text, tool_calls=tuple(calls)),
            usage=usage,
            stop_reason=stop,
            model=self.model,
        )


def _latest_prompt(request: ModelRequest) -> str:
    """The latest run of consecutive user messages, joined: a prompt together with whatever
    was injected beside it (background results, mailbox messages), so a ``match`` on the
    prompt still holds when an injection arrives with it."""
    block: list[str] = []
    for m in reversed(request.messages):
        if isinstance(m, UserMessage):
            block.append(m.content)
        elif block:
            break
    return "\n".join(reversed(block))


def _text_of(message: Any) -> str:
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else ""
