"""What a shell command may do, for approvals: ``assess(command, place)``.

Two questions, answered from ``command.parse_command``:

- **Is it known to be read-only?** Only a plain script (``Script.plain``: literal words, no
  substitutions, no compound syntax) whose every simple command is on the allow-list
  (``read_only``) with file operands inside the workdir, run by a program from outside the
  workdir, with redirections that write nowhere but ``/dev/null`` or a new file in the
  workdir; and, outside the sandbox, a ``git`` whose repository configures no program
  git would run (``git_config``).
- **Which harm can be named?** Every simple command, nested ones included, is looked at
  for the reasons an approval card shows (``RECURSIVE_DELETE`` "recursive or forced
  delete", ``WRITES_OUTSIDE``, ``DOWNLOADS_AND_RUNS``, ``ROOT``, …). Each reason says
  whether the sandbox contains it (``Reason.contained``): under bubblewrap nothing a
  command does can leave the workdir or the machine, so there only the reasons that
  destroy data in the workdir still ask (agent and settings files and git's hooks and
  config, which would run later outside it, the sandbox itself keeps read-only).

The allow-list is exact; the reasons are a best effort. Outside the sandbox a command that
is not known to be read-only asks whether or not a reason could be named ("not a known
read-only command"). Inside it, the destruction check sees what the command says in shell:
a program that deletes files (``python clean.py``) is not seen — the sandbox keeps it in
the workdir, and the person's version control is the way back.

File system look-ups are a few ``stat`` calls per command (does a target exist, where does
a program on ``PATH`` live, what does a glob match — at most ``GLOB_LIMIT`` names).
"""

from __future__ import annotations

import glob as globbing
import itertools
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...sandbox import Protection, protection
from ...sandbox.protected import places_around
from .git_config import repository_program
from .parser import Command, Pipeline, Script, Word, parse_command
from .read_only import BUILTINS, NOT_READ_ONLY, read_only_problem, split_options

GLOB_LIMIT = 200
"""Most file names a glob in a read-only command may match (more: the command asks)."""


@dataclass(frozen=True)
class Reason:
    """Why a command asks: ``text`` goes on the approval card; ``contained`` reasons do not
    ask when the command runs in the sandbox; ``protects`` reasons name a write to a path
    only the person may change (``sandbox.protection``), which no rule from a file allows."""

    text: str
    risk: str = "high"
    contained: bool = False
    protects: bool = False


# Destroy data in the workdir: ask, sandbox or not.
RECURSIVE_DELETE = Reason("recursive or forced delete")
FIND_DELETE = Reason("recursive delete")
DELETES = Reason("deletes files")
TRUNCATES = Reason("truncates or overwrites a file")
SHREDS = Reason("destroys file contents")
DISCARDS = Reason("discards local changes")
MASS_CHANGE = Reason("changes many files at once")
MOVES_OUT = Reason("moves files out of the workdir")
GIT_RUNS = Reason("sets a git option that runs programs")
FORCE_PUSH = Reason("rewrites git history")
FORK_BOMB = Reason("fork bomb")
# Contained by the sandbox: ask only outside it. The sandbox mounts the agent, skill and
# settings folders and git's hooks and config read-only (sandbox/bubblewrap.py), so a command
# there cannot plant what runs later outside it.
PROTECTED = Reason("writes an agent, skill or settings file", contained=True, protects=True)
GIT_INTERNALS = Reason("writes git's own files (its hooks and config run programs)", contained=True, protects=True)
WRITES_OUTSIDE = Reason("writes outside the workdir", contained=True)
DEVICE = Reason("writes to a device", contained=True)
DOWNLOADS_AND_RUNS = Reason("downloads and runs code", contained=True)
ROOT = Reason("runs as root", contained=True)
KILLS = Reason("kills processes", contained=True)
SYSTEM = Reason("changes the system", contained=True)
PERMISSIONS = Reason("changes permissions", "medium", contained=True)
HISTORY = Reason("rewrites git history", "medium", contained=True)  # local: the reflog keeps it
PACKAGES = Reason("changes installed packages", "medium", contained=True)
AGENT_CODE = Reason("runs code from a file the agent wrote", contained=True)
WORKDIR_PROGRAM = Reason("runs a program from the workdir", "medium", contained=True)
NETWORK = Reason("uses the network", "medium", contained=True)
ENVIRONMENT = Reason("shows the environment, credentials included", "medium", contained=True)
READS_OUTSIDE = Reason("reads outside the workdir", "medium", contained=True)
RUNS_CODE = Reason("runs code", "medium", contained=True)
APPENDS = Reason("changes an existing file", "medium", contained=True)
NOT_KNOWN = Reason(NOT_READ_ONLY, "medium", contained=True)


def protected_write(found: Protection) -> Reason:
    """The reason a write to a path that ``sandbox.protection`` names asks."""
    if found.kind == "agents":
        return PROTECTED
    if found.kind == "git":
        return GIT_INTERNALS
    return Reason(f"writes {found.text}", contained=True, protects=True)


def uncheckable(why: str) -> Reason:
    """The command could not be parsed, so nothing about it is known."""
    return Reason(f"cannot check the command: {why}", "medium")


@dataclass(frozen=True)
class Place:
    """Where a command runs: the workdir, agent folders beyond the protected paths of
    ``sandbox.protection`` (``protected``), the files the agent wrote this session
    (``written``: resolved path -> whether the agent created it), whether in the sandbox
    (``sandboxed``), and the person's ``home`` (its dot-entries are protected when the
    workdir holds it)."""

    workdir: Path
    protected: tuple[Path, ...] = ()
    written: Mapping[Path, bool] = field(default_factory=dict)
    search_path: str | None = None  # PATH for finding programs; None: the process's
    # in the sandbox what git runs is contained: the repository's git configuration is not looked at
    sandboxed: bool = False
    home: Path | None = None


@dataclass
class Assessment:
    """``read_only``: on the allow-list; ``reasons``: the harms named, most severe first;
    ``protected``: the paths only the person may change that the command writes, as far
    as its text shows (what an approval of it covers)."""

    read_only: bool
    reasons: list[Reason]
    protected: tuple[Path, ...] = ()

    def asks(self, *, sandboxed: bool) -> list[Reason]:
        """The reasons to ask for (empty: run it). In the sandbox only what it cannot
        contain asks; outside it everything that is not known to be read-only."""
        if sandboxed:
            return [r for r in self.reasons if not r.contained]
        if self.read_only and not self.reasons:
            return []
        return self.reasons or [NOT_KNOWN]


def assess(command: str, place: Place) -> Assessment:
    """Parse ``command`` and judge it (see the module doc)."""
    judge = _Judge(place)
    script = parse_command(command)
    if script.error and not script.pipelines:
        return Assessment(False, [uncheckable(script.error)])
    judge.script(script, judge.root, top=True)
    if ("(" in command and _FORK_BOMB.search(re.sub(r"\s+", "", command))) or _FORK_BOMB_FUNCTION.search(command):
        judge.add(FORK_BOMB)
    order = {r: i for i, r in enumerate(_SEVERITY)}
    reasons = sorted(judge.reasons, key=lambda r: order.get(r, len(order)))
    if any(r in order for r in reasons):  # "runs code" says less than what was named
        reasons = [r for r in reasons if r is not RUNS_CODE]
    return Assessment(judge.read_only and script.plain, reasons, tuple(dict.fromkeys(judge.planted)))


def command_texts(script: Script, *, depth: int = 0) -> list[str]:
    """The text of every simple command in ``script``, nested ones included (scripts given
    to ``bash -c`` and ``eval`` too), each also with its wrappers taken off (``sudo rm -rf
    x`` is also ``rm -rf x``): what a deny rule is matched against."""
    judge = _Judge(Place(Path("/")))
    texts: list[str] = []
    for cmd in script.commands():
        texts.append(cmd.text())
        core = judge.unwrap(cmd.words, judge.root, effects=False)
        if core and (len(core) < len(cmd.words) or _base(core[0].text) != core[0].text):
            texts.append(" ".join([_base(core[0].text), *(w.text for w in core[1:])]))  # /bin/rm is rm
        inner = _script_argument(core)
        if inner is not None and depth < _MAX_NESTING:
            texts.extend(command_texts(parse_command(inner), depth=depth + 1))
    return texts


def _script_argument(words: list[Word]) -> str | None:
    """The script text a shell's ``-c`` or ``eval`` is given, when it is literal."""
    if not words or not words[0].literal:
        return None
    name = _base(words[0].text)
    if name == "eval" and all(w.literal for w in words[1:]):
        return " ".join(w.text for w in words[1:])
    if name in SHELLS:
        for i, w in enumerate(words[1:-1], start=1):
            if w.text.startswith("-") and not w.text.startswith("--") and "c" in w.text[1:]:
                following = words[i + 1]
                return following.text if following.literal else None
    return None


def each_command(script: Script, place: Place) -> list[tuple[Command, bool, bool]]:
    """For a plain script: each simple command, whether it is read-only by itself, and
    whether its redirections are (what an allow rule needs to cover the rest)."""
    judge = _Judge(place)
    cwd = judge.root
    found = []
    for pipeline in script.pipelines:
        for cmd in pipeline.commands:
            judge.read_only, judge.reasons = True, []
            cwd = judge.command(cmd, cwd)
            read_only = judge.read_only
            judge.read_only, judge.reasons = True, []
            judge.redirects(cmd, cwd)
            found.append((cmd, read_only, judge.read_only))
    return found


# A function whose body pipes it into itself. The name starts after a separator and is
# taken whole (possessive), so a long run of text costs linear time, not quadratic.
_FORK_BOMB = re.compile(r"(?:^|(?<=[;&|(){}]))([^\s;&|(){}]++)\(\)\{[^}]*\1\|\1")
_FORK_BOMB_FUNCTION = re.compile(r"\bfunction\s+([^\s;&|(){}]++)\s*(?:\(\s*\))?\s*\{[^}]*\1\s*\|\s*\1")
_SEVERITY = (
    FORK_BOMB, RECURSIVE_DELETE, FIND_DELETE, DELETES, SHREDS, TRUNCATES, DISCARDS, FORCE_PUSH, MASS_CHANGE, MOVES_OUT,
    PROTECTED, GIT_INTERNALS, GIT_RUNS, DOWNLOADS_AND_RUNS, ROOT, DEVICE, WRITES_OUTSIDE, KILLS, SYSTEM,
    PERMISSIONS, AGENT_CODE, PACKAGES, HISTORY,
)

SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish"})
INTERPRETERS = frozenset({"perl", "ruby", "node", "nodejs", "php", "lua", "Rscript", "deno", "bun", "osascript"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "lwp-download", "nc", "ncat",
                         "socat", "ftp", "tftp", "ssh"})
NETWORK_TOOLS = DOWNLOADERS | {"scp", "sftp", "rsync", "telnet", "ssh-copy-id", "ping", "dig", "nslookup"}
_KILLERS = frozenset({"kill", "pkill", "killall", "killall5", "skill", "xkill"})
_DEVICE_TOOLS = frozenset({"fdisk", "sfdisk", "gdisk", "parted", "wipefs", "mkswap", "losetup", "blkdiscard",
                           "mke2fs", "hdparm"})
_SYSTEM_TOOLS = frozenset({"shutdown", "reboot", "halt", "poweroff", "systemctl", "service", "init", "telinit",
                           "mount", "umount", "swapoff", "sysctl", "modprobe", "insmod", "rmmod", "iptables",
                           "nft", "ufw", "crontab", "useradd", "userdel", "usermod", "passwd", "chpasswd",
                           "visudo", "launchctl"})
_PERMISSION_TOOLS = frozenset({"chmod", "chown", "chgrp", "setfacl", "chattr", "chcon"})
_PACKAGE_MANAGERS = frozenset({"pip", "pip3", "pipx", "uv", "conda", "mamba", "micromamba", "npm", "pnpm", "yarn",
                               "apt", "apt-get", "aptitude", "yum", "dnf", "zypper", "apk", "brew", "port", "gem",
                               "cargo", "go", "poetry", "pdm", "rye", "snap", "flatpak", "nix-env"})
_PACKAGE_VERBS = frozenset({"install", "uninstall", "remove", "rm", "add", "update", "upgrade", "i", "un", "purge",
                            "reinstall", "sync", "autoremove", "get", "del", "link", "unlink", "-S", "-R", "-U",
                            "-i", "-r", "-P", "-e"})
_SAFE_ASSIGNMENTS = re.compile(r"^(LC_[A-Z]+|LANG|LANGUAGE|TZ|NO_COLOR|COLUMNS|TERM)=")
_GIT_RUNNING_KEYS = re.compile(
    r"^(core\.(fsmonitor|hookspath|pager|editor|sshcommand|askpass|gitproxy)|sequence\.editor|gpg\.program|"
    r"(diff|filter|merge|credential|alias|uploadpack|receivepack)\..*|.*\.(textconv|command|cmd|driver|clean|"
    r"smudge|process))$",
    re.IGNORECASE,
)
_CODE_RECURSIVE = re.compile(r"rmtree|rm_rf|rmSync|rm_r\b|\brm\s+-\w*[rRf]|recursive\s*[:=]\s*(True|true)")
_CODE_DELETES = re.compile(r"\b(remove|removedirs|unlink|unlinkSync|rmdir|rmdirSync|truncate)\b|\brm\s|File\.delete")
_STANDARD_BIN = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")

# name: (short options with a value, long options with a value, operands before the command)
_WRAPPERS: dict[str, tuple[str, frozenset[str], int]] = {
    "sudo": ("ugCDhprtUT", frozenset({"--user", "--group", "--chdir", "--host", "--prompt", "--role", "--type",
                                      "--other-user", "--command-timeout", "--close-from"}), 0),
    "doas": ("uC", frozenset(), 0),
    "pkexec": ("", frozenset({"--user"}), 0),
    "run0": ("uD", frozenset({"--user", "--chdir", "--setenv", "--unit", "--property", "--slice", "--nice"}), 0),
    "env": ("uCS", frozenset({"--unset", "--chdir", "--split-string"}), 0),
    "nice": ("n", frozenset({"--adjustment"}), 0),
    "nohup": ("", frozenset(), 0),
    "time": ("fo", frozenset({"--format", "--output"}), 0),
    "timeout": ("sk", frozenset({"--signal", "--kill-after"}), 1),
    "stdbuf": ("ioe", frozenset({"--input", "--output", "--error"}), 0),
    "ionice": ("cnpP", frozenset({"--class", "--classdata", "--pid", "--pgid", "--uid"}), 0),
    "setsid": ("", frozenset(), 0),
    "chrt": ("", frozenset(), 1),
    "taskset": ("", frozenset(), 1),
    "flock": ("wEc", frozenset({"--timeout", "--conflict-exit-code", "--command"}), 1),
    "builtin": ("", frozenset(), 0),
    "busybox": ("", frozenset(), 0),
    "exec": ("a", frozenset(), 0),
    "unbuffer": ("", frozenset(), 0),
    "chronic": ("", frozenset(), 0),
    "caffeinate": ("tw", frozenset(), 0),
    "strace": ("eoOpPsSuEX", frozenset(), 0),
    "ltrace": ("eoOpPsSuEn", frozenset(), 0),
    "xargs": ("ILnPsdEa", frozenset({"--max-args", "--max-procs", "--max-chars", "--delimiter", "--arg-file",
                                     "--max-lines", "--replace", "--eof", "--process-slot-var"}), 0),
    "watch": ("nqg", frozenset({"--interval", "--differences"}), 0),
}
_ROOT_WRAPPERS = frozenset({"sudo", "doas", "pkexec", "run0"})
_MAX_NESTING = 6


def _base(name: str) -> str:
    return name.rsplit("/", 1)[-1] if name.startswith(_STANDARD_BIN) else name


@dataclass(frozen=True, slots=True)
class _Call:
    """One command as a harm in ``_HARMS`` reads it: the program's ``name`` (its base name
    for a standard bin folder), its argument words and their texts, the whole command (for
    its redirections), the folder it runs in, and ``unseen``: more operands come from stdin
    (``xargs``, ``find -exec``)."""

    name: str
    args: list[Word]
    texts: list[str]
    cmd: Command
    cwd: Path
    unseen: bool


class _Judge:
    def __init__(self, place: Place) -> None:
        self.place = place
        self.root = place.workdir.resolve()
        self.protected = tuple(p.resolve() for p in place.protected)
        inside = [p for p in self.protected if p.is_relative_to(self.root)]
        self.protected_inside = tuple(p.relative_to(self.root).as_posix() for p in inside)
        self.reasons: list[Reason] = []
        self.planted: list[Path] = []  # the protected paths it writes
        self.read_only = True
        self.functions: set[str] = set()
        self.nesting = 0
        # a long command repeats its programs and globs: look each up once
        self._found: dict[str, str | None] = {}
        self._globs: dict[tuple[str, Path], list[str] | None] = {}
        self._git_runs: dict[Path, Reason | None] = {}

    def add(self, reason: Reason) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def refuse(self, reason: Reason | None = None) -> None:
        """Not read-only (and, when known, why)."""
        self.read_only = False
        if reason is not None:
            self.add(reason)

    # ------------------------------------------------------------------ structure
    def script(self, script: Script, cwd: Path, *, top: bool = False) -> None:
        if script.error:
            self.refuse(uncheckable(script.error))
        if top:
            self.functions = set().union(*(s.functions for s in script.walk()))
        for word in script.loose:
            for sub in word.subs:
                self.script(sub, cwd)
        for pipeline in script.pipelines:
            cwd = self.pipeline(pipeline, cwd)

    def pipeline(self, pipeline: Pipeline, cwd: Path) -> Path:
        downloaded = False
        for command in pipeline.commands:
            core = self.unwrap(command.words, cwd, effects=False)
            name = _base(core[0].text) if core else ""
            if downloaded and _runs_code(name):
                self.add(DOWNLOADS_AND_RUNS)
            downloaded = downloaded or name in DOWNLOADERS
            cwd = self.command(command, cwd)
        return cwd

    def nested(self, text: str, cwd: Path) -> None:
        """A script given as a string (``bash -c``, ``eval``, ``su -c``, ``watch``)."""
        self.read_only = False
        if self.nesting >= _MAX_NESTING:
            self.add(uncheckable("nested too deeply"))
            return
        self.nesting += 1
        try:
            self.script(parse_command(text), cwd)
        finally:
            self.nesting -= 1

    def command(self, cmd: Command, cwd: Path) -> Path:
        for sub in cmd.subscripts():
            self.script(sub, cwd)
        self.redirects(cmd, cwd)
        if any(not _SAFE_ASSIGNMENTS.match(a.raw) or not a.literal for a in cmd.assignments) or (
            cmd.assignments and not cmd.words
        ):
            self.read_only = False  # PATH=…, LD_PRELOAD=…, GIT_*=…: another program runs
        if not cmd.words:
            return cwd
        if not cmd.words[0].literal:
            self.read_only = False
            return cwd
        core = self.unwrap(cmd.words, cwd, effects=True)
        if len(core) < len(cmd.words):
            self.read_only = False
        if not core:
            return cwd
        self.danger(core, cmd, cwd)
        problem = self.read_only_problem(core, cwd)
        if problem is not None:
            self.refuse(None if problem is NOT_KNOWN else problem)
            self.protected_operands(core[1:], cwd)
        if core[0].text == "cd" and core is cmd.words:
            return self.cd(core, cwd)
        return cwd

    def protected_operands(self, words: list[Word], cwd: Path) -> None:
        """A command that may write, naming a file in an agent, skill or settings folder
        (``touch .claude/x``, ``sed -i … agents/a.md``): it asks, sandbox or not."""
        for word in words:
            if not word.literal:
                continue
            text = word.text.partition("=")[2] if word.text.startswith("--") else word.text
            if "/" in text or text.startswith((".", "~")) or protection(text) is not None:
                self.add_protected(self.path(text, cwd))

    def redirects(self, cmd: Command, cwd: Path) -> None:
        for redirect in cmd.redirects:
            if redirect.writes:
                self.target(redirect.target, cwd, truncates=redirect.op in (">", ">|", "&>"))
            elif redirect.op == "<":
                self.reads(redirect.target, cwd)

    def unwrap(self, words: list[Word], cwd: Path, *, effects: bool) -> list[Word]:
        """The command a wrapper (``sudo``, ``env``, ``timeout``, ``xargs``, …) runs; with
        ``effects``, what the wrappers themselves do is noted."""
        while words and words[0].literal:
            name = _base(words[0].text)
            if name == "su":
                if effects:
                    self.add(ROOT)
                    for i, w in enumerate(words[:-1]):
                        if w.text in ("-c", "--command"):
                            self.string(words[i + 1], cwd)
                return []
            if name == "command" and words[1:2] and words[1].text in ("-v", "-V"):
                return words
            spec = _WRAPPERS.get(name)
            if spec is None:
                return words
            if effects:
                self.program(words[0].text, cwd)
                if name in _ROOT_WRAPPERS:
                    self.add(ROOT)
            values, long_values, skip = spec
            i = 1
            while i < len(words) and words[i].text.startswith("-") and words[i].text != "-":
                text = words[i].text
                i += 1
                if text == "--":
                    break
                takes = (text.startswith("--") and "=" not in text and text in long_values) or (
                    not text.startswith("--") and text[-1] in values
                )
                if effects and name == "env" and (text in ("-S", "--split-string") or text.startswith("-S")):
                    value = text[2:] if len(text) > 2 and not text.startswith("--") else None
                    if value is not None:
                        self.nested(value, cwd)
                    elif i < len(words):
                        self.string(words[i], cwd)
                if takes and i < len(words):
                    i += 1
            if name == "env":
                while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i].raw):
                    i += 1
            i += skip
            rest = words[i:]
            if not rest:
                return words  # the wrapper alone: `env` prints the environment, `sudo -l` lists
            if name == "watch":
                if effects:
                    self.nested(" ".join(w.text for w in rest), cwd)
                return []
            if name == "xargs":
                if effects:
                    self.read_only = False
                    self.danger(rest, Command(words=rest), cwd, unseen=True)
                return []
            words = rest
        return words

    def string(self, word: Word, cwd: Path) -> None:
        """A word holding a script: parse it when its text is known."""
        if word.literal:
            self.nested(word.text, cwd)
        else:
            self.refuse(RUNS_CODE)
            if self.downloads(word.subs):
                self.add(DOWNLOADS_AND_RUNS)

    def downloads(self, scripts: Iterable[Script]) -> bool:
        for script in scripts:
            for cmd in script.commands():
                core = self.unwrap(cmd.words, self.root, effects=False)
                if core and _base(core[0].text) in DOWNLOADERS:
                    return True
        return False

    # ------------------------------------------------------------------ paths
    def path(self, text: str, cwd: Path) -> Path:
        p = Path(os.path.expanduser(text) if text.startswith("~") else text)
        p = p if p.is_absolute() else cwd / p
        try:
            return p.resolve(strict=False)
        except (OSError, RuntimeError, ValueError):
            return Path(os.path.normpath(p))

    def inside(self, p: Path) -> bool:
        return p.is_relative_to(self.root)

    def protected_reason(self, p: Path) -> Reason | None:
        """Why a write to ``p`` asks whatever the policy, if it does (``sandbox.protection``)."""
        if p.is_relative_to(self.root):
            rel = p.relative_to(self.root).as_posix()
            places = places_around(self.root, rel, home=self.place.home)
            found = protection(rel, folders=self.protected_inside, places=places)
            if found is not None:
                return protected_write(found)
        return PROTECTED if any(p.is_relative_to(d) for d in self.protected) else None

    def add_protected(self, p: Path, *, refuse: bool = False) -> None:
        reason = self.protected_reason(p)
        if reason is not None:
            self.planted.append(p)
        if reason is not None and refuse:
            self.refuse(reason)
        elif reason is not None:
            self.add(reason)

    def target(self, word: Word, cwd: Path, *, truncates: bool) -> None:
        """A file the command opens for writing."""
        if not word.literal or word.glob:
            self.read_only = False
            return
        text = word.text
        if text in ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-") or re.fullmatch(r"/dev/fd/\d+", text):
            return
        p = self.path(text, cwd)
        if text.startswith("/dev/") or p.is_relative_to("/dev"):
            self.refuse(DEVICE)
        elif not self.inside(p):
            self.refuse(WRITES_OUTSIDE)
        else:
            self.add_protected(p, refuse=True)
            if p.is_file():
                self.refuse(TRUNCATES if truncates else APPENDS)

    def reads(self, word: Word, cwd: Path) -> None:
        if not word.literal:
            self.read_only = False
        elif word.text not in ("/dev/null", "/dev/stdin", "-") and not self.inside(self.path(word.text, cwd)):
            self.refuse(READS_OUTSIDE)

    def cd(self, words: list[Word], cwd: Path) -> Path:
        relative = len(words) > 1 and not words[1].text.startswith(("/", "./", "../", "~"))
        if len(words) > 2 or (words[1:] and words[1].text == "-") or (relative and os.environ.get("CDPATH")):
            self.refuse(NOT_KNOWN)  # with $CDPATH set, `cd data` may go anywhere
            return cwd
        target = self.path(words[1].text if len(words) > 1 else "~", cwd)
        if not self.inside(target):
            self.refuse(READS_OUTSIDE)
        return target

    # ------------------------------------------------------------------ the allow-list
    def read_only_problem(self, words: list[Word], cwd: Path) -> Reason | None:
        """Why ``words`` is not on the allow-list (programs found in the workdir are named
        by ``program``)."""
        name = words[0].text
        if "/" in name:
            if self.inside(self.path(name, cwd)) or not name.startswith(_STANDARD_BIN):
                return NOT_KNOWN
            name = _base(name)
        elif name in self.functions:
            return NOT_KNOWN
        if name == "cd":
            return None
        if name in ("env", "printenv"):
            return ENVIRONMENT
        args: list[str] = []
        for word in words[1:]:
            if not word.glob:
                args.append(word.text)
                continue
            matches = self.expand(word.text, cwd)
            if matches is None:
                return NOT_KNOWN
            args.extend(matches or [word.text])
        outside: list[bool] = []

        def paths(files: list[str]) -> str | None:
            for f in files:
                if f not in ("-", "/dev/null", "/dev/stdin") and not self.inside(self.path(f, cwd)):
                    outside.append(True)
                    return "outside"
            return None

        problem = read_only_problem([name, *args], paths)
        if problem is None:
            return self.git_runs(cwd) if name == "git" and not self.place.sandboxed else None
        return READS_OUTSIDE if outside else NOT_KNOWN

    def git_runs(self, cwd: Path) -> Reason | None:
        """Why a read-only git command in ``cwd`` could run a program the repository names
        (``git_config``), looked at once per folder."""
        if cwd not in self._git_runs:
            why = repository_program(cwd, self.root)
            self._git_runs[cwd] = None if why is None else Reason(why, contained=True)
        return self._git_runs[cwd]

    def expand(self, pattern: str, cwd: Path) -> list[str] | None:
        """What bash would pass for an unquoted glob (``None``: cannot tell, or too many,
        or a name that would read as an option)."""
        if "{" in pattern or "[^" in pattern:
            return None  # brace expansion and bash's own negation are not Python's glob
        key = (pattern, cwd)
        if key not in self._globs:
            names = globbing.iglob(pattern, root_dir=cwd)
            try:
                found = list(itertools.islice(names, GLOB_LIMIT + 1))
            finally:
                names.close()  # type: ignore[attr-defined]  # a generator: closes its scandir
            bad = len(found) > GLOB_LIMIT or any(f.startswith("-") for f in found)
            self._globs[key] = None if bad else sorted(found)
        return self._globs[key]

    # ------------------------------------------------------------------ named harms
    def danger(self, words: list[Word], cmd: Command, cwd: Path, *, unseen: bool = False) -> None:
        """Reasons for one command (``unseen``: more operands come from stdin, as with
        ``xargs`` or ``find -exec``): its program's entry in ``_HARMS``."""
        if not words[0].literal:
            return
        name = _base(words[0].text)
        if "/" in name or (name not in BUILTINS and name not in self.functions and name != "cd"):
            self.program(name, cwd)
        harm = _HARMS.get(_family(name))
        if harm is not None:
            harm(self, _Call(name, words[1:], [w.text for w in words[1:]], cmd, cwd, unseen))

    def evaluates(self, call: _Call) -> None:
        """``eval``: its words are a script; one not known until it runs runs code."""
        if all(w.literal for w in call.args):
            self.nested(" ".join(call.texts), call.cwd)
        else:
            self.refuse(RUNS_CODE)
            if self.downloads(s for w in call.args for s in w.subs):
                self.add(DOWNLOADS_AND_RUNS)

    def sources(self, call: _Call) -> None:
        """``source`` / ``.``: runs a file in this shell."""
        self.runs_file(call.args[:1], call.cwd)

    def dd(self, call: _Call) -> None:
        for t in call.texts:
            if t.startswith("of="):
                self.target(Word(t[3:], t[3:]), call.cwd, truncates="conv=notrunc" not in call.texts)

    def tee(self, call: _Call) -> None:
        options, files = _split(call.args)
        for w in files:
            self.target(w, call.cwd, truncates="-a" not in options and "--append" not in options)

    def rsync(self, call: _Call) -> None:
        if any(":" in t and not t.startswith("-") for t in call.texts):
            self.add(NETWORK)
        if any(t.startswith("--delete") or t.startswith("--remove-source") for t in call.texts):
            self.add(RECURSIVE_DELETE)

    def network(self, call: _Call) -> None:
        """A network tool; an output file it names is a write (curl's ``-O`` names none)."""
        self.add(NETWORK)
        for i, t in enumerate(call.texts[:-1]):
            if t in ("-o", "--output", "-O") and not (call.name == "curl" and t == "-O"):
                self.target(call.args[i + 1], call.cwd, truncates=True)

    def package_manager(self, call: _Call) -> None:
        """``pip install``, ``npm i``, ``apt-get remove``, ``uv pip install`` …"""
        if _PACKAGE_VERBS & set(call.texts[:2]) or call.texts[:2] == ["pip", "install"]:
            self.add(PACKAGES)

    def package_tool(self, call: _Call) -> None:
        """``dpkg -i``, ``rpm -e``, ``pacman -S`` …"""
        if any(t[:2] in _PACKAGE_VERBS for t in call.texts):
            self.add(PACKAGES)

    def lists_variables(self, call: _Call) -> None:
        """``export``, ``declare`` and ``set`` with (almost) no operand print the variables."""
        if not call.texts[1:]:
            self.add(ENVIRONMENT)

    def program(self, name: str, cwd: Path) -> None:
        """A program run from the workdir (``./x.sh``, or first on PATH from there)."""
        if "/" in name:
            p = self.path(name, cwd)
        else:
            search = self.place.search_path if self.place.search_path is not None else os.environ.get("PATH", "")
            if any(not os.path.isabs(entry) for entry in search.split(os.pathsep)):
                # "." or an empty entry: bash looks in the folder the command is run from
                self.refuse(WORKDIR_PROGRAM)
                return
            if name not in self._found:
                self._found[name] = shutil.which(name, path=search)
            found = self._found[name]
            if found is None or not Path(os.path.abspath(found)).is_relative_to(self.root):
                return
            p = self.path(found, cwd)
        if self.inside(p):
            self.refuse(AGENT_CODE if p in self.place.written else WORKDIR_PROGRAM)

    def runs_file(self, operands: list[Word], cwd: Path) -> None:
        self.read_only = False
        for word in operands:
            if self.downloads(word.subs):
                self.add(DOWNLOADS_AND_RUNS)
            elif word.literal and self.path(word.text, cwd) in self.place.written:
                self.add(AGENT_CODE)
            else:
                self.add(RUNS_CODE)
        if not operands:
            self.add(RUNS_CODE)

    def shell(self, call: _Call) -> None:
        args, cmd, cwd = call.args, call.cmd, call.cwd
        self.read_only = False
        i = 0
        command_string = False
        while i < len(args) and args[i].text[:1] in ("-", "+") and args[i].text not in ("-", "--"):
            text = args[i].text
            i += 1
            if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                i += 1
            elif not text.startswith("--") and "c" in text[1:]:
                command_string = True
        operands = args[i + (i < len(args) and args[i].text == "--") :]
        if command_string:
            if operands:
                self.string(operands[0], cwd)
            return
        if operands:
            self.runs_file(operands[:1], cwd)
            return
        bodies = [r.body for r in cmd.redirects if r.op == "<<" and r.body is not None]
        for body in bodies:
            self.nested(body, cwd)
        if not bodies:
            self.add(RUNS_CODE)  # a script on stdin: the pipeline check names a download

    def interpreter(self, call: _Call) -> None:
        name, args, cwd = call.name, call.args, call.cwd
        if [w.text for w in args] in (["--version"], ["--help"], ["-V"], ["-VV"]):
            return
        self.read_only = False
        inline = {"-c"} if name.startswith(("python", "pypy")) else {"-e", "-E", "--eval", "-p", "--print", "-r"}
        for i, word in enumerate(args):
            text = word.text
            code: Word | None = None
            if text in inline and i + 1 < len(args):
                code = args[i + 1]
            elif any(text.startswith(o) and len(text) > len(o) for o in inline if len(o) == 2) and not text.startswith("--"):
                code = Word(text[2:], text[2:], word.literal)
            if code is not None:
                self.add(RUNS_CODE)
                self.inline_code(code)
                return
            if text == "-m" and i + 1 < len(args):
                module = [w.text for w in args[i + 1 : i + 3]]
                self.add(PACKAGES if module[:1] == ["pip"] and module[1:] and module[1] in _PACKAGE_VERBS else RUNS_CODE)
                return
            if not text.startswith("-"):
                self.runs_file([word], cwd)
                return
        self.add(RUNS_CODE)

    def inline_code(self, code: Word) -> None:
        if self.downloads(code.subs):
            self.add(DOWNLOADS_AND_RUNS)
        if _CODE_RECURSIVE.search(code.text):
            self.add(RECURSIVE_DELETE)
        elif _CODE_DELETES.search(code.text):
            self.add(DELETES)

    def remove(self, call: _Call) -> None:
        args, cwd, unseen = call.args, call.cwd, call.unseen
        options, operands = _split(args)
        if any(o in ("--recursive", "--force") or (not o.startswith("--") and set(o[1:]) & set("rRf")) for o in options):
            self.add(RECURSIVE_DELETE)
            return
        for word in operands:
            p = self.path(word.text, cwd) if word.literal and not word.glob else None
            if p is not None:
                self.add_protected(p)
            if p is None or not self.place.written.get(p, False):
                self.add(DELETES)
        if unseen:
            self.add(DELETES)

    def find(self, call: _Call) -> None:
        args, texts, cmd, cwd = call.args, call.texts, call.cmd, call.cwd
        if "-delete" in texts:
            self.add(FIND_DELETE)
        for i, t in enumerate(texts):
            if t in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((j for j in range(i + 1, len(texts)) if texts[j] in (";", "+")), len(texts))
                inner = args[i + 1 : end]
                if inner:
                    self.danger(self.unwrap(inner, cwd, effects=True) or inner, cmd, cwd, unseen=True)
            elif (t.startswith("-fprint") or t == "-fls") and i + 1 < len(args):
                self.target(args[i + 1], cwd, truncates=True)

    def copy(self, call: _Call) -> None:
        name, args, cwd, unseen = call.name, call.args, call.cwd, call.unseen
        options, operands = _split_pairs(args, "tSm" if name == "install" else "tS")
        target_dir = next((v for o, v in options if o in ("-t", "--target-directory") and v is not None), None)
        sources = operands if target_dir is not None else operands[:-1]
        dest = Word(target_dir, target_dir) if target_dir is not None else (operands[-1] if operands else None)
        if name == "mv" and (unseen or any(not w.literal or w.glob for w in sources)):
            self.add(MASS_CHANGE)
        if name == "mv":
            for w in sources:
                if w.literal:
                    self.add_protected(self.path(w.text, cwd))
            if dest is not None and dest.literal and not self.inside(self.path(dest.text, cwd)):
                self.add(MOVES_OUT)  # in the sandbox, out of the workdir is into a /tmp that vanishes
        if dest is None:
            return
        keeps = any(o in ("-n", "--no-clobber", "--update=none") for o, _ in options) or (
            name == "ln" and not any(o in ("-f", "--force") for o, _ in options)
        )
        if not dest.literal:
            return
        p = self.path(dest.text, cwd)
        if p.is_dir() and not (name == "ln" and not sources):
            for w in sources if sources else [dest]:
                if w.literal and not w.glob:
                    self.target(Word(str(p / Path(w.text).name), ""), cwd, truncates=not keeps)
                else:
                    self.target(dest, cwd, truncates=False)
        else:
            self.target(dest, cwd, truncates=not keeps)

    def permissions(self, call: _Call) -> None:
        args, cwd, unseen = call.args, call.cwd, call.unseen
        self.add(PERMISSIONS)
        options, operands = _split(args)
        recursive = any(o in ("-R", "--recursive") or (not o.startswith("--") and "R" in o) for o in options)
        files = operands if any(o.startswith("--reference") for o in options) else operands[1:]
        wide = unseen or any(
            not w.literal or w.glob or self.root.is_relative_to(self.path(w.text, cwd)) for w in files
        )
        if recursive or wide:
            self.add(MASS_CHANGE)
        for w in files:
            if w.literal:
                self.add_protected(self.path(w.text, cwd))

    def git(self, call: _Call) -> None:
        args = call.texts
        i = 0
        while i < len(args) and args[i].startswith("-"):
            if args[i] in ("-c", "--config-env") and i + 1 < len(args):
                if _GIT_RUNNING_KEYS.match(args[i + 1].partition("=")[0]):
                    self.add(GIT_RUNS)
                i += 1
            elif args[i] in ("-C", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--super-prefix"):
                i += 1
            i += 1
        if i >= len(args):
            return
        sub, rest = args[i], args[i + 1 :]
        options = {r for r in rest if r.startswith("-")}
        if sub == "clean" and not options & {"-n", "--dry-run"}:
            self.add(DISCARDS)
        elif sub == "reset" and options & {"--hard", "--merge"}:
            self.add(DISCARDS)
        elif sub == "reset":
            self.add(HISTORY)
        elif sub == "checkout" and (options & {"-f", "--force", "--"} or "." in rest or "--" in rest):
            self.add(DISCARDS)
        elif sub == "restore" and not (options & {"--staged", "-S"} and not options & {"--worktree", "-W"}):
            self.add(DISCARDS)
        elif sub == "stash" and rest[:1] in (["drop"], ["clear"]):
            self.add(DISCARDS)
        elif sub == "branch" and ("-D" in options or (options & {"-d", "--delete"} and options & {"-f", "--force"})):
            self.add(DISCARDS)
        elif sub in ("rm", "switch") and options & {"-f", "--force", "--discard-changes"}:
            self.add(DISCARDS)
        elif sub in ("reflog", "gc", "prune", "update-ref") and (
            {"expire", "delete"} & set(rest) or any(r.startswith("--prune") for r in rest) or sub == "prune"
            or (sub == "update-ref" and "-d" in options)
        ):
            self.add(DISCARDS)
        elif sub == "push":
            self.add(NETWORK)
            forced = options & {"-f", "--force", "--mirror", "--delete", "-d", "--prune"} or any(
                r.startswith(("--force", "+")) or (r.startswith(":") and len(r) > 1) for r in rest
            )
            if forced:
                self.add(FORCE_PUSH)
        elif sub in ("rebase", "filter-branch", "filter-repo", "replace") or (sub == "commit" and "--amend" in options):
            self.add(HISTORY)
        elif sub in ("fetch", "pull", "clone", "ls-remote", "submodule") or (sub == "remote" and "update" in rest):
            self.add(NETWORK)
        elif sub == "config":
            operands = [r for r in rest if not r.startswith("-")]
            reading = options & {"--get", "--get-all", "--get-regexp", "--list", "-l", "--unset", "--unset-all"}
            if operands and not reading and (len(operands) >= 2 or options & {"--add", "--replace-all"}):
                if _GIT_RUNNING_KEYS.match(operands[0]):
                    self.add(GIT_RUNS)


_Harm = Callable[[_Judge, _Call], None]


def _adds(reason: Reason) -> _Harm:
    """The harm of a program whose every run is ``reason`` (``shred``, ``kill``, …)."""

    def harm(judge: _Judge, call: _Call) -> None:
        judge.add(reason)

    return harm


def _claims(*families: tuple[Iterable[str], _Harm]) -> dict[str, _Harm]:
    """Program name -> harm; a name in several families keeps the first (``rsync``: its own,
    not the network tools')."""
    table: dict[str, _Harm] = {}
    for names, harm in families:
        for name in names:
            table.setdefault(name, harm)
    return table


_HARMS = _claims(
    (SHELLS, _Judge.shell),
    ({"eval"}, _Judge.evaluates),
    ({"source", "."}, _Judge.sources),
    ({"python", *INTERPRETERS}, _Judge.interpreter),  # "python": every python3.x and pypy (_family)
    ({"rm", "unlink"}, _Judge.remove),
    ({"find"}, _Judge.find),
    ({"shred", "wipe", "srm"}, _adds(SHREDS)),
    ({"truncate"}, _adds(TRUNCATES)),
    ({"dd"}, _Judge.dd),
    ({"mkfs", *_DEVICE_TOOLS}, _adds(DEVICE)),  # "mkfs": mkfs.ext4 and its kin (_family)
    ({"tee"}, _Judge.tee),
    ({"cp", "mv", "install", "ln"}, _Judge.copy),
    (_PERMISSION_TOOLS, _Judge.permissions),
    (_KILLERS, _adds(KILLS)),
    (_SYSTEM_TOOLS, _adds(SYSTEM)),
    ({"git"}, _Judge.git),
    ({"rsync"}, _Judge.rsync),
    (NETWORK_TOOLS, _Judge.network),
    (_PACKAGE_MANAGERS, _Judge.package_manager),
    ({"dpkg", "rpm", "pacman"}, _Judge.package_tool),
    ({"env", "printenv"}, _adds(ENVIRONMENT)),
    ({"export", "declare", "set"}, _Judge.lists_variables),
)
"""What running each program may do, as the judge names it: the domain as a table, as
``read_only.py`` states the programs that change nothing. A program not here has no
named harm (whether it is read-only is ``read_only.py``'s question)."""


def _family(name: str) -> str:
    """``name`` as ``_HARMS`` knows it: every ``python3.12`` or ``pypy3`` is ``python``,
    every ``mkfs.*`` is ``mkfs``."""
    if re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", name):
        return "python"
    return "mkfs" if name.startswith("mkfs") else name


def _runs_code(name: str) -> bool:
    return (
        name in SHELLS
        or name in INTERPRETERS
        or name in ("eval", "source", ".")
        or bool(re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", name))
    )


def _split(args: list[Word]) -> tuple[list[str], list[Word]]:
    """The options (as written) and the operand words of ``args``, GNU style."""
    options: list[str] = []
    operands: list[Word] = []
    for i, w in enumerate(args):
        if w.text == "--":
            operands.extend(args[i + 1 :])
            break
        if w.text.startswith("-") and w.text != "-":
            options.append(w.text)
        else:
            operands.append(w)
    return options, operands


def _split_pairs(args: list[Word], values: str) -> tuple[list[tuple[str, str | None]], list[Word]]:
    """``(option, value)`` pairs (short options in ``values`` take one) and operand words."""
    pairs, _ = split_options([w.text for w in args], values)
    operands: list[Word] = []
    i = 0
    while i < len(args):
        w = args[i]
        i += 1
        if w.text == "--":
            operands.extend(args[i:])
            break
        if w.text.startswith("-") and w.text != "-":
            if not w.text.startswith("--") and w.text[-1] in values and len(w.text) == 2:
                i += 1  # its value is the next word
        else:
            operands.append(w)
    return pairs, operands
