"""The files in the workdir that an MCP server runs: what its trust must cover besides its
configuration.

``.mcp.json`` saying ``python srv.py`` is the same entry whatever ``srv.py`` holds, so a trust
given to the entry alone survives the agent rewriting ``srv.py``. ``files_fingerprint`` hashes
the content of every regular file inside the workdir that the command line names: a word, the
value of an ``--option=value`` or ``NAME=value``, the command as ``PATH`` finds it (a
``.venv/bin/server``), and the words of shell text — a word after ``-c`` (``sh -c``,
``bash -lc``) or one with spaces, quotes or shell punctuation, split as the shell would
(``shlex``), nested shells included. Each word is taken from the server's ``cwd`` and from
every workdir folder the line names (``cd sub && python main.py``). A server whose files
changed is a server to trust again.

Shell text can name a file in ways no reading of it tells: a name the shell works out
(``$F.py``, `` `…` ``, a glob), text that does not split, nesting or length past the bounds.
``unread_shell_text`` says so; the plain words of such text (its fragments, when it does
not split) are still covered, but trust by name does not cover the server (``trust.py``):
the person reads the command and trusts it with ``%mcp trust``, which cannot cover a file
named only through such text.

Bounded: at most ``MAX_WORDS`` words and ``MAX_BASES`` folders looked at; the first
``MAX_NAMED_FILES`` files hashed in full up to ``MAX_HASHED_BYTES`` (a bigger or later one by
its size and change times); a hash is kept while the file's identity, size and change times
stay the same (``st_ctime`` cannot be set back by a program), so checking an unchanged
server costs a ``stat`` per file. Not covered: what those files load in turn (``python -m
pkg``, a folder given as an argument, imports of the script) — the protected paths and the
checkpoints guard the rest of the workdir.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from ..core import open_regular
from .config import ServerConfig, StdioServer

__all__ = [
    "MAX_BASES",
    "MAX_HASHED_BYTES",
    "MAX_NAMED_FILES",
    "MAX_WORDS",
    "files_fingerprint",
    "named_files",
    "unread_shell_text",
]

MAX_NAMED_FILES = 16
MAX_HASHED_BYTES = 4 * 1024 * 1024
MAX_WORDS = 128
MAX_BASES = 4
_MAX_WORD = 4096
_MAX_DEPTH = 3  # a shell in a shell in a shell
_CACHE_SIZE = 256
_CHUNK = 1 << 20
_digests: OrderedDict[tuple[str, int, int, int, int, int], str] = OrderedDict()

_SHELL_SYNTAX = re.compile(r"[\s'\"\\;&|<>()`$]")
_COMMAND_FLAG = re.compile(r"-[A-Za-z]{0,5}c[A-Za-z]{0,5}")  # -c, -lc, -ec: the next word is shell text
# $@, $1, ${1}: the words after the text, read as words already; any other $, `…` or glob is a
# name the shell works out
_COMPUTED = re.compile(r"\$(?![@*#?$!0-9]|\{[@*#?$!0-9]\})|`|[*?[]")
_FRAGMENT = re.compile(r"[\w.~/+@%,:=-]+")
_PUNCTUATION = frozenset(";&|<>()")


class _Words:
    """The words of a command line that may name a file, and what of its shell text could
    not be read (``unread``: the first reason, or ``None``)."""

    def __init__(self, config: StdioServer) -> None:
        self.found: list[str] = []
        self.unread: str | None = None
        self._add([config.command, *config.args], depth=0)

    def _note(self, why: str) -> None:
        self.unread = self.unread or why

    def _add(self, words: Sequence[str], *, depth: int) -> None:
        after_flag = False
        for word in words:
            if len(self.found) >= MAX_WORDS:
                self._note(f"more than {MAX_WORDS} words")
                return
            shell = after_flag or bool(_SHELL_SYNTAX.search(word))
            after_flag = bool(_COMMAND_FLAG.fullmatch(word))
            if not word or "\0" in word or set(word) <= _PUNCTUATION:
                continue
            if len(word) <= _MAX_WORD:
                self.found.append(word)
                if "=" in word:  # --option=value, NAME=value
                    self.found.append(word.partition("=")[2])
            if shell:
                self._add_shell_text(word, depth=depth)

    def _add_shell_text(self, text: str, *, depth: int) -> None:
        if len(text) > _MAX_WORD or depth >= _MAX_DEPTH:
            why = f"longer than {_MAX_WORD} characters" if len(text) > _MAX_WORD else f"nested over {_MAX_DEPTH} deep"
            self._note(f"shell text {why}")
            self.found.extend(_FRAGMENT.findall(text[:_MAX_WORD])[:MAX_WORDS])
            return
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError as exc:
            self._note(f"shell text that does not split ({exc})")
            self.found.extend(_FRAGMENT.findall(text)[:MAX_WORDS])
            return
        if _COMPUTED.search(text):
            self._note("shell text in which the shell works out names ($VAR, `…`, a glob)")
        self._add(tokens, depth=depth + 1)


def unread_shell_text(config: ServerConfig) -> str | None:
    """Why ``config``'s command line may name files ``named_files`` cannot tell (shell text
    it cannot fully read, or too many words), or ``None``."""
    return _Words(config).unread if isinstance(config, StdioServer) else None


def named_files(config: ServerConfig, workdir: Path) -> list[Path]:
    """The regular files inside ``workdir`` (real paths, in the order named) that
    ``config``'s command line names, from its ``cwd`` or from a workdir folder it names."""
    if not isinstance(config, StdioServer):
        return []
    root = Path(os.path.realpath(workdir))
    words = [Path(w).expanduser() for w in _Words(config).found]
    on_path = shutil.which(config.command, path=config.env.get("PATH", os.environ.get("PATH")))
    bases = [Path(os.path.realpath(config.cwd or workdir))]
    for p in words:
        real = Path(os.path.realpath(p if p.is_absolute() else bases[0] / p))
        if len(bases) < MAX_BASES and real not in bases and real.is_relative_to(root) and real.is_dir():
            bases.append(real)
    found: list[Path] = []
    named = [p if p.is_absolute() else base / p for p in words for base in bases]
    named += [Path(on_path)] if on_path is not None else []
    for p in named:
        real = Path(os.path.realpath(p))
        if real not in found and real.is_relative_to(root) and real.is_file():
            found.append(real)
    return found


def _digest(path: Path, *, content: bool = True) -> str:
    """The hash of ``path``'s content (or, past ``MAX_HASHED_BYTES`` or without ``content``,
    its size and change times), kept while the file stays the same."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    digest = f"size {st.st_size}, changed {st.st_mtime_ns}/{st.st_ctime_ns}"
    if not content:
        return digest
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _digests:
        _digests.move_to_end(key)
        return _digests[key]
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
    """A hash of the content of the files ``config`` runs from ``workdir`` (``named_files``;
    past the first ``MAX_NAMED_FILES``, of their size and change times), ``""`` when it names
    none."""
    files = named_files(config, workdir)
    if not files:
        return ""
    root = Path(os.path.realpath(workdir))
    hashed = hashlib.sha256()
    for i, path in enumerate(files):
        digest = _digest(path, content=i < MAX_NAMED_FILES)
        hashed.update(f"{path.relative_to(root).as_posix()}\0{digest}\n".encode("utf-8", "surrogateescape"))
    return hashed.hexdigest()
