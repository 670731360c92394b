"""``History``: the checkpoints of one workdir as kept on disk, beside the shadow git
repository that holds their files.

In the store folder (a bare git repository, ``gitstore``)::

    objects/, refs/, HEAD, config, shallow    git's own: one commit per checkpoint, the
                                              workdir's files and symlinks as its tree
    harness/index.jsonl                       one line per checkpoint (``Checkpoint``)
    harness/<number>.json.z                   its manifest (what git cannot hold: exact
                                              permission bits, times, folders, special
                                              files, content over the cap) and the
                                              changes its call made (for undo)
    harness/last                              the newest snapshot, so that a new kernel
                                              reads only the files changed since
    workdir                                   the workdir's real path

Recording a checkpoint costs about what changed, not the size of the tree: the git item and
JSON row of each path are kept while its entry is unchanged (entries are shared between
snapshots), and a folder whose items did not change keeps its tree id.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass
from typing import Any

from ..core.error import HarnessError
from .effects import Change
from .gitstore import GitStore, TreeItem
from .snapshot import Entry, Manifest

__all__ = ["Checkpoint", "History"]

SAVE_LAST_EVERY = 30.0
"""Seconds between two saves of the newest snapshot (a stale one only costs reading the
files changed since)."""


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
        """``#3 · 2026-12-01 14:02:11 · bash (main) · deleted data/ (3 files)``."""
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


class History:
    """The index, details and trees of the checkpoints in ``store`` (see the module doc).
    Not thread-safe: ``Checkpoints`` holds its lock around every use."""

    def __init__(self, store: GitStore, *, keep: int) -> None:
        self.store = store
        self.folder = store.root / "harness"
        self.keep = keep
        self._rows: dict[str, tuple[Entry, str]] = {}  # path → (entry, its JSON row)
        self._items: dict[str, tuple[Entry, str, TreeItem]] = {}  # path → (entry, folder, git item)
        self._trees: dict[str, tuple[tuple[TreeItem, ...], str]] = {}  # folder → (items, tree id)
        self._saved_last = 0.0

    def open(self) -> None:
        self.folder.mkdir(exist_ok=True)

    # ------------------------------------------------------------------ reading
    def kept(self) -> list[Checkpoint]:
        """Every checkpoint kept, oldest first (a damaged line is skipped)."""
        try:
            lines = (self.folder / "index.jsonl").read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                found.append(Checkpoint.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                continue
        return found

    def detail(self, number: int) -> tuple[Manifest, list[Change]]:
        """The manifest of checkpoint ``number`` and the changes its call made."""
        try:
            data = _unpack((self.folder / f"{number}.json.z").read_bytes())
            changes = [
                Change(str(rel), _entry(before), _entry(after)) for rel, before, after in data["changes"]
            ]
            return Manifest.from_json(data["manifest"]), changes
        except (OSError, ValueError, KeyError, TypeError, zlib.error) as exc:
            raise HarnessError(f"checkpoint #{number} cannot be read ({exc}); pick another (checkpoints())") from None

    def load_last(self) -> Manifest | None:
        """The newest snapshot an earlier session saved; an entry whose content is no
        longer in the store is dropped (read again)."""
        try:
            manifest = Manifest.from_json(_unpack((self.folder / "last").read_bytes()))
        except (OSError, ValueError, KeyError, TypeError, zlib.error):
            return None
        manifest.entries = {rel: e for rel, e in manifest.entries.items() if e.blob is None or self.store.has(e.blob)}
        return manifest

    # ------------------------------------------------------------------ writing
    def save_last(self, manifest: Manifest, *, now: bool = False) -> None:
        """Save the newest snapshot, at most every ``SAVE_LAST_EVERY`` seconds (``now``:
        at once, when closing)."""
        if not now and time.monotonic() - self._saved_last < SAVE_LAST_EVERY:
            return
        path = self.folder / "last"
        temp = path.with_name(f".last.tmp-{os.getpid()}")
        temp.write_bytes(zlib.compress(self._manifest_json(manifest).encode(), 1))
        os.replace(temp, path)
        self._saved_last = time.monotonic()

    def record(
        self,
        before: Manifest,
        changes: tuple[Change, ...],
        *,
        call_id: str,
        tool: str,
        agent: str,
        summary: str,
        overlapped: tuple[str, ...] = (),
        partial: str = "",
    ) -> Checkpoint:
        """Make ``before`` checkpoint number N+1: a commit of its tree, its details and a
        line of the index."""
        index = self.kept()
        number = index[-1].number + 1 if index else 1
        when = time.time()
        message = f"#{number} before {tool} by {agent} (call {call_id})\n\nthen: {summary}"
        commit = self.store.write_commit(self.tree(before), self.store.head(), message, int(when))
        self.store.set_head(commit)
        rows = ",".join(json.dumps([c.path, _row(c.before), _row(c.after)]) for c in changes)
        detail = f'{{"manifest":{self._manifest_json(before)},"changes":[{rows}]}}'
        # a new file, written once: no temporary file (a rename over nothing buys nothing)
        with open(self.folder / f"{number}.json.z", "xb") as fh:
            fh.write(zlib.compress(detail.encode(), 1))
        point = Checkpoint(number, commit, call_id, tool, agent, when, summary, overlapped, partial)
        with open(self.folder / "index.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(point.to_json(), ensure_ascii=True) + "\n")
        return point

    def tree(self, manifest: Manifest) -> str:
        """Store the git tree of ``manifest``'s files and symlinks (folders come from their
        paths; what git cannot hold — empty folders, special files, content not kept — is
        in the manifest alone); its id."""
        children: dict[str, list[TreeItem]] = {}
        cached, items = self._items, {}
        for rel, entry in manifest.entries.items():
            if entry.blob is None or entry.kind not in ("file", "symlink"):
                continue
            known = cached.get(rel)
            if known is None or known[0] is not entry:
                parent, _, name = rel.rpartition("/")
                mode = "120000" if entry.kind == "symlink" else "100755" if entry.mode & 0o111 else "100644"
                known = (entry, parent, (mode, os.fsencode(name), entry.blob))
            items[rel] = known
            children.setdefault(known[1], []).append(known[2])
        self._items = items
        folders = set(children)
        for folder in list(folders):
            while folder:
                folder = folder.rpartition("/")[0]
                folders.add(folder)
        for folder in sorted(folders - {""}, key=lambda f: -f.count("/")):
            parent, _, name = folder.rpartition("/")
            oid = self._folder_tree(folder, children.pop(folder, []))
            children.setdefault(parent, []).append(("40000", os.fsencode(name), oid))
        return self._folder_tree("", children.get("", []))

    def _folder_tree(self, folder: str, items: list[TreeItem]) -> str:
        key = tuple(items)
        known = self._trees.get(folder)
        if known is not None and known[0] == key and self.store.has(known[1]):
            return known[1]
        oid = self.store.write_tree(items)
        self._trees[folder] = (key, oid)
        return oid

    def _manifest_json(self, manifest: Manifest) -> str:
        """``manifest`` as JSON, each unchanged entry's row reused."""
        cached, rows, parts = self._rows, {}, []
        for rel, entry in manifest.entries.items():
            known = cached.get(rel)
            if known is None or known[0] is not entry:
                known = (entry, f"{json.dumps(rel)}:{json.dumps(entry.to_json(), separators=(',', ':'))}")
            rows[rel] = known
            parts.append(known[1])
        self._rows = rows
        head = {"taken_ns": manifest.taken_ns, "incomplete": sorted(manifest.incomplete), "partial": manifest.partial}
        return json.dumps(head, separators=(",", ":"))[:-1] + ',"entries":{' + ",".join(parts) + "}}"

    # ------------------------------------------------------------------ pruning
    def prune(self, live: list[Manifest]) -> None:
        """When more than ``keep`` (plus a fifth) checkpoints are kept, drop the oldest and
        every object only they used; ``live``: snapshots still in use (their files stay)."""
        index = self.kept()
        if len(index) <= self.keep + self.keep // 5:
            return
        kept = index[-self.keep :]
        for old in index[: -self.keep]:
            (self.folder / f"{old.number}.json.z").unlink(missing_ok=True)
        temp = self.folder / f".index.tmp-{os.getpid()}"
        temp.write_text("".join(json.dumps(c.to_json(), ensure_ascii=True) + "\n" for c in kept), encoding="utf-8")
        os.replace(temp, self.folder / "index.jsonl")
        self.store.set_shallow([kept[0].commit])
        reachable: set[str] = set()
        for point in kept:
            reachable.add(point.commit)
            self._mark(self.store.commit_tree(point.commit), reachable)
            manifest, changes = self.detail(point.number)
            reachable.update(e.blob for e in manifest.entries.values() if e.blob)
            reachable.update(e.blob for c in changes for e in (c.before, c.after) if e is not None and e.blob)
        for snapshot in live:
            reachable.update(e.blob for e in snapshot.entries.values() if e.blob)
        for oid in list(self.store.objects()):
            if oid not in reachable:
                self.store.remove(oid)
        self._trees.clear()  # their ids may have gone

    def _mark(self, tree: str, reachable: set[str]) -> None:
        if tree in reachable:
            return
        reachable.add(tree)
        for mode, _name, oid in self.store.read_tree(tree):
            if mode == "40000":
                self._mark(oid, reachable)
            else:
                reachable.add(oid)


def _row(entry: Entry | None) -> list[object] | None:
    return None if entry is None else entry.to_json()


def _entry(row: Any) -> Entry | None:
    return None if row is None else Entry.from_json(row)


def _unpack(raw: bytes) -> dict[str, Any]:
    data = json.loads(zlib.decompress(raw))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data
