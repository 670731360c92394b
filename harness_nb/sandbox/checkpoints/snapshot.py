"""``Snapshotter``: one snapshot of the workdir — every path's kind, permission bits, size and
times, and the content of files and symlinks stored in the shadow git repository
(``gitstore``) — and ``Manifest``, what it found.

A snapshot is a stat walk: a file is read (and its content stored) only when its
signature — (mode, size, mtime, ctime, inode) from ``lstat`` — differs from the previous
snapshot's, or when that one recorded it less than ``RACY_NS`` before it was taken (a
change within the same clock tick could keep every field but the content; an entry that
had settled for that long before the earlier snapshot can be trusted). A forged mtime
alone changes ctime, so it is seen.

Nothing is followed through a symlink. The walk goes breadth first, from a queue of
folders; each is opened relative to the workdir's descriptor with ``O_NOFOLLOW`` and
checked (same device and inode as listed) before it is listed, so a folder swapped for a
symlink on the way is never listed; a file is opened the same way with ``O_NONBLOCK`` and
checked with ``fstat`` before it is read; a symlink is stored as its target; a named pipe,
socket or device is recorded by kind and never opened. Files over ``max_file_bytes`` (the
cap) are recorded by size and times only: their content cannot come back. So are files
beyond the snapshot's byte budget (a first snapshot of a huge tree), which later
snapshots store as the budget allows.

The walk is bounded whatever the workdir holds (``WalkLimits``): it records at most
``per_folder`` entries of one folder and ``entries`` in all, lists at most ``names``
names in all, and enters no folder more than ``depth`` levels down. Past the first two
bounds it goes on **names only**: an entry whose name or folder is protected
(``protection``: ``.envrc`` among a million files) is still recorded, nothing else is,
and a folder's contents are not read one at a time. Shallow folders come first, so a deep
or wide tree the agent made cuts off itself, not the rest. What the walk did not finish
is in the manifest: ``incomplete`` folders (not every entry recorded: a diff never calls
their unrecorded contents deleted) and, of those, ``unlisted`` ones (not even every name
read: not even a protected name's absence says anything); ``partial`` says it in words
("partly unknown: flood/ (walk stopped at 10,000 files per folder)").

Left out (none is an effect a person wants undone, and each changes on its own): the
harness's own state under ``.harness_nb/`` (``HARNESS_STATE``, and that folder itself:
the sandbox makes it as a mount point), an empty folder where the sandbox makes one to
mount on while a command runs (``protected.sandbox_mount_point``: ``agents/``,
``.claude/``, ``.git/hooks``, …; every process sees it meanwhile), the folders in
``skip`` (the checkpoint store when it lies inside the workdir, IPython's folder) and, in
three kinds of folder, everything but what runs programs:

- a git directory — a ``.git`` folder, or one recognised by what it holds
  (``looks_like_git_dir``: a bare repository, a separate git dir, a common dir) — keeps
  its config and hooks (``protection``), not its objects, refs and index;
- a virtualenv (a folder holding ``pyvenv.cfg``) keeps the ``*.pth`` files,
  ``sitecustomize.py`` and ``usercustomize.py`` of its ``lib/python*/site-packages``;
- a regenerable cache (``CACHE_DIRS``: ``node_modules``, ``.mypy_cache``, …) keeps only
  the ``.git`` of each folder in it (``node_modules/pkg/.git``, and in an npm scope
  ``node_modules/@scope/pkg/.git``): a stat per package, not a walk of the cache.

Bytecode (``__pycache__``) is walked like anything else: a ``.pyc`` a call writes is
code the kernel would import (``checkpoint`` removes it). The manifest's ``places`` are
what the walk found that a path's name does not show (``ProtectedPlaces``: the git
directories by content, the folder ``core.hooksPath`` names, what hook symlinks point at).
Given a ``FolderWatch``, the walk watches every folder it lists (``watch.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..watch import FolderWatch
from .gitstore import GitStore
from .manifest import Manifest
from .walk import CACHE_DIRS, DIR_FLAGS, WALK_LIMITS, Walk, WalkLimits

__all__ = [
    "CACHE_DIRS",
    "RACY_NS",
    "SNAPSHOT_BUDGET",
    "WALK_LIMITS",
    "Snapshotter",
    "WalkLimits",
]

SNAPSHOT_BUDGET = 2 << 30
"""Most bytes of new content one snapshot stores (a first snapshot of a large tree)."""
RACY_NS = 1_000_000_000
"""Entries changed this close to the previous snapshot are read again (see the module doc)."""


class Snapshotter:
    """Takes snapshots of ``workdir`` into ``store`` (see the module doc). ``folders``:
    more protected folders (relative paths of agent folders given to the harness);
    ``home``: the person's home relative to the workdir (``""``: it is the workdir; ``None``:
    it lies outside), whose dot-entries are protected."""

    def __init__(
        self,
        workdir: Path,
        store: GitStore,
        *,
        max_file_bytes: int,
        skip: Iterable[Path] = (),
        folders: Iterable[str] = (),
        home: str | None = None,
        limits: WalkLimits = WALK_LIMITS,
        budget: int = SNAPSHOT_BUDGET,
        racy_ns: int = RACY_NS,
        watch: FolderWatch | None = None,
    ) -> None:
        self.workdir = workdir
        self.store = store
        self.max_file_bytes = max_file_bytes
        self.skip = list(skip)
        self.folders = tuple(folders)
        self.home = home
        self.limits = limits
        self.budget = budget
        self.racy_ns = racy_ns
        self.watch = watch

    def take(self, previous: Manifest | None = None) -> Manifest:
        """A snapshot of the workdir now, storing the content of every file whose
        signature differs from ``previous``'s. Blocking: run it on a worker thread."""
        walk = Walk(self, previous)
        if self.watch is not None:
            self.watch.start_walk()
        root = os.open(self.workdir, DIR_FLAGS)
        try:
            walk.run(root)
        finally:
            os.close(root)
        return walk.manifest()
