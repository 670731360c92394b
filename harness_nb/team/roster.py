"""Team rosters on disk: ``<folder>/<team>/roster.json`` and ``<folder>/<team>/<name>.jsonl``.

The roster lists each teammate with what it takes to revive it (its agent definition's
name, its first prompt) and what a person wants to see (state, last message, tokens). It is
rewritten atomically whenever a member changes, so a reader (or a restarted kernel) never
sees half a file. Each teammate's conversation is the ``MemorySession`` transcript beside it.

Several kernels may share a workdir. A roster write is a merge made under a file lock
(``filelock``, on ``<folder>/.<team>.lock`` beside the team's folder, so the folder
holds only the roster and the transcripts): the writer replaces only the
members it owns (those it spawned or revived) and keeps every other member as the file
has it, so no kernel drops another's teammates. Names are claimed the same way: a name
taken in the file, or whose transcript exists, is never handed out again, and nothing
deletes a transcript another process may be writing.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, ValidationError

from ..core import Usage
from ..core.secret import SECRETS

if TYPE_CHECKING:
    from filelock import FileLock

log = logging.getLogger("harness_nb.team")

MemberState = Literal["working", "idle", "exited"]
ROSTER_FILE = "roster.json"
LOCK_TIMEOUT = 5.0
"""Seconds a roster write waits for another kernel's write to finish (it takes milliseconds)."""


class RosterMember(BaseModel):
    """One teammate as the roster records it. ``turns`` counts finished teammate turns
    (each one engine run, however many LLM calls it took)."""

    name: str
    team: str
    agent: str
    task_id: str
    state: MemberState = "working"
    prompt: str = ""
    last_message: str = ""
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    owner: str | None = None  # "<pid>:<token>" of the team manager that runs it (see new_owner)

    @property
    def tokens(self) -> int:
        """Input plus output tokens over the teammate's whole life (revivals included)."""
        return self.usage.total_tokens


class Roster(BaseModel):
    """Every member of one team, in the order they joined."""

    team: str
    members: list[RosterMember] = Field(default_factory=list)
    updated_at: float = Field(default_factory=time.time)


class RosterStore:
    """Reads and writes the rosters and names the transcripts under ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def team_dir(self, team: str) -> Path:
        return self.folder / team

    def transcript_path(self, team: str, name: str) -> Path:
        """Where teammate ``name``'s conversation is appended as JSONL."""
        return self.team_dir(team) / f"{name}.jsonl"

    def lock(self, team: str) -> FileLock:
        """The cross-process lock of ``team``'s folder (creates the folder)."""
        from filelock import FileLock  # at the first team, not when harness_nb is imported

        self.team_dir(team).mkdir(parents=True, exist_ok=True)
        return FileLock(self.folder / f".{team}.lock", timeout=LOCK_TIMEOUT)

    def save(self, team: str, members: Iterable[RosterMember]) -> Path:
        """Merge ``members`` into ``team``'s roster on disk, under the team's lock: each of
        them replaces the entry of its name; members the file has and ``members`` lacks
        (another kernel's) are kept. Written atomically. Raises ``OSError`` when the lock
        cannot be had within ``LOCK_TIMEOUT``."""
        from filelock import Timeout

        ours = list(members)
        try:
            with self.lock(team):
                on_disk = self.load(team)
                mine = {m.name: m for m in ours}
                # in join order: each member where the file has it, new ones at the end
                merged = [mine.pop(m.name, m) for m in (on_disk.members if on_disk else [])]
                return self._write(Roster(team=team, members=[*merged, *mine.values()]))
        except Timeout as exc:
            raise OSError(f"the roster of team {team} is locked by another process: {exc}") from None

    def claim(self, team: str, wanted: str, taken: Iterable[str]) -> str:
        """A teammate name for a new member of ``team``: ``wanted``, or ``wanted-2``, … —
        one not in ``taken`` (this process's names), not in the roster on disk (another
        kernel's) and with no transcript file yet. Its transcript file is created before the
        lock is released, so two kernels cannot both claim it."""
        with self.lock(team):
            on_disk = self.load(team)
            used = {*taken, *(m.name for m in (on_disk.members if on_disk else []))}
            name, n = wanted, 1
            while name in used or self.transcript_path(team, name).exists():
                n += 1
                name = f"{wanted}-{n}"
            self.transcript_path(team, name).touch(exist_ok=False)
            return name

    def running_elsewhere(self, team: str, name: str, me: str) -> str | None:
        """The owner (``"<pid>:<token>"``) of teammate ``name`` when another live team
        manager runs it now, per the roster on disk; ``None`` when none does (it exited, its
        kernel is gone, or it is ``me``'s)."""
        on_disk = self.load(team)
        record = next((m for m in (on_disk.members if on_disk else []) if m.name == name), None)
        if record is None or record.state == "exited" or record.owner in (None, me):
            return None
        return record.owner if _alive(record.owner) else None

    def _write(self, roster: Roster) -> Path:
        folder = self.team_dir(roster.team)
        target = folder / ROSTER_FILE
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".roster-", suffix=".tmp")
        try:
            # a teammate's first prompt may be a person's text, holding a pasted key
            clean = Roster.model_validate(SECRETS.scrub_data(roster.model_dump(mode="json")))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(clean.model_dump_json(indent=2))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def load(self, team: str) -> Roster | None:
        """``team``'s roster, or ``None`` when there is none or it cannot be read (logged)."""
        path = self.team_dir(team) / ROSTER_FILE
        if not path.is_file():
            return None
        try:
            roster = Roster.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("team roster %s cannot be read (%s); skipped", path, str(exc).splitlines()[0])
            return None
        if roster.team != team:
            log.warning("team roster %s names team %r; using the folder's name %r", path, roster.team, team)
            roster.team = team
        for member in roster.members:
            member.team = team
        return roster

    def load_all(self) -> list[Roster]:
        """Every readable roster under the folder, by team name (a missing folder is fine)."""
        if not self.folder.is_dir():
            return []
        rosters = (self.load(d.name) for d in sorted(self.folder.iterdir()) if d.is_dir())
        return [r for r in rosters if r is not None]


def new_owner() -> str:
    """An owner mark for a team manager: its pid (to tell whether it still lives) and a
    token (two harnesses in one process are two owners)."""
    return f"{os.getpid()}:{os.urandom(4).hex()}"


def _alive(owner: str) -> bool:
    pid_text, _, _ = owner.partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True
