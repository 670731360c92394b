"""Path confinement: every file tool sees only the working directory.

Reads: a path from the model is resolved against the working directory with symlinks
followed, and refused unless the real location is inside it (``resolve_in_workdir``).
Checking the *resolved* path is what stops ``..`` tricks and symlinks (to files or folders)
that lead out of the workdir. The file is then opened at that real path one folder at a
time, never through a symlink (``read_target``, ``core.open_folder``): a folder swapped for a
symlink after the check makes the read fail, not go elsewhere.

Writes: the path written is the path as given (``..`` folded, ``write_target``), the same
path the permission hook judged; the tools open its folders without following symlinks, so
a write never lands anywhere else — a symlink on the way, even one made after the check, is
refused.

Names that are not UTF-8, or that hold control characters, are shown to the model escaped
(``caf\\xff.txt``, ``a\\x1b[31m.txt``, see ``core.text``); a path the model sends back in
that form names the file, unless a file is literally called that.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core import PathEscapeError, ToolError, escape_name, unescape_name

__all__ = ["Target", "display_path", "read_target", "resolve_in_workdir", "write_target"]


@dataclass(frozen=True, slots=True)
class Target:
    """A file a tool opens: ``base`` (the workdir, or one of ``ToolContext.roots``, as a real
    path) and the folders and name below it (``parts``; empty for ``base`` itself)."""

    base: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        """The absolute path."""
        return self.base.joinpath(*self.parts)

    @property
    def rel(self) -> str:
        """The path below ``base``, ``/``-separated (``""`` for ``base`` itself)."""
        return "/".join(self.parts)


def _escape(path: str, root: Path) -> PathEscapeError:
    return PathEscapeError(f"path {path!r} is outside the working directory {root}; use a path inside it")


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
    raw = unescape_name(path)
    if raw != path and not os.path.lexists(resolved):
        # ``caf\xff.txt`` as ls showed it: the file whose name has the byte 0xff.
        unescaped = _resolve(root, raw)
        if os.path.lexists(unescaped):
            resolved = unescaped
    if not resolved.is_relative_to(root) and not any(resolved.is_relative_to(r) for r in roots):
        raise _escape(path, root)
    return resolved


def read_target(workdir: Path, path: str, *, roots: Sequence[Path] = ()) -> Target:
    """``resolve_in_workdir``'s answer as a ``Target``: a real path, so no part of it is a
    symlink unless one was swapped in since (``core.open_folder`` then refuses it)."""
    resolved = resolve_in_workdir(workdir, path, roots=roots)
    for base in (workdir.resolve(), *roots):
        if resolved.is_relative_to(base):
            return Target(base, resolved.relative_to(base).parts)
    raise _escape(path, workdir.resolve())  # unreachable: resolve_in_workdir checked it


def _lexical(workdir: Path, root: Path, path: str, roots: Sequence[Path]) -> Target:
    if "\0" in path:
        raise ToolError(f"cannot use path {path!r}: embedded null byte")
    try:
        p = Path(path).expanduser()
    except RuntimeError as exc:  # no home folder to expand "~" to
        raise ToolError(f"cannot use path {path!r}: {exc}") from None
    full = Path(os.path.normpath(p if p.is_absolute() else root / p))
    # the workdir as the model may know it too, before symlinks in its own path resolve
    given = Path(os.path.normpath(workdir.absolute()))
    for base, shown in ((root, root), (given, root), *((r, r) for r in roots)):
        if full.is_relative_to(base):
            return Target(shown, full.relative_to(base).parts)
    raise _escape(path, root)


def write_target(workdir: Path, path: str, *, roots: Sequence[Path] = ()) -> Target:
    """Where a write of ``path`` lands: the path as given, relative to ``workdir`` (or
    absolute inside it or one of ``roots``), with ``.`` and ``..`` folded but no symlink
    followed — the file tools write exactly this, opening its folders without following
    symlinks, and the permission hook judges exactly this. ``PathEscapeError`` when it is
    outside; a name shown escaped (``caf\\xff.txt``) names the file that exists by that
    name, as in ``resolve_in_workdir``."""
    root = workdir.resolve()
    target = _lexical(workdir, root, path, roots)
    raw = unescape_name(path)
    if raw != path and not os.path.lexists(target.path):
        unescaped = _lexical(workdir, root, raw, roots)
        if os.path.lexists(unescaped.path):
            target = unescaped
    return target


def display_path(workdir: Path, resolved: Path) -> str:
    """``resolved`` relative to ``workdir`` in ``/`` form (``.`` for the workdir itself),
    so outputs read the same on every machine and match what the model can pass back
    (absolute for a path in one of ``ToolContext.roots``, outside it). Bytes that are not
    UTF-8 and control characters are escaped (``core.escape_name``)."""
    root = workdir.resolve()
    if not resolved.is_relative_to(root):
        return escape_name(resolved.as_posix())
    return escape_name(resolved.relative_to(root).as_posix())
