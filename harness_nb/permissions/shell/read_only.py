"""The allow-list of read-only shell commands, and the argument rules that keep them so.

``read_only_problem(words, paths)`` says why one simple command (its words, quotes removed,
all literal) is not known to be read-only — ``None`` when it is. A command is on the list
only with arguments that cannot write, run other programs or reach the network: ``find``
without ``-delete``/``-exec``/``-fprint``, ``sed`` scripts without ``w``/``e``/``-i``, ``awk``
programs without ``system``, pipes or output redirection, ``git`` subcommands that only
read (``branch`` and ``tag`` only listing), ``sort`` without ``-o`` and so on. Each
positional argument that names a file is checked by ``paths`` (it must stay in the
workdir). Options are read GNU style: clusters (``-rn``), attached values (``-n5``,
``--max-count=5``) and options after operands.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .sed import sed_script_is_safe

# The reason an argument was refused: None when the argument is fine.
PathCheck = Callable[[list[str]], str | None]

NOT_READ_ONLY = "not a known read-only command"


@dataclass(frozen=True)
class Spec:
    """How to read one command's arguments.

    ``values``: short options followed by a value; ``long_values``: long options that take
    the next word when written without ``=``; ``forbid`` / ``forbid_long``: options (long
    ones by prefix) that make the command write or run something; ``pattern``: the first
    operand is a pattern or script, not a file, unless one of ``pattern_options`` gave it;
    ``paths``: operands name files; ``file_options``: options whose value names a file;
    ``most``: the most operands allowed."""

    values: str = ""
    long_values: frozenset[str] = frozenset()
    forbid: str = ""
    forbid_long: tuple[str, ...] = ()
    pattern: bool = False
    pattern_options: frozenset[str] = frozenset()
    paths: bool = True
    file_options: frozenset[str] = frozenset()
    most: int | None = None
    check: Callable[[list[tuple[str, str | None]], list[str]], bool] | None = None


def split_options(
    args: list[str], values: str = "", long_values: frozenset[str] = frozenset()
) -> tuple[list[tuple[str, str | None]], list[str]]:
    """GNU-style split of ``args`` into ``(option, value)`` pairs and operands."""
    options: list[tuple[str, str | None]] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            operands.extend(args[i:])
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if not eq and name in long_values and i < len(args):
                value, i = args[i], i + 1
                eq = "="
            options.append((name, value if eq else None))
        elif arg.startswith("-") and arg != "-":
            for j, letter in enumerate(arg[1:], start=1):
                if letter in values:
                    rest = arg[j + 1 :]
                    if not rest and i < len(args):
                        rest, i = args[i], i + 1
                    options.append(("-" + letter, rest))
                    break
                options.append(("-" + letter, None))
        else:
            operands.append(arg)
    return options, operands


def _grep_like(rg: bool) -> Spec:
    common = {"--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context"}
    if rg:
        return Spec(
            values="efgtTmABCMjEr",
            long_values=frozenset(common | {"--glob", "--iglob", "--type", "--type-not", "--max-columns",
                                            "--threads", "--encoding", "--replace", "--max-depth", "--sort",
                                            "--sortr", "--ignore-file", "--type-add", "--colors", "--max-filesize"}),
            forbid="zL",
            forbid_long=("--pre", "--search-zip", "--follow", "--hostname-bin"),
            pattern=True,
            pattern_options=frozenset({"-e", "-f", "--regexp", "--file", "--files", "--type-list"}),
            file_options=frozenset({"-f", "--file", "--ignore-file"}),
        )
    return Spec(
        values="efmABCDd",
        long_values=frozenset(common | {"--include", "--exclude", "--exclude-dir", "--exclude-from",
                                        "--devices", "--directories", "--label", "--binary-files"}),
        forbid="R",
        forbid_long=("--dereference-recursive",),
        pattern=True,
        pattern_options=frozenset({"-e", "-f", "--regexp", "--file"}),
        file_options=frozenset({"-f", "--file", "--exclude-from"}),
    )


def _date(options: list[tuple[str, str | None]], operands: list[str]) -> bool:
    return all(o.startswith("+") for o in operands)


def _sed(options: list[tuple[str, str | None]], operands: list[str]) -> bool:
    scripts = [v or "" for name, v in options if name in ("-e", "--expression")]
    if not scripts:
        if not operands:
            return False
        scripts = [operands[0]]
    return all(sed_script_is_safe(s) for s in scripts)


def _awk(options: list[tuple[str, str | None]], operands: list[str]) -> bool:
    return bool(operands) and awk_program_is_safe(operands[0])


def _uniq(options: list[tuple[str, str | None]], operands: list[str]) -> bool:
    return len(operands) <= 1  # a second operand is the file uniq writes


_FLAGS_ONLY = Spec(paths=False, most=0)
_TEXT = Spec(paths=False)

SPECS: dict[str, Spec] = {
    "ls": Spec(values="ITw", long_values=frozenset({"--ignore", "--hide", "--width", "--tabsize", "--format",
                                                      "--sort", "--time", "--block-size", "--quoting-style"})),
    "cat": Spec(),
    "head": Spec(values="nc", long_values=frozenset({"--lines", "--bytes"})),
    "tail": Spec(values="ncs", long_values=frozenset({"--lines", "--bytes", "--pid", "--sleep-interval"})),
    "wc": Spec(file_options=frozenset({"--files0-from"})),
    "grep": _grep_like(rg=False),
    "egrep": _grep_like(rg=False),
    "fgrep": _grep_like(rg=False),
    "rg": _grep_like(rg=True),
    "sort": Spec(values="kotST", long_values=frozenset({"--key", "--field-separator", "--buffer-size",
                                                          "--temporary-directory", "--parallel", "--batch-size"}),
                 forbid="o", forbid_long=("--output", "--compress-program", "--random-source", "--files0-from")),
    "uniq": Spec(values="fsw", long_values=frozenset({"--skip-fields", "--skip-chars", "--check-chars"}),
                 check=_uniq),
    "cut": Spec(values="bcdf", long_values=frozenset({"--bytes", "--characters", "--delimiter", "--fields",
                                                        "--output-delimiter"})),
    "paste": Spec(values="d", long_values=frozenset({"--delimiters"})),
    "join": Spec(values="jt12eo"),
    "comm": Spec(),
    "diff": Spec(values="CUFIXSLxD", long_values=frozenset({"--label", "--exclude", "--exclude-from",
                                                              "--ignore-matching-lines"}),
                 file_options=frozenset({"-X", "--exclude-from", "--from-file", "--to-file"})),
    "cmp": Spec(values="in"),
    "nl": Spec(values="bdfhilnsvw"),
    "tac": Spec(values="s"),
    "rev": Spec(),
    "fold": Spec(values="w"),
    "column": Spec(values="csoN"),
    "tr": Spec(paths=False, most=2),
    "md5sum": Spec(), "sha1sum": Spec(), "sha256sum": Spec(), "sha512sum": Spec(), "b2sum": Spec(),
    "cksum": Spec(),
    "strings": Spec(values="ntTe"),
    "od": Spec(values="AjNStw"),
    "hexdump": Spec(values="efns"),
    "xxd": Spec(values="cglosn", forbid="r", most=1),
    "zcat": Spec(), "bzcat": Spec(), "xzcat": Spec(),
    "file": Spec(values="mfFeP", forbid="C", forbid_long=("--compile",),
                 file_options=frozenset({"-m", "-f", "--magic-file", "--files-from"})),
    "stat": Spec(values="c", long_values=frozenset({"--format", "--printf"})),
    "du": Spec(values="dBtX", long_values=frozenset({"--max-depth", "--block-size", "--threshold", "--exclude"}),
               forbid_long=("--files0-from",)),
    "df": Spec(values="Btx", long_values=frozenset({"--block-size", "--type", "--exclude-type", "--output"})),
    "tree": Spec(values="LPIH", forbid="o"),
    "sed": Spec(values="el", long_values=frozenset({"--expression", "--line-length"}), forbid="if",
                forbid_long=("--in-place", "--file"), pattern=True,
                pattern_options=frozenset({"-e", "--expression"}), check=_sed),
    # -f/-E/-i/-l/-e bring code that cannot be read here; -d/-o/-p (and every long option:
    # --dump-variables, --profile, …) write files
    "awk": Spec(values="Fv", forbid="fEilepdoD", forbid_long=("--",), pattern=True, check=_awk),
    "echo": _TEXT,
    "printf": Spec(paths=False, forbid="v"),  # -v sets a variable (PATH, say) for what follows
    "pwd": _FLAGS_ONLY,
    "true": _TEXT, "false": _TEXT, ":": _TEXT,
    "test": _TEXT, "[": _TEXT,
    "sleep": _TEXT,
    "seq": _TEXT,
    "expr": _TEXT,
    "basename": _TEXT, "dirname": _TEXT,
    "realpath": _TEXT, "readlink": _TEXT,
    "which": _TEXT, "whereis": _TEXT, "type": _TEXT,
    "whoami": _FLAGS_ONLY, "id": _TEXT, "groups": _TEXT,
    "uname": _FLAGS_ONLY, "arch": _FLAGS_ONLY, "nproc": _FLAGS_ONLY, "lscpu": _FLAGS_ONLY,
    "free": _FLAGS_ONLY, "uptime": _FLAGS_ONLY,
    "hostname": Spec(paths=False, most=0, forbid="Fb", forbid_long=("--file", "--boot")),
    "ps": Spec(values="opuUgGtC", paths=False),
    "date": Spec(values="dfr", forbid="s", forbid_long=("--set",), check=_date,
                 file_options=frozenset({"-f", "-r", "--file", "--reference"})),
}
SPECS["gawk"] = SPECS["mawk"] = SPECS["nawk"] = SPECS["awk"]

# Commands that bash runs itself: no program on PATH can stand in for them.
BUILTINS = frozenset({"echo", "printf", "pwd", "true", "false", ":", "test", "[", "type", "cd", "command"})

_GIT_GLOBAL_OK = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"})
_GIT_READ = frozenset({
    "status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "shortlog", "describe", "ls-tree",
    "cat-file", "grep", "show-ref", "merge-base", "name-rev", "count-objects", "rev-list", "whatchanged",
    "cherry", "diff-tree", "diff-files", "diff-index", "for-each-ref", "check-ignore", "check-attr", "version",
    "show-branch",
})
_GIT_FORBID = ("--output", "--ext-diff", "--open-files-in-pager", "-O", "--exec", "--upload-pack", "--receive-pack")
_GIT_LISTING = {
    "branch": (frozenset({"-a", "-r", "-v", "-vv", "--all", "--remotes", "--verbose", "--list", "-l", "--contains",
                          "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format", "--color",
                          "--no-color", "--show-current", "--column", "--no-column", "-i", "--ignore-case",
                          "--abbrev", "--no-abbrev"})),
    "tag": (frozenset({"-l", "--list", "-n", "--contains", "--no-contains", "--merged", "--no-merged",
                       "--points-at", "--sort", "--format", "--column", "--no-column", "-i", "--ignore-case",
                       "--color"})),
}
_GIT_LIST_OPERANDS = frozenset({"--list", "-l", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"})


def git_problem(args: list[str], paths: PathCheck) -> str | None:
    """Why ``git <args>`` is not known to be read-only."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] not in _GIT_GLOBAL_OK:
            return NOT_READ_ONLY  # -c, -C, --git-dir, --exec-path, … change what git runs
        i += 1
    if i >= len(args):
        return NOT_READ_ONLY
    sub, rest = args[i], args[i + 1 :]
    if any(a == f or a.startswith(f + "=") or (f == "-O" and a.startswith("-O")) for a in rest for f in _GIT_FORBID):
        return NOT_READ_ONLY
    options = [a for a in rest if a.startswith("-")]
    operands = [a for a in rest if not a.startswith("-")]
    if sub in _GIT_READ:
        values = [o.partition("=")[2] for o in options if "=" in o]  # --contents=/etc/x
        return paths([a for a in [*operands, *values] if a.startswith(("/", "~")) or "/../" in f"/{a}/"])
    if sub in _GIT_LISTING:
        allowed = _GIT_LISTING[sub]
        names = [o.partition("=")[0] for o in options]
        if any(n not in allowed and not re.fullmatch(r"-n\d*", n) for n in names):
            return NOT_READ_ONLY
        if operands and not _GIT_LIST_OPERANDS.intersection(names):
            return NOT_READ_ONLY  # `git branch x` creates a branch
        return None
    if sub == "remote":
        return None if (not rest or rest in (["-v"], ["--verbose"]) or rest[:1] == ["get-url"]) else NOT_READ_ONLY
    if sub == "stash":
        return None if rest[:1] in (["list"], ["show"]) else NOT_READ_ONLY
    if sub == "reflog":
        shows = not rest or rest[0] in ("show", "exists") or rest[0].startswith("-")
        return None if shows and not {"expire", "delete"} & set(rest) else NOT_READ_ONLY
    if sub == "worktree":
        return None if rest[:1] == ["list"] else NOT_READ_ONLY
    if sub == "config":
        reads = {"--get", "--get-all", "--get-regexp", "--list", "-l", "--get-urlmatch", "--get-color"}
        writes = {"--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section",
                  "-e", "--edit", "--file", "-f", "--blob"}
        given = {o.partition("=")[0] for o in options}
        return None if given & reads and not given & writes else NOT_READ_ONLY
    return NOT_READ_ONLY


def _pip_problem(args: list[str]) -> str | None:
    options, operands = split_options(args)
    if not operands or operands[0] not in ("list", "show", "freeze"):
        return NOT_READ_ONLY
    # --outdated / --uptodate ask the package index: network, and pip's own code paths
    if any(name in ("-o", "-u", "--outdated", "--uptodate", "--index-url", "-i") for name, _ in options):
        return NOT_READ_ONLY
    return None


def _find_problem(args: list[str], paths: PathCheck) -> str | None:
    starts: list[str] = []
    i = 0
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("(", ")", "!", ","):
        starts.append(args[i])
        i += 1
    for arg in args:
        if arg in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fls", "-L", "-follow", "-files0-from") or (
            arg.startswith("-fprint")
        ):
            return NOT_READ_ONLY
    return paths(starts)


def read_only_problem(words: list[str], paths: PathCheck) -> str | None:
    """Why the simple command ``words`` (a bare command name, then its arguments) is not
    known to be read-only: ``NOT_READ_ONLY`` or what ``paths`` said; ``None`` when it is."""
    name, args = words[0], words[1:]
    if args in (["--version"], ["--help"]) or (re.fullmatch(r"python[0-9.]*", name) and args in (["-V"], ["-VV"])):
        return None
    if name == "git":
        return git_problem(args, paths)
    if name in ("pip", "pip3"):
        return _pip_problem(args)
    if name == "find":
        return _find_problem(args, paths)
    if name == "command":
        return None if args[:1] in (["-v"], ["-V"]) else NOT_READ_ONLY
    spec = SPECS.get(name)
    if spec is None:
        return NOT_READ_ONLY
    options, operands = split_options(args, spec.values, spec.long_values)
    for option, _value in options:
        if option[1:] in spec.forbid and not option.startswith("--") or any(
            option.startswith(f) for f in spec.forbid_long
        ):
            return NOT_READ_ONLY
    if spec.most is not None and len(operands) > spec.most:
        return NOT_READ_ONLY
    if spec.check is not None and not spec.check(options, operands):
        return NOT_READ_ONLY
    if not spec.paths:
        return None
    files = operands
    if spec.pattern and not spec.pattern_options.intersection(o for o, _ in options):
        files = operands[1:]
    files = [*files, *(v for o, v in options if o in spec.file_options and v)]
    return paths(files)


# ---------------------------------------------------------------------- awk
_AWK_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_AWK_PRINT = re.compile(r"\bprintf?\b([^;{}\n]*)")


def awk_program_is_safe(program: str) -> bool:
    """Whether an awk program cannot run commands or write files: no ``system``,
    ``getline``, ``|`` (pipes to and from commands; ``||`` is fine), ``@`` directives, and
    no ``>`` inside a ``print``/``printf`` (a redirection there; elsewhere a comparison)."""
    code = _AWK_STRING.sub('""', program)
    if '"' in code:
        return False  # a string that does not close: not something to reason about
    if re.search(r"\b(system|getline|fflush|close)\b|@", code):
        return False
    if re.search(r"(?<!\|)\|(?!\|)", code):
        return False
    for m in _AWK_PRINT.finditer(code):
        depth = 0
        for ch in m.group(1):
            depth += ch == "("
            depth -= ch == ")"
            if ch == ">" and depth <= 0:
                return False
    return True
