"""Path confinement: every file tool sees only the working directory.

A path from the model is resolved against the working directory with symlinks followed,
and refused unless the real location is inside it. Checking the *resolved* path is what
stops ``..`` tricks and symlinks (to files or folders) that lead out of the workdir.

Names that are not UTF-8 are shown to the model escaped (``caf\\xff.txt``, see
``core.text``); a path the model sends back in that form names the file, unless a file
is literally called that.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..core import PathEscapeError, ToolError, escape_surrogates, unescape_bytes


def _resolve(root: Path, path: str) -> Path:
    try:
        # expanduser so "~/x" is judged as the home folder the model meant, not as a
        # folder literally named "~" inside the workdir.
        return (root / Path(path).expanduser()).resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as exc:
        # ValueError: an embedded NUL byte; RuntimeError/OSError: a symlink loop.
        raise ToolError(f"cannot use path {path!r}: {exc}") from None


def resolve_in_workdir(workdir: Path, path: str, *, roots: Sequence[Path] = ()) -> Path:
    """The real absolute location of ``path`` if it lies inside ``workdir`` (or one of
    ``roots``, folders outside it a tool may also use: ``ToolContext.roots``).

    Relative paths are taken from ``workdir``; absolute paths are allowed when they point
    inside it. The target need not exist (``write_file`` creates it). Raises
    ``PathEscapeError`` when the resolved path is outside, ``ToolError`` when the path
    cannot be resolved at all.
    """
    root = workdir.resolve()
    resolved = _resolve(root, path)
    raw = unescape_bytes(path)
    if raw != path and not os.path.lexists(resolved):
        # ``caf\xff.txt`` as ls showed it: the file whose name has the byte 0xff.
        unescaped = _resolve(root, raw)
        if os.path.lexists(unescaped):
            resolved = unescaped
    if not resolved.is_relative_to(root) and not any(resolved.is_relative_to(r) for r in roots):
        raise PathEscapeError(
            f"path {path!r} is outside the working directory {root}; use a path inside it"
        )
    return resolved


def display_path(workdir: Path, resolved: Path) -> str:
    """``resolved`` relative to ``workdir`` in ``/`` form (``.`` for the workdir itself),
    so outputs read the same on every machine and match what the model can pass back
    (absolute for a path in one of ``ToolContext.roots``, outside it). Bytes that are not
    UTF-8 are shown as ``\\xNN``."""
    root = workdir.resolve()
    if not resolved.is_relative_to(root):
        return escape_surrogates(resolved.as_posix())
    return escape_surrogates(resolved.relative_to(root).as_posix())
