"""Read subagent definitions from Markdown files with YAML frontmatter.

An agent file looks like Claude Code's::

    ---
    name: code-reviewer
    description: Reviews notebook code for bugs. Use after writing analysis code.
    tools: Read, Grep, Glob
    ---
    You are a careful reviewer ...

The frontmatter is parsed with a real YAML parser. Popular agent collections also hold
descriptions with an unquoted ``: `` inside, which YAML rejects but Claude Code loads, so
on a YAML error a line-based reader (``_lenient_mapping``) gets a second try and the file
loads with a warning saying so.

Agent files are untrusted data (they arrive with cloned repositories, and the model can
write one), so reading is bounded: files over 1 MiB are skipped, frontmatter over 64 KiB,
YAML aliases and deep nesting are refused before anything expands (``core/frontmatter.py``),
a skill name that is a path (``skills: [../../etc/passwd]``) is dropped with a warning and
never read, and at most ``MAX_FILES`` files are read from one folder.

Every field of a Claude Code agent file is accounted for (``definition.CLAUDE_FIELDS``): a
field harness_nb acts on is read into the definition; ``hooks``, ``isolation`` and
``initialPrompt`` are kept there too and named in the file's note as not supported here;
``Task``/``Agent`` in ``tools`` are dropped with a note (subagents never delegate); a value
a field cannot take (``permissionMode: plann``) is dropped with a note. A key that is no
field but close to one (``disalowedTools``, ``maxturns``) stays in ``extra`` with a
did-you-mean warning; one spelt another way than Claude Code spells it
(``permission-mode``) is read, with a warning that Claude Code would not read it.

Nothing here raises for a bad file: each file that is skipped, or only partly understood,
gives exactly one warning string naming the file and the reason, and loading goes on —
even when the parser itself fails (RecursionError, MemoryError, anything): one bad file
never stops the others, nor ``Harness()`` or ``%load_ext harness_nb``.
Reads are synchronous on purpose: this runs once at start-up over a few small files.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core import NotRegularFileError, read_regular
from ..core.frontmatter import FrontmatterError, load_frontmatter
from ..skills.skill import skill_name_problem
from .definition import (
    CAMEL_NAMES,
    EFFORTS,
    MEMORY_SCOPES,
    NAME_RULE,
    SubAgentDefinition,
    canonical_key,
    normalize_choice,
    normalize_model,
    normalize_permission_mode,
    normalize_tool_names,
    split_names,
)

MAX_FILE_BYTES = 1024 * 1024
MAX_FILES = 1000
"""Most agent files read from one folder (a collection of agents has a few dozen)."""
# Every warning for a file that was not loaded reads "<file>: skipped: <reason>".
SKIPPED = ": skipped: "
# A skill name that is a path, in a file that loaded: worth a warning too.
DROPPED_SKILL = "skills: dropped: "
# A misspelt field, or one Claude Code would not read: a warning as well.
DID_YOU_MEAN = "did you mean"
NOT_CLAUDE_SPELLING = "Claude Code reads only"
NOT_SUPPORTED_NOTE = "kept but not supported here: "

_TOOL_FIELDS = ("tools", "disallowed_tools")
_LIST_FIELDS = frozenset({"tools", "disallowed_tools", "skills"})
_FIELD_KEYS = frozenset(SubAgentDefinition.model_fields) - {"source", "extra", "delegation"}
# Extra keys seen in real agent collections; the lenient reader only starts a new key at
# a known name, so that "user: ..." lines inside an <example> stay part of the description.
_COMMON_EXTRA_KEYS = frozenset({"category", "version", "tags", "author"})
_SQUASHED = {canon.replace("_", ""): canon for canon in _FIELD_KEYS}
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*))?$")


@dataclass
class LoadResult:
    """Definitions read, in file order, and one readable warning per troublesome file."""

    definitions: list[SubAgentDefinition] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: LoadResult) -> None:
        """Append another result's definitions and warnings to this one."""
        self.definitions.extend(other.definitions)
        self.warnings.extend(other.warnings)


class _Skip(Exception):
    """This file is not a usable definition; the message says why."""


def load_agent_dir(path: Path, *, label: str | None = None) -> LoadResult:
    """Load every ``*.md`` file under ``path`` (subfolders too), in sorted path order.

    A missing folder gives an empty result and no warning. Hidden files and folders
    (``.git``, ``.DS_Store``) are ignored. ``label`` replaces ``path`` at the start of each
    warning so messages read ``agents/bad.md: ...`` rather than an absolute path.
    """
    result = LoadResult()
    shown = label if label is not None else str(path)
    if not path.exists():
        return result
    if not path.is_dir():
        result.warnings.append(f"{shown}{SKIPPED}not a folder")
        return result
    files = agent_files(path)
    if len(files) > MAX_FILES:
        result.warnings.append(
            f"{shown}: {len(files)} agent files; only the first {MAX_FILES} (by path) are read"
        )
        files = files[:MAX_FILES]
    for file in files:
        relative = file.relative_to(path)
        result.extend(load_agent_file(file, label=f"{shown}/{relative.as_posix()}"))
    return result


def agent_files(path: Path) -> list[Path]:
    """The ``*.md`` files under ``path``, hidden ones left out, in sorted path order.
    Symlinked folders are not entered (no loops); unreadable entries are left out."""
    try:
        found = [
            p for p in path.rglob("*.md") if not _hidden(p.relative_to(path)) and not p.is_dir()
        ]
    except OSError:  # the folder vanished or cannot be read while being walked
        return []
    return sorted(found, key=lambda p: p.relative_to(path).parts)


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def load_agent_file(path: Path, *, label: str | None = None) -> LoadResult:
    """Load one agent file: one definition, or none and one warning saying why."""
    shown = label if label is not None else str(path)
    try:
        # Only a regular file is opened (a named pipe would block), and never more than
        # the cap is read, whatever the size said a moment ago.
        size = path.stat().st_size
        data = read_regular(path, MAX_FILE_BYTES)
        if len(data) > MAX_FILE_BYTES:
            size = max(size, len(data))
            raise _Skip(f"file is {size:,} bytes; agent files are limited to 1 MiB")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise _Skip(f"not UTF-8 text (bad byte at offset {exc.start})") from exc
    except NotRegularFileError as exc:
        return LoadResult(warnings=[f"{shown}{SKIPPED}a {exc.kind}, not a file"])
    except OSError as exc:
        return LoadResult(warnings=[f"{shown}{SKIPPED}cannot read: {exc.strerror or exc}"])
    except _Skip as exc:
        return LoadResult(warnings=[f"{shown}{SKIPPED}{exc}"])
    return parse_agent_text(text, source=str(path), label=shown)


def parse_agent_text(text: str, *, source: str, label: str | None = None) -> LoadResult:
    """Parse the text of an agent file. ``source`` is recorded on the definition."""
    shown = label if label is not None else source
    notes: list[str] = []
    try:
        definition = _parse(text, source, notes)
    except _Skip as exc:
        return LoadResult(warnings=[f"{shown}{SKIPPED}{exc}"])
    except Exception as exc:
        # One file, whatever broke, must not stop the rest: RecursionError, MemoryError, a
        # number too long to convert. The bounds make these unlikely; this makes them one
        # warning.
        problem = f"{type(exc).__name__}: {exc}"[:200]
        return LoadResult(
            warnings=[f"{shown}{SKIPPED}could not be parsed ({problem}); fix or remove the file"]
        )
    warnings = [f"{shown}: " + "; ".join(notes)] if notes else []
    return LoadResult(definitions=[definition], warnings=warnings)


def _parse(text: str, source: str, notes: list[str]) -> SubAgentDefinition:
    front, body, first_line = _split_frontmatter(text)
    raw = _read_mapping(front, first_line, notes)

    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        canon = canonical_key(str(key))
        if canon in _FIELD_KEYS:
            fields[canon] = value
            if str(key) not in (canon, CAMEL_NAMES.get(canon)):
                camel = CAMEL_NAMES.get(canon, canon)
                notes.append(f"{key} read as {camel} ({NOT_CLAUDE_SPELLING} {camel}: write it so)")
        else:
            extra[str(key)] = value

    if not _text(fields.get("name")):
        raise _Skip(f"no name in the frontmatter (add one, e.g. 'name: my-agent': {NAME_RULE})")
    if not _text(fields.get("description")):
        raise _Skip(
            "no description in the frontmatter (the main agent reads it to decide "
            "when to delegate)"
        )

    for key in _TOOL_FIELDS:
        if key in fields and not _blank(fields[key]):
            fields[key] = _tool_list(key, fields[key], notes, fields)
    if "skills" in fields:
        fields["skills"] = _skill_list(fields["skills"], notes)
    if "model" in fields:
        fields["model"], note = normalize_model(fields["model"])
        if note:
            notes.append(note)
    if "permission_mode" in fields:
        fields["permission_mode"], note = normalize_permission_mode(fields["permission_mode"])
        if note:
            notes.append(note)
    for key, choices in (("memory", MEMORY_SCOPES), ("effort", EFFORTS)):
        if key in fields:
            fields[key], note = normalize_choice(key, fields[key], choices)
            if note:
                notes.append(note)
    # A prompt in the frontmatter and one in the body are both kept, frontmatter first.
    prompt_parts = [_text(fields.pop("system_prompt", None)), body.strip()]
    fields["system_prompt"] = "\n\n".join(p for p in prompt_parts if p)

    unknown = sorted(extra)
    for key in unknown:
        close = _close_field(key)
        if close is not None:
            notes.append(f"unknown key {key!r} kept in extra ({DID_YOU_MEAN} {close}?)")
    plain = [k for k in unknown if _close_field(k) is None]
    if plain:
        notes.append("unknown keys kept in extra: " + ", ".join(plain))
    try:
        defn = SubAgentDefinition.model_validate({**fields, "extra": extra, "source": source})
    except ValidationError as exc:
        raise _Skip(_describe(exc)) from exc
    if defn.unsupported():
        notes.append(NOT_SUPPORTED_NOTE + ", ".join(defn.unsupported()))
    return defn


def _close_field(key: str) -> str | None:
    """The field (Claude Code's spelling) that ``key`` is a misspelling of, if any."""
    squashed = canonical_key(key).replace("_", "")
    close = difflib.get_close_matches(squashed, _SQUASHED, n=1, cutoff=0.8)
    if not close:
        return None
    canon = _SQUASHED[close[0]]
    return CAMEL_NAMES.get(canon, canon)


def _split_frontmatter(text: str) -> tuple[str, str, int]:
    """Return (frontmatter, body, 1-based file line of the first frontmatter line)."""
    if not text.strip():
        raise _Skip("empty file")
    # A BOM can survive when the text did not come through load_agent_file.
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if lines[start].rstrip() != "---":
        raise _Skip("no frontmatter (an agent file starts with a '---' line)")
    for end in range(start + 1, len(lines)):
        if lines[end].rstrip() == "---":
            front = "\n".join(lines[start + 1 : end])
            return front, "\n".join(lines[end + 1 :]), start + 2
    raise _Skip(f"frontmatter opened at line {start + 1} is never closed with '---'")


def _read_mapping(front: str, first_line: int, notes: list[str]) -> dict[Any, Any]:
    import yaml  # loaded by load_frontmatter anyway; not at import

    try:
        loaded = load_frontmatter(front, first_line=first_line)
    except FrontmatterError as exc:
        raise _Skip(str(exc)) from None
    except yaml.YAMLError as exc:
        where = _yaml_error_line(exc, first_line)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        lenient = _lenient_mapping(front)
        if lenient is None:
            raise _Skip(f"invalid YAML{where}: {problem}") from exc
        notes.append(
            f"loaded leniently: invalid YAML{where}: {problem} "
            "(quote the value, e.g. description: \"...\", to make it valid YAML)"
        )
        return lenient
    if loaded is None:
        raise _Skip("frontmatter is empty (expected name and description)")
    if not isinstance(loaded, dict):
        kind = "a list" if isinstance(loaded, list) else f"a {type(loaded).__name__}"
        raise _Skip(f"frontmatter is {kind}, not a mapping of keys (name: ..., description: ...)")
    return loaded


def _yaml_error_line(exc: Any, first_line: int) -> str:
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return ""
    return f" at line {first_line + mark.line}"


def _lenient_mapping(front: str) -> dict[str, Any] | None:
    """Read ``key: value`` lines the way Claude Code tolerates; None if no name+description.

    A line starts a new key only at column 0 and only for a known key not seen yet; every
    other line continues the previous value. This keeps ``Context: ...`` or ``user: ...``
    lines of an unquoted multi-line description inside that description.
    """
    values: dict[str, list[str]] = {}
    keys: dict[str, str] = {}
    current: str | None = None
    for line in front.split("\n"):
        match = _KEY_LINE.match(line)
        if match:
            canon = canonical_key(match.group(1))
            if (canon in _FIELD_KEYS or canon in _COMMON_EXTRA_KEYS) and canon not in keys:
                current = canon
                keys[canon] = match.group(1)
                values[canon] = [match.group(2) or ""]
                continue
        if current is not None:
            values[current].append(line)
    parsed = {canon: _lenient_value(canon, lines) for canon, lines in values.items()}
    if not _text(parsed.get("name")) or not _text(parsed.get("description")):
        return None
    return {keys[canon]: value for canon, value in parsed.items()}


def _lenient_value(canon: str, lines: list[str]) -> Any:
    head, rest = lines[0].strip(), lines[1:]
    if canon in _LIST_FIELDS:
        # "- Read" item lines, or a comma string / flow list, possibly over several lines.
        dashed = [ln.strip()[1:] for ln in rest if ln.strip().startswith("-")]
        joined = ",".join(dashed) if not head and dashed else " ".join([head, *rest]).strip()
        flow = joined.startswith("[") and joined.endswith("]")
        items = [_unquote(item) for item in split_names(joined[1:-1] if flow else joined)]
        # As in YAML: "tools:" with nothing after it is null (inherit), "tools: []" a list.
        return items if items or flow else None
    if head in {"|", "|-", "|+", ">", ">-", ">+"}:
        return textwrap.dedent("\n".join(rest)).strip()
    text = "\n".join([head, *rest]).strip()
    if text.startswith("'"):
        return _unquote(text)  # single quotes have no escapes
    # Collections that trip YAML write "Examples:\n\n<example>..." unquoted and mean
    # newlines, as in a double-quoted string; a literal backslash-n is never intended.
    return _unquote(text).replace("\\n", "\n").replace("\\t", "\t")


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('\\"', '"')
    return text


def _tool_list(key: str, raw: Any, notes: list[str], fields: dict[str, Any]) -> list[str]:
    result = normalize_tool_names(raw)
    if result.delegation and key == "tools":
        fields["delegation"] = result.delegation
        notes.append(f"tools: {', '.join(result.delegation)} dropped: subagents never delegate here")
    # An unknown name in disallowed_tools blocks a tool we do not have: nothing to say.
    if result.dropped and key == "tools":
        note = f"tools: dropped names harness_nb has no tool for: {', '.join(result.dropped)}"
        if not result.names:
            # Say so loudly: an emptied allowlist means no tools, never "inherit all".
            note += " (no listed tool is left, so this agent gets no tools)"
        notes.append(note)
    elif key == "tools" and not result.names:
        what = "no other tool is listed" if result.delegation else "tools is an empty list"
        notes.append(f"{what}, so this agent gets no tools (omit it to inherit)")
    if result.patterns:
        effect = "allows" if key == "tools" else "blocks"
        notes.append(
            f"{key}: {', '.join(result.patterns)} {effect} the whole tool "
            "(harness_nb does not enforce tool patterns)"
        )
    return result.names


def _skill_list(raw: Any, notes: list[str]) -> list[str]:
    """The skill names that are plain names; every other one is dropped with a note, so
    that a path such as ``../../etc/passwd`` is never joined onto a skill folder."""
    kept: list[str] = []
    for name in split_names(raw):
        problem = skill_name_problem(name)
        if problem:
            notes.append(f"{DROPPED_SKILL}{problem}; it is never read")
        else:
            kept.append(name)
    return kept


def _describe(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "frontmatter"
    message = str(error["msg"]).removeprefix("Value error, ")
    return message if message.startswith(f"{where} ") else f"{where}: {message}"


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ("" if value is None else str(value))


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())
