"""Conversation sessions and their transcripts on disk.

``MemorySession`` holds the messages of one conversation. With a transcript path it also
appends each message (and each run's usage) to a JSONL file as it happens, so a crash or a
kernel restart loses nothing; ``load_transcript`` reads the messages back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter

from ..core import Message, Usage, new_id

_MESSAGE = TypeAdapter(Message)


class MemorySession:
    """The messages of one conversation, optionally mirrored to a JSONL transcript."""

    def __init__(self, session_id: str | None = None, *, transcript: Path | None = None) -> None:
        self.id = session_id or new_id("session")
        self.messages: list[Message] = []
        self.transcript = transcript
        self._fh: IO[str] | None = None

    def append(self, message: Message) -> None:
        self.messages.append(message)
        if self.transcript is not None:  # dumping is the costly part; skip it when unused
            self._write({"type": "message", "message": message.model_dump(mode="json")})

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.append(m)

    def record(self, kind: str, **data: Any) -> None:
        """Write a non-message line (run start/finish, usage) to the transcript."""
        self._write({"type": kind, **data})

    def record_usage(self, run_id: str, usage: Usage, stop_reason: str) -> None:
        self.record("run_finished", run_id=run_id, stop_reason=stop_reason, usage=usage.model_dump())

    def _write(self, line: dict[str, Any]) -> None:
        if self.transcript is None:
            return
        if self._fh is None:
            self.transcript.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.transcript.open("a", encoding="utf-8")
        self._fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        return f"<MemorySession {self.id} messages={len(self.messages)}>"


def load_transcript(path: Path) -> list[Message]:
    """The messages recorded in a JSONL transcript, in order (other lines are skipped; a
    torn last line from a crash is ignored)."""
    messages: list[Message] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("type") == "message":
                messages.append(_MESSAGE.validate_python(row["message"]))
    return messages
