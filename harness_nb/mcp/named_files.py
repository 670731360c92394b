"""The files in the workdir that an MCP server runs: what its trust must cover besides its
configuration.

``.mcp.json`` saying ``python srv.py`` is the same entry whatever ``srv.py`` holds, so a trust
given to the entry alone survives the agent rewriting ``srv.py``. ``files_fingerprint`` hashes
the content of every regular file inside the workdir that the command or an argument names
(a word, or the value of an ``--option=value``, taken from the server's ``cwd``; the command
as ``PATH`` finds it, when that is in the workdir: a ``.venv/bin/server``). A server whose
files changed is a server to trust again.

Bounded: at most ``MAX_NAMED_FILES`` files, each hashed in full up to ``MAX_HASHED_BYTES``
(a bigger one by its size and change times); a hash is kept while the file's identity, size
and change times stay the same (``st_ctime`` cannot be set back by a program), so checking an
unchanged server costs a ``stat`` per file. Not covered: what those files load in turn
(``python -m pkg``, a folder given as an argument, imports of the script) — the protected
paths and the checkpoints guard the rest of the workdir.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import OrderedDict
from pathlib import Path

from ..core import open_regular
from .config import ServerConfig, StdioServer

__all__ = ["MAX_HASHED_BYTES", "MAX_NAMED_FILES", "files_fingerprint", "named_files"]

MAX_NAMED_FILES = 16
MAX_HASHED_BYTES = 4 * 1024 * 1024
_MAX_WORD = 4096
_CACHE_SIZE = 256
_CHUNK = 1 << 20
_digests: OrderedDict[tuple[str, int, int, int, int, int], str] = OrderedDict()


def _candidates(config: StdioServer) -> list[str]:
    """The words of the command line that may name a file: each word, and the value of an
    ``--option=value``."""
    words: list[str] = []
    for word in (config.command, *config.args):
        words.append(word)
        if word.startswith("-") and "=" in word:
            words.append(word.partition("=")[2])
    return [w for w in words if w and len(w) <= _MAX_WORD and "\0" not in w]


def named_files(config: ServerConfig, workdir: Path) -> list[Path]:
    """The regular files inside ``workdir`` (real paths, in the order named, at most
    ``MAX_NAMED_FILES``) that ``config``'s command line names."""
    if not isinstance(config, StdioServer):
        return []
    root = Path(os.path.realpath(workdir))
    base = config.cwd or workdir
    found: list[Path] = []
    paths = [Path(w).expanduser() for w in _candidates(config)]
    on_path = shutil.which(config.command, path=config.env.get("PATH", os.environ.get("PATH")))
    if on_path is not None:
        paths.append(Path(on_path))
    for p in paths:
        real = Path(os.path.realpath(p if p.is_absolute() else base / p))
        if real not in found and real.is_relative_to(root) and real.is_file():
            found.append(real)
            if len(found) >= MAX_NAMED_FILES:
                break
    return found


def _digest(path: Path) -> str:
    """The hash of ``path``'s content (or, past ``MAX_HASHED_BYTES``, of its size and change
    times), kept while the file stays the same."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _digests:
        _digests.move_to_end(key)
        return _digests[key]
    digest = f"size {st.st_size}, changed {st.st_mtime_ns}/{st.st_ctime_ns}"
    if st.st_size <= MAX_HASHED_BYTES:
        hashed = hashlib.sha256()
        left = MAX_HASHED_BYTES + 1  # one byte more tells a file that grew since the stat
        try:
            with open_regular(path) as f:
                while left > 0 and (chunk := f.read(min(_CHUNK, left))):
                    hashed.update(chunk)
                    left -= len(chunk)
        except OSError as exc:
            return f"unreadable: {exc.strerror}"
        if left > 0:
            digest = hashed.hexdigest()
    _digests[key] = digest
    if len(_digests) > _CACHE_SIZE:
        _digests.popitem(last=False)
    return digest


def files_fingerprint(config: ServerConfig, workdir: Path) -> str:
    """A hash of the content of the files ``config`` runs from ``workdir`` (``named_files``),
    ``""`` when it names none."""
    files = named_files(config, workdir)
    if not files:
        return ""
    root = Path(os.path.realpath(workdir))
    hashed = hashlib.sha256()
    for path in files:
        hashed.update(f"{path.relative_to(root).as_posix()}\0{_digest(path)}\n".encode("utf-8", "surrogateescape"))
    return hashed.hexdigest()
