"""Team rosters on disk: ``<folder>/<team>/roster.json`` and ``<folder>/<team>/<name>.jsonl``.

The roster lists each teammate with what it takes to revive it (its agent definition's
name, its first prompt) and what a person wants to see (state, last message, tokens). It is
rewritten atomically whenever a member changes, so a reader (or a restarted kernel) never
sees half a file. Each teammate's conversation is the ``MemorySession`` transcript beside it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from ..core import Usage

log = logging.getLogger("harness_nb.team")

MemberState = Literal["working", "idle", "exited"]
ROSTER_FILE = "roster.json"


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

    def save(self, team: str, members: Iterable[RosterMember]) -> Path:
        """Write ``team``'s roster atomically (temporary file, then rename over the old one)."""
        roster = Roster(team=team, members=list(members))
        folder = self.team_dir(team)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / ROSTER_FILE
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".roster-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(roster.model_dump_json(indent=2))
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
