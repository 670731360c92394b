"""Which MCP servers may start: the ones the person configured, and the project's once the
person trusts them.

A server is **the project's** when a repository can bring it: an entry of
``<workdir>/.mcp.json``, or an inline ``mcpServers`` entry of an agent file under the workdir
(``agents/``, ``.claude/agents/``, ``.harness_nb/agents/``). A stdio server is a command run
outside the sandbox, with the person's rights, so opening someone else's repository must not
run it: a project server is listed (``%mcp``, with what it would run) but not started, and
its tools are not offered, until the person trusts it by one of:

- ``%mcp trust NAME`` (``McpManager.trust``): kept in ``~/.harness_nb/mcp-trust.json`` under
  the workdir's real path, the server's name, its **fingerprint** — a hash of its resolved
  configuration (command, args, the names of its env variables, cwd; or url) — and a hash of
  the content of the files in the workdir that its command line names (``named_files.py``:
  ``python srv.py`` covers ``srv.py``). A changed entry, or a changed file, needs trusting
  again. ``%mcp untrust NAME`` forgets.
- ``Harness(mcp_trust=[…])`` / ``HarnessNB.mcp_trust``: names.
- Claude Code's settings ``enableAllProjectMcpServers`` (every ``.mcp.json`` server),
  ``enabledMcpjsonServers`` (names) and ``disabledMcpjsonServers`` (names never started,
  whatever else trusts them), for ``.mcp.json`` servers, read only from the person's own
  files: ``~/.claude/settings.json``, ``~/.harness_nb/settings.json`` and the workdir's
  ``.claude/settings.local.json`` (git-ignored by convention: a repository that commits one
  anyway could vouch for itself). Never from the workdir's ``.claude/settings.json`` or
  ``.harness_nb/settings.json``: a repository cannot vouch for its own servers.

Trust by name (the last two) covers a server as it was configured when this process first
read the workdir's configuration (``Trust.begin``: a session's start, kept across harnesses
rebuilt in the same kernel): an entry that appeared or changed since — its command line or
a file it runs — waits for ``%mcp trust`` like any other, and ``%mcp`` shows what it would
run. A name cannot vouch for whatever the agent writes under that name mid-session, nor for
a command line whose shell text hides which files it runs (``unread_shell_text``: ``sh -c
'python $F'``): that one waits for ``%mcp trust``, given after reading the command.

The trust file holds no command, argument or variable value (only hashes of them), is
written atomically under a lock (two kernels trusting at once both keep their decision),
keeps at most ``MAX_RECORDS`` decisions (the oldest go first), and a
corrupt one costs one warning and is read as empty (the next ``%mcp trust`` replaces it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..core import ConfigError, read_regular
from ..core.secret import SECRETS
from .config import PROJECT_FILE, ServerConfig, ServerEntry, StdioServer
from .named_files import files_fingerprint, unread_shell_text

log = logging.getLogger("harness_nb.mcp")

MAX_RECORDS = 2000
LOCK_TIMEOUT = 10.0  # seconds; a write holds the lock for one small file
MAX_TRUST_BYTES = 1024 * 1024
MAX_SETTINGS_BYTES = 1024 * 1024
TRUST_FILE = ".harness_nb/mcp-trust.json"
USER_SETTINGS = (".claude/settings.json", ".harness_nb/settings.json")
LOCAL_SETTINGS = ".claude/settings.local.json"

Standing = Literal["trusted", "needs approval", "disabled"]
Digest = tuple[str, str]  # (fingerprint, files_fingerprint)

_SESSION_START: dict[str, dict[tuple[str, str], Digest]] = {}
"""Per workdir (real path): each project server's digest, by (source, name), as this process
first read the configuration. Process-wide: the notebook rebuilds its harness when some
settings change, and the new one must not take a file planted meanwhile as its start."""


def fingerprint(config: ServerConfig) -> str:
    """A hash of what a server runs or reaches: command, args, env names and cwd, or url.
    (Env values are left out: they are often tokens that change; a new variable is not.)"""
    if isinstance(config, StdioServer):
        data: dict[str, Any] = {
            "command": config.command,
            "args": list(config.args),
            "env": sorted(config.env),
            "cwd": str(config.cwd) if config.cwd is not None else None,
        }
    else:
        data = {"url": config.url}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """Whether a server may start, and why (``%mcp`` shows it)."""

    standing: Standing
    why: str

    @property
    def trusted(self) -> bool:
        return self.standing == "trusted"


@dataclass
class TrustSettings:
    """Claude Code's MCP approval settings, from the person's own settings files: each key's
    value and the file it came from."""

    enable_all: str | None = None  # the file that says enableAllProjectMcpServers: true
    enabled: dict[str, str] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def read_trust_settings(files: Iterable[tuple[Path, str]]) -> TrustSettings:
    """The approval settings of ``files`` (path, shown name), merged: any ``true`` enables
    all, the name lists add up. A file that cannot be read or a bad value is one warning."""
    found = TrustSettings()
    for path, shown in files:
        document = _read_json(path, shown, MAX_SETTINGS_BYTES, found.warnings, what="its MCP approvals")
        if not isinstance(document, dict):
            continue
        if document.get("enableAllProjectMcpServers") is True and found.enable_all is None:
            found.enable_all = shown
        elif "enableAllProjectMcpServers" in document and not isinstance(document["enableAllProjectMcpServers"], bool):
            found.warnings.append(f"{shown}: enableAllProjectMcpServers must be true or false; it is not used")
        for key, into in (("enabledMcpjsonServers", found.enabled), ("disabledMcpjsonServers", found.disabled)):
            names = document.get(key)
            if names is None:
                continue
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                found.warnings.append(f'{shown}: {key} must be a list of server names, e.g. ["github"]; it is not used')
                continue
            for name in names[:1000]:
                into.setdefault(name, shown)
    return found


def _read_json(path: Path, shown: str, limit: int, warnings: list[str], *, what: str) -> Any:
    """The JSON document of ``path`` (``None`` when it is missing or bad: a bad one adds a
    warning saying ``what`` is not used)."""
    try:
        data = read_regular(path, limit)
    except FileNotFoundError:
        return None
    except OSError as exc:
        warnings.append(f"{shown}: cannot read it ({exc.strerror or type(exc).__name__}); {what} are not used")
        return None
    if len(data) > limit:
        warnings.append(f"{shown}: larger than {limit // 1024} KiB; {what} are not used")
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        warnings.append(f"{shown}: not valid JSON ({type(exc).__name__}); {what} are not used")
        return None


@dataclass(frozen=True)
class Record:
    """One ``%mcp trust`` decision: in this workdir, this name with this configuration and
    these files (``files``: their ``files_fingerprint``, ``""`` for none)."""

    workdir: str
    name: str
    fingerprint: str
    files: str = ""


class TrustStore:
    """The ``%mcp trust`` decisions kept in ``path`` (``None``: in memory only, for this
    process). Blocking but bounded: one small file read or written per call."""

    def __init__(self, path: Path | None, *, shown: str = "~/" + TRUST_FILE) -> None:
        self.path = path
        self.shown = shown
        self._records: list[Record] | None = None
        self.warnings: list[str] = []

    def records(self) -> list[Record]:
        """The decisions, oldest first (the file is read on first ask and by ``reload``)."""
        if self._records is None:
            self._records = self._read()
        return self._records

    def reload(self) -> None:
        """Read the file again at the next ask (another kernel may have trusted a server)."""
        self._records = None

    def _read(self) -> list[Record]:
        if self.path is None:
            return []
        problems: list[str] = []
        document = _read_json(self.path, self.shown, MAX_TRUST_BYTES, problems, what="its MCP trust decisions")
        records: list[Record] = []
        if document is not None:
            rows = document.get("servers") if isinstance(document, dict) else None
            if not isinstance(rows, list):
                problems.append(
                    f'{self.shown}: not an object with a "servers" list; its MCP trust decisions are not used'
                )
            else:
                for row in rows[-MAX_RECORDS:]:
                    keys = ("workdir", "name", "fingerprint")
                    fields = [row.get(k) for k in keys] + [row.get("files", "")] if isinstance(row, dict) else []
                    if fields and all(isinstance(f, str) for f in fields):
                        records.append(Record(*(str(f) for f in fields)))
        if problems and problems != self.warnings:  # one warning per corrupt file, not per read
            for problem in problems:
                log.warning("%s (it is replaced at the next %%mcp trust)", problem)
        self.warnings = problems
        return records

    def add(self, record: Record) -> None:
        """Keep ``record`` (the oldest decisions go past ``MAX_RECORDS``)."""
        with self._locked():
            kept = [r for r in self.records() if r != record] + [record]
            self._write(kept[-MAX_RECORDS:])

    def remove(self, workdir: str, name: str) -> int:
        """Forget every decision for ``name`` in ``workdir``; how many there were."""
        with self._locked():
            kept = [r for r in self.records() if (r.workdir, r.name) != (workdir, name)]
            gone = len(self.records()) - len(kept)
            if gone:
                self._write(kept)
        return gone

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the file's lock and read it afresh: two kernels sharing a home each change
        what the file holds now, so neither one's decision is lost to the other's write."""
        if self.path is None:
            yield
            return
        from filelock import FileLock, Timeout  # at the first write, not when harness_nb is imported

        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.path.with_name(f".{self.path.name}.lock"), timeout=LOCK_TIMEOUT)
        try:
            with lock:
                self._records = self._read()
                yield
        except Timeout:
            raise ConfigError(
                f"{self.shown} is locked by another process for over {LOCK_TIMEOUT:g} s; try again, "
                f"or delete {lock.lock_file} if no harness_nb kernel is running"
            ) from None

    def _write(self, records: list[Record]) -> None:
        self._records = records
        if self.path is None:
            return
        rows: list[dict[str, str]] = []
        for r in records:
            rows.append({"workdir": r.workdir, "name": r.name, "fingerprint": r.fingerprint})
            if r.files:
                rows[-1]["files"] = r.files
        document = {"version": 1, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "servers": rows}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".mcp-trust-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(document, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.warnings = []


class Trust:
    """The trust decisions for one workdir: ``names`` given in code, the person's settings
    files (``home``'s, when given, and the workdir's ``.claude/settings.local.json``) and
    ``store``. ``refresh`` re-reads the files."""

    def __init__(
        self, workdir: Path, *, names: Iterable[str] = (), store: TrustStore | None = None, home: Path | None = None
    ) -> None:
        self.workdir = workdir
        self.key = os.path.realpath(workdir)
        self.names = frozenset(names)
        self.store = store if store is not None else TrustStore(None)
        self.home = home
        self.settings = TrustSettings()
        self._noticed: set[tuple[str, str, str]] = set()
        self.refresh()

    def settings_files(self) -> list[tuple[Path, str]]:
        """The files whose approval settings count: the person's own, never the project's."""
        files = [(self.home / name, f"~/{name}") for name in USER_SETTINGS] if self.home is not None else []
        return [*files, (self.workdir / LOCAL_SETTINGS, LOCAL_SETTINGS)]

    def refresh(self) -> list[str]:
        """Read the settings files and the store again; their warnings."""
        self.settings = read_trust_settings(self.settings_files())
        self.store.reload()
        self.store.records()
        return [*self.settings.warnings, *self.store.warnings]

    def digest(self, entry: ServerEntry) -> Digest:
        """What ``entry`` runs, hashed: its configuration and the content of the files in the
        workdir it names (a ``stat`` per file while they stay the same)."""
        return fingerprint(entry.config), files_fingerprint(entry.config, self.workdir)

    def begin(self, entries: Iterable[ServerEntry]) -> None:
        """Note ``entries`` (every server configured now) as this session's start, unless this
        process noted the workdir's start already: trust by name covers only these."""
        if self.key not in _SESSION_START:
            _SESSION_START[self.key] = {(e.source, e.name): self.digest(e) for e in entries if e.project}

    def verdict(self, entry: ServerEntry) -> Verdict:
        """Whether ``entry`` may start, and why (see the module doc)."""
        from_file = entry.source == PROJECT_FILE
        if from_file and entry.name in self.settings.disabled:
            return Verdict("disabled", f"disabledMcpjsonServers in {self.settings.disabled[entry.name]}")
        if not entry.project:
            return Verdict("trusted", f"configured by you ({entry.source})")
        digest = self.digest(entry)
        mine = [r for r in self.store.records() if (r.workdir, r.name) == (self.key, entry.name)]
        if any((r.fingerprint, r.files) == digest for r in mine):
            return Verdict("trusted", "%mcp trust")
        by_name = self._by_name(entry)
        if by_name is not None:
            unread = unread_shell_text(entry.config)
            if unread is not None:
                why = f"its command line has {unread}: harness_nb cannot tell every file it runs, so {by_name}"
                return Verdict("needs approval", f"{why} does not cover it")
            start = _SESSION_START.get(self.key)
            if start is None or start.get((entry.source, entry.name)) == digest:
                return Verdict("trusted", by_name)
            new = (entry.source, entry.name) not in start
            what = "appeared" if new else "changed (its command line or a file it runs)"
            why = f"it {what} during this session, and {by_name} trusts only what was configured when it began"
            return Verdict("needs approval", why)
        if any(r.fingerprint == digest[0] for r in mine):
            return Verdict("needs approval", "a file it runs changed since you trusted it")
        if mine:
            return Verdict("needs approval", "its configuration changed since you trusted it")
        return Verdict("needs approval", "a project's server runs only once you trust it")

    def _by_name(self, entry: ServerEntry) -> str | None:
        """The trust by name that covers ``entry``, if one does (see the module doc)."""
        from_file = entry.source == PROJECT_FILE
        if entry.name in self.names:
            return "mcp_trust"
        if from_file and entry.name in self.settings.enabled:
            return f"enabledMcpjsonServers in {self.settings.enabled[entry.name]}"
        if from_file and self.settings.enable_all is not None:
            return f"enableAllProjectMcpServers in {self.settings.enable_all}"
        return None

    def allow(self, entry: ServerEntry) -> None:
        """Trust ``entry`` (its name, fingerprint and files) in this workdir from now on."""
        fp, files = self.digest(entry)
        self.store.add(Record(self.key, entry.name, fp, files))

    def forget(self, name: str) -> int:
        """Forget the ``%mcp trust`` decisions for ``name``; how many there were."""
        return self.store.remove(self.key, name)

    def notice(self, pending: Iterable[ServerEntry]) -> None:
        """One warning naming the servers of ``pending`` not yet warned about: that they did
        not start, what they would run, and how to trust them."""
        new = [e for e in pending if (e.name, *self.digest(e)) not in self._noticed]
        if not new:
            return
        self._noticed.update((e.name, *self.digest(e)) for e in new)
        listed = "; ".join(f"{e.name} ({e.source}) would run: {describe_fully(e)}" for e in new)
        if len(new) == 1:
            head = "MCP server of this project not started, it runs only once you trust it"
            how = how_to_trust(new[0].name)
        else:
            head = "MCP servers of this project not started, they run only once you trust them"
            how = how_to_trust("NAME")
        log.warning("%s", SECRETS.scrub(f"{head}: {listed}. If you do: {how}"))


def how_to_trust(name: str) -> str:
    """The ways to trust server ``name`` (one sentence, for messages)."""
    return f"%mcp trust {name} (or %mcp trust --all) in a notebook, or Harness(mcp_trust=[{name!r}])"


def describe_fully(entry: ServerEntry) -> str:
    """What ``entry`` would run or reach, all of it: the command line (shell-quoted), the
    folder and the names of the variables it sets; or the URL."""
    config = entry.config
    text = config.describe()
    if isinstance(config, StdioServer):
        if config.cwd is not None:
            text += f" (in {config.cwd})"
        if config.env:
            text += f" (env {', '.join(sorted(config.env))})"
    return text
