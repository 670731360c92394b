"""``Setting``: how one setting of ``RunSettings`` (``settings.py``) is described, normalised
and checked, read from its dataclass field: the flat name, default and help its field's
metadata (``about``) gives, and the kind its type gives — what a ``%config`` trait, a
row of the documentation's settings table and a check are made from."""

from __future__ import annotations

import os
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin, get_type_hints

from .core import ConfigError
from .engine.limits import require_positive
from .providers.options import ProviderOptions, check_pace
from .sandbox import SandboxLimits

if TYPE_CHECKING:
    from .settings import RunSettings

__all__ = ["Setting", "about", "describe"]

# Values that were once accepted, and what they are called now (0.x: gone, with a pointer).
_RENAMED = {("approval_policy", "dangerous"): "allowlist"}


def about(help: str, *, name: str | None = None, built: bool = False) -> dict[str, Any]:
    """The metadata of a setting's field: its ``help`` (what ``%config`` shows), its flat
    ``name`` when it differs from the field's, and whether it is ``built``."""
    return {"help": " ".join(help.split()), "name": name, "built": built}


@dataclass(frozen=True)
class Setting:
    """One setting as every surface shows it: its flat ``name``; where it lives (``group``,
    the ``RunSettings`` field holding its group, ``None`` for a field of its own, and
    ``field``); its ``default`` and ``help``; whether it is ``built`` into a harness; its
    ``kind`` (``bool``, ``int``, ``float``, ``text``, ``names``, ``mapping``, ``choice``
    — one of ``choices`` — or ``pace``, a choice or a number) and whether it may be none
    (``optional``)."""

    name: str
    group: str | None
    field: str
    default: Any
    help: str
    built: bool
    kind: str
    optional: bool
    choices: tuple[str, ...] = ()

    def value(self, settings: RunSettings) -> Any:
        """This setting's value in ``settings``."""
        return getattr(settings if self.group is None else getattr(settings, self.group), self.field)

    def checked(self, value: Any) -> Any:
        """``value`` as this setting holds it (none written one way, lists as tuples, paths
        as text), or the ``ConfigError`` saying why it cannot be."""
        if value is None and self.optional:
            return None
        kind, name = self.kind, self.name
        if kind in ("int", "float"):
            if self.optional and value == 0 and not isinstance(value, bool):
                return None
            require_positive(name, value, whole=kind == "int", optional=self.optional)
        elif kind == "names":
            names = _names(name, value)
            return (names or None) if self.optional else names
        elif kind == "text":
            text = os.fspath(value) if isinstance(value, os.PathLike) else value
            if not isinstance(text, str):
                raise ConfigError(f"{name} must be text, not {value!r}")
            return text or None
        elif kind == "mapping":
            if not isinstance(value, Mapping | ProviderOptions | SandboxLimits):
                raise ConfigError(f"{name} must be a mapping, e.g. {{...}}, not {value!r}")
            return value or None
        elif kind == "bool" and not isinstance(value, bool):
            raise ConfigError(f"{name} must be True or False, not {value!r}")
        elif kind == "choice" and value not in self.choices:
            raise ConfigError(self.not_a_choice(value))
        elif kind == "pace":
            try:
                return check_pace(value)
            except ValueError as exc:
                raise ConfigError(f"{name} {value!r} cannot be used: {exc}") from None
        return value

    def not_a_choice(self, value: Any) -> str:
        """Why ``value`` is none of the choices (a value that was renamed says its new name)."""
        renamed = _RENAMED.get((self.name, value)) if isinstance(value, str) else None
        if renamed is not None:
            return f"{self.name} {value!r} was renamed {renamed!r}"
        return f"{self.name} must be one of {', '.join(map(repr, self.choices))}, not {value!r}"


def _names(what: str, names: Iterable[str | os.PathLike[str]] | None) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str):
        raise ConfigError(f"{what} is a list of names, e.g. [{names!r}], not one string")
    return tuple(os.fspath(n) for n in names)



def _kind(hint: Any) -> tuple[str, bool, tuple[str, ...]]:
    """(kind, optional, choices) of a setting's type (see ``Setting``)."""
    union = get_origin(hint) in (Union, types.UnionType)
    members = [a for a in (get_args(hint) if union else (hint,)) if a is not type(None)]
    optional = len(members) < len(get_args(hint)) if union else False
    choices = tuple(c for a in members if get_origin(a) is Literal for c in get_args(a))
    plain = [get_origin(a) or a for a in members if get_origin(a) is not Literal]
    if choices:
        return ("pace" if float in plain else "choice"), optional, choices
    if tuple in plain:
        return "names", optional, ()
    if Mapping in plain:
        return "mapping", optional, ()
    kinds = {bool: "bool", int: "int", float: "float", str: "text"}
    if len(plain) == 1 and plain[0] in kinds:
        return kinds[plain[0]], optional, ()
    raise TypeError(f"a setting of type {hint!r}: no surface knows how to show it")


def describe(holder: type, group: str | None) -> list[Setting]:
    """The settings the fields of ``holder`` (a settings dataclass; ``group``: where it sits in
    ``RunSettings``) describe, in their order."""
    hints = get_type_hints(holder)
    found = []
    for f in fields(holder):
        if "help" not in f.metadata:
            continue
        kind, optional, choices = _kind(hints[f.name])
        name = f.metadata["name"] or f.name
        about = f.metadata
        found.append(Setting(name, group, f.name, f.default, about["help"], about["built"], kind, optional, choices))
    return found
