"""The programs harness_nb itself runs outside the sandbox, and the folders they may come from.

bubblewrap and ``nsenter`` start every sandboxed command (as root, on a root kernel);
``prlimit``, ``bash`` and ``sh`` start an unsandboxed one and a weaker-mode root one; ``rg``
matches for ``grep``; ``git`` shows the read-only check a repository's configuration. Each
runs with the kernel's rights. Found by name on ``PATH``, a folder a command can write could
supply one: a command plants ``bwrap`` in ``.venv/bin`` or ``node_modules/.bin``, or a
hostile repository ships ``bin/git``, and the harness runs it next, unsandboxed, as root.

So ``harness_program(name)`` never takes a program from a folder commands may write: it
looks ``name`` up once per process in ``PATH``'s absolute folders (a relative one, ``.`` or
``./bin``, is wherever a command runs), and passes over every hit that lies, resolved, in a
working directory this process has given a harness or a command (``note_workdir``: the one
folder the sandbox may write; its private ``/tmp`` vanishes with it). ``None`` when no other
is found: the caller says what is missing.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

__all__ = ["harness_program", "note_workdir", "writable_holder"]

_workdirs: set[Path] = set()
_lock = threading.Lock()


def note_workdir(folder: Path | str) -> None:
    """Remember ``folder`` as a working directory: no program of the harness comes from it."""
    real = Path(os.path.realpath(folder))
    if real not in _workdirs:
        with _lock:
            _workdirs.add(real)


def writable_holder(path: Path | str) -> Path | None:
    """The noted working directory that holds ``path`` (resolved), if one does."""
    return _holder(Path(os.path.realpath(path)))


def harness_program(name: str) -> str | None:
    """Where the harness's own program ``name`` is (see the module doc), or ``None``."""
    return next((path for path, real in _on_path(name) if _holder(real) is None), None)


def _holder(real: Path) -> Path | None:
    return next((w for w in tuple(_workdirs) if real.is_relative_to(w)), None)


@functools.cache
def _on_path(name: str) -> tuple[tuple[str, Path], ...]:
    """(path, resolved) of every executable ``name`` in ``PATH``'s absolute folders, in
    order: looked up once per process."""
    found: dict[str, Path] = {}
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder, name)
        if os.path.isabs(folder) and os.path.isfile(path) and os.access(path, os.X_OK):
            found.setdefault(path, Path(os.path.realpath(path)))
    return tuple(found.items())
