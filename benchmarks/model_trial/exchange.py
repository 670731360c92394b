"""What a relayed request holds and what an answer to it must be.

A request is a Chat Completions body; its sizes are counted as the harness sends it
(compact UTF-8 JSON). An answer is the answerer's file::

    {"content": "text, or empty", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.csv"}}]}

``check_answer`` says what is wrong with one, in words that say how to fix it; only an
answer without problems is sent to the client. Standard library only.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_ANSWER = 1024 * 1024  # an answer file larger than this is refused
SETTLE = 1.0  # seconds a file that does not parse yet may still be being written
ANSWER_FORMAT = (
    '{"content": "what the model says (may be empty when it calls tools)", '
    '"tool_calls": [{"name": "<a tool of this request>", "arguments": {"<param>": "<value>"}}]}'
)
SYSTEM_ROLES = ("system", "developer")


def compact(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, as the harness puts it on the wire."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def text_of(content: Any) -> str:
    """The text of a message's ``content``: a string, or a list of parts whose non-text
    parts are named with their size."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                pieces.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                pieces.append(f"[{kind} part, {len(compact(part)):,} bytes]")
        return "\n".join(pieces)
    return json.dumps(content, ensure_ascii=False)


def messages_of(body: Mapping[str, Any]) -> list[Any]:
    """The request's messages (an empty list if it has none)."""
    messages = body.get("messages")
    return messages if isinstance(messages, list) else []


def is_system(message: Any) -> bool:
    """Whether a message is part of the system prompt."""
    return isinstance(message, dict) and message.get("role") in SYSTEM_ROLES


def system_text(messages: Sequence[Any]) -> str:
    """The system prompt: every system (or developer) message's text, in order."""
    return "\n\n".join(text_of(m.get("content")) for m in messages if is_system(m))


def tools_of(body: Mapping[str, Any]) -> list[Any]:
    """The request's tool list (empty if it offers none)."""
    tools = body.get("tools")
    return tools if isinstance(tools, list) else []


def tool_names(tools: Sequence[Any]) -> list[str]:
    """The names of the tools in a tool list, in its order."""
    names = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


@dataclass(frozen=True)
class Sizes:
    """Bytes of a request as received, of its ``tools`` and of its system prompt."""

    request: int
    tools: int
    system: int

    @classmethod
    def of(cls, body: Mapping[str, Any], raw: bytes) -> Sizes:
        tools = tools_of(body)
        return cls(len(raw), len(compact(tools)) if tools else 0, len(system_text(messages_of(body)).encode()))


def check_answer(data: Any, offered: Sequence[str], tool_choice: Any = None) -> list[str]:
    """What is wrong with an answer (parsed JSON) to a request that offers the tools
    ``offered`` with ``tool_choice``; empty when it can be sent."""
    if not isinstance(data, dict):
        return [f"the answer must be a JSON object like {ANSWER_FORMAT}, not {type(data).__name__}"]
    problems = _unknown_keys("", data, ("content", "tool_calls"), "an answer")
    content = data.get("content")
    if content is not None and not isinstance(content, str):
        problems.append(f"'content' must be a string (or null), not {type(content).__name__}")
        content = None
    calls = data.get("tool_calls")
    if calls is None:
        calls = []
    if not isinstance(calls, list):
        problems.append(f"'tool_calls' must be a list, not {type(calls).__name__}")
        calls = []
    if not (content or "").strip() and not calls:
        problems.append("the answer is empty: give 'content', 'tool_calls' or both")
    if calls and not offered:
        problems.append("this request offers no tools: answer with 'content' only")
    if calls and tool_choice == "none":
        problems.append("this request says tool_choice 'none': answer with 'content' only")
    if not calls and tool_choice == "required":
        problems.append("this request says tool_choice 'required': call at least one tool")
    for i, call in enumerate(calls, 1):
        problems += _call_problems(f"tool call {i}", call, offered)
    return problems


def _call_problems(where: str, call: Any, offered: Sequence[str]) -> list[str]:
    if not isinstance(call, dict):
        return [f"{where} must be an object {{'name': …, 'arguments': {{…}}}}, not {type(call).__name__}"]
    if "function" in call:
        return [f"{where}: write {{'name': …, 'arguments': {{…}}}} directly, not OpenAI's {{'function': …}} form"]
    problems = _unknown_keys(f"{where}: ", call, ("name", "arguments"), "a call")
    name = call.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{where}: 'name' must be the name of one of this request's tools")
    elif offered and name not in offered:
        problems.append(f"{where}: {name!r} is not a tool of this request; its tools: {', '.join(offered)}")
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        problems.append(f"{where}: 'arguments' must be a JSON object, not a string holding JSON")
    elif not isinstance(arguments, dict):
        problems.append(f"{where}: 'arguments' must be a JSON object, not {type(arguments).__name__}")
    return problems


def _unknown_keys(where: str, data: dict[str, Any], known: tuple[str, str], what: str) -> list[str]:
    unknown = sorted(set(data) - set(known))
    if not unknown:
        return []
    return [f"{where}unknown key(s) {', '.join(map(repr, unknown))}: {what} has only {known[0]!r} and {known[1]!r}"]


def call_names(messages: Sequence[Any]) -> dict[str, str]:
    """The tool name of every call in ``messages``' assistant turns, by call id."""
    return {
        str(call.get("id")): str((call.get("function") or {}).get("name"))
        for m in messages
        if isinstance(m, dict)
        for call in m.get("tool_calls") or []
        if isinstance(call, dict)
    }


def read_answer(path: Path, offered: Sequence[str], tool_choice: Any = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The answer in ``path`` when it can be sent; else ``None`` and what is wrong with it
    (``None`` and no problems: not there, or maybe still being written; look again)."""
    try:
        size = path.stat().st_size
        if size > MAX_ANSWER:
            return None, [f"the file is {size:,} bytes; an answer may have at most {MAX_ANSWER:,}"]
        raw = path.read_bytes()
        written = path.stat().st_mtime
    except FileNotFoundError:
        return None, []
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        if time.time() - written < SETTLE:
            return None, []
        return None, [f"not valid JSON: {exc}"]
    problems = check_answer(data, offered, tool_choice)
    return (None, problems) if problems else (data, [])


def completion_calls(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The answer's tool calls in Chat Completions form, each with a fresh id."""
    return [
        {
            "id": "call_" + uuid.uuid4().hex[:12],
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}), ensure_ascii=False)},
        }
        for c in answer.get("tool_calls") or []
    ]
