"""``Checkpoints``: the workdir checkpointed around every call that can change files, what
each call did, and going back — a whole rewind, or one call undone.

Around each such call (after its approval, right before it runs) ``start`` snapshots the
workdir and ``finish`` snapshots it again: the difference is what the call created,
changed and deleted (``effects.Effects``). When it changed anything, the snapshot from
before becomes a **checkpoint**: a commit in a shadow git repository kept outside the
workdir, under ``~/.harness_nb/checkpoints/<name>-<hash of the real path>/`` (a ``workdir``
file there names it), as Gemini CLI and Cline keep theirs. ``git --git-dir <that folder>
log`` lists them. The repository is written by ``gitstore`` rather than by ``git add``:
git never tracks what is inside a ``.git`` folder (whose config and hooks must be watched),
cannot leave out files by size, and follows no rule about symlinks that this harness could
rely on (``snapshot`` never follows one).

Calls may overlap (parallel tool calls, subagents, background tasks, teammates):
snapshots are serialized by a lock, calls are not. While another call ran at the same
time, a call's effects may include the other's; its effects say so.

**Protected paths** (``protected.protection``): a change to one is kept only when the call
was vouched for — the person approved it, or the permission hook let it change that path
itself (a rule the person gave, a subagent's memory folder) — and every call that ran
beside it was vouched for too. Otherwise it is reverted at once, before the result goes
back (restored, or deleted when it did not exist), and the result says so.

``rewind`` puts the whole workdir back as it was before a call (default: the latest); its
``dry_run`` only says what it would do, with a bounded diff. ``undo`` puts back one call's
paths only, where they are still as the call left them, and names the conflicts instead of
overwriting later work. Each of them is checkpointed itself first, so it can be undone in
turn. What a rewind cannot bring back is listed, never skipped silently: files over the
size cap (recorded by size and time only), sockets and devices. Kernel state, and anything
outside the workdir, is not covered.

The store keeps the newest ``KEEP`` checkpoints; older ones are dropped with the objects
only they used (the oldest kept commit is listed in ``shallow``, so git reads the history
as a shallow clone's).
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.error import HarnessError
from ..core.secret import SECRETS
from ..core.usage import plural
from .effects import Change, Effects, diff, reverted_for_model, reverted_for_person, shown_path
from .gitstore import GitStore, StoreError, TreeItem
from .protected import CREDENTIALS, protection
from .restore import Restored, Restorer
from .snapshot import Entry, Manifest, Snapshotter

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "KEEP",
    "CallEffects",
    "Checkpoint",
    "Checkpoints",
    "Rewind",
    "Watch",
    "store_folder",
]

log = logging.getLogger("harness_nb.checkpoints")

DEFAULT_MAX_FILE_MB = 50.0
"""Files larger than this are recorded by size and time only (the ``checkpoint_max_mb``
setting's default)."""
KEEP = 100
"""Checkpoints kept per workdir; older ones are dropped, a fifth of that many at a time."""
DIFF_LINES = 400
"""Most lines of the diff a rewind shows first."""
DIFF_FILE_LINES = 80
DIFF_MAX_BYTES = 256 * 1024  # files larger than this are compared by size only in the diff
STORE_HOME = Path(".harness_nb") / "checkpoints"
# what going back does to a path, in the words of a rewind's summary (about to, or done)
_TO_DO = {"created": "brings back", "changed": "restores", "deleted": "removes"}
_DONE = {"created": "brought back", "changed": "restored", "deleted": "removed"}


def store_folder(workdir: Path, home: Path) -> Path:
    """Where the checkpoints of ``workdir`` are kept: ``<home>/.harness_nb/checkpoints/
    <name>-<16 hex digits of the SHA-256 of its real path>``."""
    real = os.path.realpath(workdir)
    key = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:40].strip(".") or "root"
    return home / STORE_HOME / f"{name}-{key}"


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: the workdir as it was before call ``call_id`` (``tool``, by
    ``agent``) at ``time``, kept as ``commit``; ``summary``: what the call then did."""

    number: int
    commit: str
    call_id: str
    tool: str
    agent: str
    time: float
    summary: str
    overlapped: tuple[str, ...] = ()
    partial: str = ""

    def describe(self) -> str:
        """``#3 · 14:02:11 · bash (main) · deleted data/ (3 files)``."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        return f"#{self.number} · {when} · {self.tool} ({self.agent}) · {self.summary}"

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "commit": self.commit,
            "call_id": self.call_id,
            "tool": self.tool,
            "agent": self.agent,
            "time": self.time,
            "summary": self.summary,
            "overlapped": list(self.overlapped),
            "partial": self.partial,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        return cls(
            int(data["number"]),
            str(data["commit"]),
            str(data["call_id"]),
            str(data["tool"]),
            str(data["agent"]),
            float(data["time"]),
            str(data["summary"]),
            tuple(map(str, data.get("overlapped", ()))),
            str(data.get("partial", "")),
        )


@dataclass
class Watch:
    """One call between its two snapshots: who made it, whether it was vouched for, the
    workdir before it, and the calls that ran beside it (label → vouched for)."""

    serial: int
    call_id: str
    tool: str
    agent: str
    vouched: bool
    before: Manifest
    overlapped: dict[str, bool] = field(default_factory=dict)

    def label(self, beside: Watch | None = None) -> str:
        """How another call names this one: ``bash``, or ``bash of explore`` when it is
        another agent's."""
        return self.tool if beside is not None and beside.agent == self.agent else f"{self.tool} of {self.agent}"


@dataclass(frozen=True)
class CallEffects:
    """What ``finish`` found for one call: the ``effects`` it kept (recorded as
    ``checkpoint``, which undoes them), the protected changes it ``reverted``, and a
    ``problem`` when no checkpoint could be taken."""

    tool: str = ""
    effects: Effects = field(default_factory=Effects)
    reverted: tuple[Change, ...] = ()
    checkpoint: Checkpoint | None = None
    problem: str = ""
    cap_mb: float = DEFAULT_MAX_FILE_MB
    unvouched: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.effects or self.reverted or self.problem)

    def for_model(self) -> str:
        """The lines appended to the call's result (empty when nothing happened)."""
        lines = []
        if self.effects:
            lines.append(self.effects.for_model(undoable=self.checkpoint is not None, cap_mb=self.cap_mb))
        if self.reverted:
            lines.append(reverted_for_model(self.reverted, overlapped=self.unvouched))
        if self.problem:
            lines.append(f"[checkpoints: {self.problem}; this call's effects cannot be undone]")
        return "\n".join(lines)

    def line(self) -> str:
        """The view's line: ``changed 2 files · deleted data/ (3 files)``."""
        return self.effects.line()

    def reverted_line(self) -> str:
        """``the command wrote .mcp.json, which only you may change: reverted`` (or "")."""
        return reverted_for_person(self.reverted, tool=self.tool) if self.reverted else ""

    def lost(self) -> list[str]:
        return self.effects.lost(self.cap_mb)


@dataclass
class Rewind:
    """What a rewind or an undo does (``dry_run``: would do) to bring back ``checkpoint``:
    the ``changes`` from now to then, ``conflicts`` it leaves alone (an undo: paths changed
    again since the call), a bounded unified ``diff``, and, once done, what was
    ``applied`` and the checkpoint ``recorded`` first (which undoes it)."""

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
        """One line: ``rewound to #3 (before bash by main): brought back data/ (3 files) ·
        removed out.csv``."""
        what = Effects(tuple(self.changes)).line(_DONE if self.done else _TO_DO)
        head = (
            f"{'rewound' if self.done else 'rewinds'} the workdir to checkpoint #{self.checkpoint.number} "
            f"(before {self.checkpoint.tool} by {self.checkpoint.agent})"
            if self.kind == "rewind"
            else f"{'undid' if self.done else 'undoes'} checkpoint #{self.checkpoint.number} "
            f"({self.checkpoint.tool} by {self.checkpoint.agent})"
        )
        parts = [f"{head}: {what or 'nothing to change'}"]
        if self.conflicts:
            parts.append(f"left alone, changed again since: {', '.join(map(shown_path, self.conflicts[:8]))}")
        failed = self.applied.failed if self.applied is not None else []
        lost = [c.path for c in self.changes if c.after is not None and not c.after.kept]
        not_back = [f"{shown_path(p)} ({why})" for p, why in failed] if self.done else [
            f"{shown_path(p)} (its content was not kept)" for p in lost
        ]
        if not_back:
            parts.append(f"not restored: {', '.join(not_back[:8])}")
        if self.recorded is not None:
            parts.append(f"checkpoint #{self.recorded.number} undoes this")
        return "; ".join(parts)

    def __str__(self) -> str:
        return f"{self.summary()}\n\n{self.diff}".strip()


class Checkpoints:
    """The checkpoints of one workdir (see the module doc). ``home``: whose
    ``~/.harness_nb`` keeps them (the process's home when ``None``); ``max_file_mb``: the
    size cap; ``folders``: more protected folders (relative paths of agent folders given to
    the harness); ``skip``: folders never snapshot (IPython's, when it lies in the workdir);
    ``keep``: how many checkpoints are kept.
    Nothing is written until the first ``start``. Every method blocks: call them on a
    worker thread (``core.run_blocking``)."""

    def __init__(
        self,
        workdir: Path,
        *,
        home: Path | None = None,
        max_file_mb: float = DEFAULT_MAX_FILE_MB,
        folders: Iterable[str] = (),
        skip: Iterable[Path] = (),
        keep: int = KEEP,
    ) -> None:
        if not max_file_mb > 0:
            raise ValueError(f"checkpoint_max_mb must be more than 0, not {max_file_mb!r}")
        self.workdir = workdir.resolve()
        self.folder = store_folder(self.workdir, home if home is not None else Path.home())
        self.max_file_mb = float(max_file_mb)
        self.folders = tuple(folders)
        self.keep = keep
        self.store = GitStore(self.folder)
        self._skip = [self.folder.parent, *skip]
        self._lock = threading.RLock()
        self._active: dict[int, Watch] = {}
        self._serial = 0
        self._last: Manifest | None = None  # the newest snapshot: which files need reading
        self._ready = False
        self._held = False

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1024 * 1024)

    def leave_out(self, folder: Path) -> None:
        """Never snapshot ``folder`` (one that changes on its own, like IPython's)."""
        with self._lock:
            self._skip.append(folder)

    # ------------------------------------------------------------------ around a call
    def start(self, call_id: str, tool: str, agent: str, *, vouched: bool) -> Watch:
        """Snapshot the workdir before a call; the ``Watch`` goes to ``finish``.
        ``vouched``: the person approved the call, or the permission hook let it change
        protected paths (see the module doc)."""
        with self._locked():
            before = self._snapshot()
            self._serial += 1
            watch = Watch(self._serial, call_id, tool, agent, vouched, before.copy())
            for other in self._active.values():
                other.overlapped[watch.label(other)] = vouched
                watch.overlapped[other.label(watch)] = other.vouched
            self._active[watch.serial] = watch
            return watch

    def finish(self, watch: Watch) -> CallEffects:
        """Snapshot again after the call: its effects, with protected changes it had no
        right to make reverted and a checkpoint recorded when anything else changed."""
        with self._locked():
            try:
                after = self._snapshot()
                changes = diff(watch.before, after)
                trusted = watch.vouched and all(watch.overlapped.values())
                guarded = [] if trusted else [c for c in changes if protection(c.path, folders=self.folders)]
                kept = tuple(c for c in changes if c not in guarded)
                if guarded:
                    self._revert(guarded, after, watch)
                overlapped = tuple(watch.overlapped)
                effects = Effects(kept, after.partial or watch.before.partial, overlapped)
                checkpoint = self._record(watch, effects) if kept else None
                return CallEffects(
                    watch.tool,
                    effects,
                    tuple(guarded),
                    checkpoint,
                    cap_mb=self.max_file_mb,
                    unvouched=tuple(label for label, ok in watch.overlapped.items() if not ok),
                )
            finally:
                self._active.pop(watch.serial, None)

    def forget(self, watch: Watch) -> None:
        """Stop counting ``watch`` as running (its ``finish`` could not run). Never blocks."""
        self._active.pop(watch.serial, None)

    def _revert(self, changes: list[Change], after: Manifest, watch: Watch) -> None:
        targets = {c.path: c.before for c in changes}
        done = self._restorer().apply(targets, after.entries)
        for rel, why in done.failed:
            log.warning("could not revert %s after %s: %s", shown_path(rel), watch.tool, why)
        self._settle(targets, exclude=watch)

    def _settle(self, targets: dict[str, Entry | None], *, exclude: Watch | None = None) -> None:
        """After the harness itself put ``targets`` back, the calls still running must not
        count that as their effect, and the next snapshot must read those files again."""
        for other in self._active.values():
            if other is exclude:
                continue
            for rel, entry in targets.items():
                if entry is None:
                    other.before.entries.pop(rel, None)
                else:
                    other.before.entries[rel] = entry
        if self._last is not None:
            for rel in targets:
                self._last.entries.pop(rel, None)

    # ------------------------------------------------------------------ listing
    def kept(self) -> list[Checkpoint]:
        """Every checkpoint kept, oldest first."""
        with self._locked(create=False):
            return self._index()

    def get(self, checkpoint: int | str | None = None) -> Checkpoint:
        """Checkpoint number ``checkpoint`` (or its commit id, or a prefix of it); the latest
        one taken before a tool call when ``None``."""
        found = self.kept()
        if checkpoint is None:
            calls = [c for c in found if c.tool not in ("rewind", "undo")] or found
            if not calls:
                raise HarnessError("no checkpoints yet: one is taken before each call that changes files")
            return calls[-1]
        for c in found:
            if (isinstance(checkpoint, int) and c.number == checkpoint) or (
                isinstance(checkpoint, str) and len(checkpoint) >= 4 and c.commit.startswith(checkpoint)
            ):
                return c
        numbers = ", ".join(f"#{c.number}" for c in found[-10:]) or "none yet"
        raise HarnessError(f"no checkpoint {checkpoint!r}; the latest are {numbers} (see checkpoints())")

    # ------------------------------------------------------------------ going back
    def rewind(self, checkpoint: int | str | None = None, *, dry_run: bool = False) -> Rewind:
        """Put the whole workdir back as it was at ``checkpoint`` (the latest when
        ``None``); with ``dry_run``, only say what that would do."""
        with self._locked():
            point = self.get(checkpoint)
            then = self._detail(point.number)[0]
            now = self._snapshot()
            plan: dict[str, Entry | None] = {}
            for rel in then.entries.keys() | now.entries.keys():
                if not (then.covers(rel) and now.covers(rel)):
                    continue
                old, new = then.entries.get(rel), now.entries.get(rel)
                if old is None or new is None or not old.same(new):
                    plan[rel] = old
            return self._go_back("rewind", point, plan, now, [], dry_run=dry_run)

    def undo(self, checkpoint: int | str, *, dry_run: bool = False) -> Rewind:
        """Put back what the call of ``checkpoint`` changed, path by path, where the path is
        still as that call left it; the others are ``conflicts``."""
        with self._locked():
            point = self.get(checkpoint)
            _, changes = self._detail(point.number)
            now = self._snapshot()
            plan: dict[str, Entry | None] = {}
            conflicts = []
            for change in changes:
                current = now.entries.get(change.path)
                if _matches(current, change.before):
                    continue  # already as it was
                if now.covers(change.path) and _matches(current, change.after):
                    plan[change.path] = change.before
                else:
                    conflicts.append(change.path)
            return self._go_back("undo", point, plan, now, conflicts, dry_run=dry_run)

    def _go_back(
        self,
        kind: str,
        point: Checkpoint,
        plan: dict[str, Entry | None],
        now: Manifest,
        conflicts: list[str],
        *,
        dry_run: bool,
    ) -> Rewind:
        changes = [Change(rel, now.entries.get(rel), plan[rel]) for rel in sorted(plan)]
        report = Rewind(kind, point, changes, self._diff(changes), conflicts)
        if dry_run or not plan:
            return report
        self._serial += 1
        own = Watch(self._serial, f"{kind}-{point.number}", kind, "you", True, now)
        report.recorded = self._record(own, Effects(tuple(changes)))
        report.applied = self._restorer().apply(plan, now.entries)
        self._settle(plan)
        return report

    def _diff(self, changes: list[Change]) -> str:
        """A unified diff from now to then, bounded (``DIFF_LINES``, ``DIFF_FILE_LINES`` per
        file); credentials files are named, never shown; secrets are masked."""
        lines: list[str] = []
        for change in changes:
            if len(lines) >= DIFF_LINES:
                lines.append(f"… and more: {plural(len(changes), 'path')} in all")
                break
            lines += self._file_diff(change)
        return SECRETS.scrub("\n".join(lines))

    def _file_diff(self, change: Change) -> list[str]:
        now, then = change.before, change.after
        name = shown_path(change.path)
        kinds = {e.kind for e in (now, then) if e is not None}
        if kinds - {"file"}:
            return [f"{_TO_DO[change.verb]} {name} ({' → '.join(e.kind for e in (now, then) if e is not None)})"]
        if protection(change.path) is CREDENTIALS:
            return [f"--- {name} (a credentials file: its content is not shown)"]
        texts = [self._text(e) for e in (now, then)]
        if any(t is None for t in texts):
            sizes = " → ".join(f"{e.size:,} bytes" if e is not None else "none" for e in (now, then))
            return [f"Binary file {name} differs ({sizes})"]
        old, new = (t or "" for t in texts)
        was, will = (f"a/{name}" if now else "/dev/null"), (f"b/{name}" if then else "/dev/null")
        body = list(difflib.unified_diff(old.splitlines(), new.splitlines(), was, will, lineterm=""))
        if len(body) > DIFF_FILE_LINES:
            body = [*body[:DIFF_FILE_LINES], f"… {len(body) - DIFF_FILE_LINES} more lines of {name}"]
        return body

    def _text(self, entry: Entry | None) -> str | None:
        if entry is None:
            return ""
        if entry.blob is None or entry.size > DIFF_MAX_BYTES:
            return None
        data = self.store.read_blob(entry.blob)
        if b"\0" in data[:8192]:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    # ------------------------------------------------------------------ the store
    @contextlib.contextmanager
    def _locked(self, *, create: bool = True) -> Iterator[None]:
        """The thread lock, and the store's file lock (another kernel on the same workdir)."""
        with self._lock:
            if self._held:  # flock is per open file: a nested take would wait for itself
                yield
                return
            if not self._ready:
                if not create and not self.folder.exists():
                    yield
                    return
                self._open()
            with open(self.folder / "harness.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self._held = True
                try:
                    yield
                finally:
                    self._held = False

    def _open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.folder.parent, 0o700)  # copies of the person's files, .env among them
        named = self.folder / "workdir"
        if named.exists() and named.read_text(errors="replace").strip() != str(self.workdir):
            raise StoreError(f"{self.folder} keeps another folder's checkpoints ({named.read_text()[:200]!r})")
        named.write_text(f"{self.workdir}\n")
        self.store.init()
        (self.folder / "harness").mkdir(exist_ok=True)
        self._last = self._load_last()
        self._ready = True

    def _snapshot(self) -> Manifest:
        snapshotter = Snapshotter(
            self.workdir, self.store, max_file_bytes=self.max_file_bytes, skip=self._skip, folders=self.folders
        )
        manifest = snapshotter.take(self._last)
        if manifest.read:
            _write(self.folder / "harness" / "last", _pack(manifest.to_json()))
        self._last = manifest
        return manifest

    def _load_last(self) -> Manifest | None:
        """The newest snapshot of an earlier session, so that a new kernel reads only the
        files changed since; an entry whose content is no longer in the store is dropped
        (read again)."""
        try:
            manifest = Manifest.from_json(_unpack((self.folder / "harness" / "last").read_bytes()))
        except (OSError, ValueError, KeyError, TypeError, zlib.error):
            return None
        manifest.entries = {rel: e for rel, e in manifest.entries.items() if e.blob is None or self.store.has(e.blob)}
        return manifest

    def _restorer(self) -> Restorer:
        return Restorer(self.workdir, self.store)

    def _index(self) -> list[Checkpoint]:
        path = self.folder / "harness" / "index.jsonl"
        found = []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        for line in lines:
            try:
                found.append(Checkpoint.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                log.warning("checkpoints of %s: a damaged line of %s was skipped", self.workdir, path)
        return found

    def _detail(self, number: int) -> tuple[Manifest, list[Change]]:
        """The manifest of checkpoint ``number`` and the changes its call made."""
        try:
            data = _unpack((self.folder / "harness" / f"{number}.json.z").read_bytes())
            changes = [
                Change(str(rel), None if b is None else Entry.from_json(b), None if a is None else Entry.from_json(a))
                for rel, b, a in data["changes"]
            ]
            return Manifest.from_json(data["manifest"]), changes
        except (OSError, ValueError, KeyError, TypeError, zlib.error) as exc:
            raise HarnessError(f"checkpoint #{number} cannot be read ({exc}); pick another (checkpoints())") from None

    def _record(self, watch: Watch, effects: Effects) -> Checkpoint:
        """Make ``watch.before`` a checkpoint of the call, whose effects were ``effects``."""
        index = self._index()
        number = index[-1].number + 1 if index else 1
        summary = effects.line()
        when = time.time()
        message = f"#{number} before {watch.tool} by {watch.agent} (call {watch.call_id})\n\nthen: {summary}"
        commit = self.store.write_commit(self._tree(watch.before), self.store.head(), message, int(when))
        self.store.set_head(commit)
        detail = {
            "manifest": watch.before.to_json(),
            "changes": [[c.path, _row(c.before), _row(c.after)] for c in effects.changes],
        }
        _write(self.folder / "harness" / f"{number}.json.z", _pack(detail))
        point = Checkpoint(
            number,
            commit,
            watch.call_id,
            watch.tool,
            watch.agent,
            when,
            summary,
            tuple(watch.overlapped),
            effects.partial,
        )
        with open(self.folder / "harness" / "index.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(point.to_json(), ensure_ascii=True) + "\n")
        if len(index) + 1 > self.keep + self.keep // 5:
            self._prune([*index, point])
        return point

    def _tree(self, manifest: Manifest) -> str:
        """Store the git tree of ``manifest``'s files and symlinks (folders come from their
        paths; what git cannot hold — empty folders, special files, content not kept — is
        in the manifest alone)."""
        children: dict[str, list[TreeItem]] = {}
        folders: set[str] = set()
        for rel, entry in manifest.entries.items():
            if entry.blob is None or entry.kind not in ("file", "symlink"):
                continue
            parent, _, name = rel.rpartition("/")
            mode = "120000" if entry.kind == "symlink" else "100755" if entry.mode & 0o111 else "100644"
            children.setdefault(parent, []).append((mode, os.fsencode(name), entry.blob))
            while parent:
                folders.add(parent)
                parent = parent.rpartition("/")[0]
        for folder in sorted(folders, key=lambda f: -f.count("/")):
            parent, _, name = folder.rpartition("/")
            tree = self.store.write_tree(children.pop(folder, []))
            children.setdefault(parent, []).append(("40000", os.fsencode(name), tree))
        return self.store.write_tree(children.get("", []))

    def _prune(self, index: list[Checkpoint]) -> None:
        """Drop all but the newest ``keep`` checkpoints and the objects only they used."""
        kept = index[-self.keep :]
        for old in index[: -self.keep]:
            (self.folder / "harness" / f"{old.number}.json.z").unlink(missing_ok=True)
        _write(self.folder / "harness" / "index.jsonl", "".join(json.dumps(c.to_json()) + "\n" for c in kept).encode())
        self.store.set_shallow([kept[0].commit])
        live: set[str] = set()
        for point in kept:
            live.add(point.commit)
            self._mark(self.store.commit_tree(point.commit), live)
            manifest, changes = self._detail(point.number)
            live.update(e.blob for e in manifest.entries.values() if e.blob)
            live.update(e.blob for c in changes for e in (c.before, c.after) if e is not None and e.blob)
        for snapshot in [self._last, *(w.before for w in self._active.values())]:
            if snapshot is not None:
                live.update(e.blob for e in snapshot.entries.values() if e.blob)
        for oid in list(self.store.objects()):
            if oid not in live:
                self.store.remove(oid)

    def _mark(self, tree: str, live: set[str]) -> None:
        if tree in live:
            return
        live.add(tree)
        for mode, _name, oid in self.store.read_tree(tree):
            if mode == "40000":
                self._mark(oid, live)
            else:
                live.add(oid)


def _matches(current: Entry | None, expected: Entry | None) -> bool:
    if current is None or expected is None:
        return current is None and expected is None
    return current.same(expected)


def _row(entry: Entry | None) -> list[object] | None:
    return None if entry is None else entry.to_json()


def _pack(data: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(data, separators=(",", ":"), ensure_ascii=True).encode(), 1)


def _unpack(raw: bytes) -> dict[str, Any]:
    data = json.loads(zlib.decompress(raw))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _write(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    temp.write_bytes(data)
    os.replace(temp, path)
