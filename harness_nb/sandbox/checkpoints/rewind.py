"""``Rewind``: what a rewind or an undo does, in words and as a bounded diff.

The diff runs from now to the checkpoint (what the person gets back is ``+``): unified for
text files, one line for a binary one, a symlink or a folder; a credentials file is
named, never shown, and any secret left in the rest is masked — the values of
credential-named keys included (a ``password:`` of ``config.yaml``): each file's content,
then and now, is read for them first, as a file a tool reads is (``Secrets.learn_file``). It stops after
``DIFF_LINES`` lines (``DIFF_FILE_LINES`` per file) and says how much more there was.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...core.secret import SECRETS
from ...core.usage import plural
from ..protected import CREDENTIALS, protection
from .effects import Change, Effects, shown_path
from .gitstore import GitStore
from .history import Checkpoint
from .manifest import Entry
from .restore import Restored

__all__ = ["DIFF_LINES", "Rewind", "rewind_diff"]

DIFF_LINES = 400
"""Most lines of the diff a rewind shows first."""
DIFF_FILE_LINES = 80
DIFF_MAX_BYTES = 256 * 1024  # larger files are compared by size only in the diff
# what going back does to a path, in the words of a rewind's summary (about to, or done)
TO_DO = {"created": "brings back", "changed": "restores", "deleted": "removes"}
DONE = {"created": "brought back", "changed": "restored", "deleted": "removed"}


@dataclass
class Rewind:
    """What a rewind or an undo (``kind``) does — with ``dry_run``, would do — to bring
    back ``checkpoint``: the ``changes`` from now to then, the ``conflicts`` it leaves
    alone (an undo: paths changed again since the call), a bounded unified ``diff``, and,
    once done, what was ``applied`` and the checkpoint ``recorded`` first (which undoes
    it)."""

    kind: str
    checkpoint: Checkpoint
    changes: list[Change]
    diff: str = ""
    conflicts: list[str] = field(default_factory=list)
    applied: Restored | None = None
    recorded: Checkpoint | None = None

    @property
    def done(self) -> bool:
        return self.applied is not None

    def summary(self) -> str:
        """One line: ``rewound the workdir to checkpoint #3 (before bash by main): brought
        back data/ (3 files) · removed out.csv; checkpoint #4 undoes this``."""
        what = Effects(tuple(self.changes)).line(DONE if self.done else TO_DO) or "nothing to change"
        point = self.checkpoint
        if self.kind == "rewind":
            head = f"{'rewound' if self.done else 'rewinds'} the workdir to checkpoint #{point.number} "
            head += f"(before {point.tool} by {point.agent})"
        else:
            head = f"{'undid' if self.done else 'undoes'} checkpoint #{point.number} ({point.tool} by {point.agent})"
        parts = [f"{head}: {what}"]
        if self.conflicts:
            parts.append(f"left alone, changed again since: {', '.join(map(shown_path, self.conflicts[:8]))}")
        if self.applied is not None:
            missing = [f"{shown_path(path)} ({why})" for path, why in self.applied.failed]
        else:
            missing = [
                f"{shown_path(c.path)} (its content was not kept)"
                for c in self.changes
                if c.after is not None and not c.after.kept
            ]
        if missing:
            parts.append(f"not restored: {', '.join(missing[:8])}")
        if self.recorded is not None:
            parts.append(f"checkpoint #{self.recorded.number} undoes this")
        return "; ".join(parts)

    def __str__(self) -> str:
        return f"{self.summary()}\n\n{self.diff}".strip()


def rewind_diff(changes: Iterable[Change], store: GitStore) -> str:
    """The diff from now (each change's ``before``) to then (its ``after``)."""
    changes = list(changes)
    lines: list[str] = []
    for change in changes:
        if len(lines) >= DIFF_LINES:
            lines.append(f"… and more: {plural(len(changes), 'path')} in all")
            break
        lines += _file_diff(change, store)
    return SECRETS.scrub("\n".join(lines))


def _file_diff(change: Change, store: GitStore) -> list[str]:
    now, then = change.before, change.after
    name = shown_path(change.path)
    if any(e is not None and e.kind != "file" for e in (now, then)):
        kinds = " → ".join(e.kind if e is not None else "nothing" for e in (now, then))
        return [f"{TO_DO[change.verb]} {name} ({kinds})"]
    if protection(change.path) is CREDENTIALS:
        return [f"--- {name} (a credentials file: its content is not shown)"]
    old, new = _text(now, store), _text(then, store)
    for text in (old, new):
        if text:  # its credentials are masked from here on, in this diff and wherever they show
            SECRETS.learn_file(change.path, text)
    if old is None or new is None:
        sizes = " → ".join(f"{e.size:,} bytes" if e is not None else "none" for e in (now, then))
        return [f"Binary file {name} differs ({sizes})"]
    was, will = (f"a/{name}" if now else "/dev/null"), (f"b/{name}" if then else "/dev/null")
    body = list(difflib.unified_diff(old.splitlines(), new.splitlines(), was, will, lineterm=""))
    if len(body) > DIFF_FILE_LINES:
        body = [*body[:DIFF_FILE_LINES], f"… {len(body) - DIFF_FILE_LINES} more lines of {name}"]
    return body


def _text(entry: Entry | None, store: GitStore) -> str | None:
    """A file's text, ``""`` for none, ``None`` when it cannot be shown as text."""
    if entry is None:
        return ""
    if entry.blob is None or entry.size > DIFF_MAX_BYTES:
        return None
    data = store.read_blob(entry.blob)
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
