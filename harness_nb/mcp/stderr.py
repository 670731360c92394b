"""``StderrTail``: the last few KiB a stdio server wrote to its stderr.

A server that fails to start usually says why on stderr, so the error naming it quotes the
tail. The child writes into a pipe that the event loop reads (no thread); only the last
``limit`` bytes are kept, however much a chatty server writes over a long session.
"""

from __future__ import annotations

import asyncio
import io
import os
from typing import TextIO

from ..core.secret import SECRETS


class _Reader(asyncio.Protocol):
    def __init__(self, tail: StderrTail) -> None:
        self.tail = tail

    def data_received(self, data: bytes) -> None:
        self.tail.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.tail.closed.set()


class StderrTail:
    """A pipe for a child's stderr, read on the running loop, keeping its last ``limit``
    bytes. ``open()`` gives the end to hand to the child; ``child_started()`` closes this
    process's copy of it (so the pipe ends when the child does); ``aclose()`` stops reading."""

    def __init__(self, limit: int = 8192) -> None:
        self.limit = limit
        self._data = bytearray()
        self._writer: TextIO | None = None
        self._transport: asyncio.ReadTransport | None = None
        self.closed = asyncio.Event()

    async def open(self) -> TextIO:
        """A fresh pipe; returns its write end (a text file, as the SDK's ``errlog`` wants)."""
        read_fd, write_fd = os.pipe()
        reader = os.fdopen(read_fd, "rb", buffering=0)
        try:
            loop = asyncio.get_running_loop()
            self._transport, _ = await loop.connect_read_pipe(lambda: _Reader(self), reader)
        except BaseException:
            reader.close()
            os.close(write_fd)
            raise
        self._writer = io.TextIOWrapper(os.fdopen(write_fd, "wb"))
        return self._writer

    def child_started(self) -> None:
        """The child holds its own copy of the write end now: drop ours."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def feed(self, data: bytes) -> None:
        """Keep ``data``, dropping what is older than the last ``limit`` bytes."""
        self._data += data
        if len(self._data) > self.limit:
            del self._data[: len(self._data) - self.limit]

    def text(self, lines: int = 12) -> str:
        """The last ``lines`` lines, decoded and scrubbed of secrets ('' when it said nothing)."""
        text = self._data.decode("utf-8", errors="replace").strip()
        return SECRETS.scrub("\n".join(text.splitlines()[-lines:]))

    async def aclose(self, *, wait: float = 0.5) -> None:
        """Stop reading, after giving what the child wrote before it ended ``wait`` seconds
        to arrive."""
        self.child_started()
        if self._transport is not None:
            try:
                async with asyncio.timeout(wait):
                    await self.closed.wait()
            except TimeoutError:
                pass  # a grandchild still holds the pipe open; stop reading anyway
            self._transport.close()
            self._transport = None

    def __repr__(self) -> str:
        return f"<StderrTail {len(self._data)} bytes>"
