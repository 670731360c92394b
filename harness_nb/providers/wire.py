"""Request bodies as JSON bytes, without encoding the whole history again on every call.

A request repeats the conversation so far, so encoding each body from scratch costs time
in proportion to the history on every turn. The providers keep each message's encoding
in its ``wire`` cache and put the history into the body as an ``EncodedList``: the
values as usual (for reading and for tests) plus the stored encoding of each, which
``encode_body`` joins instead of encoding the values again.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..core import escape_surrogates_in_json

__all__ = ["EncodedList", "Histories", "History", "encode_body", "encoded_message", "to_json"]

# Compact, like httpx's own ``json=`` encoding.
_dumps = partial(json.dumps, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def to_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON. A lone surrogate in a string (a non-UTF-8 file
    name, a broken escape from a server) is sent as visible text (``\\xff``), never as an
    error that would stop the conversation."""
    text = _dumps(value)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return escape_surrogates_in_json(text).encode()


class EncodedList(list[Any]):
    """A list of JSON values with the encoding of each (``parts``), kept side by side."""

    def __init__(self, items: Iterable[Any] = (), parts: Iterable[bytes] = ()) -> None:
        super().__init__(items)
        self.parts = list(parts)


def encode_body(body: Mapping[str, Any]) -> bytes:
    """``body`` as compact JSON. An ``EncodedList`` value is joined from its stored parts
    (unless it was changed after they were made, then it is encoded afresh); the keys and
    the plain values every request repeats (the model, ``"auto"``, ``true``) are encoded
    once per process."""
    fields = []
    for key, value in body.items():
        if isinstance(value, EncodedList) and len(value.parts) == len(value):
            data = b"[" + b",".join(value.parts) + b"]"
        elif value is None or type(value) in (str, bool, int):
            data = _plain_json(value)
        else:
            data = to_json(value)
        fields.append(_plain_json(key) + b":" + data)
    return b"{" + b",".join(fields) + b"}"


@functools.lru_cache(maxsize=512)
def _plain_json(value: str | bool | int | None) -> bytes:
    return to_json(value)


@functools.lru_cache(maxsize=64)
def encoded_message(role: str, content: str) -> tuple[dict[str, Any], bytes]:
    """``{"role": role, "content": content}`` and its encoding, made once for each text: a
    system prompt (a few KB) repeats unchanged in every request of a conversation."""
    form = {"role": role, "content": content}
    return form, to_json(form)


@dataclass(slots=True)
class History:
    """A history as encoded for one request: its ``messages``, their ``forms`` and their
    encodings (``parts``), and ``pending``, what the wire form of the next message depends on
    (the tool results whose images still wait for their message, in OpenAI's form)."""

    messages: list[Any]
    forms: list[Any]
    parts: list[bytes]
    pending: list[Any]


class Histories:
    """The histories a provider encoded last, one per message list and wire form (at most
    ``size``). Each request repeats the conversation so far, and even a loop over messages'
    cached encodings costs about a quarter of a µs a message on every call: a history that
    starts with the same messages as one kept here continues from it.

    The same messages, compared by ``==``: a list edited in place (compacted, rescrubbed)
    differs where it was edited and is encoded afresh; equal messages have equal forms."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._kept: dict[tuple[int, str], History] = {}

    def start(self, messages: Sequence[Any], form: str) -> History:
        """Where encoding ``messages`` in ``form`` can start: a kept history they begin with
        (its ``pending`` a copy to change), else an empty one."""
        kept = self._kept.get((id(messages), form))
        if kept is not None and len(kept.messages) <= len(messages) and messages[: len(kept.messages)] == kept.messages:
            return History(kept.messages, kept.forms, kept.parts, list(kept.pending))
        return History([], [], [], [])

    def keep(self, messages: Sequence[Any], form: str, history: History) -> None:
        """Keep ``history`` as the encoding of ``messages`` in ``form`` (the oldest kept one goes
        when there are ``size``)."""
        key = (id(messages), form)
        self._kept.pop(key, None)
        if len(self._kept) >= self.size:
            del self._kept[next(iter(self._kept))]
        self._kept[key] = history
