"""Masking a set of known values in a text: ``Scrubber`` (what ``Secrets`` compiles its values
into) and ``scrub_shapes`` (strings shaped like known keys, whoever's they are).

A scrubber replaces each value with ``[redacted]`` wherever it appears: as it is, reversed,
and encoded (``encodings``: hex in any case — ``xxd -p | tr a-f A-F`` — and base64 at each
of the three alignments a value can have inside a longer text). An encoded copy sits inside a block of base64 or hex
characters, possibly wrapped over lines (``base64`` wraps at 76 characters, ``xxd -p`` at
60): the whole block is redacted, as it would decode to the secret. A key handed to the
harness is also caught echoed partly masked (``sk-proj-****abcd``: a token holding its
first or last 8 characters).

Cost: one ``str.replace`` per value and its reversed copy, and one ``in`` test per encoded
form (about seven per value) on the text with its line breaks removed (hex forms on its
lower-cased copy); the block search runs only when one is found.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["MIN_LENGTH", "REDACTED", "SHAPES", "Scrubber", "encodings", "scrub", "scrub_shapes"]

REDACTED = "[redacted]"
MIN_LENGTH = 8  # shorter values would mask ordinary words
_TOKEN = re.compile(r"[^\s\"',;:=]{8,}")


# -- shapes -----------------------------------------------------------------------------------

_W = r"[A-Za-z0-9_-]"


def _bounded(first: str, rest: str) -> str:
    """``first`` + ``rest``, not inside a longer word (``task-…`` is not ``sk-…``). The
    look-behind sits after the first character so the regex keeps its fast first-char scan."""
    return f"{first}(?<!{_W}{first}){rest}"


_Replace = Callable[[re.Match[str]], str] | str


@dataclass(frozen=True)
class _Shape:
    """One kind of key: literal ``hints`` (an ``in`` check, before the regex runs at all),
    the regex, and what a match becomes."""

    name: str
    hints: tuple[str, ...]  # a cheap ``in`` check before the regex runs
    pattern: re.Pattern[str]
    replace: _Replace = REDACTED


def _openai(match: re.Match[str]) -> str:
    # a real key holds digits; "sk-learn-compatible-estimators" does not
    token = match.group(0)
    return REDACTED if any(c.isdigit() for c in token) else token


def _url_password(match: re.Match[str]) -> str:
    return f"://{match['user']}:{REDACTED}@"


_PRIVATE_KEY = (  # the block, or as much of it as the text holds (``head -3 id_rsa``)
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*)PRIVATE KEY-----"
    r"(?:\r?\n(?!-----END)(?:[A-Za-z0-9+/=]*(?=\r?\n|\Z)|[A-Za-z-]+:[^\n]*))*"
    r"(?:\r?\n-----END (?P=kind)PRIVATE KEY-----)?"
)
_SHAPE_TABLE: list[tuple[str, tuple[str, ...], str, _Replace]] = [
    ("openai/anthropic", ("sk-",), _bounded("s", r"k-(?:ant-|proj-|svcacct-|admin-)?[\w-]{20,}"), _openai),
    ("aws key id", ("AKIA", "ASIA"), _bounded("A", r"(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"), REDACTED),
    ("github", ("gh", "github_pat_"), _bounded("g", r"(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_\w{30,})"), REDACTED),
    ("slack", ("xox",), _bounded("x", r"ox[abprse]-[A-Za-z0-9-]{10,}"), REDACTED),
    ("google", ("AIza",), _bounded("A", r"Iza[\w-]{35}"), REDACTED),
    ("hugging face", ("hf_",), _bounded("h", r"f_[A-Za-z0-9]{30,}"), REDACTED),
    ("stripe", ("k_live_", "k_test_"), _bounded("[sr]", r"k_(?:live|test)_[A-Za-z0-9]{16,}"), REDACTED),
    ("jwt", ("eyJ",), _bounded("e", r"yJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}"), REDACTED),
    ("private key", ("-----BEGIN",), _PRIVATE_KEY, REDACTED),
    ("url password", ("://",), r"://(?P<user>[^\s/:@]*):[^\s/@]+@", _url_password),
]
SHAPES: tuple[_Shape, ...] = tuple(_Shape(n, hints, re.compile(p), r) for n, hints, p, r in _SHAPE_TABLE)
_HINTED = tuple((hint, shape) for shape in SHAPES for hint in shape.hints)


def scrub_shapes(text: str) -> str:
    """``text`` with every string shaped like a known key (``SHAPES``) redacted."""
    for hint, shape in _HINTED:  # a plain loop: this runs for every message
        if hint in text:
            text = shape.pattern.sub(shape.replace, text)
    return text


_URL_SAFE = str.maketrans("+/", "-_")
# Runs of base64 or hex characters, continued by whole lines of them (``base64`` wraps at 76,
# ``xxd -p`` at 60).
_ENCODED_BLOCK = re.compile(r"[A-Za-z0-9+/=_-]+(?:\r?\n[A-Za-z0-9+/=_-]+(?![^\r\n]))*")
# Every encoded form is at least 10 characters, and a wrapped block has a line longer than
# that: a text without such a run holds no encoded copy (a cheap test for short messages).
# Looked for in the text's UTF-8 bytes with each byte of the alphabet made "a" and every
# other byte (a non-ASCII character's included) a space: two C passes, where a regex search
# for the run steps through the text in Python's regex engine (~3 µs per 100 characters).
_RUN_LENGTH = 10
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
_ALPHABET_AS_A = bytes(ord("a") if byte in _ALPHABET else ord(" ") for byte in range(256))


def _has_encoded_run(text: str) -> bool:
    """Whether ``text`` holds a run of ``_RUN_LENGTH`` base64 or hex characters."""
    data = text.encode("utf-8", "surrogatepass")
    return b"a" * _RUN_LENGTH in data.translate(_ALPHABET_AS_A)


def encodings(value: str) -> list[str]:
    """What a copy of ``value`` shows as when a command encodes a text holding it: its hex
    (``xxd -p``, ``.hex()``; lower-case and first, ``Scrubber`` finds it in any case) and,
    for each of the three places it can start in base64's groups of three bytes, the base64
    characters that depend on ``value`` alone (standard and URL-safe alphabets)."""
    raw = value.encode()
    forms = [raw.hex()]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        core = encoded[-(-8 * shift // 6) : 8 * (shift + len(raw)) // 6]
        forms.extend(dict.fromkeys((core, core.translate(_URL_SAFE))))
    return forms


@dataclass(frozen=True)
class Scrubber:
    """One compiled set of values (``of``): ``values`` and the lines of multi-line ones,
    with their reversed copies, longest first; their ``encodings`` (``hexed``: the hex
    ones, matched in any case); and the first and last 8 characters of the ``keys``.
    Calling it scrubs a text (see the module doc)."""

    values: frozenset[str]
    exact: tuple[str, ...]
    encoded: tuple[str, ...]
    hexed: tuple[str, ...]
    anchors: frozenset[str]

    @classmethod
    def of(cls, values: Iterable[str], keys: Iterable[str] = ()) -> Scrubber:
        given = {v for v in values if len(v) >= MIN_LENGTH}
        found = set(given)
        for v in given:
            # a multi-line value (a PEM key in a .env) also shows a line at a time
            found.update(line.strip() for line in v.splitlines() if len(line.strip()) >= 16)
        exact = found | {v[::-1] for v in given}
        forms = [encodings(v) for v in given]
        hexed = {f[0] for f in forms}
        encoded = {form for f in forms for form in f[1:]}
        anchors = frozenset(a for k in keys if len(k) >= 12 for a in (k[:8], k[-8:]))
        by_length = tuple(sorted(exact, key=len, reverse=True))
        return cls(frozenset(found), by_length, tuple(sorted(encoded)), tuple(sorted(hexed)), anchors)

    def __call__(self, text: str) -> str:
        for value in self.exact:
            text = text.replace(value, REDACTED)
        if (self.encoded or self.hexed) and _has_encoded_run(text) and self._holds_encoded(text):
            text = _ENCODED_BLOCK.sub(self._block, text)
        for anchor in self.anchors:
            if anchor in text:
                text = _TOKEN.sub(self._partial, text)
                break
        return scrub_shapes(text)

    def _holds_encoded(self, text: str) -> bool:
        if "\n" in text:
            text = text.replace("\r\n", "").replace("\n", "")
        if any(form in text for form in self.encoded):
            return True
        lowered = text.lower()  # hex prints in either case, or a mix of them
        return any(form in lowered for form in self.hexed)

    def _block(self, match: re.Match[str]) -> str:
        block = match.group(0)
        return REDACTED if self._holds_encoded(block) else block

    def _partial(self, match: re.Match[str]) -> str:
        token = match.group(0)
        return REDACTED if any(a in token for a in self.anchors) else token


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` without ``secrets`` (and any token holding the first or last 8 characters of
    one at least 12 long: servers echo keys partly masked, ``sk-proj-****abcd``) and without
    strings shaped like known keys. ``Secrets.scrub`` is this with every known secret."""
    values = [s for s in secrets if s]
    return Scrubber.of(values, keys=values)(text)
