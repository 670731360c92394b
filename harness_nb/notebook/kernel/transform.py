"""Input transformers that make our magics behave in a cell.

* ``PromptMagicTransformer`` (token level, runs before IPython's ``?`` help handling): a line
  ``%@explore what is this?`` stays a magic call with the ``?`` in the prompt, instead of
  becoming a help request. A bare ``%@explore?`` is help on that magic (IPython's own help
  syntax would look up ``explore`` without the ``@`` and report it missing). The assignment
  form ``answer = %agent what is this?`` gets the same treatment.
* ``await_our_magics`` (after the cell is turned into Python): every call of one of our magics
  that is not inside a function gets ``await`` in front, so the run happens on the kernel's
  own loop — the cell stays busy, Run-All stays sequential, and widget clicks still arrive.
* ``name_unknown_agents`` (the same step, first): a ``%@name`` with no such agent becomes
  ``%agents --unknown=name``, whose error lists the agents there are.
"""

from __future__ import annotations

import ast
import re
import tokenize
from collections.abc import Callable
from typing import Any

from IPython.core.inputtransformer2 import EscapedCommand, MagicAssign, TokenTransformBase

OUR_LINE_MAGICS = ("agent", "agents", "task", "team", "mcp", "fix", "approvals")
_HELP_REQUEST = re.compile(r"^%{1,2}@?[\w.-]+\?{1,2}$")
_AGENT_HELP = re.compile(r"^(%{1,2}@[\w.-]+)(\?{1,2})$")


class AgentHelp(TokenTransformBase):
    """``%@name?`` / ``%@name??`` becomes ``%pinfo %@name`` / ``%pinfo2 %@name``."""

    priority = 1

    def transform(self, lines: list[str]) -> list[str]:
        line = lines[self.start_line]
        indent, text = line[: self.start_col], line[self.start_col :].strip()
        found = _AGENT_HELP.match(text)
        if found is None:
            raise SyntaxError(text)  # the manager then tries the next candidate
        magic = "pinfo2" if found.group(2) == "??" else "pinfo"
        call = f"{indent}get_ipython().run_line_magic({magic!r}, {found.group(1)!r})\n"
        return [*lines[: self.start_line], call, *lines[self.start_line + 1 :]]


class PromptMagicAssign(MagicAssign):
    """``x = %agent …?``: IPython's magic assignment, found at the start of the line so that
    it sorts ahead of HelpEnd (which also starts there) instead of after it."""

    priority = 1

    def __init__(self, line_start: tuple[int, int], percent: tuple[int, int]) -> None:
        super().__init__(line_start)
        self.percent_col = percent[1]

    def transform(self, lines: list[str]) -> list[str]:
        self.start_col = self.percent_col  # MagicAssign splits the line at start_col
        return super().transform(lines)


def _assignment_end(line: list[tokenize.TokenInfo], ix: int) -> int | None:
    """Index of the ``=`` of a plain assignment target (``x =``, ``a, b =``) from ``ix``."""
    for i in range(ix, len(line)):
        token = line[i]
        if token.string == "=":
            return i if i > ix else None
        plain = token.type in (tokenize.NAME, tokenize.STRING, tokenize.NUMBER)
        if not plain and token.string not in (",", "(", ")", "[", "]", ".", "*"):
            return None
    return None


class PromptMagicTransformer(EscapedCommand):
    """Parses ``%@name …?`` and ``%agent …?`` as magic calls (priority above HelpEnd's 5)."""

    priority = 1

    @classmethod
    def find(cls, tokens_by_line: list[list[tokenize.TokenInfo]]) -> TokenTransformBase | None:
        for line in tokens_by_line:
            ix = 0
            while ix < len(line) and line[ix].type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL):
                ix += 1
            if ix + 2 >= len(line):
                continue
            if line[ix].string != "%":
                assign = _assignment_end(line, ix)
                if assign is None or assign + 2 >= len(line) or line[assign + 1].string != "%":
                    continue
                magic = line[assign + 2].string
                if (magic == "@" or magic in OUR_LINE_MAGICS) and line[ix].line.rstrip().endswith("?"):
                    return PromptMagicAssign(line[ix].start, line[assign + 1].start)
                continue
            name = line[ix + 1].string
            if name != "@" and name not in OUR_LINE_MAGICS:
                continue
            text = line[ix].line.strip()
            if _AGENT_HELP.match(text):
                return AgentHelp(line[ix].start)
            if not text.rstrip().endswith("?") or _HELP_REQUEST.match(text):
                continue
            return cls(line[ix].start)
        return None


def _is_our_call(node: ast.Call) -> bool:
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("run_line_magic", "run_cell_magic")):
        return False
    inner = func.value
    if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "get_ipython"):
        return False
    if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
        return False
    name = node.args[0].value
    return name.startswith("@") or name in OUR_LINE_MAGICS


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.spots: list[tuple[int, int]] = []
        self._awaited: set[int] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return  # `await` is not allowed in a plain function: leave those calls alone

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        return

    def visit_Await(self, node: ast.Await) -> None:
        self._awaited.add(id(node.value))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _is_our_call(node) and id(node) not in self._awaited:
            self.spots.append((node.lineno, node.col_offset))
        self.generic_visit(node)


def _char(text: str, col: int) -> int:
    """A character index from ``col_offset``, which counts UTF-8 bytes."""
    return len(text.encode("utf-8")[:col].decode("utf-8", "ignore"))


def name_unknown_agents(lines: list[str], known: Callable[[str], bool]) -> list[str]:
    """Turn each call of a ``%@name`` magic with no agent of that name (``known`` says)
    into ``%agents --unknown=name``, which fails the cell naming the agents there are;
    IPython alone says "Line magic function not found" and lists nothing."""
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return lines
    unknown: list[tuple[ast.Call, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_our_call(node):
            magic = node.args[0]
            name = str(magic.value) if isinstance(magic, ast.Constant) else ""
            if name.startswith("@") and not known(name[1:]):
                unknown.append((node, name[1:]))
    out = list(lines)
    for call, name in sorted(unknown, key=lambda found: (found[0].lineno, found[0].col_offset), reverse=True):
        if call.end_lineno is None or call.end_col_offset is None:
            continue
        first, last = out[call.lineno - 1], out[call.end_lineno - 1]
        replaced = f"get_ipython().run_line_magic('agents', {'--unknown=' + name!r})"
        joined = first[: _char(first, call.col_offset)] + replaced + last[_char(last, call.end_col_offset) :]
        out[call.lineno - 1 : call.end_lineno] = [joined]
    return out


def await_our_magics(lines: list[str], shell: Any = None) -> list[str]:
    """Insert ``await`` before top-level calls of our magics (needs ``%autoawait`` on)."""
    if not any("get_ipython()" in ln for ln in lines):
        return lines
    if shell is not None and not getattr(shell, "autoawait", False):
        return lines
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return lines
    finder = _Finder()
    finder.visit(tree)
    if not finder.spots:
        return lines
    out = list(lines)
    for lineno, col in sorted(finder.spots, reverse=True):
        text = out[lineno - 1]
        char = _char(text, col)
        out[lineno - 1] = text[:char] + "await " + text[char:]
    return out
