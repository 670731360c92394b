"""Credentials in the notebook's variables: what ``list_variables`` and ``inspect_variable``
never show, and what ``Secrets`` learns from the namespace.

A variable whose name looks like a credential (``db_password``, ``api_key``, ``creds``:
``core.credential.is_credential_key``) is shown by type only, and every string in it is
masked; elsewhere a mapping's values under such keys (``config["db"]["password"]``,
``creds["token"]``) are masked: ``[redacted]`` in the preview, whatever the value's length
(a short one too, which ``Secrets`` would not mask everywhere).

The same values are learned by the process's secrets (``learn_credentials``), with the
string attributes of objects under such names (``settings.api_key``), so a later copy of
one — ``print(db_password)`` in ``run_python``, a command's output — is masked too. The
walk is bounded (``MAX_NODES`` objects per call, ``MAX_DEPTH`` levels): a namespace of
large tables costs no more than that.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

from ...core.credential import is_credential_key
from ...core.secret import REDACTED, SECRETS

__all__ = ["MASKED", "learn_credentials", "masked"]

MAX_NODES = 5_000
MAX_DEPTH = 4
MAX_ITEMS = 200  # of one container, in a masked preview


class _Masked:
    """Stands for a masked value in a preview (its repr is ``[redacted]``, as the scrubbed
    text's)."""

    def __repr__(self) -> str:
        return REDACTED


MASKED: Any = _Masked()


def masked(value: Any, name: str | None = None, depth: int = 0) -> Any:
    """``value`` as a preview may show it: ``MASKED`` for a credential-named ``name``; a
    mapping (or list) rebuilt with the values under credential-named keys masked. Other
    values are returned as they are (a bounded copy: past ``MAX_DEPTH`` levels or
    ``MAX_ITEMS`` items a container is kept as it is)."""
    if name is not None and is_credential_key(name):
        return MASKED
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, Mapping) and len(value) <= MAX_ITEMS:
        return {k: masked(v, str(k), depth + 1) for k, v in value.items()}
    if type(value) in (list, tuple) and len(value) <= MAX_ITEMS:
        return type(value)(masked(v, None, depth + 1) for v in value)
    return value


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
    else those under credential-named keys and attributes further in."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        return
    if isinstance(value, str):
        if inside:
            yield value
    elif isinstance(value, bytes):
        if inside:
            yield value.decode("utf-8", errors="replace")
    elif isinstance(value, Mapping):
        for key, item in islice(value.items(), MAX_ITEMS):
            yield from _credentials(item, inside or is_credential_key(str(key)), depth + 1, budget)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in islice(value, MAX_ITEMS):
            yield from _credentials(item, inside, depth + 1, budget)
    else:
        fields = getattr(value, "__dict__", None)
        if isinstance(fields, dict) and not isinstance(value, type):
            for key, item in islice(fields.items(), MAX_ITEMS):
                if isinstance(key, str) and not key.startswith("__"):
                    yield from _credentials(item, inside or is_credential_key(key), depth + 1, budget)
