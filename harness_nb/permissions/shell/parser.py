"""Shell command syntax for approvals: a small tokenizer of bash's grammar, careful rather
than complete.

``parse_command(text)`` returns a ``Script``: every simple command bash would run, in
order — across ``|``, ``&&``, ``||``, ``;``, ``&`` and newlines, inside subshells, braces,
``if``/``for``/``while``/``case`` bodies and function definitions — with its words (quotes
removed), its redirections and its ``NAME=value`` prefixes. Command substitutions
(``$(…)``, backticks, ``${…}`` holding one), process substitutions (``<(…)``, ``>(…)``) are
parsed too, into the ``subs`` of the word that holds them; so are here-documents.

A word whose value cannot be known without running bash (any expansion, an ANSI-C quote)
has ``literal=False``; a word bash may turn into several file names has ``glob=True``;
one that starts with an unquoted ``~`` has ``tilde=True``. ``Script.compound`` names the
syntax beyond a plain list of commands that was seen (``subshell``, ``control``, …).

The read-only allow-list (``policy.py``) accepts only scripts of literal words with
no compound syntax and no substitutions: a subset whose meaning is the same to bash and to
this parser, so a difference between the two cannot turn into a command run unasked. The
reasons shown on an approval card look at every simple command found, however nested.
Input is bounded (``MAX_COMMAND_CHARS``, ``MAX_DEPTH`` nested substitutions); past the
bounds, or at syntax the parser cannot follow (an unterminated quote), ``Script.error``
says why and the command is treated as not understood.

No third-party parser: a full grammar (tree-sitter-bash) is error-tolerant and differs
from bash in corner cases, which for an allow-list is a way in; bashlex is GPL-3.0 and
unmaintained. The allow-list needs only the subset above, parsed exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_COMMAND_CHARS = 20_000
"""Longer commands are not parsed (and so never allowed without asking)."""
MAX_DEPTH = 12
"""Most nested substitutions followed."""

# Reserved words that may open or continue a compound command where a command starts.
_CONTROL = frozenset({"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "!", "time", "coproc"})
_HEADER = frozenset({"for", "select"})  # their words up to ';' or a newline are not a command
_WORD_END = frozenset(" \t\n|&;()<>")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_FD = re.compile(r"\d+(?=[<>])")
_REDIRECTS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">")


@dataclass
class Word:
    """One word: ``text`` is its value with quotes removed (expansions left as written),
    ``raw`` the source text."""

    text: str
    raw: str
    literal: bool = True
    glob: bool = False
    tilde: bool = False
    subs: list[Script] = field(default_factory=list)


@dataclass
class Redirect:
    """``op`` is one of ``> >> >| &> &>> <> < <<< <<`` or ``dup`` (``2>&1``, ``>&-``);
    ``fd`` the descriptor written before it; ``target`` the file (a here-document's
    delimiter for ``<<``, whose text is ``body``)."""

    op: str
    fd: int | None
    target: Word
    body: str | None = None
    quoted_body: bool = False
    subs: list[Script] = field(default_factory=list)

    @property
    def writes(self) -> bool:
        """Whether the redirection opens its target for writing."""
        return self.op in {">", ">>", ">|", "&>", "&>>", "<>"}


@dataclass
class Command:
    """A simple command: ``NAME=value`` prefixes, words (the first is the command name) and
    redirections, in the order written."""

    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    assignments: list[Word] = field(default_factory=list)

    @property
    def name(self) -> str | None:
        return self.words[0].text if self.words else None

    def text(self) -> str:
        """The words' values joined by single spaces (what a rule is matched against)."""
        return " ".join(w.text for w in self.words)

    def subscripts(self) -> Iterator[Script]:
        for word in (*self.assignments, *self.words):
            yield from word.subs
        for redirect in self.redirects:
            yield from redirect.target.subs
            yield from redirect.subs


@dataclass
class Pipeline:
    """Commands joined by ``|``; ``background`` when it ended with ``&``."""

    commands: list[Command] = field(default_factory=list)
    background: bool = False


@dataclass
class Script:
    """What ``parse_command`` found: the pipelines in order (compound commands flattened),
    the names of functions defined, the compound syntax seen, and ``error`` when the text
    could not be followed."""

    pipelines: list[Pipeline] = field(default_factory=list)
    compound: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    loose: list[Word] = field(default_factory=list)  # words outside commands (loop headers, case patterns)
    error: str | None = None

    def walk(self) -> Iterator[Script]:
        """This script and every script nested in it (substitutions), depth first."""
        yield self
        for pipeline in self.pipelines:
            for command in pipeline.commands:
                for sub in command.subscripts():
                    yield from sub.walk()
        for word in self.loose:
            for sub in word.subs:
                yield from sub.walk()

    def commands(self) -> Iterator[Command]:
        """Every simple command, nested ones included."""
        for script in self.walk():
            for pipeline in script.pipelines:
                yield from pipeline.commands

    @property
    def errors(self) -> list[str]:
        return [s.error for s in self.walk() if s.error]

    @property
    def plain(self) -> bool:
        """Only simple commands of literal words joined by ``|``, ``&&``, ``||``, ``;`` and
        newlines, each parsed in full: what the allow-list can judge."""
        if self.error or self.compound or self.loose:
            return False
        for pipeline in self.pipelines:
            for command in pipeline.commands:
                parts = [*command.assignments, *command.words, *(r.target for r in command.redirects)]
                if any(not w.literal or w.subs for w in parts):
                    return False
                if any(r.subs or (r.body is not None and not r.quoted_body and "$" in r.body) for r in command.redirects):
                    return False
        return True


class _SyntaxProblem(Exception):
    pass


class _Parser:
    """Reads ``text`` from ``start``; a nested parser (``$(…)``) stops at its ``)``."""

    def __init__(self, text: str, depth: int = 0, start: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise _SyntaxProblem(f"nested more than {MAX_DEPTH} levels deep")
        self.s = text
        self.i = start
        self.depth = depth
        self.script = Script()
        self.pipeline = Pipeline()
        self.command = Command()
        self.pending: list[tuple[Redirect, bool]] = []  # here-documents waiting for their body
        self.header = False  # inside a for/select header: words are not a command
        self.case_patterns = False  # between `in`/`;;` and `)` of a case
        self.cases = 0
        self.function_name = False  # the word after `function` names a function

    # ------------------------------------------------------------------ structure
    def parse(self, stop: str | None = None) -> Script:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif s.startswith("\\\n", self.i):
                self.i += 2
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end == -1 else end
            elif c == "\n":
                self.i += 1
                self._end_pipeline()
                self._read_heredocs()
            elif c == ";":
                if s.startswith(";;", self.i) or s.startswith(";&", self.i):
                    self.i += 3 if s.startswith(";;&", self.i) else 2
                    self.case_patterns = self.cases > 0
                else:
                    self.i += 1
                self._end_pipeline()
            elif c == "&" and s.startswith("&&", self.i):
                self.i += 2
                self._end_pipeline()
            elif c == "&" and not s.startswith("&>", self.i):
                self.i += 1
                self.pipeline.background = True
                self.script.compound.add("background")
                self._end_pipeline()
            elif c == "|" and s.startswith("||", self.i):
                self.i += 2
                self._end_pipeline()
            elif c == "|":
                self.i += 2 if s.startswith("|&", self.i) else 1
                if not self.case_patterns:
                    self._end_command()
            elif c == "(":
                self._open_paren()
            elif c == ")":
                self.i += 1
                if self.case_patterns:
                    self.case_patterns = False
                    self.command = Command()
                elif stop == ")":
                    break
                else:
                    self.script.compound.add("unknown")
            elif (c in "<>" and not s.startswith("<(", self.i) and not s.startswith(">(", self.i)) or (
                c in "&0123456789" and self._redirect_ahead()
            ):
                self._redirect()
            else:
                self._place(self._word())
        else:
            if stop == ")":
                raise _SyntaxProblem("a '(' or '$(' is not closed")
        self._end_pipeline()
        self._read_heredocs()
        return self.script

    def _redirect_ahead(self) -> bool:
        """``&>`` or digits written right before ``<``/``>`` (``2>``): a redirection. The
        main loop is always at the start of a token here, as bash requires for a number."""
        return self.s.startswith("&>", self.i) or bool(_FD.match(self.s, self.i))

    def _open_paren(self) -> None:
        s = self.s
        cmd = self.command
        if self.case_patterns:
            self.i += 1
            return
        if not cmd.words and not cmd.assignments and not cmd.redirects:
            if s.startswith("((", self.i):
                self.i += 2
                self._skip_arithmetic()
                self.script.compound.add("control")
                return
            self.i += 1
            self.script.compound.add("subshell")
            self._nested_inline()
            return
        rest = s[self.i + 1 :].lstrip(" \t")
        if len(cmd.words) == 1 and not cmd.assignments and rest.startswith(")"):
            self.script.functions.add(cmd.words[0].text)
            self.script.compound.add("function")
            self._loose(cmd.words[0])
            self.command = Command()
            self.i = s.index(")", self.i) + 1
            return
        self.i += 1
        self.script.compound.add("unknown")

    def _nested_inline(self) -> None:
        """A subshell's commands join this script (their order and kind are what matter)."""
        inner = _Parser(self.s, self.depth + 1, self.i)
        sub = inner.parse(stop=")")
        self.i = inner.i
        self.script.pipelines.extend(p for p in sub.pipelines if p.commands)
        self.script.compound |= sub.compound
        self.script.functions |= sub.functions
        self.script.loose.extend(sub.loose)

    def _place(self, word: Word) -> None:
        cmd = self.command
        keyword = word.text if word.literal and word.raw == word.text and not cmd.words else None
        if keyword == "esac" and self.cases:
            self.cases -= 1
            self.case_patterns = False
            return
        if self.function_name or self.header or self.case_patterns:
            self.function_name = False
            self._loose(word)
            return
        if not cmd.words and _ASSIGNMENT.match(word.raw):
            cmd.assignments.append(word)
            return
        if keyword in _CONTROL or keyword in ("{", "}"):
            self.script.compound.add("group" if keyword in ("{", "}") else "control")
        elif keyword in _HEADER or keyword == "case":
            self.script.compound.add("control")
            self.header = True
            self.cases += keyword == "case"
        elif keyword == "function":
            self.script.compound.add("function")
            self.function_name = True
        elif keyword == "[[":
            self.script.compound.add("control")
            self._conditional()
        else:
            cmd.words.append(word)

    def _loose(self, word: Word) -> None:
        """A word that is not part of a command (a loop header, a case pattern, a function
        name): kept for the substitutions it may hold."""
        self.script.loose.append(word)
        if self.header and self.cases and word.literal and word.text == "in":
            self.header = False
            self.case_patterns = True

    def _conditional(self) -> None:
        """``[[ … ]]``: its ``<``, ``>``, ``(`` and ``&&`` are operators of the test, not of
        the shell. Skip to ``]]``, keeping the substitutions inside."""
        m = re.compile(r"(?:^|(?<=[\s;&|]))\]\](?=$|[\s;&|)])").search(self.s, self.i)
        end = m.start() if m else len(self.s)
        self.script.loose.append(Word("", "", False, subs=_substitutions_in(self.s[self.i : end], self.depth + 1)))
        self.i = m.end() if m else end

    def _end_command(self) -> None:
        cmd = self.command
        if cmd.words or cmd.assignments or cmd.redirects:
            self.pipeline.commands.append(cmd)
        self.command = Command()

    def _end_pipeline(self) -> None:
        self._end_command()
        self.header = False
        if self.pipeline.commands:
            self.script.pipelines.append(self.pipeline)
        self.pipeline = Pipeline()

    # ------------------------------------------------------------------ redirections
    def _redirect(self) -> None:
        s = self.s
        fd: int | None = None
        m = _FD.match(s, self.i)
        if m:
            fd = int(m.group())
            self.i = m.end()
        op = next(o for o in _REDIRECTS if s.startswith(o, self.i))
        self.i += len(op)
        while self.i < len(s) and (s[self.i] in " \t" or s.startswith("\\\n", self.i)):
            self.i += 2 if s[self.i] == "\\" else 1
        if self.i >= len(s) or s[self.i] in "\n;&|()<>":
            raise _SyntaxProblem(f"'{op}' has no target")
        target = self._word()
        if op in (">&", "<&") and re.fullmatch(r"\d+-?|-", target.text):
            op = "dup"
        elif op == ">&":
            op = "&>"
        elif op == "<&":
            op = "<"
        redirect = Redirect("<<" if op == "<<-" else op, fd, target)
        if op in ("<<", "<<-"):
            quoted = target.raw != target.text or any(q in target.raw for q in "'\"\\")
            redirect.quoted_body = quoted
            self.pending.append((redirect, op == "<<-"))
        self.command.redirects.append(redirect)

    def _read_heredocs(self) -> None:
        s = self.s
        for redirect, strip_tabs in self.pending:
            delimiter = redirect.target.text
            lines = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                line = s[self.i :] if end == -1 else s[self.i : end]
                self.i = len(s) if end == -1 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            redirect.body = "\n".join(lines)
            if not redirect.quoted_body:
                redirect.subs = _substitutions_in(redirect.body, self.depth + 1)
        self.pending = []

    # ------------------------------------------------------------------ words
    def _word(self) -> Word:
        s = self.s
        start = self.i
        text: list[str] = []
        literal = True
        glob = False
        braces = False
        subs: list[Script] = []
        tilde = s.startswith("~", self.i)
        while self.i < len(s):
            c = s[self.i]
            if c in _WORD_END:
                if c in "<>" and s.startswith("(", self.i + 1):
                    piece = self.i
                    self.i += 2
                    subs.append(self._nested(")"))
                    literal = False
                    text.append(s[piece : self.i])
                    continue
                if c == "(" and _ASSIGNMENT.match("".join(text)) and "".join(text).endswith("="):
                    self.i += 1
                    subs.extend(self._balanced(")"))
                    literal = False
                    continue
                break
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                text.append(s[self.i + 1 : self.i + 2] or "\\")
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end == -1:
                    raise _SyntaxProblem("a single quote is not closed")
                text.append(s[self.i + 1 : end])
                self.i = end + 1
            elif c == '"':
                self.i += 1
                value, ok, found = self._double_quoted()
                text.append(value)
                literal = literal and ok
                subs.extend(found)
            elif c in "$`":
                value, ok, found = self._expansion(quoted=False)
                text.append(value)
                literal = literal and ok
                subs.extend(found)
            else:
                if c in "*?[":
                    glob = True
                elif c == "{":
                    braces = True
                elif c == "}" and braces:
                    glob = True
                text.append(c)
                self.i += 1
        return Word("".join(text), s[start : self.i], literal, glob, tilde, subs)

    def _double_quoted(self) -> tuple[str, bool, list[Script]]:
        s = self.s
        out: list[str] = []
        literal = True
        subs: list[Script] = []
        while self.i < len(s):
            c = s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out), literal, subs
            if c == "\\":
                nxt = s[self.i + 1 : self.i + 2]
                if nxt == "\n":
                    pass
                elif nxt in ("$", "`", '"', "\\"):
                    out.append(nxt)
                else:
                    out.append("\\" + nxt)
                self.i += 2
            elif c in "$`":
                value, ok, found = self._expansion(quoted=True)
                out.append(value)
                literal = literal and ok
                subs.extend(found)
            else:
                out.append(c)
                self.i += 1
        raise _SyntaxProblem("a double quote is not closed")

    def _expansion(self, *, quoted: bool) -> tuple[str, bool, list[Script]]:
        """At a ``$`` or a backtick: the text, whether it is literal, the scripts inside."""
        if self.s[self.i] == "`":
            return "`…`", False, [self._backtick()]
        return self._dollar(quoted=quoted)

    def _dollar(self, *, quoted: bool = False) -> tuple[str, bool, list[Script]]:
        """At a ``$``: the text it stands for (as written when it expands), whether it is
        literal, and the scripts inside it."""
        s = self.s
        start = self.i
        nxt = s[self.i + 1 : self.i + 2]
        if s.startswith("$((", self.i):
            self.i += 3
            subs = self._skip_arithmetic()
            return s[start : self.i], False, subs
        if nxt == "(":
            self.i += 2
            sub = self._nested(")")
            return s[start : self.i], False, [sub]
        if nxt == "{":
            self.i += 2
            subs = self._balanced("}")
            return s[start : self.i], False, subs
        if nxt == "'" and not quoted:
            i = self.i + 2
            while i < len(s) and s[i] != "'":
                i += 2 if s[i] == "\\" else 1
            if i >= len(s):
                raise _SyntaxProblem("a $'…' quote is not closed")
            self.i = i + 1
            return s[start : self.i], False, []
        if nxt == '"' and not quoted:
            self.i += 2
            value, _ok, subs = self._double_quoted()
            return value, False, subs
        m = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]", s[self.i + 1 :])
        if m:
            self.i += 1 + m.end()
            return s[start : self.i], False, []
        self.i += 1
        return "$", True, []

    def _nested(self, stop: str) -> Script:
        inner = _Parser(self.s, self.depth + 1, self.i)
        sub = inner.parse(stop=stop)
        self.i = inner.i
        return sub

    def _backtick(self) -> Script:
        s = self.s
        i = self.i + 1
        out: list[str] = []
        while i < len(s) and s[i] != "`":
            if s[i] == "\\" and s[i + 1 : i + 2] in ("`", "$", "\\"):
                out.append(s[i + 1])
                i += 2
            else:
                out.append(s[i])
                i += 1
        if i >= len(s):
            raise _SyntaxProblem("a backtick is not closed")
        self.i = i + 1
        return _Parser("".join(out), self.depth + 1).parse()

    def _balanced(self, close: str) -> list[Script]:
        """Skip to the ``close`` matching an opening just read (``${…}``, an array), through
        quotes; the substitutions met on the way are returned."""
        s = self.s
        opener = "{" if close == "}" else "("
        depth = 1
        subs: list[Script] = []
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end == -1:
                    raise _SyntaxProblem("a single quote is not closed")
                self.i = end + 1
            elif c == '"':
                self.i += 1
                subs.extend(self._double_quoted()[2])
            elif c == "$" or c == "`":
                subs.extend(self._dollar()[2] if c == "$" else [self._backtick()])
            elif c == opener:
                depth += 1
                self.i += 1
            elif c == close:
                depth -= 1
                self.i += 1
                if depth == 0:
                    return subs
            else:
                self.i += 1
        raise _SyntaxProblem(f"a '{opener}' is not closed")

    def _skip_arithmetic(self) -> list[Script]:
        """After ``((`` / ``$((``: skip to the matching ``))``."""
        subs = self._balanced(")")
        if self.s.startswith(")", self.i):
            self.i += 1
        return subs


def _substitutions_in(text: str, depth: int) -> list[Script]:
    """The substitutions in here-document text whose delimiter was not quoted."""
    parser = _Parser(text + '"', depth)
    try:
        return parser._double_quoted()[2]
    except _SyntaxProblem:
        return []


def parse_command(text: str) -> Script:
    """Parse ``text`` as bash would split it (see the module doc). Never raises: syntax the
    parser cannot follow, or input past its bounds, sets ``Script.error``."""
    if len(text) > MAX_COMMAND_CHARS:
        return Script(error=f"longer than {MAX_COMMAND_CHARS:,} characters")
    try:
        return _Parser(text).parse()
    except _SyntaxProblem as exc:
        return Script(error=str(exc))
    except RecursionError:
        return Script(error="nested too deeply")
