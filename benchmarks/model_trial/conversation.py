"""Which conversation a relayed request continues, and its readable form.

The wire does not say which agent sent a request. ``Conversations`` tells them apart: the
system prompt's first line names the agent; a request continues the conversation of that
agent whose previous request's messages it extends (else, after a compaction, the one that
began with the same first message); a conversation with a request still waiting is never
continued, since an agent waits for each answer. An agent that can delegate (holds a
``task`` tool) is a main agent, any other a subagent; a subagent whose first message holds
a prompt some answer passed to a tool is linked to that call.

``render`` writes what the answerer reads: the system prompt and tools in full when a
conversation first shows them or changes them (else "unchanged since req-NNNN"), and the
messages new since the conversation's previous request. Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exchange import (
    ANSWER_FORMAT,
    Sizes,
    call_names,
    compact,
    is_system,
    messages_of,
    system_text,
    text_of,
    tool_names,
    tools_of,
)

COORDINATION = ("task_output", "task_stop")  # tools of a main agent that do not start subagents


def first_line(system: str) -> str:
    """The system prompt's first line, cut at 100 characters: it names the agent."""
    line = next((ln.strip() for ln in system.splitlines() if ln.strip()), "(no system prompt)")
    return line if len(line) <= 100 else line[:99] + "…"


def delegates(names: Sequence[str]) -> bool:
    """Whether an agent holding these tools can start subagents (subagents never can),
    whatever its delegation tools are called."""
    return any(n == "task" or (n.startswith("task_") and n not in COORDINATION) for n in names)


def digest(data: bytes) -> str:
    """A short hash of a system prompt or tool list."""
    return hashlib.sha256(data).hexdigest()[:12]


@dataclass
class Conversation:
    """One agent's conversation as the relay has seen it."""

    id: str
    agent: str  # the system prompt's first line
    role: str  # "main agent" or "subagent"
    parent: str = ""  # the tool call that started it, when one was seen
    requests: list[int] = field(default_factory=list)
    messages: list[bytes] = field(default_factory=list)  # the last request's, without the system ones
    system: tuple[str, int] = ("", 0)  # (hash, the request that showed it in full)
    tools: tuple[str, int] = ("", 0)
    tool_list: list[Any] = field(default_factory=list)
    waiting: bool = False


@dataclass(frozen=True)
class Placed:
    """A request's place: its conversation, and what it shares with that conversation's
    previous request."""

    conversation: Conversation
    new: bool
    previous: int  # the conversation's previous request (0: none)
    kept: int  # leading non-system messages unchanged since ``previous``
    system_since: int  # the request that last showed the system prompt (0: show it now)
    tools_since: int  # likewise for the tools
    old_tools: list[Any]


@dataclass(frozen=True)
class Delegation:
    """A prompt an answer passed to a tool (a subagent's task)."""

    prompt: str
    agent: str
    background: bool
    conversation: str
    request: int


class Conversations:
    """The conversations seen so far (see the module docstring)."""

    def __init__(self) -> None:
        self.all: list[Conversation] = []
        self._delegations: list[Delegation] = []

    def place(self, n: int, body: Mapping[str, Any]) -> Placed:
        """Assign request ``n`` to a conversation and mark that conversation waiting."""
        raw = messages_of(body)
        system, tools = system_text(raw), tools_of(body)
        messages = [compact(m) for m in raw if not is_system(m)]
        agent = first_line(system)
        free = [c for c in self.all if c.agent == agent and not c.waiting]
        extended = [c for c in free if c.messages and messages[: len(c.messages)] == c.messages]
        chosen = max(extended, key=lambda c: len(c.messages), default=None)
        kept = len(chosen.messages) if chosen else 0
        if chosen is None and messages:
            chosen = next((c for c in reversed(free) if c.messages[:1] == messages[:1]), None)
        new = chosen is None
        if chosen is None:
            role = "main agent" if delegates(tool_names(tools)) else "subagent"
            chosen = Conversation(f"C{len(self.all) + 1}", agent, role, parent=self._parent_of(raw))
            self.all.append(chosen)
        system_hash, tools_hash = digest(system.encode()), digest(compact(tools))
        placed = Placed(
            conversation=chosen,
            new=new,
            previous=chosen.requests[-1] if chosen.requests else 0,
            kept=kept,
            system_since=chosen.system[1] if chosen.system[0] == system_hash else 0,
            tools_since=chosen.tools[1] if chosen.tools[0] == tools_hash else 0,
            old_tools=chosen.tool_list,
        )
        if not placed.system_since:
            chosen.system = (system_hash, n)
        if not placed.tools_since:
            chosen.tools, chosen.tool_list = (tools_hash, n), tools
        chosen.requests.append(n)
        chosen.messages = messages
        chosen.waiting = True
        return placed

    def answered(self, conversation: Conversation, n: int, calls: Sequence[Mapping[str, Any]]) -> None:
        """Request ``n`` got an answer with ``calls``: remember the prompts they pass (at the
        top of the arguments or in a list of items), so the conversations those start can
        name their parent."""
        for call in calls:
            args = call.get("arguments")
            if not isinstance(args, dict):
                continue
            lists = [v for key in ("tasks", "chain") if isinstance(v := args.get(key), list)]
            items = [args] + [i for items in lists for i in items if isinstance(i, dict)]
            for item in items:
                prompt = item.get("prompt")
                if isinstance(prompt, str) and prompt.strip():
                    agent = str(item.get("subagent_type") or args.get("subagent_type") or call.get("name"))
                    background = bool(args.get("background"))
                    self._delegations.append(Delegation(prompt.strip(), agent, background, conversation.id, n))

    def _parent_of(self, messages: Sequence[Any]) -> str:
        first = next(
            (text_of(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"), ""
        )
        for d in reversed(self._delegations):
            if d.prompt in first:
                self._delegations.remove(d)  # one call starts one conversation
                mode = "in the background" if d.background else "in the foreground"
                return f"{d.agent} {mode}, started by {d.conversation} in req-{d.request:04d}"
        return ""


# -- the readable form ----------------------------------------------------------------------------


def render(
    n: int,
    body: Mapping[str, Any],
    sizes: Sizes,
    placed: Placed,
    *,
    image: Callable[[Any], str],
    full_history: bool = False,
) -> str:
    """The readable form of request ``n``. ``image(part)`` describes an image part (and may
    save it); only the parts of messages shown are passed to it."""
    c = placed.conversation
    messages, tools = messages_of(body), tools_of(body)
    names = tool_names(tools)
    parent = f" ({c.parent})" if c.parent else ""
    out = [f"# req-{n:04d} · {c.id}, its request {len(c.requests)} · {c.role}: {c.agent}"]
    out.append(
        f"New conversation{parent}." if placed.new else f"Continues {c.id} after req-{placed.previous:04d}{parent}."
    )
    out.append(
        f"Sizes: request {sizes.request:,} bytes · tools {sizes.tools:,} bytes ({len(names)} tools) · "
        f"system prompt {sizes.system:,} bytes · {len(messages)} messages"
    )
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    out.append(f"stream={bool(body.get('stream'))} tool_choice={body.get('tool_choice')} max_tokens={limit}")
    out += _system_section(placed, system_text(messages))
    out += _tools_section(placed, tools)
    out += _messages_section(placed, messages, image, full_history)
    out.append(
        f"\n## Answer\nWrite resp-{n:04d}.json (as resp-{n:04d}.json.tmp first, then rename it):\n{ANSWER_FORMAT}"
    )
    out.append(f"Tools you may call: {', '.join(names) if names else 'none (answer with content only)'}.")
    return "\n".join(out) + "\n"


def _system_section(placed: Placed, system: str) -> list[str]:
    if placed.system_since:
        return [f"\n## System prompt: unchanged since req-{placed.system_since:04d}"]
    note = "new conversation" if placed.new else f"changed since req-{placed.previous:04d}"
    return [f"\n## System prompt ({note})", system]


def _tools_section(placed: Placed, tools: Sequence[Any]) -> list[str]:
    names = tool_names(tools)
    if placed.tools_since:
        return [f"\n## Tools: unchanged since req-{placed.tools_since:04d}: {', '.join(names)}"]
    note = (
        "new conversation"
        if placed.new
        else f"changed since req-{placed.previous:04d}: {_changes(placed.old_tools, tools)}"
    )
    lines = [f"\n## Tools ({note})"]
    for tool in tools:
        function = tool.get("function", {}) if isinstance(tool, dict) else {}
        params = json.dumps(function.get("parameters"), ensure_ascii=False)
        lines.append(f"### {function.get('name')}  ({len(compact(tool)):,} bytes)\n{function.get('description') or ''}")
        lines.append(f"parameters: {params}")
    return lines


def _changes(old: Sequence[Any], new: Sequence[Any]) -> str:
    before = {name: compact(t) for t in old for name in tool_names([t])}
    after = {name: compact(t) for t in new for name in tool_names([t])}
    kinds = (
        ("added", [name for name in after if name not in before]),
        ("removed", [name for name in before if name not in after]),
        ("changed", [name for name in after if name in before and before[name] != after[name]]),
    )
    return "; ".join(f"{label}: {', '.join(found)}" for label, found in kinds if found) or "reordered"


def _messages_section(placed: Placed, messages: Sequence[Any], image: Callable[[Any], str], full: bool) -> list[str]:
    shown = [(i, m) for i, m in enumerate(messages) if not is_system(m)]
    skip = 0 if full or placed.new else placed.kept
    lines = []
    if skip and skip == len(shown):  # nothing new: the client sent the same request again
        lines.append(f"\n## The same messages as req-{placed.previous:04d}: sent again (a retry). The last one:")
        skip -= 1
    elif skip:
        lines.append(f"\n## Messages [{shown[0][0]}]–[{shown[skip - 1][0]}]: as in req-{placed.previous:04d}")
        lines.append("## New messages")
    elif not placed.new and not full:
        lines.append(
            f"\n## Messages (the history differs from req-{placed.previous:04d}'s, compacted or edited: all of it)"
        )
    else:
        lines.append("\n## Messages")
    calls = call_names(messages)
    for index, message in shown[skip:]:
        lines += _message_lines(index, message, calls, image)
    return lines


def _message_lines(index: int, message: Any, calls: Mapping[str, str], image: Callable[[Any], str]) -> list[str]:
    if not isinstance(message, dict):
        return [f"--- [{index}] (not an object) {json.dumps(message)[:200]}"]
    if message.get("role") == "tool":
        call_id = str(message.get("tool_call_id"))
        lines = [f"--- [{index}] tool result of {call_id} ({calls.get(call_id, '?')})"]
    else:
        lines = [f"--- [{index}] {message.get('role')}"]
    content = message.get("content")
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "image_url":
            lines.append(f"[image: {image(part)}]")
        elif part:
            lines.append(text_of(part if isinstance(part, str) else [part]))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        lines.append(f"  -> call {call.get('id')}: {function.get('name')}({function.get('arguments')})")
    return lines


def image_saver(directory: Path, n: int) -> Callable[[Any], str]:
    """An ``image`` for ``render`` that writes each data-URL image of request ``n`` to
    ``req-NNNN-image-K.<ext>`` in ``directory`` (a capable answerer may look at it)."""
    count = 0

    def save(part: Any) -> str:
        nonlocal count
        url = str((part.get("image_url") or {}).get("url", ""))
        found = re.match(r"data:image/(\w+);base64,(.*)", url, re.DOTALL)
        if not found:
            return f"an image at {url[:80]}"
        try:
            data = base64.b64decode(found.group(2))
        except (binascii.Error, ValueError):
            return "an image whose data is not valid base64"
        count += 1
        name = f"req-{n:04d}-image-{count}.{found.group(1)}"
        (directory / name).write_bytes(data)
        return f"{len(data):,} bytes, saved as {name}"

    return save
