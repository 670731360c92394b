"""Permission rules the person writes, in Claude Code's syntax, and where they come from.

::

    Bash                    every bash command
    Bash(npm run test)      exactly that command
    Bash(git status:*)      commands that start with `git status` (then a space, or nothing)
    Bash(git * main)        `*` stands for anything
    Read(**)  Edit(docs/*.md)  Write(data/**)   a path, relative to the workdir
    WebFetch  run_python  mcp__server__tool  mcp__server__*  mcp__server   tool names

Claude Code's tool names map onto ours through the one table (``tools.names``); ``Read``
rules cover ``read_file``, ``ls``, ``glob`` and ``grep``, ``Edit`` rules ``edit_file`` and
``write_file``, ``Write`` rules ``write_file``. Paths are matched gitignore-style: a
pattern without ``/`` matches a name at any depth, ``dir/`` everything below ``dir``,
``/x`` and ``./x`` start at the workdir, ``//abs`` and ``~/x`` are absolute.

A ``Bash`` rule with a pattern is matched against each simple command of a command that
parses as plain (literal words; no substitutions, no compound syntax — see
``command.Script.plain``), so ``Bash(git status:*)`` never allows ``git status; rm -rf x``
or ``git status $(rm -rf x)``. A deny rule matches when the whole command, or any simple
command in it however nested (wrappers such as ``sudo`` and ``env`` taken off), does.

``PermissionRules`` holds the rules in force: the session's (added by "Approve for this
session"), the ones given in code or ``%config`` (``Harness(allow=…, deny=…)``), and the
settings files (``SETTINGS_FILES``, ``permissions.allow`` / ``ask`` / ``deny``). A file is
untrusted input: at most ``MAX_SETTINGS_BYTES`` are read, never from a FIFO or device; bad
JSON, a bad rule or an unexpected shape is one warning naming the file and the problem,
and the file's other rules still count. Files are re-read when they change (their
modification time, size or inode), checked with one ``stat`` each per decision — or, when
inotify saw nothing change in their folders, not at all (``PermissionRules.unchanged``).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
import os
import re
import stat
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import ConfigError, ToolCall, ToolError
from ..sandbox.watch import ReadWatch, linked
from ..tools.names import CLAUDE_TOOL_NAMES
from ..tools.search import compile_glob
from .shell.parser import parse_command

logger = logging.getLogger("harness_nb.permission")

MAX_SETTINGS_BYTES = 256 * 1024
"""Largest settings file read; a larger one is skipped with a warning."""
MATCH_SECONDS = 0.05
"""Longest a path pattern may take to match one path (a decision runs on the event loop)."""
SETTINGS_FILES = (".claude/settings.json", ".claude/settings.local.json", ".harness_nb/settings.json")
"""Settings files read from the workdir (and ``~/.claude/settings.json`` when a home is given)."""

PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "ls", "glob", "grep"})
_FAMILIES = {
    "read": frozenset({"read_file", "ls", "glob", "grep"}),
    "edit": frozenset({"edit_file", "write_file"}),
    "multiedit": frozenset({"edit_file", "write_file"}),
    "write": frozenset({"write_file"}),
}
_CLAUDE_SHOWN = {"bash": "Bash", "read_file": "Read", "write_file": "Write", "edit_file": "Edit"}
_RULE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_*-]*)\s*(?:\((?P<spec>.*)\))?$", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """One parsed rule. ``tools``: our tool names it covers (``None``: any tool whose name
    matches ``name``, a pattern for MCP names); ``spec``: what is in the parentheses;
    ``exact``: made for one call ("Approve for this session"), it matches that call only."""

    text: str
    name: str
    tools: frozenset[str] | None
    spec: str | None = None
    exact: bool = False

    def __str__(self) -> str:
        return self.text

    @property
    def bash(self) -> bool:
        return self.tools == frozenset({"bash"})

    def covers(self, tool: str) -> bool:
        """Whether the rule is about tool ``tool`` at all."""
        if self.tools is not None:
            return tool in self.tools
        if fnmatch.fnmatchcase(tool, self.name):
            return True
        # `mcp__server` stands for every tool of that server
        return self.name.startswith("mcp__") and self.name.count("__") == 1 and tool.startswith(self.name + "__")

    def matches_text(self, text: str) -> bool:
        """For a Bash rule: whether one simple command (or a whole command) matches."""
        spec = self.spec
        if spec is None or spec.strip() == "*":
            return True
        text = " ".join(text.split())
        if self.exact:
            return text == " ".join(spec.split())
        if spec.endswith(":*"):
            prefix = _decoded(spec[:-2])
            return text == prefix or text.startswith(prefix + " ")
        if "*" in spec:
            return _wildcard([re.sub(r"\s+", " ", p) for p in spec.split("*")], text)
        return text == _decoded(spec)

    def matches_path(self, workdir: Path, path: str, *, home: Path, unsure: bool = False) -> bool:
        """For a path rule: whether ``path`` (as a tool was given it) matches; ``unsure``
        is the answer when a pathological pattern takes too long (deny and ask rules fail
        closed: they match)."""
        if self.spec is None:
            return True
        root = workdir.resolve()
        target = _resolve(root, path)
        if self.exact:
            return target == _resolve(root, self.spec[1:] if self.spec.startswith("//") else self.spec)
        pattern = self.spec
        if pattern.startswith("//"):
            subject, pattern = target.as_posix(), pattern[1:]
        elif pattern.startswith("~/"):
            subject, pattern = target.as_posix(), home.as_posix().rstrip("/") + pattern[1:]
        else:
            if not target.is_relative_to(root):
                return False
            subject = target.relative_to(root).as_posix()
            pattern = pattern[2:] if pattern.startswith("./") else pattern.lstrip("/")
            if "/" not in pattern.rstrip("/"):
                pattern = "**/" + pattern
        if pattern.endswith("/"):
            pattern += "**"
        try:
            return _glob(pattern).fullmatch(subject, timeout=MATCH_SECONDS) is not None
        except TimeoutError:
            logger.warning("permission rule %s: its pattern took too long to match %r", self.text, path)
            return unsure


@functools.lru_cache(maxsize=512)
def _glob(pattern: str) -> Any:
    return compile_glob(pattern)


def _wildcard(parts: list[str], text: str) -> bool:
    """Whether ``text`` is ``parts`` joined by runs of anything (``*``), in linear time: a
    regex of ``.*`` would backtrack polynomially on a long command."""
    first, *middle, last = parts
    if not text.startswith(first) or len(text) < len(first) + len(last) or not text.endswith(last):
        return False
    at, end = len(first), len(text) - len(last)
    for part in middle:
        found = text.find(part, at, end)
        if found == -1:
            return False
        at = found + len(part)
    return True


def _decoded(spec: str) -> str:
    """A command as written in a rule, with quotes removed as bash would (when it is one
    plain simple command), so ``Bash(git commit -m "x")`` matches what the parser reads."""
    script = parse_command(spec)
    commands = list(script.commands())
    if script.plain and len(commands) == 1 and not commands[0].redirects:
        return commands[0].text()
    return " ".join(spec.split())


def _resolve(root: Path, path: str) -> Path:
    p = Path(os.path.expanduser(path))
    p = p if p.is_absolute() else root / p
    try:
        return p.resolve(strict=False)
    except (OSError, RuntimeError, ValueError):
        return Path(os.path.normpath(p))


def parse_rule(text: Any) -> Rule:
    """Parse one rule; ``ConfigError`` names what is wrong with it."""
    if not isinstance(text, str):
        raise ConfigError(f"a permission rule is text like 'Bash(git status:*)', not {type(text).__name__}")
    m = _RULE.match(text.strip())
    if m is None:
        raise ConfigError(
            f"{text!r} is not a permission rule: write a tool name, optionally with a pattern in "
            "parentheses, e.g. 'Bash(git status:*)', 'Write(data/**)', 'WebFetch', 'mcp__server__tool'"
        )
    name, spec = m.group("name"), m.group("spec")
    if spec is not None and not spec.strip():
        raise ConfigError(f"{text!r}: the parentheses are empty; leave them out to match every call of {name}")
    key = name.lower()
    tools: frozenset[str] | None
    if key in _FAMILIES:
        tools = _FAMILIES[key]
    elif key in CLAUDE_TOOL_NAMES:
        tools = frozenset({CLAUDE_TOOL_NAMES[key]})
    elif "*" in name or name.startswith("mcp__"):
        tools = None
    else:
        tools = frozenset({name})
    if spec is not None:
        takes_pattern = tools is not None and (tools == {"bash"} or tools <= PATH_TOOLS)
        if not takes_pattern and (name.islower() or name.startswith("mcp__") or tools is None):
            # A tool of ours (or an MCP tool) that has no pattern form. Claude Code's own
            # tools that harness_nb lacks (`WebFetch(domain:…)`) are kept: they match nothing.
            raise ConfigError(
                f"{text!r}: only Bash and the file tools (Read, Edit, Write) take a pattern in "
                f"parentheses; write {name} alone to match every call of it"
            )
        if tools is not None and tools <= PATH_TOOLS:
            try:
                compile_glob(spec.lstrip("/"))
            except ToolError as exc:
                raise ConfigError(f"{text!r}: {exc}") from None
    return Rule(text.strip(), name, tools, spec)


def session_rule(call: ToolCall) -> Rule | None:
    """The rule "Approve for this session" adds for ``call``: that exact command or path,
    or the tool's name for tools without a pattern form (``None``: arguments unreadable)."""
    try:
        args = call.parsed_arguments()
    except ValueError:
        return None
    if call.name == "bash":
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return None
        return Rule(f"Bash({command.strip()})", "Bash", frozenset({"bash"}), command.strip(), exact=True)
    if call.name in PATH_TOOLS and isinstance(args.get("path"), str):
        path = args["path"]
        path = path[2:] if path.startswith("./") else path
        shown = "/" + path if path.startswith("/") else path
        name = _CLAUDE_SHOWN.get(call.name, call.name)
        return Rule(f"{name}({shown})", name, frozenset({call.name}), shown, exact=True)
    return Rule(call.name, call.name, frozenset({call.name}))


@dataclass(frozen=True)
class Sourced:
    """A rule and where it came from (``origin``, shown in messages). ``trusted``: given
    by the person directly (the session's button, code, ``%config``), not read from a file
    the agent or a cloned repository could have written."""

    rule: Rule
    origin: str
    trusted: bool


@dataclass(frozen=True)
class RuleSet:
    """The rules in force, by kind."""

    allow: tuple[Sourced, ...] = ()
    ask: tuple[Sourced, ...] = ()
    deny: tuple[Sourced, ...] = ()


def parse_rules(rules: Iterable[Any], what: str) -> list[Rule]:
    """Parse every rule of a list (``ConfigError`` for the first bad one, naming ``what``)."""
    if isinstance(rules, str):
        raise ConfigError(f"{what} is a list of rules, e.g. ['Bash(git status:*)'], not one string")
    out = []
    for text in rules:
        try:
            out.append(parse_rule(text))
        except ConfigError as exc:
            raise ConfigError(f"{what}: {exc}") from None
    return out


class PermissionRules:
    """The rules in force for one harness (see the module doc for their sources).

    ``current`` re-states the settings files (a ``stat`` each, on a worker thread);
    ``unchanged`` answers without the file system, from inotify watches on their folders
    (``sandbox.watch``), when nothing can have changed since: then a decision that needs no
    other file can be made on the event loop. ``close`` ends the watch."""

    def __init__(
        self,
        workdir: Path,
        *,
        home: Path | None = None,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        origin: str = "Harness(allow=…, deny=…)",
    ) -> None:
        self.workdir = Path(workdir)
        self.home = home
        self.origin = origin
        self.session: list[Rule] = []
        self.warnings: list[str] = []
        self._allow = parse_rules(allow, "allow")
        self._deny = parse_rules(deny, "deny")
        self._files: dict[Path, tuple[tuple[int, int, int], RuleSet, list[str]]] = {}
        self._from_files: tuple[RuleSet, ...] = ()  # what ``current`` last read, file by file
        self._rules: RuleSet | None = None  # those with the session's and the code's, until one changes
        self._lock = threading.Lock()  # decisions run on worker threads, several at once
        self._watch = ReadWatch()  # on the files' folders: whether ``current`` need run again

    def configure(self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None) -> None:
        """Replace the rules given in code or ``%config`` (both checked before either changes)."""
        new_allow = parse_rules(allow, "allow") if allow is not None else self._allow
        new_deny = parse_rules(deny, "deny") if deny is not None else self._deny
        with self._lock:
            self._allow, self._deny = new_allow, new_deny
            self._rules = None

    def remember(self, rule: Rule) -> None:
        """Allow ``rule`` for the rest of this harness's life ("Approve for this session")."""
        with self._lock:
            if rule in self.session:
                return
            self.session.append(rule)
            self._rules = None
        logger.info("approved for this session: %s", rule)

    def files(self) -> list[tuple[Path, str]]:
        """The settings files, each with the name messages use for it."""
        found = []
        if self.home is not None:
            found.append((self.home / ".claude" / "settings.json", "~/.claude/settings.json"))
        found.extend((self.workdir / name, name) for name in SETTINGS_FILES)
        return found

    def current(self) -> RuleSet:
        """Every rule in force now (settings files re-read if they changed). Blocking: a
        ``stat`` per file, and a bounded read of a file that changed."""
        with self._lock:
            files = self.files()
            # the way down to each file (its folder, where the file is written, and the one
            # above, where that folder is made or removed), watched before the files are read
            missing = self._watch.reading(files=(path for path, _shown in files))
            # a missing folder is seen being made from the one above it; the top one must be there
            trusted = not any(linked(path) or path.parent.parent in missing for path, _shown in files)
            from_files: list[RuleSet] = []
            warnings: list[str] = []
            for path, shown in self.files():
                rules, problems = self._file(path, shown)
                from_files.append(rules)
                warnings += problems
            self._from_files = tuple(from_files)
            self._rules = None
            self.warnings = warnings
            self._watch.read(trusted=trusted)
            return self._composed()

    def unchanged(self) -> RuleSet | None:
        """The rules in force, without the file system: the settings files as ``current``
        last read them, when no event has come from their folders since and none of them
        is a link whose change a folder's watch could miss. ``None`` when that cannot be
        known (something changed, no inotify, ``current`` under way on another thread):
        call ``current``. Never blocks."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._composed() if self._watch.unchanged() else None
        finally:
            self._lock.release()

    def close(self) -> None:
        """End the watch on the settings files' folders (``unchanged`` then says ``None``)."""
        with self._lock:
            self._watch.close()

    def _composed(self) -> RuleSet:
        if self._rules is not None:
            return self._rules
        allow = [Sourced(r, "this session", True) for r in self.session]
        allow += [Sourced(r, self.origin, True) for r in self._allow]
        deny = [Sourced(r, self.origin, True) for r in self._deny]
        ask: list[Sourced] = []
        for rules in self._from_files:
            allow += rules.allow
            ask += rules.ask
            deny += rules.deny
        self._rules = RuleSet(tuple(allow), tuple(ask), tuple(deny))
        return self._rules

    def _file(self, path: Path, shown: str) -> tuple[RuleSet, list[str]]:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._files.pop(path, None)
            return RuleSet(), []
        except OSError as exc:
            return RuleSet(), [f"{shown}: cannot read it ({exc.strerror or exc}); its rules are not used"]
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._files.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1], cached[2]
        rules, warnings = read_settings(path, shown, st)
        for warning in warnings:
            logger.warning("%s", warning)
        if rules.allow or rules.ask or rules.deny:
            logger.info("%s: %d allow, %d ask, %d deny rules", shown, len(rules.allow), len(rules.ask), len(rules.deny))
        self._files[path] = (signature, rules, warnings)
        return rules, warnings


def read_settings(path: Path, shown: str, st: os.stat_result | None = None) -> tuple[RuleSet, list[str]]:
    """The rules of one settings file and a warning per problem (see the module doc)."""
    try:
        st = st or os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return RuleSet(), [f"{shown}: not a regular file; its rules are not used"]
        if st.st_size > MAX_SETTINGS_BYTES:
            return RuleSet(), [f"{shown}: larger than {MAX_SETTINGS_BYTES // 1024} KiB; its rules are not used"]
        # O_NONBLOCK: a FIFO swapped in after the stat cannot hang the read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return RuleSet(), [f"{shown}: not a regular file; its rules are not used"]
            data = fh.read(MAX_SETTINGS_BYTES + 1)
    except OSError as exc:
        return RuleSet(), [f"{shown}: cannot read it ({exc.strerror or exc}); its rules are not used"]
    if len(data) > MAX_SETTINGS_BYTES:
        return RuleSet(), [f"{shown}: larger than {MAX_SETTINGS_BYTES // 1024} KiB; its rules are not used"]
    try:
        settings = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return RuleSet(), [f"{shown}: not UTF-8 text; its rules are not used"]
    except json.JSONDecodeError as exc:
        return RuleSet(), [f"{shown}: not valid JSON ({exc.msg} at line {exc.lineno}); its rules are not used"]
    except (RecursionError, ValueError) as exc:
        return RuleSet(), [f"{shown}: cannot be read as JSON ({type(exc).__name__}); its rules are not used"]
    if not isinstance(settings, dict):
        return RuleSet(), [f"{shown}: not a JSON object; its rules are not used"]
    permissions = settings.get("permissions")
    if permissions is None:
        return RuleSet(), []
    if not isinstance(permissions, dict):
        return RuleSet(), [f'{shown}: "permissions" is not an object; its rules are not used']
    warnings: list[str] = []
    kinds: dict[str, list[Sourced]] = {"allow": [], "ask": [], "deny": []}
    for kind, found in kinds.items():
        entries = permissions.get(kind, [])
        if not isinstance(entries, list):
            warnings.append(f'{shown}: "permissions.{kind}" is not a list; skipped')
            continue
        for entry in entries:
            try:
                found.append(Sourced(parse_rule(entry), shown, False))
            except ConfigError as exc:
                warnings.append(f"{shown}: permissions.{kind}: {exc}; skipped")
    return RuleSet(tuple(kinds["allow"]), tuple(kinds["ask"]), tuple(kinds["deny"])), warnings


def first_match(
    rules: Iterable[Sourced],
    call: ToolCall,
    args: Mapping[str, Any],
    *,
    workdir: Path,
    home: Path,
    unsure: bool = False,
) -> Sourced | None:
    """The first rule that matches ``call`` (a Bash rule: the whole command; the permission
    hook looks inside commands itself). ``unsure``: whether a path pattern that takes too
    long counts as matching."""
    for sourced in rules:
        rule = sourced.rule
        if not rule.covers(call.name):
            continue
        if rule.spec is None:
            return sourced
        if call.name == "bash":
            command = args.get("command")
            if isinstance(command, str) and rule.matches_text(command):
                return sourced
        elif call.name in PATH_TOOLS and isinstance(args.get("path", "."), str):
            if rule.matches_path(workdir, args.get("path", "."), home=home, unsure=unsure):
                return sourced
    return None
