"""Imports that a file in the notebook's folder cannot shadow, and which written file would.

ipykernel puts ``''`` (the current folder: the notebook's, usually the workdir) first on
``sys.path``. After the agent wrote ``mcp.py`` there, the harness's own first ``import mcp``
would run that file inside the kernel process, next to the API keys. So every import the
harness makes after start-up runs inside ``shielded_imports()``::

    with shielded_imports():
        from mcp import ClientSession

Inside it, on this thread, a top-level module is looked up on ``sys.path`` without the
entries that mean the current folder (``''``, any relative entry, the current folder or the
one the process started in, by their real paths) — for the module named and for everything
it imports in turn. A module found only there is refused (``ModuleNotFoundError``).
``sys.path`` itself is not changed: the notebook's own imports, and other threads, see what
they always saw. Submodules (``mcp.types``) are found through their package's ``__path__``
and need no shield. How: a finder placed before ``PathFinder`` on ``sys.meta_path``, active
only inside ``shielded_imports`` on its thread.

``shadowed_module(path, workdir=…)`` is the other side, for the permission hook: the module a
file written at ``path`` would stand in for (``mcp.py`` in the workdir: ``mcp``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

__all__ = ["import_module", "shadowed_module", "shielded_imports"]

_STARTED_IN = os.path.realpath(os.getcwd())  # where the kernel started: on sys.path as its path
_local = threading.local()
_install_lock = threading.Lock()


def _current_folders() -> set[str]:
    """The real paths that mean "the current folder" on ``sys.path``."""
    try:
        now = os.path.realpath(os.getcwd())
    except OSError:  # the current folder was removed
        return {_STARTED_IN}
    return {now, _STARTED_IN}


def _split_search_path() -> tuple[list[str], list[str]]:
    """``sys.path`` as (the entries a shielded import searches, the current-folder ones)."""
    current = _current_folders()
    kept: list[str] = []
    hidden: list[str] = []
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        if not os.path.isabs(entry) or os.path.realpath(entry) in current:
            hidden.append(entry)
        else:
            kept.append(entry)
    return kept, hidden


class _OutsideCurrentFolder(importlib.abc.MetaPathFinder):
    """Finds top-level modules on ``sys.path`` without the current folder, while
    ``shielded_imports`` is active on the importing thread; does nothing otherwise."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or not getattr(_local, "depth", 0):
            return None
        kept, hidden = _split_search_path()
        spec = importlib.machinery.PathFinder.find_spec(fullname, kept, target)
        if spec is not None:
            return spec
        if hidden and importlib.machinery.PathFinder.find_spec(fullname, hidden, target) is not None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} outside the current folder: harness_nb never imports "
                f"from the notebook's folder (a {fullname}.py there is not used); install the package",
                name=fullname,
            )
        return None  # not on the path at all: the finders after PathFinder may know it


_FINDER = _OutsideCurrentFolder()


def _install() -> None:
    """Put the finder just before ``PathFinder`` on ``sys.meta_path`` (once)."""
    if _FINDER in sys.meta_path:
        return
    with _install_lock:
        if _FINDER in sys.meta_path:
            return
        finders = sys.meta_path
        at = finders.index(importlib.machinery.PathFinder) if importlib.machinery.PathFinder in finders else 0
        finders.insert(at, _FINDER)


@contextmanager
def shielded_imports() -> Iterator[None]:
    """Imports made inside this block, on this thread, never come from the current folder
    (see the module doc). Put only import statements inside it."""
    _install()
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def import_module(name: str, package: str | None = None) -> ModuleType:
    """``importlib.import_module(name, package)`` inside ``shielded_imports``."""
    with shielded_imports():
        return importlib.import_module(name, package)


def _strip_suffix(name: str) -> str | None:
    """``x`` for a module file ``x.py`` / ``x.pyc`` / ``x.cpython-311-…so``, else ``None``."""
    for suffix in sorted(importlib.machinery.all_suffixes(), key=len, reverse=True):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


def _module_at(folder: Path, parts: tuple[str, ...]) -> str | None:
    """The top-level module that ``folder/parts…`` is or belongs to: ``x`` for ``x.py`` (or
    ``x.so``…), for ``x/__init__.py`` and for anything in a folder ``x/`` that holds an
    ``__init__`` (a folder without one does not hide a package of that name)."""
    first = parts[0]
    if len(parts) == 1:
        name = _strip_suffix(first)
    elif len(parts) == 2 and _strip_suffix(parts[1]) == "__init__":
        name = first
    else:
        inits = (folder / first / f"__init__{s}" for s in importlib.machinery.all_suffixes())
        name = first if any(os.path.lexists(p) for p in inits) else None
    return name if name is not None and name.isidentifier() else None


def _found_at(name: str, entries: list[str]) -> float | None:
    """Where module ``name`` is found now: its index in ``entries`` (``sys.path`` without the
    current folder), ``inf`` when another finder (an editable install's) provides it, ``None``
    when nothing does. Builtin and frozen modules count as not found: nothing on the path can
    stand in for them."""
    for i, entry in enumerate(entries):
        if importlib.machinery.PathFinder.find_spec(name, [entry]) is not None:
            return i
    machinery = importlib.machinery
    skip = (machinery.PathFinder, machinery.BuiltinImporter, machinery.FrozenImporter, _FINDER)
    for finder in list(sys.meta_path):
        if finder in skip or not hasattr(finder, "find_spec"):
            continue
        try:
            if finder.find_spec(name, None) is not None:
                return float("inf")
        except Exception:  # a third-party finder's failure says nothing about the name
            continue
    return None


def shadowed_module(path: Path, *, workdir: Path) -> str | None:
    """The module that a file or folder written at ``path`` (absolute, real) would stand in
    for, or ``None``: ``path`` is ``NAME.py`` (or ``NAME.so``, or anything in a folder
    ``NAME/``) directly in a folder that imports search before the place where an importable
    ``NAME`` is found now — the current folder or ``workdir`` (searched first, as ipykernel's
    ``''`` is), or a ``sys.path`` folder listed before that place."""
    kept, _hidden = _split_search_path()
    real_kept = [os.path.realpath(e) for e in kept]
    first = {*_current_folders(), os.path.realpath(workdir)}
    folders = [(Path(f), -1) for f in first] + [(Path(f), i) for i, f in enumerate(real_kept)]
    for folder, rank in folders:
        if path == folder or not path.is_relative_to(folder):
            continue
        name = _module_at(folder, path.relative_to(folder).parts)
        if name is None:
            continue
        found = _found_at(name, kept)
        if found is not None and found > rank:
            return name
    return None
