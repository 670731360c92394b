"""Text that cannot be encoded or shown as it is: lone surrogates and control characters,
made visible and reversible.

A file name that is not UTF-8 reaches Python as a ``str`` holding lone surrogates
(``os.fsdecode`` uses ``surrogateescape``: byte ``0xff`` becomes ``"\\udcff"``). Such a string
cannot be encoded as UTF-8, so it would crash the JSON sent to a model, a transcript line
or a widget message. ``escape_surrogates`` turns each lone surrogate into visible text the
model can copy: ``\\xff`` for an escaped byte, ``\\ud800`` for any other lone surrogate.

A file name may also hold control characters: an ANSI or OSC escape sequence that recolours
or retitles a terminal, a newline that fakes another line of a listing, a bidi override that
shows ``txt.exe`` as ``exe.txt``. ``escape_name`` shows those too, as ``\\x1b`` (C0 and DEL),
``\\u009b`` (C1), ``\\u202e`` (format and bidi characters, line and paragraph separators);
every name a tool shows goes through it. ``unescape_name`` is the way back for a name the
model returns in that form (the file tools try it when the name as given does not exist).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["escape_name", "escape_surrogates", "escape_surrogates_in_json", "json_line", "unescape_name"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED = re.compile(r"\\x([0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})")
# Unicode's "Other, control" and "Other, format", and the two separators that end a line.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _shown(code: int) -> str:
    """The escape of one character: ``\\xNN`` for a byte that surrogateescape could not
    decode and for C0 controls and DEL, ``\\uNNNN`` or ``\\UNNNNNNNN`` for the rest."""
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _visible(match: re.Match[str]) -> str:
    return _shown(ord(match.group()))


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate shown as ``\\xNN`` (an undecodable byte) or
    ``\\uNNNN``, so it encodes as UTF-8. Text without surrogates is returned as it is."""
    if text.isascii() or not _SURROGATE.search(text):  # isascii: one C pass, most text ends there
        return text
    return _SURROGATE.sub(_visible, text)


def _escaped(char: str) -> bool:
    """Whether ``escape_name`` shows ``char`` escaped."""
    return "\ud800" <= char <= "\udfff" or unicodedata.category(char) in _HIDDEN_CATEGORIES


def escape_name(name: str) -> str:
    """``name`` (a file name or path) as a tool shows it: lone surrogates as
    ``escape_surrogates`` shows them, control, format and bidi characters and line
    separators escaped (``\\x1b``, ``\\u009b``, ``\\u202e``); everything else, spaces and
    non-ASCII letters included, as it is. ``unescape_name`` reverses it."""
    if name.isprintable():  # the common case, checked in C: nothing to escape
        return name
    return "".join(_shown(ord(c)) if _escaped(c) else c for c in name)


def _unescaped(match: re.Match[str]) -> str:
    digits = match.group(1) or match.group(2) or match.group(3)
    code = int(digits, 16)
    if match.group(1) is not None:
        if 0x80 <= code <= 0xFF:  # a byte that is not UTF-8: the surrogate os.fsdecode makes
            return chr(0xDC00 + code)
        return chr(code) if code < 0x20 or code == 0x7F else match.group()
    if code > 0x10FFFF:
        return match.group()
    char = chr(code)
    # only what escape_name writes this way: ``\\u0041`` stays six characters
    return char if _escaped(char) and not 0xDC80 <= code <= 0xDCFF else match.group()


def unescape_name(text: str) -> str:
    """The reverse of ``escape_name``: each escape it writes becomes the character (or, for
    ``\\x80``-``\\xff``, the undecodable byte) again, so a name shown escaped names the
    file. Other backslashes are left as they are."""
    if "\\" not in text:
        return text
    return _ESCAPED.sub(_unescaped, text)


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
