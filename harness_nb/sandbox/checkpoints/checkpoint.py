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

A snapshot walks the workdir (a stat walk: files are read only when they changed), within
bounds whatever it holds (``snapshot.WalkLimits``): past them it records protected names
only, and the call's effects say what is "partly unknown"; the one before a call is
skipped when inotify saw nothing change since the last one (``watch.py``), so an
unchanged tree costs one walk per call.

Calls may overlap (parallel tool calls, subagents, background tasks, teammates):
snapshots are serialized by a lock, calls are not. While another call ran at the same
time, a call's effects may include the other's; its effects say so.

**Protected paths** (``protected.protection``, with what the walk found: the home, git
directories by content, hooks folders): a change to one is kept only when the call was
vouched for *that path* — the approval card named it (the person approved ``write_file
.mcp.json``, or a command the card said writes ``.mcp.json``), or the permission hook let
the call change it (a rule the person gave, a subagent's memory folder) — and so was
every call that ran beside it. Otherwise it is reverted at once, before the result goes
back (restored, or deleted when it did not exist), and the result says so: an approval
covers the paths it named, never the others the same call touched. What is put back is
what the path was before the call, unless it is now as it was before the first of the
calls running when this one began: then what the call saw at its start was another call's
passing state (a folder that came and went), there is nothing to put back, and it is no
change of this call — a revert never brings back a path that did not exist before those
calls. Compiled Python
(``*.pyc``) a call created or changed is removed whoever vouched for it (a kernel imports
it in place of its source; commands run with ``PYTHONDONTWRITEBYTECODE=1``).

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
import fcntl
import hashlib
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...core.error import HarnessError
from ..protected import BYTECODE, ProtectedPlaces, home_in, protection
from ..watch import FolderWatch
from .effects import Change, Effects, diff, reverted_for_model, reverted_for_person, shown_path
from .gitstore import GitStore, StoreError
from .history import Checkpoint, History
from .manifest import Entry, Manifest
from .restore import Restorer
from .rewind import Rewind, rewind_diff
from .snapshot import WALK_LIMITS, Snapshotter, WalkLimits

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "KEEP",
    "CallEffects",
    "Checkpoint",
    "Checkpoints",
    "Rewind",
    "Watch",
    "store_folder",
    "without_effects",
]

log = logging.getLogger("harness_nb.checkpoints")

DEFAULT_MAX_FILE_MB = 50.0
"""Files larger than this are recorded by size and time only (the ``checkpoint_max_mb``
setting's default)."""
KEEP = 100
"""Checkpoints kept per workdir; older ones are dropped, a fifth of that many at a time."""
STORE_HOME = Path(".harness_nb") / "checkpoints"


def store_folder(workdir: Path, home: Path) -> Path:
    """Where the checkpoints of ``workdir`` are kept: ``<home>/.harness_nb/checkpoints/
    <name>-<16 hex digits of the SHA-256 of its real path>``."""
    real = os.path.realpath(workdir)
    key = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:40].strip(".") or "root"
    return home / STORE_HOME / f"{name}-{key}"


@dataclass
class Watch:
    """One call between its two snapshots: who made it, the protected paths it was vouched
    for (relative to the workdir; a folder covers what is in it), the workdir before it,
    the calls that ran beside it (label → the paths they were vouched for), and the
    workdir before the first of the calls already running when it began (``origin``; its
    own ``before`` when none was)."""

    serial: int
    call_id: str
    tool: str
    agent: str
    vouched: frozenset[str]
    before: Manifest
    overlapped: dict[str, frozenset[str]] = field(default_factory=dict)
    key: object = None
    origin: Manifest | None = None

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
        return bool(self.effects or self.reverted or self.problem or self.effects.partial)

    def for_model(self) -> str:
        """The lines appended to the call's result (empty when nothing happened)."""
        lines = []
        if self.effects or self.effects.partial:
            lines.append(self.effects.for_model(undoable=self.checkpoint is not None, cap_mb=self.cap_mb))
        if self.reverted:
            lines.append(reverted_for_model(self.reverted, overlapped=self.unvouched))
        if self.problem:
            lines.append(f"[checkpoints: {self.problem}; this call's effects cannot be undone]")
        return "\n".join(lines)

    def line(self) -> str:
        """The view's line: ``changed 2 files · deleted data/ (3 files)`` (``no change seen``
        when the walk newly stopped short and saw nothing)."""
        return self.effects.line() or ("no change seen" if self.effects.partial else "")

    def reverted_line(self) -> str:
        """``the command wrote .mcp.json, which only you may change: reverted`` (or "")."""
        return reverted_for_person(self.reverted, tool=self.tool) if self.reverted else ""

    def lost(self) -> list[str]:
        return self.effects.lost(self.cap_mb)


_NOTES = ("[effects: ", "[reverted: ", "[checkpoints: ")


def without_effects(result: str) -> str:
    """A tool result without the lines ``CallEffects.for_model`` appended (a view shows
    them as a line of its own)."""
    head, _, notes = result.rpartition("\n\n")
    if not notes or not all(line.startswith(_NOTES) for line in notes.splitlines()):
        return result
    return head


class Checkpoints:
    """The checkpoints of one workdir (see the module doc). ``home``: whose
    ``~/.harness_nb`` keeps them (the process's home when ``None``); ``max_file_mb``: the
    size cap; ``folders``: more protected folders (relative paths of agent folders given to
    the harness); ``skip``: folders never snapshot (IPython's, when it lies in the workdir);
    ``keep``: how many checkpoints are kept; ``walk``: the bounds of each snapshot's walk.
    The dot-entries of ``home`` are protected when the workdir holds it. Nothing is written
    until the first ``start``.
    Every method but ``forget`` and ``abandon`` blocks: call them on a worker thread
    (``core.run_blocking``)."""

    def __init__(
        self,
        workdir: Path,
        *,
        home: Path | None = None,
        max_file_mb: float = DEFAULT_MAX_FILE_MB,
        folders: Iterable[str] = (),
        skip: Iterable[Path] = (),
        keep: int = KEEP,
        walk: WalkLimits = WALK_LIMITS,
    ) -> None:
        if not max_file_mb > 0:
            raise ValueError(f"checkpoint_max_mb must be more than 0, not {max_file_mb!r}")
        self.workdir = workdir.resolve()
        home = home if home is not None else Path.home()
        self.folder = store_folder(self.workdir, home)
        self.home = home_in(self.workdir, home)  # where it lies in the workdir, if it does
        self.walk = walk
        self.max_file_mb = float(max_file_mb)
        self.folders = tuple(folders)
        self.store = GitStore(self.folder)
        self.history = History(self.store, keep=keep)
        self._skip = [self.folder.parent, *skip]
        self._lock = threading.RLock()
        self._active: dict[int, Watch] = {}  # the calls between their snapshots
        self._abandoned: set[object] = set()
        self._running = threading.Lock()  # guards those two; never held during a walk
        self._serial = 0
        self._last: Manifest | None = None  # the newest snapshot: which files need reading
        self._ready = False
        self._held = False
        self._watch: FolderWatch | None = None

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1024 * 1024)

    def leave_out(self, folder: Path) -> None:
        """Never snapshot ``folder`` (one that changes on its own, like IPython's)."""
        with self._lock:
            self._skip.append(folder)

    # ------------------------------------------------------------------ around a call
    def start(
        self, call_id: str, tool: str, agent: str, *, vouched: frozenset[str] = frozenset(), key: object = None
    ) -> Watch:
        """Snapshot the workdir before a call; the ``Watch`` goes to ``finish``.
        ``vouched``: the protected paths (relative) the approval card named or the
        permission hook let it change (see the module doc). ``key``: what ``abandon``
        names it by."""
        with self._locked():
            # nothing changed since the last snapshot (inotify says so): it is the state
            # before this call, and the call costs one walk, after it
            quiet = self._last is not None and self._watch is not None and not self._watch.changed()
            before = self._last if quiet and self._last is not None else self._snapshot()
            self._serial += 1
            watch = Watch(self._serial, call_id, tool, agent, vouched, before.copy(), key=key)
            with self._running:
                if key is not None and key in self._abandoned:
                    self._abandoned.discard(key)
                    return watch  # whoever asked is gone: the call never runs
                for other in self._active.values():
                    other.overlapped[watch.label(other)] = vouched
                    watch.overlapped[other.label(watch)] = other.vouched
                first = min(self._active.values(), key=lambda other: other.serial, default=watch)
                watch.origin = first.before
                self._active[watch.serial] = watch
            return watch

    def abandon(self, key: object) -> None:
        """The caller of ``start(key=key)`` was interrupted before it had its watch: the
        call never runs, so it must not count as running beside others. Never blocks for
        long (a snapshot under way is not waited for)."""
        with self._running:
            found = [serial for serial, watch in self._active.items() if watch.key is key]
            for serial in found:
                del self._active[serial]
            if not found:
                self._abandoned.add(key)

    def finish(self, watch: Watch) -> CallEffects:
        """Snapshot again after the call: its effects, with protected changes it had no
        right to make reverted (bytecode removed) and a checkpoint recorded when anything
        else changed."""
        with self._locked():
            try:
                after = self._snapshot()
                before = watch.before
                places = before.places | after.places
                # what the walk records past its bounds: protected by name, home or git directory
                recorded = ProtectedPlaces(places.home, places.git_dirs)
                changes = diff(before, after, guarded=lambda rel: self._protected(rel, recorded))
                reverted: dict[Change, Entry | None] = {}
                passing: set[Change] = set()  # as before the calls beside it: another's passing state
                for change in changes:
                    why = protection(change.path, folders=self.folders, places=places)
                    if why is BYTECODE:
                        if change.after is not None:
                            reverted[change] = None  # compiled again from the source when needed
                    elif why is not None and not self._vouched(change, watch):
                        if _as_it_was(watch.origin, change):
                            passing.add(change)
                        else:
                            reverted[change] = change.before
                kept = tuple(c for c in changes if c not in reverted and c not in passing)
                if reverted:
                    self._revert(reverted, after, watch, places)
                new_unknown = after.incomplete - before.incomplete or after.unlisted - before.unlisted
                partial = after.partial or before.partial if kept or new_unknown else ""
                effects = Effects(kept, partial, tuple(watch.overlapped))
                checkpoint = self._record(watch, effects) if kept else None
                suspects = tuple(
                    label
                    for label, scope in watch.overlapped.items()
                    if any(not _covers(scope, change) for change in reverted)
                )
                return CallEffects(
                    watch.tool, effects, tuple(reverted), checkpoint, cap_mb=self.max_file_mb, unvouched=suspects
                )
            finally:
                self.forget(watch)

    def _protected(self, rel: str, places: ProtectedPlaces) -> bool:
        return protection(rel, folders=self.folders, places=places) is not None

    def _vouched(self, change: Change, watch: Watch) -> bool:
        """Whether ``change`` to a protected path stays: this call was vouched for it, and
        so was every call that ran beside it (any of them may have made it)."""
        return _covers(watch.vouched, change) and all(_covers(scope, change) for scope in watch.overlapped.values())

    def forget(self, watch: Watch) -> None:
        """Stop counting ``watch`` as running (its ``finish`` could not run). Never blocks
        for long."""
        with self._running:
            self._active.pop(watch.serial, None)

    def _running_watches(self) -> list[Watch]:
        with self._running:
            return list(self._active.values())

    def _revert(
        self, reverted: dict[Change, Entry | None], after: Manifest, watch: Watch, places: ProtectedPlaces
    ) -> None:
        targets = {c.path: entry for c, entry in reverted.items()}
        done = self._restorer().apply(targets, after.entries, whole=places.git_dirs)
        for rel, why in done.failed:
            log.warning("could not revert %s after %s: %s", shown_path(rel), watch.tool, why)
        self._settle(targets, exclude=watch)

    def _settle(self, targets: dict[str, Entry | None], *, exclude: Watch | None = None) -> None:
        """After the harness itself put ``targets`` back, the calls still running must not
        count that as their effect, and the next snapshot must read those files again."""
        for other in self._running_watches():
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
            return self.history.kept()

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
            then = self.history.detail(point.number)[0]
            now = self._snapshot()
            plan: dict[str, Entry | None] = {}
            for rel in then.entries.keys() | now.entries.keys():
                if not then.knows(rel):
                    continue  # under a folder that checkpoint did not finish: nothing to bring back
                old, new = then.entries.get(rel), now.entries.get(rel)
                if old is None or new is None or not old.same(new):
                    plan[rel] = old
            return self._go_back("rewind", point, plan, now, [], dry_run=dry_run)

    def undo(self, checkpoint: int | str, *, dry_run: bool = False) -> Rewind:
        """Put back what the call of ``checkpoint`` changed, path by path, where the path is
        still as that call left it; the others are ``conflicts``."""
        with self._locked():
            point = self.get(checkpoint)
            _, changes = self.history.detail(point.number)
            now = self._snapshot()
            plan: dict[str, Entry | None] = {}
            conflicts = []
            for change in changes:
                current = now.entries.get(change.path)
                if _matches(current, change.before):
                    continue  # already as it was
                if now.knows(change.path) and _matches(current, change.after):
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
        report = Rewind(kind, point, changes, rewind_diff(changes, self.store), conflicts)
        if dry_run or not plan:
            return report
        self._serial += 1
        own = Watch(self._serial, f"{kind}-{point.number}", kind, "you", frozenset(), now)
        report.recorded = self._record(own, Effects(tuple(changes)))
        report.applied = self._restorer().apply(plan, now.entries)
        self._settle(plan)
        return report

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
        self.history.open()
        self._last = self.history.load_last()
        self._watch = FolderWatch()
        self._ready = True

    def close(self) -> None:
        """Stop watching the workdir (the store stays; a later call opens it again)."""
        with self._lock:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
            if self._ready and self._last is not None:
                try:
                    self.history.save_last(self._last, now=True)
                except OSError as exc:  # a lost cache only costs reading the files again
                    log.warning("the newest snapshot of %s could not be saved: %s", self.workdir, exc)
            self._ready = False

    def _snapshot(self) -> Manifest:
        snapshotter = Snapshotter(
            self.workdir,
            self.store,
            max_file_bytes=self.max_file_bytes,
            skip=self._skip,
            folders=self.folders,
            home=self.home,
            limits=self.walk,
            watch=self._watch,
        )
        manifest = snapshotter.take(self._last)
        if manifest.read:
            self.history.save_last(manifest)
        self._last = manifest
        return manifest

    def _restorer(self) -> Restorer:
        return Restorer(self.workdir, self.store)

    def _record(self, watch: Watch, effects: Effects) -> Checkpoint:
        """Make ``watch.before`` a checkpoint of the call, whose effects were ``effects``;
        drop the oldest when there are too many."""
        point = self.history.record(
            watch.before,
            effects.changes,
            call_id=watch.call_id,
            tool=watch.tool,
            agent=watch.agent,
            summary=effects.line(),
            overlapped=tuple(watch.overlapped),
            partial=effects.partial,
        )
        live = [m for m in (self._last, *(w.before for w in self._running_watches())) if m is not None]
        self.history.prune(live)
        return point


def _matches(current: Entry | None, expected: Entry | None) -> bool:
    if current is None or expected is None:
        return current is None and expected is None
    return current.same(expected)


def _as_it_was(origin: Manifest | None, change: Change) -> bool:
    """Whether ``change`` left its path as ``origin`` (the workdir before the first of the
    calls running when the call began) had it: absent then and now, or the same."""
    return (
        origin is not None
        and origin.knows(change.path, guarded=True)
        and _matches(origin.entries.get(change.path), change.after)
    )


def _covers(scope: frozenset[str], change: Change) -> bool:
    """Whether ``scope`` (paths a call was vouched for) covers ``change``: the path, what is
    in it, or a folder created on the way to it."""
    path = change.path
    for vouched in scope:
        if path == vouched or path.startswith(vouched + "/"):
            return True
        if change.verb == "created" and vouched.startswith(path + "/"):
            return True
    return False
