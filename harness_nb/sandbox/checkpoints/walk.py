"""``Walk``: one snapshot's walk of the workdir (``snapshot.Snapshotter`` takes it; its
module doc says what a snapshot records and leaves out).

It goes breadth first, from a queue of ``_Folder`` values, each listed in one of six ways:
in full, by protected names only (past a bound), a git directory (its config and hooks), a
cache (a stat for each package's ``.git``), a virtualenv (down to ``site-packages``), and
a ``site-packages`` (its startup files). Every bound it meets is noted against the
outermost folder it leaves unfinished, and said in words at the end (``Manifest.partial``).
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ...core.fs import file_kind
from ...core.text import escape_name
from ..protected import (
    CONFIG_READ_LIMIT,
    HARNESS_STATE,
    ProtectedPlaces,
    hooks_folder,
    hooks_path,
    link_target,
    looks_like_git_dir,
    name_protection,
    protection,
    sandbox_mount_point,
)
from .gitstore import StoreError
from .manifest import Entry, Manifest, with_blob

if TYPE_CHECKING:
    from .snapshot import Snapshotter

__all__ = ["CACHE_DIRS", "DIR_FLAGS", "WALK_LIMITS", "Walk", "WalkLimits", "shown_folder"]

CACHE_DIRS = frozenset({".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules", ".ipynb_checkpoints", ".cache"})
"""Folders anywhere in the tree that tools regenerate (``.cache``: the XDG cache of a home
folder inside the workdir): only looked into for git directories, never restored."""


@dataclass(frozen=True)
class WalkLimits:
    """How far one snapshot's walk goes: entries recorded in all and per folder, names
    listed in all, folder levels entered (``snapshot``'s module doc says what it does past
    them)."""

    entries: int = 100_000
    per_folder: int = 10_000
    names: int = 500_000
    depth: int = 64

    def __post_init__(self) -> None:
        for name in ("entries", "per_folder", "names", "depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"WalkLimits.{name} must be at least 1, not {getattr(self, name)!r}")


WALK_LIMITS = WalkLimits()
"""The bounds every snapshot's walk has unless told otherwise."""


# Inside a git directory: what git itself rewrites all the time and never runs.
_GIT_BULK = frozenset({"objects", "refs", "logs", "lfs", "rr-cache", "index", "packed-refs"})
_SITE_NAMES = frozenset({"sitecustomize.py", "usercustomize.py"})
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# How a folder is walked (see the module doc).
_FULL, _NAMES, _GIT, _CACHE, _VENV, _SITE = range(6)
# What is known of a folder's contents, by an ancestor: all there is, not every entry, not every name.
_KNOWN, _UNDER_INCOMPLETE, _UNDER_UNLISTED = range(3)


class _Folder(NamedTuple):
    """A folder waiting to be listed: its path, its (device, inode) as listed, its depth,
    how it is walked, the git directory it lies in, its level below a virtualenv or in a
    cache, and what is known of its contents."""

    rel: str
    key: tuple[int, int]
    depth: int
    how: int
    git_root: str = ""
    level: int = 0
    known: int = _KNOWN


class Walk:
    """One snapshot's walk (see the module doc): ``run`` it, then take its ``manifest``."""

    def __init__(self, owner: Snapshotter, previous: Manifest | None) -> None:
        self.owner = owner
        self.store = owner.store
        self.limits = owner.limits
        self.taken_ns = time.time_ns()
        self.previous = previous.entries if previous is not None else {}
        # entries the previous snapshot saw settled for at least RACY_NS can be trusted
        self.trusted_before = (previous.taken_ns - owner.racy_ns) if previous is not None else 0
        self.entries: dict[str, Entry] = {}
        self.entries_left = self.limits.entries
        self.names_left = self.limits.names
        self.incomplete: set[str] = set()
        self.unlisted: set[str] = set()
        self.unknown: list[str] = []  # the outermost folders not finished, in the order found
        self.stopped: set[str] = set()  # the bounds that stopped the walk
        self.unreadable: list[str] = []
        self.budget_note = ""
        self.git_roots: list[str] = []  # every git directory found, for its config and hook links
        self.git_dirs: set[str] = set()  # those recognised by what they hold
        self.git_links: list[str] = []  # symlinks among git's protected files (hooks)
        self.home_prefix = None if owner.home is None else (owner.home + "/" if owner.home else "")
        self.name_places = ProtectedPlaces(home=owner.home)
        self.budget = owner.budget
        self.read = 0
        self.queue: deque[_Folder] = deque()
        self.skipped: set[tuple[int, int]] = set()
        for path in owner.skip:
            try:
                found = os.stat(path)
            except OSError:
                continue
            self.skipped.add((found.st_dev, found.st_ino))

    # ------------------------------------------------------------------ the queue
    def run(self, root: int) -> None:
        st = os.fstat(root)
        self.queue.append(_Folder("", (st.st_dev, st.st_ino), 0, _FULL))
        watch = self.owner.watch
        while self.queue:
            folder = self.queue.popleft()
            if self.names_left <= 0:
                self.unfinished(folder.rel, folder.known, why="names", unlisted=True)
                continue
            if folder.how == _FULL and self.entries_left <= 0:
                folder = folder._replace(how=_NAMES, known=self.unfinished(folder.rel, folder.known, why="entries"))
            fd = self._open(root, folder)
            if fd < 0:
                continue
            try:
                if watch is not None:
                    watch.add(fd)
                self._list(fd, folder)
            finally:
                if fd != root:
                    os.close(fd)

    def _open(self, root: int, folder: _Folder) -> int:
        """The folder ``rel`` opened, if it is still the one listed (``-1`` otherwise). Its
        folders on the way may be followed, the folder itself never is, and its device and
        inode must be the ones listed: a folder swapped for a symlink is not listed."""
        rel = folder.rel
        if not rel:
            return root
        try:
            fd = os.open(rel, DIR_FLAGS, dir_fd=root)
        except OSError:
            self.unreadable.append(rel)
            self.unfinished(rel, folder.known, why="", unlisted=True)
            return -1
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != folder.key:
            os.close(fd)  # replaced since it was listed: the next snapshot sees what is there
            self.unfinished(rel, folder.known, why="", unlisted=True, say=False)
            return -1
        return fd

    def unfinished(self, rel: str, known: int, *, why: str, unlisted: bool = False, say: bool = True) -> int:
        """Note that folder ``rel`` is not finished (``unlisted``: not even its names),
        stopped by the bound ``why``; what is known of its contents now."""
        if why:
            self.stopped.add(why)
        if known == _KNOWN:
            self.incomplete.add(rel)
            if say:
                self.unknown.append(rel)
        if unlisted:
            if known != _UNDER_UNLISTED:
                self.unlisted.add(rel)
            return _UNDER_UNLISTED
        return max(known, _UNDER_INCOMPLETE)

    # ------------------------------------------------------------------ one folder
    def _list(self, fd: int, folder: _Folder) -> None:
        rel = folder.rel
        try:
            listing = os.scandir(fd)
        except OSError:
            self.unreadable.append(rel)
            self.unfinished(rel, folder.known, why="", unlisted=True)
            return
        with listing:
            size = min(self.limits.per_folder, self.names_left)
            head = list(itertools.islice(listing, size))
            self.names_left -= len(head)
            if not head and sandbox_mount_point(rel, folders=self.owner.folders):
                self.entries.pop(rel, None)  # perhaps where a running command's read-only mount sits
            if rel and folder.how in (_FULL, _NAMES, _CACHE):
                names = {item.name for item in head}
                if looks_like_git_dir(names):
                    folder = folder._replace(how=_GIT, git_root=rel)
                    self.git_roots.append(rel)
                    self.git_dirs.add(rel)
                elif folder.how != _CACHE and "pyvenv.cfg" in names:
                    folder = folder._replace(how=_VENV, level=0)
            if folder.how == _FULL:
                done = self._full(fd, folder, head)
                if done < len(head):  # the bound on entries in all: the rest of it by name
                    folder = folder._replace(how=_NAMES, known=self.unfinished(rel, folder.known, why="entries"))
                    self._others(fd, folder, head[done:])
            else:
                self._others(fd, folder, head)
            if len(head) < size:
                return
            rest = next(listing, None)
            if rest is None:
                return
            if self.names_left <= 0:
                self.unfinished(rel, folder.known, why="names", unlisted=True)
                return
            if folder.how == _FULL:
                folder = folder._replace(how=_NAMES, known=self.unfinished(rel, folder.known, why="per_folder"))
            self._others(fd, folder, self._counted(itertools.chain((rest,), listing), folder))

    def _counted(self, items: Iterator[os.DirEntry[str]], folder: _Folder) -> Iterator[os.DirEntry[str]]:
        """The ``items`` of ``folder`` the bound on names in all lets the walk read."""
        for item in items:
            if self.names_left <= 0:
                self.unfinished(folder.rel, folder.known, why="names", unlisted=True)
                return
            self.names_left -= 1
            yield item

    def _full(self, fd: int, folder: _Folder, items: list[os.DirEntry[str]]) -> int:
        """Record every entry of ``items`` while the bound on entries allows; how many it
        took. The loop every snapshot runs over every entry: kept lean (locals, no calls
        for an entry whose stamp is known and settled)."""
        entries, previous, trusted = self.entries, self.previous, self.trusted_before
        prefix = folder.rel + "/" if folder.rel else ""
        state_folder = prefix == ".harness_nb/"
        left = self.entries_left
        cap = self.owner.max_file_bytes
        for at, item in enumerate(items):
            if left <= 0:
                self.entries_left = left
                return at
            name = item.name
            if state_folder and name in HARNESS_STATE:
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            rel = prefix + name
            if stat.S_ISDIR(st.st_mode):
                if name in CACHE_DIRS:
                    self._subfolder(folder, rel, st, _CACHE, record=False)
                    continue
                left -= rel != ".harness_nb"
                if name == ".git":
                    self.git_roots.append(rel)
                    self._subfolder(folder, rel, st, _GIT, git_root=rel)
                else:
                    self._subfolder(folder, rel, st, _FULL)
                continue
            left -= 1
            was = previous.get(rel)
            if (
                was is not None
                and was.stamp == (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                and was.mtime_ns < trusted
                and was.ctime_ns < trusted
                and (was.blob is not None or was.size > cap)
            ):
                entries[rel] = was
            else:
                entries[rel] = self._entry(fd, name, st)
        self.entries_left = left
        return len(items)

    def _others(self, fd: int, folder: _Folder, items: Iterable[os.DirEntry[str]]) -> None:
        """Record what a folder walked other than in full keeps of ``items`` (see the
        module doc: names only, a git directory, a cache, a virtualenv)."""
        how, level = folder.how, folder.level
        prefix = folder.rel + "/" if folder.rel else ""
        guard_all = (
            how == _NAMES and protection(folder.rel, folders=self.owner.folders, places=self.name_places) is not None
        )
        git_places = ProtectedPlaces(git_dirs=frozenset({folder.git_root})) if how == _GIT else None
        for item in items:
            name = item.name
            if prefix == ".harness_nb/" and name in HARNESS_STATE:
                continue
            rel = prefix + name
            try:
                is_folder = item.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if how == _CACHE and is_folder and name != ".git":
                if level == 0 and name.startswith("@"):  # an npm scope: its packages lie one level down
                    self._subfolder(folder, rel, _lstat(item), _CACHE, level=1, record=False)
                else:
                    self._probe_git(fd, folder, name, rel)
                continue
            keep = self._keeps(rel, name, prefix, how, guard_all, git_places)
            if not keep and not is_folder:
                continue
            st = _lstat(item)
            if st is None:
                continue
            if not is_folder:
                self.entries[rel] = self._known(fd, name, st, rel)
                if how == _GIT and stat.S_ISLNK(st.st_mode):
                    self.git_links.append(rel)
            elif how == _GIT:
                if name not in _GIT_BULK:
                    self._subfolder(folder, rel, st, _GIT, git_root=folder.git_root, record=keep)
            elif how == _VENV:  # only lib/python*/site-packages
                if (level == 0 and name == "lib") or (level == 1 and name.startswith("python")):
                    self._subfolder(folder, rel, st, _VENV, level=level + 1, record=False)
                elif level == 2 and name == "site-packages":
                    self._subfolder(folder, rel, st, _SITE, record=False)
            elif name == ".git" and how in (_NAMES, _CACHE):
                self.git_roots.append(rel)
                self._subfolder(folder, rel, st, _GIT, git_root=rel)
            elif how == _NAMES:
                self._subfolder(folder, rel, st, _CACHE if name in CACHE_DIRS else _NAMES, record=keep)

    def _probe_git(self, fd: int, folder: _Folder, name: str, rel: str) -> None:
        """Record the ``.git`` of the package folder ``name`` in a cache, if it has one: an
        open and a stat, where listing every package would cost a walk of the cache."""
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:
            return
        try:
            st = os.stat(".git", dir_fd=child, follow_symlinks=False)
            git = rel + "/.git"
            if not stat.S_ISDIR(st.st_mode):
                self.entries[git] = self._known(child, ".git", st, git)  # gitdir: …
            else:
                self.git_roots.append(git)
                self._subfolder(folder._replace(depth=folder.depth + 1), git, st, _GIT, git_root=git)
        except OSError:
            return
        finally:
            os.close(child)

    def _keeps(
        self, rel: str, name: str, prefix: str, how: int, guard_all: bool, git_places: ProtectedPlaces | None
    ) -> bool:
        """Whether a folder walked other than in full records ``rel`` (a file, or a folder
        it enters anyway)."""
        if how == _NAMES:
            if guard_all or name_protection(name, top=not prefix) is not None:
                return True
            return prefix == self.home_prefix and name.startswith(".")
        if how == _GIT:
            return protection(rel, folders=self.owner.folders, places=git_places) is not None
        if how == _CACHE:
            return name == ".git"  # a package's own gitdir file
        if how == _SITE:
            return name.endswith(".pth") or name in _SITE_NAMES
        return False

    def _subfolder(
        self,
        parent: _Folder,
        rel: str,
        st: os.stat_result | None,
        how: int,
        *,
        git_root: str = "",
        level: int = 0,
        record: bool = True,
    ) -> None:
        """Queue folder ``rel`` of ``parent`` to be listed ``how`` (and record it, unless
        not ``record``), unless it is skipped or too deep."""
        if st is None or (st.st_dev, st.st_ino) in self.skipped:
            return
        if parent.depth >= self.limits.depth:
            self.unfinished(rel, parent.known, why="depth", unlisted=True)
            return
        # .harness_nb itself is the harness's (the sandbox makes it as a mount point); what
        # is put in it is watched like anything else
        if record and rel != ".harness_nb":
            self.entries[rel] = Entry("folder", stat.S_IMODE(st.st_mode), 0, 0, 0, st.st_ino)
        key = (st.st_dev, st.st_ino)
        self.queue.append(_Folder(rel, key, parent.depth + 1, how, git_root, level, parent.known))

    # ------------------------------------------------------------------ one file
    def _known(self, fd: int, name: str, st: os.stat_result, rel: str) -> Entry:
        """The previous snapshot's entry of ``rel`` when its stamp is the same and settled,
        else the entry read now."""
        was = self.previous.get(rel)
        if (
            was is not None
            and was.stamp == (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            and was.mtime_ns < self.trusted_before
            and was.ctime_ns < self.trusted_before
            and (was.blob is not None or was.size > self.owner.max_file_bytes)
        ):
            return was
        return self._entry(fd, name, st)

    def _entry(self, fd: int, name: str, st: os.stat_result) -> Entry:
        """The entry of ``name``, its content read and stored (its stamp was not known)."""
        kind = file_kind(st.st_mode)
        entry = Entry(kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if kind not in ("file", "symlink"):
            return entry
        self.read += 1
        if kind == "symlink":
            try:
                return with_blob(entry, self.store.write("blob", os.readlink(os.fsencode(name), dir_fd=fd)))
            except OSError:
                return entry
        if st.st_size > self.owner.max_file_bytes:
            return entry
        if st.st_size > self.budget:
            self.budget_note = "the first snapshot of this workdir is still being stored"
            return entry
        data = self._read(fd, name, st)
        if data is None:
            return entry
        self.budget -= len(data)
        return with_blob(entry, self.store.write("blob", data))

    def _read(self, fd: int, name: str, st: os.stat_result) -> bytes | None:
        """The content of regular file ``name`` if it is still the file listed and within
        the cap; ``None`` otherwise."""
        try:
            handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
        except OSError:
            return None
        try:
            opened = os.fstat(handle)
            if not stat.S_ISREG(opened.st_mode) or opened.st_ino != st.st_ino:
                return None
            with os.fdopen(handle, "rb", closefd=False) as fh:
                data = fh.read(self.owner.max_file_bytes + 1)
        except OSError:
            return None
        finally:
            os.close(handle)
        return data if len(data) <= self.owner.max_file_bytes else None

    # ------------------------------------------------------------------ the result
    def manifest(self) -> Manifest:
        places = ProtectedPlaces(self.owner.home, frozenset(self.git_dirs), frozenset(self._hooks()))
        partial = "; ".join(p for p in (self._unknown_text(), self.budget_note) if p)
        return Manifest(
            self.entries,
            self.taken_ns,
            frozenset(self.incomplete),
            partial,
            self.read,
            frozenset(self.unlisted),
            places,
        )

    def _hooks(self) -> set[str]:
        """What git runs as hooks from the workdir: the folder each git directory's
        ``core.hooksPath`` names, and what a symlink among its hooks points at."""
        found: set[str] = set()
        workdir = Path(os.path.realpath(self.owner.workdir))
        for root in self.git_roots:
            for name in ("config", "config.worktree"):
                text = self._blob_text(root + "/" + name)
                value = hooks_path(text) if text else None
                where = hooks_folder(value, root, workdir=workdir, home=self.owner.home) if value else None
                if where is not None:
                    found.add(where)
        for rel in self.git_links:
            target = self._blob_text(rel)
            where = link_target(rel, target, workdir=workdir) if target else None
            if where is not None:
                found.add(where)
        return found

    def _blob_text(self, rel: str) -> str:
        entry = self.entries.get(rel)
        if entry is None or entry.blob is None:
            return ""
        try:
            return self.store.read_blob(entry.blob)[:CONFIG_READ_LIMIT].decode("utf-8", "surrogateescape")
        except StoreError:
            return ""

    def _unknown_text(self) -> str:
        """``partly unknown: flood/, d/d/d/ (walk stopped at 10,000 files per folder/depth 64)``."""
        if not self.unknown:
            return ""
        limits = self.limits
        where = ", ".join(shown_folder(rel) for rel in self.unknown[:3])
        if len(self.unknown) > 3:
            where += f" and {len(self.unknown) - 3:,} more"
        stops = {
            "per_folder": f"{limits.per_folder:,} files per folder",
            "entries": f"{limits.entries:,} files in all",
            "depth": f"depth {limits.depth}",
            "names": f"{limits.names:,} names",
        }
        why = []
        said = [text for name, text in stops.items() if name in self.stopped]
        if said:
            why.append("walk stopped at " + "/".join(said))
        if self.unreadable:
            why.append(f"{', '.join(shown_folder(rel) for rel in self.unreadable[:3])} could not be read")
        return f"partly unknown: {where} ({'; '.join(why)})" if why else f"partly unknown: {where}"


def _lstat(item: os.DirEntry[str]) -> os.stat_result | None:
    try:
        return item.stat(follow_symlinks=False)
    except OSError:
        return None  # gone since it was listed


def shown_folder(rel: str) -> str:
    """A folder as a report names it: ``flood/``, or ``the workdir`` for its top."""
    if not rel:
        return "the workdir"
    text = escape_name(rel)
    return (text if len(text) <= 120 else text[:119] + "…") + "/"
