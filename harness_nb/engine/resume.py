"""Back to a conversation after a kernel restart: the sessions on disk, and a history
repaired so that a real API accepts it.

Every main conversation is appended to ``<workdir>/.harness_nb/sessions/<id>.jsonl`` as it
happens (subagents' transcripts sit beside it as ``<id>.<task>.jsonl``). ``list_sessions``
summarises them (date, first prompt, turns, cost); ``read_session`` loads one back with
``repair_history`` applied: a tool call left without a result — the kernel died while the
tool ran — gets an error result, because every API rejects a history with a call that has
no result. A compacted conversation comes back compacted (its ``compaction`` lines applied).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import AssistantMessage, ConfigError, Message, ToolResultMessage, Usage
from .session import load_transcript

UNFINISHED_RESULT = (
    "error: this tool call never finished: the kernel stopped while it ran. Check what it "
    "did before you run it again."
)
PROMPT_PREVIEW = 80


def repair_history(messages: Sequence[Message]) -> tuple[list[Message], int]:
    """``messages`` with an error result added after every tool call that has none (in
    call order, right after the results that do exist), and without results that answer no
    call of the turn before. Returns the history and how many repairs were made."""
    out: list[Message] = []
    added = 0  # repairs: results added or dropped
    pending: list[tuple[str, str]] = []  # (call id, tool name) still waiting for a result

    def close_pending() -> None:
        nonlocal added
        for call_id, name in pending:
            out.append(ToolResultMessage(tool_call_id=call_id, name=name, content=UNFINISHED_RESULT, is_error=True))
            added += 1
        pending.clear()

    for message in messages:
        if isinstance(message, ToolResultMessage):
            waiting = [(i, n) for i, n in pending if i != message.tool_call_id]
            if len(waiting) == len(pending):
                added += 1  # a result for no call of the turn before: APIs reject it too
                continue
            pending[:] = waiting
            out.append(message)
            continue
        close_pending()
        out.append(message)
        if isinstance(message, AssistantMessage):
            pending.extend((c.id, c.name) for c in message.tool_calls)
    close_pending()
    return out, added


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One main conversation on disk, as ``%agent --sessions`` lists it."""

    id: str
    path: Path
    modified: float
    first_prompt: str
    runs: int
    turns: int
    usage: Usage

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.modified))


def session_files(folder: Path) -> list[Path]:
    """The main conversations' transcripts under ``folder``, newest first (subagents'
    ``<id>.<task>.jsonl`` are not conversations of their own)."""
    if not folder.is_dir():
        return []
    files = [p for p in folder.glob("*.jsonl") if "." not in p.stem and p.is_file()]
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


def summarise(path: Path) -> SessionSummary:
    """Read ``path`` once: its first prompt, its runs, turns and usage."""
    first, runs, turns, usage = "", 0, 0, Usage()
    for row in _rows(path):
        kind = row.get("type")
        if kind == "message" and not first:
            message = row.get("message") or {}
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                first = " ".join(message["content"].split())
        elif kind == "run_finished":
            runs += 1
            try:
                run_usage = Usage.model_validate(row.get("usage") or {})
            except ValueError:
                continue
            turns += run_usage.turns
            usage.add(run_usage)
    if len(first) > PROMPT_PREVIEW:
        first = first[: PROMPT_PREVIEW - 1] + "…"
    return SessionSummary(path.stem, path, path.stat().st_mtime, first, runs, turns, usage)


def list_sessions(folder: Path) -> list[SessionSummary]:
    """Every main conversation under ``folder``, newest first."""
    return [summarise(p) for p in session_files(folder)]


def read_session(folder: Path, session_id: str | None = None) -> tuple[str, Path, list[Message], int]:
    """Load conversation ``session_id`` (the newest when ``None``): its id, path, repaired
    history and the number of results the repair added. ``ConfigError`` names the sessions
    there are when it does not exist."""
    files = session_files(folder)
    if session_id is None:
        if not files:
            raise ConfigError(f"no conversation to resume: {folder} holds no session transcripts yet")
        path = files[0]
    else:
        path = folder / f"{session_id.removesuffix('.jsonl')}.jsonl"
        if "/" in session_id or not path.is_file():
            known = ", ".join(p.stem for p in files[:10]) or "(none)"
            raise ConfigError(f"no session {session_id!r} in {folder}; the newest are: {known}")
    messages, added = repair_history(load_transcript(path, compacted=True))
    return path.stem, path, messages, added


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from a crash
            if isinstance(row, dict):
                yield row


__all__ = [
    "UNFINISHED_RESULT",
    "SessionSummary",
    "list_sessions",
    "read_session",
    "repair_history",
    "session_files",
    "summarise",
]
