"""``SkillCatalog``: the Agent Skills found in the skill folders, checked against the spec.

An Agent Skill (agentskills.io) is a folder ``<name>/SKILL.md``: YAML frontmatter with
``name`` (1-64 lowercase letters, digits and single hyphens, the folder's own name) and
``description`` (1-1024 characters), optionally ``license``, ``compatibility`` (at most 500
characters), ``metadata`` (strings to strings) and ``allowed-tools`` (space-delimited);
then a Markdown body; resource files (``scripts/``, ``references/``, ``assets/``) beside it.

The catalog lists the ``<name>/SKILL.md`` folders of ``<workdir>/.claude/skills``,
``<workdir>/.harness_nb/skills``, ``~/.claude/skills`` and ``~/.harness_nb/skills``
(``SKILL_FOLDERS``), project before user, names sorted within a folder; the first skill of
a name wins and a later one is listed as shadowed. A skill is known by its folder's name
(what ``skill(name)`` and an agent file's ``skills:`` take).

What a file can do wrong comes in two kinds, both listed by ``%skills`` and logged once per
change of the file:

- **problems**: a rule of the spec broken (a name that does not match its folder, too long,
  with capitals or bad hyphens; a description over 1024 characters; a ``compatibility``
  over 500; ``metadata`` that is not strings; keys the spec does not have). The skill is
  still offered: these are slips, and the folder name is what finds it.
- **refused**: the skill cannot be used and is never offered: no frontmatter, YAML that is
  invalid or over a limit (``core.frontmatter``), no description (the model picks a skill
  by it), a folder name that is not a plain name, or a file that is not a regular UTF-8
  file of at most ``SKILL_MAX_BYTES`` inside its skill folder (a symlink out is refused).

``disable-model-invocation: true`` (Claude Code's key) keeps a skill out of the model's
catalog; it can still be preloaded. ``allowed-tools`` is parsed and shown, never acted on:
harness_nb pre-approves no tool because a skill file asks for it.

``refresh()`` is stat-based and cheap: it lists the folders and stats each ``SKILL.md``,
and re-reads only files whose modification time, size or inode changed; ``version`` grows
whenever what the catalog holds changes, so a prompt built from it is rebuilt then and only
then (a stable system prompt keeps the provider's prompt cache warm). ``unchanged()`` says,
without the file system, when a refresh would find nothing new: inotify (``ReadWatch``) saw
no event in the folders it listed since, nor on the way down to them (the workdir is
watched for ``.claude`` and ``.harness_nb`` only, not for the files written beside them), so
a run need not send the refresh to a worker.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core import ConfigError
from ..core.frontmatter import FrontmatterError, load_frontmatter, split_frontmatter
from ..sandbox.watch import ReadWatch, linked
from .skill import SKILL_FOLDERS, SkillSource, read_skill_file, skill_name_problem

__all__ = [
    "CATALOG_MAX_CHARS",
    "DESCRIPTION_MAX_CHARS",
    "SKILLS_MAX_PER_FOLDER",
    "Skill",
    "SkillCatalog",
    "parse_skill",
]

log = logging.getLogger("harness_nb.engine")

NAME_MAX_CHARS = 64
DESCRIPTION_MAX_CHARS = 1024
COMPATIBILITY_MAX_CHARS = 500
CATALOG_MAX_CHARS = 4000
"""Most characters of the catalog in a system prompt (about a thousand tokens)."""
CATALOG_SHORT_DESCRIPTION = 200
"""Past the budget, each description is cut to this many characters before skills are dropped."""
SKILLS_MAX_PER_FOLDER = 200
"""Most skill folders read from one skill folder (names sorted); the rest are noted."""

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SPEC_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})
_CLAUDE_KEYS = frozenset(
    {"disable-model-invocation", "user-invocable", "argument-hint", "model", "when_to_use", "context", "agent", "hooks"}
)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Skill:
    """One ``<name>/SKILL.md`` as found: its fields, its body and what is wrong with it.

    ``name`` is the folder's name, ``declared_name`` the frontmatter's. ``problems`` are
    broken rules of the spec (the skill still works); ``refused`` says why it cannot be
    used at all (then it is never offered). ``shadowed_by`` is the folder of the skill of
    the same name that wins over this one."""

    name: str
    folder: Path
    source: SkillSource
    description: str = ""
    body: str = ""
    declared_name: str | None = None
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    model_invocable: bool = True
    problems: tuple[str, ...] = ()
    refused: str | None = None
    shadowed_by: Path | None = None

    @property
    def path(self) -> Path:
        """Its ``SKILL.md``."""
        return self.folder / "SKILL.md"

    @property
    def offered(self) -> bool:
        """Whether the model is offered it: usable, not shadowed, not kept from the model."""
        return self.refused is None and self.shadowed_by is None and self.model_invocable


def parse_skill(folder: Path, source: SkillSource = "project", *, root: Path | None = None) -> Skill:
    """The skill in ``folder`` (its ``SKILL.md`` read and checked); never raises for a bad
    file: what is wrong is in ``problems`` or ``refused``. ``root`` is the skill folder it
    was found in: its ``SKILL.md`` must really be inside it (default: ``folder``'s parent)."""
    name = folder.name
    if problem := _folder_name_problem(name):
        return Skill(name=name, folder=folder, source=source, refused=problem)
    try:
        _confine(folder / "SKILL.md", root or folder.parent)
        text = read_skill_file(name, folder / "SKILL.md")
    except ConfigError as exc:
        return Skill(name=name, folder=folder, source=source, refused=_own(str(exc), name))
    front, body = split_frontmatter(text)
    if front is None:
        return Skill(
            name=name, folder=folder, source=source,
            refused="SKILL.md has no frontmatter: it starts with a '---' line, then 'name: "
            f"{name}' and 'description: ...' lines, then another '---'",
        )
    # padded with the lines above it, so that YAML's line numbers are the file's
    padding = "\n" * (text.removeprefix("\ufeff").replace("\r\n", "\n").split("---", 1)[0].count("\n") + 1)
    import yaml  # loaded by load_frontmatter anyway; not at import

    try:
        data = load_frontmatter(padding + front)
    except FrontmatterError as exc:
        return Skill(name=name, folder=folder, source=source, refused=str(exc).replace("agent files", "skill files"))
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return Skill(
            name=name, folder=folder, source=source,
            refused=f"invalid YAML in the frontmatter{where}: {problem} (quote the value, e.g. "
            'description: "...")',
        )
    if not isinstance(data, dict):
        return Skill(name=name, folder=folder, source=source, refused="the frontmatter is not a mapping of keys (name: ..., description: ...)")
    return _checked(name, folder, source, {str(k): v for k, v in data.items()}, body)


def _checked(name: str, folder: Path, source: SkillSource, data: dict[str, Any], body: str) -> Skill:
    """The skill from its parsed frontmatter, each rule of the spec checked."""
    problems: list[str] = []
    declared = data.get("name")
    if declared is None:
        problems.append(f"no name in the frontmatter (the spec requires one: name: {name})")
    elif not isinstance(declared, str) or declared.strip() != name:
        problems.append(f"name {str(declared)!r} does not match its folder {name!r}; it is known as {name!r}")
    if not _NAME.match(name) or len(name) > NAME_MAX_CHARS:
        problems.append(
            f"name {name!r} breaks the spec: 1-{NAME_MAX_CHARS} lowercase letters, digits and "
            "hyphens, with no hyphen at either end or two in a row"
        )
    description = _text(data.get("description"))
    if not description:
        return Skill(
            name=name, folder=folder, source=source, body=body, problems=tuple(problems),
            refused="no description in the frontmatter: the model picks a skill by its description, "
            "so SKILL.md needs 'description: what it does and when to use it'",
        )
    if len(description) > DESCRIPTION_MAX_CHARS:
        problems.append(f"description is {len(description):,} characters; the spec allows {DESCRIPTION_MAX_CHARS:,}")
    compatibility = _optional_text("compatibility", data, problems)
    if compatibility is not None and len(compatibility) > COMPATIBILITY_MAX_CHARS:
        problems.append(f"compatibility is {len(compatibility):,} characters; the spec allows {COMPATIBILITY_MAX_CHARS}")
    metadata = _metadata(data.get("metadata"), problems)
    allowed = _tool_list(data.get("allowed-tools"), problems)
    unknown = sorted(set(data) - _SPEC_KEYS - _CLAUDE_KEYS)
    if unknown:
        problems.append("keys the spec does not have, ignored: " + ", ".join(unknown))
    if not body.strip():
        problems.append("the body is empty: loading the skill gives the model only its file list")
    return Skill(
        name=name,
        folder=folder,
        source=source,
        description=description,
        body=body.strip(),
        declared_name=declared.strip() if isinstance(declared, str) else None,
        license=_optional_text("license", data, problems),
        compatibility=compatibility,
        metadata=metadata,
        allowed_tools=allowed,
        model_invocable=data.get("disable-model-invocation") is not True,
        problems=tuple(problems),
    )


def _folder_name_problem(name: str) -> str | None:
    if problem := skill_name_problem(name):
        return problem
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "the folder's name is not UTF-8; rename it (lowercase letters, digits and hyphens)"
    return None


def _confine(path: Path, root: Path) -> None:
    """``ConfigError`` unless ``path``'s real location is inside ``root``'s."""
    try:
        real = path.resolve(strict=True)
        inside = real.is_relative_to(root.resolve(strict=True))
    except (OSError, RuntimeError) as exc:
        raise ConfigError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not inside:
        raise ConfigError(
            f"{path} leads outside its skill folder {root} (to {real}); skills are read only "
            "from inside the skill folders"
        )


def _own(message: str, name: str) -> str:
    """A ``read_skill_file`` message without its ``skill 'name': `` prefix (the listing names it)."""
    return message.removeprefix(f"skill {name!r}: ")


def _text(value: Any) -> str:
    """A frontmatter value as one clean line: YAML may give a number, and a description must
    not forge headings or instructions in the prompt with newlines or control characters."""
    if value is None or isinstance(value, dict | list):
        return ""
    return _SPACES.sub(" ", "".join(c if c.isprintable() else " " for c in str(value))).strip()


def _optional_text(key: str, data: dict[str, Any], problems: list[str]) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, dict | list):
        problems.append(f"{key} should be a string; ignored")
        return None
    return _text(value) or None


def _metadata(value: Any, problems: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append("metadata should map keys to strings; ignored")
        return {}
    if not all(isinstance(v, str) for v in value.values()):
        problems.append("metadata should map keys to strings; other values are kept as text")
    return {str(k): _text(v) for k, v in value.items()}


def _tool_list(value: Any, problems: list[str]) -> tuple[str, ...]:
    """``allowed-tools`` as a tuple: a space-delimited string as the spec writes it (commas,
    as Claude Code's skills often have, also split), spaces inside ``Bash(git add:*)`` kept."""
    if value is None:
        return ()
    if isinstance(value, list):
        return tuple(t for item in value if (t := _text(item)))
    if isinstance(value, dict):
        problems.append("allowed-tools should be a space-delimited string; ignored")
        return ()
    tools, depth, current = [], 0, ""
    for char in str(value):
        depth += (char == "(") - (char == ")" and depth > 0)
        if depth == 0 and (char.isspace() or char == ","):
            tools.append(current)
            current = ""
        else:
            current += char
    return tuple(t for t in (*tools, current) if t)


@dataclass(frozen=True)
class _Found:
    """A ``SKILL.md`` as last read: what ``stat`` said of it, and the skill."""

    key: tuple[int, int, int, int]
    skill: Skill


class SkillCatalog:
    """The skills of the skill folders under ``workdir`` and (with a ``home``) under ``home``.

    ``skills()`` is every skill found, in order (shadowed and refused ones included);
    ``offered()`` those the model is offered; ``get(name)`` the one that name finds.
    ``refresh()`` re-reads what changed on disk (see the module docstring); the first use
    does it by itself. Safe to refresh from a worker thread while the loop reads."""

    def __init__(self, workdir: Path, *, home: Path | None = None) -> None:
        self.workdir = workdir
        self.home = home
        self.folders: list[tuple[SkillSource, Path]] = [(source, path) for source, path, listed in self._places() if listed]
        """The skill folders the catalog lists, first wins."""
        self.version = 0
        """Grows whenever the skills found change."""
        self.notes: list[str] = []
        """Problems of the folders themselves (unreadable, too many skills)."""
        self._found: dict[Path, _Found] = {}
        self._skills: tuple[Skill, ...] = ()
        self._scanned = False
        self._section: tuple[int, int, str] | None = None  # (version, budget, text)
        self._lock = threading.Lock()
        self._watch = ReadWatch()  # on every folder the last refresh listed

    def refresh(self) -> int:
        """Re-read the skills that changed on disk; return ``version``."""
        with self._lock:
            notes: list[str] = []
            found: dict[Path, _Found] = {}
            skills: list[Skill] = []
            winners: dict[str, Path] = {}
            # each skill folder, and the way down to it (where it or the one holding it is made)
            missing = self._watch.reading(root for _s, root in self.folders)
            trusted = not any(root.parent.parent in missing for _s, root in self.folders)
            for source, root in self.folders:
                for folder, key in self._candidates(root, notes):
                    trusted = trusted and not linked(folder / "SKILL.md")
                    known = self._found.get(folder)
                    if known is None or known.key != key:
                        known = _Found(key, parse_skill(folder, source, root=root))
                        _log(known.skill)
                    found[folder] = known
                    skill = known.skill
                    if skill.name in winners:
                        skill = replace(skill, shadowed_by=winners[skill.name])
                    else:
                        winners[skill.name] = skill.folder
                    skills.append(skill)
            if tuple(skills) != self._skills or notes != self.notes or not self._scanned:
                self._skills = tuple(skills)
                self.notes = notes
                self.version += 1
            self._found = found
            self._scanned = True
            self._watch.read(trusted=trusted)
            return self.version

    def unchanged(self) -> bool:
        """Whether ``refresh`` would find nothing new, known without the file system (see
        the module docstring); false when it cannot be known. Never blocks."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._scanned and self._watch.unchanged()
        finally:
            self._lock.release()

    def close(self) -> None:
        """End the watch on the skill folders (``unchanged`` is then always false)."""
        with self._lock:
            self._watch.close()

    def _candidates(self, root: Path, notes: list[str]) -> Iterator[tuple[Path, tuple[int, int, int, int]]]:
        """The folders under ``root`` holding a ``SKILL.md`` (names sorted, at most
        ``SKILLS_MAX_PER_FOLDER``), each with the ``stat`` key of its ``SKILL.md``. Every
        folder listed is watched before its ``SKILL.md`` is looked at (one may be made
        in a folder that has none yet)."""
        try:
            with os.scandir(root) as entries:
                names = sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            notes.append(f"{root}: cannot list the skill folder: {exc.strerror or exc}")
            return
        if len(names) > SKILLS_MAX_PER_FOLDER:
            notes.append(f"{root}: {len(names):,} folders; only the first {SKILLS_MAX_PER_FOLDER} (by name) are read")
            names = names[:SKILLS_MAX_PER_FOLDER]
        self._watch.reading_more(root / name for name in names)
        for name in names:
            folder = root / name
            try:
                st = os.stat(folder / "SKILL.md")
            except (OSError, ValueError):
                continue  # a folder without SKILL.md (shared scripts, say) is no skill
            yield folder, (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)

    def _current(self) -> tuple[Skill, ...]:
        if not self._scanned:
            self.refresh()
        return self._skills

    def skills(self) -> list[Skill]:
        """Every skill found, first-wins order; shadowed and refused ones included."""
        return list(self._current())

    def offered(self) -> list[Skill]:
        """The skills the model is offered (``Skill.offered``)."""
        return [s for s in self._current() if s.offered]

    def get(self, name: str) -> Skill | None:
        """The skill ``name`` finds (the first of that name), or ``None``."""
        return next((s for s in self._current() if s.name == name and s.shadowed_by is None), None)

    def preload_dirs(self) -> list[Path]:
        """The folders a preload searches (``skill.skill_dirs``, without the user's when the
        catalog has no home)."""
        return [path for _source, path, _listed in self._places()]

    def _places(self) -> Iterator[tuple[SkillSource, Path, bool]]:
        """``SKILL_FOLDERS`` under the workdir and the home folder (none there without one)."""
        for source, sub, listed in SKILL_FOLDERS:
            base = self.workdir if source == "project" else self.home
            if base is not None:
                yield source, base / sub, listed

    def shown(self, path: Path) -> str:
        """``path`` as the person knows it: relative to the workdir, ``~/…`` under the home
        folder, else in full."""
        for base, prefix in ((self.workdir, ""), (self.home, "~/")):
            if base is not None and path.is_relative_to(base):
                return prefix + path.relative_to(base).as_posix()
        return str(path)

    def prompt_section(self, max_chars: int = CATALOG_MAX_CHARS) -> str:
        """The catalog for a system prompt: one ``- name: description`` line per offered
        skill within ``max_chars``: descriptions are shortened first, then skills dropped
        with a line saying how many and how to list them. ``""`` when none is offered.
        The same skills always give the same text (no dates, no paths)."""
        if self._scanned and self._section is not None and self._section[:2] == (self.version, max_chars):
            return self._section[2]  # asked for on every LLM call: the same text until a refresh changes it
        skills = self.offered()  # a catalog never read reads itself here
        text = _catalog_text(skills, max_chars) if skills else ""
        self._section = (self.version, max_chars, text)
        return text

    def listing(self) -> str:
        """Every offered skill with its whole description: the ``skill`` tool's answer when
        called without a name."""
        skills = self.offered()
        if not skills:
            return "No skills are installed. " + self.where()
        return "\n".join(f"- {s.name}: {s.description}" for s in skills)

    def where(self) -> str:
        """Where skills are looked for, for messages."""
        return "Skills are folders <name>/SKILL.md under " + ", ".join(self.shown(p) for _s, p in self.folders) + "."


_CATALOG_HEAD = (
    "## Skills\n\n"
    "Skills are folders of instructions, scripts and references for particular tasks. When a "
    "task matches a skill's description, first load the skill with the `skill` tool "
    "(`skill(name=...)`) and follow its instructions.\n\n"
)


def _catalog_text(skills: list[Skill], max_chars: int) -> str:
    for limit in (DESCRIPTION_MAX_CHARS, CATALOG_SHORT_DESCRIPTION):
        lines = [f"- {s.name}: {_cut(s.description, limit)}" for s in skills]
        text = _CATALOG_HEAD + "\n".join(lines)
        if len(text) <= max_chars:
            return text
    kept = list(lines)
    while kept:
        more = len(lines) - len(kept)
        note = f"- … {more} more: call `skill` without a name to list them all" if more else ""
        text = _CATALOG_HEAD + "\n".join([*kept, note] if note else kept)
        if len(text) <= max_chars:
            return text
        kept.pop()
    return _CATALOG_HEAD + f"- {len(lines)} skills: call `skill` without a name to list them"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _log(skill: Skill) -> None:
    """One warning per skill read with something wrong (read again only when it changes)."""
    if skill.refused is not None:
        log.warning("skill %r (%s) is not used: %s", skill.name, skill.path, skill.refused)
    elif skill.problems:
        log.warning("skill %r (%s): %s", skill.name, skill.path, "; ".join(skill.problems))
