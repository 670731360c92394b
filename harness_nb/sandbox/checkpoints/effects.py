"""What one tool call did to the workdir: the ``Change`` of each path between two
snapshots, and ``Effects``, their summary in the words the view and the model read.

A folder that was created or deleted whole is one item with its file count (``deleted
data/ (3 files)``), not one line per file. The view's line is short (``changed 2 files ·
deleted data/ (3 files)``); the model's names the paths, a bounded number of each kind
(``[effects: created out.csv; changed data/keep.csv; deleted data/raw/ (3 files) — the
person can undo this]``), and says which changes cannot be undone (a file over the size
cap was never kept). Names reach both escaped: a control character in a file name is
shown as ``\\x1b``, never sent raw to a terminal or a model.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ...core.usage import plural
from .manifest import Entry, Manifest

__all__ = ["Change", "Effects", "Group", "diff", "shown_path"]

VERBS = ("created", "changed", "deleted")
NAMES_SHOWN = 8  # of each kind, in what the model reads
NAME_CHARS = 160


@dataclass(frozen=True, slots=True)
class Change:
    """One path whose state differs: ``before`` / ``after`` (``None``: it did not exist)."""

    path: str
    before: Entry | None
    after: Entry | None

    @property
    def verb(self) -> str:
        """``created``, ``changed`` or ``deleted``."""
        if self.before is None:
            return "created"
        return "deleted" if self.after is None else "changed"

    @property
    def lost(self) -> bool:
        """Whether the state before cannot be brought back (its content was not kept)."""
        return self.before is not None and not self.before.kept


def diff(before: Manifest, after: Manifest, *, guarded: Callable[[str], bool] | None = None) -> list[Change]:
    """The changes from ``before`` to ``after``, by path. Under a folder a walk did not
    finish, an absence says nothing: a path is created or deleted only where both walks
    covered it (``Manifest.covers``), changed wherever both recorded it. ``guarded`` tells
    the protected paths, which a walk records past its bounds: only a folder whose names
    it did not list leaves those unknown."""

    def covered(rel: str) -> bool:
        if before.covers(rel) and after.covers(rel):
            return True
        protected = guarded is not None and guarded(rel)
        return protected and before.covers(rel, guarded=True) and after.covers(rel, guarded=True)

    found = [
        Change(rel, old, new)
        for rel, old in before.entries.items()
        if (new := after.entries.get(rel)) is not old and (new is None or not old.same(new))
    ]
    found = [c for c in found if c.after is not None or covered(c.path)]
    found += [
        Change(rel, None, new) for rel, new in after.entries.items() if rel not in before.entries and covered(rel)
    ]
    return sorted(found, key=lambda c: c.path)


@dataclass
class Group:
    """A file, or a folder created or deleted whole with ``files`` files in it."""

    path: str
    folder: bool
    files: int = 0

    def label(self) -> str:
        name = shown_path(self.path)
        if not self.folder:
            return name
        return f"{name}/ ({plural(self.files, 'file')})" if self.files else f"{name}/"


@dataclass(frozen=True)
class Effects:
    """The changes one call made (or that happened while it ran), summarised. ``partial``
    says why the snapshots did not see everything; ``overlapped`` names the calls that ran
    at the same time (their effects may be among these)."""

    changes: tuple[Change, ...] = ()
    partial: str = ""
    overlapped: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changes)

    def groups(self) -> dict[str, list[Group]]:
        """The changes by verb, a folder created or deleted whole as one group."""
        whole = {
            verb: {c.path for c in self.changes if c.verb == verb and _entry(c).kind == "folder"}
            for verb in ("created", "deleted")
        }
        found: dict[str, dict[str, Group]] = {verb: {} for verb in VERBS}
        for c in self.changes:
            verb = c.verb
            top = _outermost(c.path, whole.get(verb, set()))
            if top is None:
                found[verb][c.path] = Group(c.path, folder=False, files=1)
                continue
            group = found[verb].setdefault(top, Group(top, folder=True))
            if _entry(c).kind != "folder":
                group.files += 1
        return {verb: list(groups.values()) for verb, groups in found.items() if groups}

    def line(self, words: Mapping[str, str] | None = None) -> str:
        """The view's line: ``changed 2 files · deleted data/ (3 files)``; ``words`` puts
        other words for the verbs (a rewind ``brings back`` what is missing now)."""
        parts = []
        for verb, groups in self.groups().items():
            said = (words or {}).get(verb, verb)
            if len(groups) == 1:
                parts.append(f"{said} {groups[0].label()}")
                continue
            files = sum(g.files for g in groups)
            folders = [g for g in groups if g.folder]
            where = f" in {plural(len(folders), 'folder')}" if len(folders) == len(groups) else ""
            parts.append(f"{said} {plural(files, 'file')}{where}")
        return " · ".join(parts)

    def lost(self, cap_mb: float) -> list[str]:
        """What cannot be undone, each with why."""
        return [f"{shown_path(c.path)} ({_why_lost(c, cap_mb)})" for c in self.changes if c.lost]

    def for_model(self, *, undoable: bool, cap_mb: float) -> str:
        """``[effects: created out.csv; changed data/keep.csv — the person can undo this]``."""
        kinds = []
        for verb, groups in self.groups().items():
            labels = [g.label() for g in groups[:NAMES_SHOWN]]
            more = f" and {len(groups) - NAMES_SHOWN} more" if len(groups) > NAMES_SHOWN else ""
            kinds.append(f"{verb} {', '.join(labels)}{more}")
        text = "; ".join(kinds) or "no change seen"
        if self.overlapped:
            text += f" (while {_names(self.overlapped)} also ran: some of this may be theirs)"
        if self.partial:
            text += f" ({self.partial})"
        if undoable:
            lost = self.lost(cap_mb)
            text += " — the person can undo this" + (f", except {', '.join(lost[:NAMES_SHOWN])}" if lost else "")
        return f"[effects: {text}]"


def reverted_for_model(changes: Sequence[Change], *, overlapped: Iterable[str] = ()) -> str:
    """``[reverted: this call wrote .mcp.json, which only the person may change]``."""
    others = tuple(overlapped)
    who = f"this call (or {_names(others)}, which ran at the same time)" if others else "this call"
    return f"[reverted: {who} {_acts(changes)}, which only the person may change. Do not try again: ask the person.]"


def reverted_for_person(changes: Sequence[Change], *, tool: str) -> str:
    """``the command wrote .mcp.json, which only you may change: reverted``."""
    subject = "the command" if tool == "bash" else f"{tool}"
    return f"{subject} {_acts(changes)}, which only you may change: reverted"


def shown_path(rel: str, limit: int = NAME_CHARS) -> str:
    """``rel`` as a person or a model may read it: control and format characters (an ANSI
    escape, a bidi override) and bytes that are not UTF-8 written as escapes; at most
    ``limit`` characters."""
    out = []
    for ch in rel:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _acts(changes: Sequence[Change]) -> str:
    """``wrote .claude/ (1 file) and .mcp.json and deleted .envrc``."""
    groups = Effects(tuple(changes)).groups()
    wrote = [g.label() for verb in ("created", "changed") for g in groups.get(verb, ())]
    deleted = [g.label() for g in groups.get("deleted", ())]
    return " and ".join(f"{verb} {_names(paths)}" for verb, paths in (("wrote", wrote), ("deleted", deleted)) if paths)


def _names(names: Sequence[str]) -> str:
    shown = list(names[:NAMES_SHOWN])
    if len(names) > NAMES_SHOWN:
        shown.append(f"{len(names) - NAMES_SHOWN} more")
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _entry(change: Change) -> Entry:
    entry = change.after if change.after is not None else change.before
    assert entry is not None
    return entry


def _outermost(path: str, folders: set[str]) -> str | None:
    if not folders:
        return None
    parts = path.split("/")
    for n in range(1, len(parts) + 1):
        prefix = "/".join(parts[:n])
        if prefix in folders:
            return prefix
    return None


def _why_lost(change: Change, cap_mb: float) -> str:
    before = change.before
    assert before is not None
    if before.size > cap_mb * 1024 * 1024:
        return f"over the {cap_mb:g} MB checkpoint cap, not kept"
    return "its content could not be kept"
