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
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from ..core import escape_surrogates_in_json

__all__ = ["EncodedList", "encode_body", "encoded_message", "to_json"]

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
