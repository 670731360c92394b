"""Credentials in the notebook's variables: what ``list_variables`` and ``inspect_variable``
never show, and what ``Secrets`` learns from the namespace.

A variable whose name looks like a credential (``db_password``, ``api_key``, ``creds``:
``core.credential.is_credential_key``) is shown by type only. Elsewhere, at any depth, what
sits under a credential name is masked — ``[redacted]`` in the preview, whatever the value's
length (a short one too, which ``Secrets`` would not mask everywhere):

- a mapping's values under such keys (``cfg["prod"]["db"]["password"]``), in lists too;
- the fields of the objects a preview lists by name: dataclasses (``settings.api_token``),
  namedtuples, ``SimpleNamespace``;
- a pandas DataFrame's columns named like one (a Series so named, whole; another library's
  table with such a column is not previewed);
- in any other object's own ``repr``, the strings it holds in such attributes (its
  ``__dict__`` and ``__slots__``): each is replaced in the text, quoted, and bare when it is
  at least ``MIN_BARE`` characters long (a shorter bare one would garble the text).

The same values are learned by the process's secrets (``learn_credentials``), so a later
copy of one — ``print(db_password)`` in ``run_python``, a command's output — is masked too.
Every walk is bounded (``MAX_NODES`` objects, ``MAX_DEPTH`` levels, ``MAX_ITEMS`` items of
one container): a namespace of large tables costs no more than that, and what lies past the
bounds is shown as ``…`` (never as it is: it could hold a credential).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from itertools import islice
from types import SimpleNamespace
from typing import Any

from ...core.credential import is_credential_key
from ...core.secret import REDACTED, SECRETS

__all__ = ["ELIDED", "MASKED", "learn_credentials", "mask_text", "masked"]

MAX_NODES = 5_000
MAX_DEPTH = 8
MAX_ITEMS = 200  # of one container, in a masked preview
MIN_BARE = 4
_SCALARS = (str, bytes, int, float, complex, bool, type(None))


class _Shown:
    """Stands for something a preview does not show (its repr is fixed text)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


MASKED: Any = _Shown(REDACTED)
"""A masked value (its repr is ``[redacted]``, as the scrubbed text's)."""
ELIDED: Any = _Shown("…")
"""What lies past the walk's bounds."""


class _Fields:
    """An object shown by its named fields, some of them masked: ``Settings(api_token=[redacted])``."""

    def __init__(self, kind: str, fields: list[tuple[str, Any]]) -> None:
        self.kind, self.fields = kind, fields

    def __repr__(self) -> str:
        return f"{self.kind}({', '.join(f'{k}={v!r}' for k, v in self.fields)})"


def _named_fields(value: Any) -> list[tuple[str, Any]] | None:
    """The fields an object's own repr lists by name — a namedtuple's, a dataclass's, a
    ``SimpleNamespace``'s — or ``None`` for any other object."""
    names = getattr(type(value), "_fields", None) if isinstance(value, tuple) else None
    if isinstance(names, tuple):
        return list(zip(map(str, names), value, strict=False))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value) if f.repr]
    if isinstance(value, SimpleNamespace):
        return list(vars(value).items())
    return None


def _attributes(value: Any) -> Iterator[tuple[str, Any]]:
    """Every attribute an object holds: its ``__dict__`` and ``__slots__``."""
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict) and not isinstance(value, type):
        yield from ((k, v) for k, v in fields.items() if isinstance(k, str) and not k.startswith("__"))
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if isinstance(slot, str) and not slot.startswith("__") and hasattr(value, slot):
                yield slot, getattr(value, slot)


def _is_pandas(value: Any) -> bool:
    module = type(value).__module__
    return (module == "pandas" or module.startswith("pandas.")) and hasattr(value, "head")


def _credential_columns(frame: Any) -> list[Any]:
    """The columns of a pandas DataFrame named like a credential (a Series so named: all)."""
    if getattr(frame, "ndim", None) == 1:
        return [None] if is_credential_key(str(frame.name)) else []
    return [c for c in islice(getattr(frame, "columns", ()), MAX_ITEMS) if is_credential_key(str(c))]


def masked_frame(frame: Any) -> Any:
    """``frame`` (a pandas DataFrame or Series) as a preview may show it: a copy of its
    first ``MAX_ITEMS`` rows with its credential-named columns masked, or itself when it has
    none. Another library's table with such columns is not shown at all."""
    columns = _credential_columns(frame)
    if not columns:
        return frame
    if not _is_pandas(frame):
        return _Shown(f"(not shown: columns named like a credential: {', '.join(map(str, columns))})")
    shown = frame.head(MAX_ITEMS).astype(object)
    if columns == [None]:
        shown[:] = REDACTED
    else:
        for column in columns:
            shown[column] = REDACTED
    return shown


def masked(value: Any, name: str | None = None, depth: int = 0, budget: list[int] | None = None) -> Any:
    """``value`` as a preview may show it (see the module doc): ``MASKED`` for a
    credential-named ``name``; a container or a named-field object rebuilt with what is under
    credential names masked; the value itself when nothing in it is (its own repr kept)."""
    if name is not None and is_credential_key(name):
        return MASKED
    if isinstance(value, _SCALARS):
        return value
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if depth >= MAX_DEPTH or budget[0] < 0:
        return ELIDED
    if _is_pandas(value):
        return masked_frame(value)
    fields = _named_fields(value)
    if fields is not None:
        shown = [(k, masked(v, k, depth + 1, budget)) for k, v in fields[:MAX_ITEMS]]
        if len(fields) > MAX_ITEMS:
            shown.append(("…", ELIDED))
        changed = len(fields) > MAX_ITEMS or any(s is not v for (_, s), (_, v) in zip(shown, fields, strict=False))
        return _Fields(type(value).__name__, shown) if changed else value
    if isinstance(value, Mapping):
        pairs = list(islice(value.items(), MAX_ITEMS))
        items = {k: masked(v, str(k), depth + 1, budget) for k, v in pairs}
        if len(value) > MAX_ITEMS:
            items[ELIDED] = ELIDED
        return items if len(value) > MAX_ITEMS or any(items[k] is not v for k, v in pairs) else value
    if isinstance(value, list | tuple | set | frozenset):
        listed = list(islice(value, MAX_ITEMS))
        shown_items = [masked(v, None, depth + 1, budget) for v in listed]
        if len(value) > MAX_ITEMS:
            shown_items.append(ELIDED)
        if len(value) <= MAX_ITEMS and all(s is v for s, v in zip(shown_items, listed, strict=True)):
            return value
        return tuple(shown_items) if isinstance(value, tuple) else shown_items
    return value


def mask_text(text: str, value: Any, name: str | None = None) -> str:
    """``text`` (a preview of ``value``, the variable ``name``) with every string ``value``
    holds under a credential name replaced by ``[redacted]``: quoted as a repr shows it, and
    bare from ``MIN_BARE`` characters on. The backstop for objects whose own repr shows
    their attributes."""
    try:
        found = set(_credentials(value, name is not None and is_credential_key(name), 0, [MAX_NODES]))
    except Exception:  # an object whose fields fail to list: its repr shows what it will
        return text
    for secret in sorted(found, key=len, reverse=True):
        if secret:
            for form in (repr(secret), f'"{secret}"'):
                text = text.replace(form, REDACTED)
            if len(secret) >= MIN_BARE:
                text = text.replace(secret, REDACTED)
    return text


def learn_credentials(namespace: Mapping[str, Any], names: list[str]) -> None:
    """Teach the process's secrets the credentials held by the variables ``names`` of
    ``namespace`` (see the module doc)."""
    budget = [MAX_NODES]
    found: list[str] = []
    for name in names:
        try:
            found.extend(_credentials(namespace.get(name), is_credential_key(name), 0, budget))
        except Exception:  # an object whose mapping or fields fail to list: nothing to learn there
            continue
        if budget[0] <= 0:
            break
    if found:
        SECRETS.learn(found)


def _credentials(value: Any, inside: bool, depth: int, budget: list[int]) -> Iterator[str]:
    """Strings held under a credential name: every string in ``value`` when ``inside``,
    else those under credential-named keys, fields, attributes and columns further in."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        return
    if isinstance(value, str):
        if inside:
            yield value
    elif isinstance(value, bytes):
        if inside:
            yield value.decode("utf-8", errors="replace")
    elif isinstance(value, _SCALARS):
        return
    elif _is_pandas(value):
        frame = value.head(MAX_ITEMS)
        if getattr(frame, "ndim", None) == 1:
            columns = [frame] if inside or _credential_columns(frame) else []
        else:
            columns = [frame[c] for c in (islice(frame.columns, MAX_ITEMS) if inside else _credential_columns(frame))]
        for column in columns:
            budget[0] -= len(column)
            yield from (v for v in column if isinstance(v, str))
    elif (fields := _named_fields(value)) is not None:
        for key, item in fields[:MAX_ITEMS]:
            yield from _credentials(item, inside or is_credential_key(key), depth + 1, budget)
    elif isinstance(value, Mapping):
        for key, item in islice(value.items(), MAX_ITEMS):
            yield from _credentials(item, inside or is_credential_key(str(key)), depth + 1, budget)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in islice(value, MAX_ITEMS):
            yield from _credentials(item, inside, depth + 1, budget)
    else:
        for key, item in islice(_attributes(value), MAX_ITEMS):
            yield from _credentials(item, inside or is_credential_key(key), depth + 1, budget)
