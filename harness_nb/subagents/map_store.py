"""Where a map's finished rows are kept: ``<workdir>/.harness_nb/maps/<map id>/rows.sqlite``.

Each row is written as it finishes, keyed by ``row_key``: a hash of its prompt (the row's
content through the template) and of the map's ``map_key`` (the template, the agent's
definition, the model and the output schema). So ``resume`` finds the rows a crashed,
restarted or interrupted map had finished, identical rows share one key (a map runs them
once), and an estimate's sample rows are there for the real map to take.

Why SQLite (the standard library's): one file a map appends to row by row, atomic per row,
and readable by ``h.maps()`` (or another kernel) while a map writes it. The journal is WAL
with ``synchronous=NORMAL``: a commit is a write into the log without an fsync, so a row is
safe from a killed process (kill -9, a kernel restart) as soon as its commit returns, and
only a power cut can take the last ones back. There is one writer, the map, on the kernel's
loop: a row's commit is one small write (~30 µs measured, against milliseconds of the row's
own work), done before the map moves on, so there is no thread to own, no queue to lose on
a kill, and rows reach the file in the order they finished. What is slow runs on a worker
thread (``run_blocking``): opening, checking and reading a whole store, and the checkpoint
that moves the log into the file every ``CHECKPOINT_ROWS`` rows (it syncs the disk: ~20 ms
measured, which SQLite's own automatic checkpoint would spend on the loop).

A map in batch mode (``map_batch.py``) also keeps its vendor batches here, each with the
keys of its rows, as soon as the vendor has made it: a map restarted mid-batch polls the
batches it finds still running instead of submitting their rows again. The tables for
them are added to a store when it is opened for writing (older stores gain them then).

Nothing secret is kept: no prompt and no row value (only their hash), the template,
answers, outputs and errors scrubbed (``SECRETS``). A file that is not a store of this
format (another program's, a damaged one) is never changed or removed: opening it is one
``ConfigError`` naming it and saying what to do, and ``stored_maps`` lists it with its
problem rather than failing on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ..core import ConfigError, Usage
from ..core.secret import SECRETS

__all__ = [
    "MapInfo",
    "MapStore",
    "StoredBatch",
    "StoredMap",
    "StoredMaps",
    "StoredRow",
    "map_key",
    "open_map_store",
    "refuse_waiting_batches",
    "row_key",
    "stored_maps",
]

STORE_FILE = "rows.sqlite"
APPLICATION_ID = 0x484E4D50  # "HNMP": marks a harness_nb map store among SQLite files
FORMAT = 1
BUSY_TIMEOUT_MS = 1000  # another kernel resuming the same map at once: wait this long for its write
CHECKPOINT_ROWS = 500  # rows written between two checkpoints (a row is about one page of the log)

MapKind = Literal["map", "estimate"]

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE rows (
    key TEXT PRIMARY KEY,
    text TEXT,
    output TEXT,
    error TEXT,
    usage TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    seconds REAL NOT NULL,
    copies INTEGER NOT NULL,
    finished REAL NOT NULL
);
"""
_BATCH_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    round INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    keys TEXT NOT NULL,
    status TEXT NOT NULL,
    submitted REAL NOT NULL,
    ended INTEGER NOT NULL
);
"""


def _digest(*parts: str) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(part.encode("utf-8", "surrogatepass"))
        hashed.update(b"\0")
    return hashed.hexdigest()


def map_key(*, template: str, agent: dict[str, Any], model: str, output: str | None) -> str:
    """What makes two maps the same work: ``template``, ``agent`` (the parts of its
    definition that shape an answer), ``model`` and the output schema's fingerprint."""
    return _digest(template, json.dumps(agent, sort_keys=True, default=str), model, output or "")


def row_key(key: str, prompt: str) -> str:
    """A row's key in the map ``key``: its prompt is its content through the template."""
    return _digest(key, prompt)


@dataclass(frozen=True, slots=True)
class MapInfo:
    """What a store says of its map: ``id`` (its folder's name), when it was ``created``
    (seconds since the epoch), the ``agent``, ``model`` and ``template`` (scrubbed), the
    output's ``columns`` (empty: answers are text), the ``key`` (``map_key``), its ``kind``
    (an ``estimate``'s store is taken over by the next map of its key) and how many rows
    (``total``) and distinct rows (``unique``) its latest run had."""

    id: str
    created: float
    agent: str
    model: str
    template: str
    columns: tuple[str, ...]
    key: str
    kind: MapKind
    total: int
    unique: int


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One finished row: its ``key``, the answer ``text``, the ``output`` (JSON, a typed
    map's), the ``error`` (``None``: done), what it used, its ``attempts``, the ``seconds``
    it took and how many rows of its map shared it (``copies``)."""

    key: str
    text: str | None
    output: str | None
    error: str | None
    usage: Usage
    attempts: int
    seconds: float
    copies: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """A vendor batch of a map in batch mode: its ``id`` at the vendor, the ``model``
    (``provider/model``) it was sent to, its ``round`` (1: the rows' first ask; 2: typed
    answers that did not fit, asked once more), its rows' ``keys``, the vendor's last
    ``status`` word, when it was ``submitted`` and whether it has ``ended`` (its results
    taken into the rows)."""

    id: str
    model: str
    round: int
    keys: tuple[str, ...]
    status: str
    submitted: float
    ended: bool = False


@dataclass(frozen=True, slots=True)
class StoredMap:
    """A map on disk, as ``h.maps()`` lists it: its ``info`` (``None`` when the file could
    not be read, ``problem`` saying why), rows ``done`` and ``failed``, and its ``path``."""

    path: Path
    info: MapInfo | None
    done: int = 0
    failed: int = 0
    problem: str | None = None
    waiting: int = 0
    """Rows in vendor batches not yet ended (a map in batch mode)."""

    @property
    def id(self) -> str:
        return self.info.id if self.info is not None else self.path.parent.name

    def line(self) -> str:
        """``map-… · 2025-01-31 14:02 · 950/1,000 done (3 failed) · classifier · openai/gpt-4o``."""
        if self.info is None:
            return f"{self.id} · unreadable: {self.problem}"
        info = self.info
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.created))
        failed = f" ({self.failed:,} failed)" if self.failed else ""
        waiting = f" · {self.waiting:,} waiting in batches" if self.waiting else ""
        kind = " · estimate" if info.kind == "estimate" else ""
        return (
            f"{info.id} · {stamp} · {self.done:,}/{info.total:,} done{failed}{waiting} · {info.agent} · {info.model}{kind}"
        )


class MapStore:
    """One map's store, open (see the module doc). Made by ``create`` or ``open``, both
    blocking (call them through ``run_blocking``); ``put`` writes one row."""

    def __init__(self, path: Path, connection: sqlite3.Connection, info: MapInfo) -> None:
        self.path = path
        self.info = info
        self._db = connection
        self._unchecked = 0  # rows written since the last checkpoint

    @classmethod
    def create(cls, folder: Path, info: MapInfo) -> MapStore:
        """A new, empty store for ``info`` in ``folder / info.id``."""
        path = folder / info.id / STORE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            raise ConfigError(f"map store {path} exists already; a new map needs a new id")
        db = _connect(path)
        _journal(db)
        with db:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {FORMAT}")
            db.executescript(_SCHEMA + _BATCH_SCHEMA)
        store = cls(path, db, info)
        store.write_info(info)
        return store

    @classmethod
    def open(cls, path: Path) -> MapStore:
        """The store at ``path``, checked (``ConfigError`` naming it when it is not one of
        this format, or damaged; the file is left as it is)."""
        with _unusable(path):
            db = _connect(path)
            try:
                _check(db, thorough=True)
                info = _read_info(db)
                _journal(db)
                db.executescript(_BATCH_SCHEMA)
            except BaseException:
                db.close()
                raise
        return cls(path, db, info)

    def write_info(self, info: MapInfo) -> None:
        """Record ``info`` (a new run's totals, an estimate taken over by a map)."""
        values = {k: json.dumps(v) for k, v in asdict(info).items()}
        values["template"] = json.dumps(SECRETS.scrub(info.template))
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())
        self.info = info

    def retitle(self, **changes: Any) -> None:
        """``write_info`` with some fields changed."""
        self.write_info(replace(self.info, **changes))

    def rows(self) -> dict[str, StoredRow]:
        """Every row stored, by key (a row that cannot be read back is left out: it runs again)."""
        found: dict[str, StoredRow] = {}
        with _unusable(self.path):
            cursor = self._db.execute("SELECT key, text, output, error, usage, attempts, seconds, copies FROM rows")
            for key, text, output, error, usage, attempts, seconds, copies in cursor:
                try:
                    spent = Usage.model_validate_json(usage)
                except ValueError:
                    continue
                found[key] = StoredRow(key, text, output, error, spent, int(attempts), float(seconds), int(copies))
        return found

    def put(self, row: StoredRow) -> bool:
        """Write ``row`` (replacing a failure of the same key), committed before returning
        (inside a ``group``: at its next ``commit``); ``True`` when it is time for a
        ``checkpoint``."""
        output = SECRETS.scrub_arguments(row.output) if row.output is not None else None
        values = (
            row.key,
            SECRETS.scrub(row.text) if row.text is not None else None,
            output,
            SECRETS.scrub(row.error) if row.error is not None else None,
            row.usage.model_dump_json(),
            row.attempts,
            row.seconds,
            row.copies,
            time.time(),
        )
        if self._db.in_transaction:  # a group's
            self._db.execute("INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
        else:
            with self._db:
                self._db.execute("INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
        self._unchecked += 1
        if self._unchecked < CHECKPOINT_ROWS:
            return False
        self._unchecked = 0
        return True

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Rows ``put`` inside are committed together, at each ``commit`` and on leaving:
        a batch's results arrive faster than one commit a row allows (a commit now and then
        stalls for tens of ms), and a crash loses only what its batch gives again."""
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            if self._db.in_transaction:
                self._db.commit()

    def commit(self) -> None:
        """Commit a ``group``'s rows so far; the group goes on."""
        if self._db.in_transaction:
            self._db.commit()
            self._db.execute("BEGIN")

    def add_batch(self, batch: StoredBatch) -> None:
        """Record ``batch`` with its rows' keys, as one JSON list: one write of ~70 bytes a
        row (a few ms for 50,000 rows), so it is done on the loop, before anything can
        interrupt between the vendor making the batch and the store knowing it."""
        values = (
            batch.id, batch.model, batch.round, len(batch.keys), json.dumps(batch.keys), batch.status,
            batch.submitted, int(batch.ended),
        )  # fmt: skip
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)

    def batch_status(self, batch_id: str, status: str, *, ended: bool = False) -> None:
        """Record a batch's ``status`` word at the vendor; ``ended``: its results are taken."""
        with self._db:
            self._db.execute("UPDATE batches SET status = ?, ended = ? WHERE id = ?", (status, int(ended), batch_id))

    def batches(self, *, waiting: bool = True) -> list[StoredBatch]:
        """The map's batches in the order they were sent (``waiting``: only those not
        ended), each with its rows' keys (blocking: a worker thread)."""
        with _unusable(self.path):
            where = " WHERE ended = 0" if waiting else ""
            found = self._db.execute(
                f"SELECT id, model, round, keys, status, submitted, ended FROM batches{where} ORDER BY submitted, rowid"
            ).fetchall()
            return [
                StoredBatch(batch_id, model, int(round_), tuple(json.loads(keys)), status, float(submitted), bool(ended))
                for batch_id, model, round_, keys, status, submitted, ended in found
            ]

    def waiting_batches(self) -> bool:
        """Whether some of the map's batches have not ended (blocking, briefly)."""
        return self._db.execute("SELECT 1 FROM batches WHERE ended = 0 LIMIT 1").fetchone() is not None

    def checkpoint(self) -> None:
        """Move the log's rows into the file (blocking: on a worker thread), through a
        connection of its own, so that ``put`` goes on meanwhile."""
        with contextlib.closing(_connect(self.path)) as db:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        self._db.close()


def open_map_store(folder: Path, wanted: MapInfo, *, resume: bool | str) -> tuple[MapStore, dict[str, StoredRow]]:
    """The store a map described by ``wanted`` writes to under ``folder``, and the rows it
    holds. ``resume``: ``True`` continues the newest store of ``wanted.key`` (none: a new
    one), a map id that map (``ConfigError`` when it is missing or another map's);
    ``False`` takes over the newest estimate of the key (its sample rows are paid for),
    else makes a new store. A store taken is re-described with ``wanted``'s totals."""
    store = _resumed(folder, wanted, resume) if resume is not False else _estimate_of(folder, wanted.key)
    if store is None:
        return MapStore.create(folder, wanted), {}
    try:
        kind: MapKind = "estimate" if wanted.kind == "estimate" and store.info.kind == "estimate" else "map"
        store.retitle(kind=kind, total=wanted.total, unique=wanted.unique)
        return store, store.rows()
    except BaseException:
        store.close()
        raise


def _resumed(folder: Path, wanted: MapInfo, resume: bool | str) -> MapStore | None:
    if isinstance(resume, str):
        path = folder / resume / STORE_FILE
        if not path.is_file():
            raise ConfigError(f"no stored map {resume!r} under {folder}; h.maps() lists the stored ones")
        store = MapStore.open(path)
        if store.info.key != wanted.key:
            store.close()
            raise ConfigError(f"stored map {resume} is another map: {_differences(wanted, store.info)}")
        return store
    mine = [m for m in stored_maps(folder) if m.info is not None and m.info.key == wanted.key]
    return MapStore.open(mine[-1].path) if mine else None


def _estimate_of(folder: Path, key: str) -> MapStore | None:
    estimates = [m for m in stored_maps(folder) if m.info is not None and m.info.key == key and m.info.kind == "estimate"]
    return MapStore.open(estimates[-1].path) if estimates else None


def _differences(wanted: MapInfo, stored: MapInfo) -> str:
    named = [
        f"its {name} is {getattr(stored, field)!r}, not {getattr(wanted, field)!r}"
        for name, field in (("agent", "agent"), ("model", "model"), ("template", "template"), ("output", "columns"))
        if getattr(stored, field) != getattr(wanted, field)
    ]
    return "; ".join(named) or "its agent's definition or output schema differ"


def refuse_waiting_batches(folder: Path, key: str) -> None:
    """``ConfigError`` when a stored map of ``key`` has rows waiting in vendor batches: a
    new map of that key would send (and pay for) them again."""
    for stored in stored_maps(folder):
        if stored.info is not None and stored.info.key == key and stored.waiting:
            raise ConfigError(
                f"map {stored.id} of this agent, template and model has {stored.waiting:,} rows waiting in vendor "
                f"batches: resume=True (mode='batch') collects them; h.cancel_batches({stored.id!r}) stops them"
            )


class StoredMaps(list[StoredMap]):
    """``stored_maps``' list, shown one line a map (``StoredMap.line``)."""

    def __repr__(self) -> str:
        return "\n".join(m.line() for m in self) if self else "no stored maps"


def stored_maps(folder: Path) -> StoredMaps:
    """The maps stored under ``folder`` (``.harness_nb/maps``), oldest first; one that
    cannot be read is listed with its problem, after the others."""
    found = StoredMaps()
    if not folder.is_dir():
        return found
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            found.append(_summary(entry / STORE_FILE))
    found.sort(key=lambda m: (m.info is None, m.info.created if m.info else 0.0, m.id))
    return found


def _summary(path: Path) -> StoredMap:
    if not path.is_file():
        return StoredMap(path, None, problem=f"no {STORE_FILE} in its folder")
    try:
        with _unusable(path), contextlib.closing(_connect(path, read_only=True)) as db:
            _check(db, thorough=False)
            info = _read_info(db)
            done, failed = db.execute(
                "SELECT COALESCE(SUM(CASE WHEN error IS NULL THEN copies END), 0), "
                "COALESCE(SUM(CASE WHEN error IS NOT NULL THEN copies END), 0) FROM rows"
            ).fetchone()
            waiting = 0
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'batches'").fetchone():
                (waiting,) = db.execute("SELECT COALESCE(SUM(rows), 0) FROM batches WHERE ended = 0").fetchone()
    except ConfigError as exc:
        return StoredMap(path, None, problem=str(exc))
    return StoredMap(path, info, int(done), int(failed), waiting=int(waiting))


def _connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    # check_same_thread=False: opened and read on a worker thread, written on the loop —
    # never both at once (the map owns its store)
    target = f"file:{path}?mode=ro" if read_only else f"file:{path}"
    db = sqlite3.connect(target, uri=True, check_same_thread=False, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return db


def _journal(db: sqlite3.Connection) -> None:
    """WAL, committed without an fsync (see the module doc): set once the file is known
    to be a store, so that a foreign file is never changed."""
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run off the loop: MapStore.checkpoint


def _check(db: sqlite3.Connection, *, thorough: bool) -> None:
    (application,) = db.execute("PRAGMA application_id").fetchone()
    if application != APPLICATION_ID:
        raise _Unusable("it is not a harness_nb map store (another program's SQLite file)")
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version != FORMAT:
        raise _Unusable(f"it has format {version}, and this harness_nb reads format {FORMAT}")
    if thorough:
        problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise _Unusable(f"it is damaged ({'; '.join(problems)})")


def _read_info(db: sqlite3.Connection) -> MapInfo:
    values = {name: json.loads(value) for name, value in db.execute("SELECT name, value FROM meta")}
    try:
        values["columns"] = tuple(values["columns"])
        return MapInfo(**values)
    except (KeyError, TypeError) as exc:
        raise _Unusable(f"its description is incomplete ({exc})") from None


class _Unusable(Exception):
    """Why a file is no usable store (turned into one ``ConfigError`` by ``_unusable``)."""


@contextlib.contextmanager
def _unusable(path: Path) -> Iterator[None]:
    """Translate what goes wrong reading ``path`` into one ``ConfigError`` saying what to do."""
    try:
        yield
    except (_Unusable, sqlite3.DatabaseError, json.JSONDecodeError, OSError) as exc:
        reason = str(exc) if isinstance(exc, _Unusable) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(
            f"map store {path} cannot be used: {reason}. It was left as it is: move its folder aside "
            "(or delete it) and the map starts afresh"
        ) from None
