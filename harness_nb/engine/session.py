"""Conversation sessions and their transcripts on disk.

``MemorySession`` holds the messages of one conversation. With a transcript path it also
appends each message (and each run's usage) to a JSONL file as it happens, so a crash or a
kernel restart loses nothing; ``load_transcript`` reads the messages back. Creating the
transcript (its folder and file: a few ms on a watched tree, unbounded on a stalled network
mount) is the one part that may block, so a run opens it on a worker thread first
(``open_transcript``); appending a line to an open file is a few µs.

Every message is scrubbed of secrets once, as it joins the session (``Secrets``): the
history a model is sent and the transcript on disk are the same scrubbed text, and no call
re-scrubs the whole history — unless the set of secrets changed (a key exported
mid-conversation), which ``rescrub`` catches up with once. A tool result's images are
written as they are, base64 in the line (bounded where results are made: ``core.media``),
so a resumed conversation still has them; images cannot be scrubbed.

Compaction (``compaction/keeper.py``) replaces ``messages`` — what the next request sends — with a
shorter history through ``rewrite``; ``history`` and the transcript keep every message as
it joined, and the transcript gets a ``compaction`` line saying what was replaced, from
which ``load_transcript(..., compacted=True)`` rebuilds the compacted history.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter

from ..core import Message, Usage, json_line, new_id, run_blocking
from ..core.message import MessageT
from ..core.secret import SECRETS, Secrets

_MESSAGE = TypeAdapter(Message)


class MemorySession:
    """The messages of one conversation, optionally mirrored to a JSONL transcript.
    ``secrets`` scrubs every message as it joins (the process's ``SECRETS`` by default).

    ``messages`` is the history the next request sends; ``history`` every message that
    joined, also those compaction has since replaced."""

    def __init__(
        self, session_id: str | None = None, *, transcript: Path | None = None, secrets: Secrets | None = None
    ) -> None:
        self.id = session_id or new_id("session")
        self.messages: list[Message] = []
        self.history: list[Message] = []
        self.transcript = transcript
        self.secrets = secrets if secrets is not None else SECRETS
        self._scrubbed_at = self.secrets.version
        self._fh: IO[str] | None = None

    def append(self, message: MessageT) -> MessageT:
        """Add ``message``, scrubbed of secrets; returns the message as stored."""
        message = self.secrets.scrub_message(message)
        self.messages.append(message)
        self.history.append(message)
        if self.transcript is not None:  # dumping is the costly part; skip it when unused
            self._write({"type": "message", "message": message.model_dump(mode="json")})
        return message

    def rescrub(self) -> None:
        """Scrub the history again if the set of secrets changed since its messages joined
        (cheap when it did not: one version check). Unchanged messages stay the same
        objects, wire caches and all; lines already in the transcript stay as written."""
        self.secrets.refresh()
        version = self.secrets.version
        if version != self._scrubbed_at:
            self.messages[:] = [self.secrets.scrub_message(m) for m in self.messages]
            self._scrubbed_at = version

    def rewrite(self, messages: Iterable[Message], **record: Any) -> None:
        """Replace the history the next request sends with ``messages`` (compacted: the
        messages kept are the same objects, new ones are scrubbed) and write ``record`` to
        the transcript as a ``compaction`` line; ``history`` and the message lines already
        written stay as they are."""
        present = {id(m) for m in self.messages}
        self.messages[:] = [m if id(m) in present else self.secrets.scrub_message(m) for m in messages]
        self.record("compaction", **record)

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.append(m)

    def record(self, kind: str, **data: Any) -> None:
        """Write a non-message line (run start/finish, usage) to the transcript, scrubbed
        (an error's text may quote anything)."""
        if self.transcript is not None:
            self._write({"type": kind, **self.secrets.scrub_data(data)})

    def record_usage(self, run_id: str, usage: Usage, stop_reason: str) -> None:
        self.record("run_finished", run_id=run_id, stop_reason=stop_reason, usage=usage.model_dump())

    async def open_transcript(self) -> None:
        """Open the transcript for appending, its folder made, on a worker thread, so the
        event loop (the kernel's, and every other run's) never waits for the file system;
        nothing to do without a transcript or when it is open. A caller cancelled while it
        waits leaves the file to be closed as the thread finishes."""
        if self.transcript is None or self._fh is not None:
            return
        opening = asyncio.ensure_future(run_blocking(_open_for_append, self.transcript))
        try:
            fh = await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(_close_opened)
            raise
        if self._fh is None:
            self._fh = fh
        else:  # a line written meanwhile opened it on the loop
            fh.close()

    def _write(self, line: dict[str, Any]) -> None:
        if self.transcript is None:
            return
        if self._fh is None:
            self._fh = _open_for_append(self.transcript)
        # json_line: a lone surrogate (a non-UTF-8 file name) is written escaped, never
        # an encoding error that would stop the run.
        self._fh.write(json_line(line) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        return f"<MemorySession {self.id} messages={len(self.messages)}>"


def _open_for_append(path: Path) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("a", encoding="utf-8")


def _close_opened(opening: asyncio.Future[IO[str]]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def load_transcript(path: Path, *, compacted: bool = False) -> list[Message]:
    """The messages recorded in a JSONL transcript, in order (other lines are skipped; a
    torn last line from a crash is ignored). With ``compacted``, the history as the
    conversation last sent it: each ``compaction`` line is applied where it was written."""
    messages: list[Message] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(row, dict):
                continue
            if row.get("type") == "message":
                messages.append(_MESSAGE.validate_python(row["message"]))
            elif row.get("type") == "compaction" and compacted:
                messages = apply_compaction(messages, row)
    return messages


def apply_compaction(messages: list[Message], row: dict[str, Any]) -> list[Message]:
    """``messages`` after the compaction a transcript's ``compaction`` line records: the
    results it stubbed (``stubs``: call id → stub text), then its first ``summarised``
    messages replaced by the ``summary`` message and the ``pinned`` one among them (an
    index, or ``None``). A line that does not fit the history is ignored, not fatal."""
    from ..core import ToolResultMessage, UserMessage

    given = row.get("stubs")
    stubs: dict[str, Any] = given if isinstance(given, dict) else {}
    out = list(messages)
    for i, m in enumerate(out):
        if isinstance(m, ToolResultMessage) and isinstance(stubs.get(m.tool_call_id), str):
            out[i] = ToolResultMessage(
                tool_call_id=m.tool_call_id, name=m.name, content=stubs[m.tool_call_id], is_error=m.is_error
            )
    k, summary, pinned = row.get("summarised"), row.get("summary"), row.get("pinned")
    if isinstance(k, int) and 0 < k <= len(out) and isinstance(summary, str) and summary:
        head: list[Message] = [UserMessage(content=summary)]
        if isinstance(pinned, int) and 0 <= pinned < k:
            head.append(out[pinned])
        out = head + out[k:]
    return out
