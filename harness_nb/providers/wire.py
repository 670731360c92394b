"""Request bodies as JSON bytes, without encoding the whole history again on every call.

A request repeats the conversation so far, so encoding each body from scratch costs time
in proportion to the history on every turn. The providers keep each message's encoding
in its ``wire`` cache and put the history into the body as an ``EncodedList``: the
values as usual (for reading and for tests) plus the stored encoding of each, which
``encode_body`` joins instead of encoding the values again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from ..core import escape_surrogates_in_json

__all__ = ["EncodedList", "encode_body", "to_json"]

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
    (unless it was changed after they were made, then it is encoded afresh)."""
    fields = []
    for key, value in body.items():
        if isinstance(value, EncodedList) and len(value.parts) == len(value):
            data = b"[" + b",".join(value.parts) + b"]"
        else:
            data = to_json(value)
        fields.append(to_json(key) + b":" + data)
    return b"{" + b",".join(fields) + b"}"
