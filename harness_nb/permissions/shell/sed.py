"""Whether a sed script only prints and edits its stream: ``sed_script_is_safe``.

sed can write files (``w``, ``W``, the ``w`` flag of ``s``), run commands (``e``) and
read files (``r``, ``R``), so ``sed`` is read-only only when its script has none of them.
The script is read the way GNU sed reads it — addresses, then one command and its
arguments, up to ``;``, a newline or ``}`` — by ``_SedLexer``, whose methods each read one
part and return the index just past it, or ``-1`` where the text is not sed it knows (which
makes the script unsafe: what cannot be read cannot be vouched for).
"""

from __future__ import annotations

_SIMPLE = set("pPdDnNgGhHxlz=FqQ")
"""Commands with no argument but an optional number (``q5``, ``l 40``)."""
_LABELS = set(":bBtT")
"""Commands whose argument is a label, running to ``;`` or the end of the line."""
_TEXT = set("aic")
"""Commands whose argument is text, running to the end of the line."""
_S_FLAGS = set("gpiImM0123456789")
"""Flags of ``s`` that neither write nor run (``w`` and ``e`` are not among them)."""


def sed_script_is_safe(script: str) -> bool:
    """Whether a sed script only prints and edits the stream: no ``w``/``W`` (write a file),
    ``e`` (run a command), ``r``/``R`` (read a file) commands or flags. Anything it cannot
    read as sed is unsafe."""
    lexer = _SedLexer(script)
    i = 0
    while i < len(script):
        i = lexer.command(i)
        if i == -1:
            return False
    return True


class _SedLexer:
    """Reads one sed script; every method takes the index where its part starts."""

    def __init__(self, script: str) -> None:
        self.s = script
        self.n = len(script)

    def command(self, i: int) -> int:
        """Past one command with its addresses and arguments (or a blank, ``;`` or comment)."""
        s, n = self.s, self.n
        if s[i] in " \t\n;":
            return i + 1
        if s[i] == "#":
            end = s.find("\n", i)
            return n if end == -1 else end
        i = self.address(i)
        if i != -1 and i < n and s[i] == ",":
            i = self.address(i + 1)
        if i == -1:
            return -1
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            return -1
        name = s[i]
        if name in "{}":
            return i + 1
        i = self.arguments(name, i + 1)
        if i == -1:
            return -1
        while i < n and s[i] in " \t":
            i += 1
        return -1 if i < n and s[i] not in ";\n}#" else i

    def arguments(self, name: str, i: int) -> int:
        """Past the arguments of command ``name``; ``-1`` for a command that writes, runs or
        reads (``w W r R e``) or one sed does not have."""
        s, n = self.s, self.n
        if name in _SIMPLE:
            while i < n and s[i].isdigit():
                i += 1
        elif name in _LABELS:
            while i < n and s[i] not in ";\n":
                i += 1
        elif name in _TEXT:
            while i < n and s[i] != "\n":
                i += 2 if s[i] == "\\" else 1
        elif name in "sy":
            return self.substitution(name, i)
        else:
            return -1
        return i

    def substitution(self, name: str, i: int) -> int:
        """Past ``s/regex/replacement/flags`` or ``y/from/to/`` (any delimiter)."""
        s, n = self.s, self.n
        delim = s[i : i + 1]
        if not delim or delim in "\n\\":
            return -1
        i = self.regex(i + 1, delim)
        if i == -1:
            return -1
        while i < n and s[i] != delim:  # the replacement
            if s[i] == "\n" and (i == 0 or s[i - 1] != "\\"):
                return -1
            i += 2 if s[i] == "\\" else 1
        if i >= n:
            return -1
        i += 1
        while i < n and name == "s" and s[i] in _S_FLAGS:
            i += 1
        return i

    def address(self, i: int) -> int:
        """Past one address: a line number (``3``, ``1~2``), ``$``, or a regex (``/x/``,
        ``\\%x%``, with ``I``/``M``); ``i`` itself where there is none."""
        s, n = self.s, self.n
        if i < n and s[i].isdigit():
            while i < n and (s[i].isdigit() or s[i] == "~"):
                i += 1
        elif i < n and s[i] == "$":
            i += 1
        elif i < n and (s[i] == "/" or s[i] == "\\"):
            delim = "/" if s[i] == "/" else s[i + 1 : i + 2]
            if not delim or delim in "\n\\":
                return -1
            i = self.regex(i + (1 if s[i] == "/" else 2), delim)
            while 0 <= i < n and s[i] in "IM":
                i += 1
        return i

    def regex(self, i: int, delim: str) -> int:
        """Past the closing ``delim`` of a regex (brackets may hold it, as in GNU sed)."""
        s, n = self.s, self.n
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
            elif c == "[":
                i = self.bracket(i)
                if i == -1:
                    return -1
            elif c == delim:
                return i + 1
            elif c == "\n":
                return -1
            else:
                i += 1
        return -1

    def bracket(self, i: int) -> int:
        """Past a bracket expression ``[…]`` (``[]x]``, ``[^]x]``, ``[[:alpha:]]`` …)."""
        s, n = self.s, self.n
        j = i + 1
        if j < n and s[j] == "^":
            j += 1
        if j < n and s[j] == "]":
            j += 1
        while j < n and s[j] != "]":
            if s.startswith(("[:", "[.", "[="), j):
                close = s.find(s[j + 1] + "]", j + 2)
                if close == -1:
                    return -1
                j = close + 2
            else:
                j += 1
        return -1 if j >= n else j + 1
