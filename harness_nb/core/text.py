"""Text that cannot be encoded: lone surrogates, made visible and reversible.

A file name that is not UTF-8 reaches Python as a ``str`` holding lone surrogates
(``os.fsdecode`` uses ``surrogateescape``: byte ``0xff`` becomes ``"\\udcff"``). Such a string
cannot be encoded as UTF-8, so it would crash the JSON sent to a model, a transcript line
or a widget message. ``escape_surrogates`` turns each lone surrogate into visible text the
model can copy: ``\\xff`` for an escaped byte, ``\\ud800`` for any other lone surrogate.
``unescape_bytes`` is the way back for a name the model returns in that form.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["escape_surrogates", "escape_surrogates_in_json", "json_line", "unescape_bytes"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that surrogateescape could not decode
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate shown as ``\\xNN`` (an undecodable byte) or
    ``\\uNNNN``, so it encodes as UTF-8. Text without surrogates is returned as it is."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(_visible, text)


def unescape_bytes(text: str) -> str:
    """The reverse of ``escape_surrogates`` for bytes: ``\\xff`` (0x80-0xff) becomes the
    surrogate ``os.fsdecode`` gives for that byte, so a name shown escaped names the file."""
    return _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), text)


def escape_surrogates_in_json(text: str) -> str:
    """JSON text (made with ``ensure_ascii=False``) with each lone surrogate in its strings
    escaped as by ``escape_surrogates``, so that the JSON encodes as UTF-8."""
    if not _SURROGATE.search(text):
        return text
    # Surrogates can only sit inside JSON strings, where a backslash must be doubled.
    return _SURROGATE.sub(lambda m: _visible(m).replace("\\", "\\\\"), text)


def json_line(value: Any) -> str:
    """``value`` as one line of JSON that always encodes as UTF-8 (non-ASCII kept as is,
    lone surrogates escaped): the form of transcript and cassette lines."""
    return escape_surrogates_in_json(json.dumps(value, ensure_ascii=False))
