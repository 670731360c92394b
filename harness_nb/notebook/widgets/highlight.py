"""What an approval card shows of a call's arguments, made readable: a shell command as a
shell block, Python, a notebook cell's source and file contents as highlighted code, an
edit as a diff, any other call as its fields; the raw JSON stays one click away.

Highlighting uses pygments (IPython depends on it) and colours every token with
JupyterLab's own editor colours (``--jp-mirror-editor-*``), so code reads as it does in a
cell, in light and dark themes; the fallbacks are the light theme's.
"""

from __future__ import annotations

import difflib
import html
import json
from typing import Any

from pygments import lexers
from pygments.token import Comment, Keyword, Name, Number, Operator, String, Token
from pygments.util import ClassNotFound

from ...core import ToolCall

CODE_LIMIT = 6000  # characters of code or content shown on a card; the raw JSON has the rest

_TOKEN_COLORS: list[tuple[Any, str]] = [
    (Comment, "var(--jp-mirror-editor-comment-color, #408080);font-style:italic"),
    (String, "var(--jp-mirror-editor-string-color, #ba2121)"),
    (Number, "var(--jp-mirror-editor-number-color, #080)"),
    (Keyword, "var(--jp-mirror-editor-keyword-color, #008000);font-weight:bold"),
    (Name.Builtin, "var(--jp-mirror-editor-builtin-color, #008000)"),
    (Name.Function, "var(--jp-mirror-editor-def-color, #00f)"),
    (Name.Class, "var(--jp-mirror-editor-def-color, #00f)"),
    (Operator.Word, "var(--jp-mirror-editor-keyword-color, #008000);font-weight:bold"),
    (Operator, "var(--jp-mirror-editor-operator-color, #7800c2)"),
]


def _style(token: Any) -> str | None:
    for kind, style in _TOKEN_COLORS:
        if token in kind:
            return style
    return None


def highlighted(code: str, language: str = "python", *, filename: str | None = None) -> str:
    """``code`` as a ``<pre>`` of coloured spans (escaped; cut at ``CODE_LIMIT``)."""
    shown = code if len(code) <= CODE_LIMIT else code[:CODE_LIMIT] + "\n… (cut; the raw arguments have all of it)"
    try:
        lexer = lexers.get_lexer_for_filename(filename) if filename else lexers.get_lexer_by_name(language)
    except ClassNotFound:
        lexer = lexers.get_lexer_by_name("text")
    parts = []
    for token, text in lexer.get_tokens(shown):
        escaped = html.escape(text)
        style = _style(token) if token is not Token.Text else None
        parts.append(f"<span style='color:{style}'>{escaped}</span>" if style else escaped)
    return f"<pre class='hnb-code'>{''.join(parts).rstrip()}</pre>"


def shell_block(command: str) -> str:
    """A shell command as a block with a ``$`` prompt."""
    lines = command if len(command) <= CODE_LIMIT else command[:CODE_LIMIT] + " …"
    prompt = "<span class='hnb-muted' style='user-select:none'>$ </span>"
    return f"<pre class='hnb-shell'>{prompt}{html.escape(lines)}</pre>"


def diff_block(old: str, new: str) -> str:
    """An edit as a unified diff, removed lines red and added lines green."""
    rows = []
    for line in list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2))[2:]:
        colour = {"-": "var(--hnb-err, #b71c1c)", "+": "var(--hnb-ok, #1b5e20)"}.get(line[:1], "var(--hnb-muted, #616161)")
        rows.append(f"<span style='color:{colour}'>{html.escape(line)}</span>")
    body = "\n".join(rows)
    if len(body) > CODE_LIMIT:
        body = body[:CODE_LIMIT] + "\n…"
    return f"<pre class='hnb-diff'>{body}</pre>"


def raw_json(call: ToolCall) -> str:
    """The call's arguments as the model sent them (pretty JSON when it parses), behind a
    toggle."""
    try:
        text = json.dumps(call.parsed_arguments(), indent=2, ensure_ascii=False)
    except ValueError:
        text = call.arguments
    return (
        "<details class='hnb-raw'><summary class='hnb-muted'>raw arguments (JSON)</summary>"
        f"<pre>{html.escape(text[:20000])}</pre></details>"
    )


def _fields(args: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    rows = [
        f"<div><span class='hnb-muted'>{html.escape(k)}:</span> <code>{html.escape(_short(v))}</code></div>"
        for k, v in args.items()
        if k not in skip
    ]
    return "".join(rows)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 300 else text[:299] + "…"


def call_body(call: ToolCall) -> str:
    """The readable body of a card for ``call``, then the raw JSON toggle."""
    try:
        args = call.parsed_arguments()
    except ValueError:
        return f"<pre>{html.escape(call.arguments[:CODE_LIMIT])}</pre>"
    body = _body(call.name, args)
    return body + raw_json(call)


def _text(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) else None


def _body(name: str, args: dict[str, Any]) -> str:
    command, code, path = _text(args, "command"), _text(args, "code"), _text(args, "path") or ""
    content, old, new = _text(args, "content"), _text(args, "old_string"), _text(args, "new_string")
    if name == "bash" and command is not None:
        return shell_block(command) + _fields(args, ("command",))
    if name == "run_python" and code is not None:
        return highlighted(code) + _fields(args, ("code",))
    source = _text(args, "source")
    if name == "notebook_run" and source is not None:  # the cell's source, read as it asked
        head = f"<div><span class='hnb-muted'>run cell</span> <code>{html.escape(_short(args.get('cell')))}</code></div>"
        return head + highlighted(source) + _fields(args, ("cell", "source"))
    if name == "write_file" and content is not None:
        head = f"<div><span class='hnb-muted'>write</span> <code>{html.escape(path)}</code></div>"
        return head + highlighted(content, filename=path or None) + _fields(args, ("path", "content"))
    if name == "edit_file" and old is not None and new is not None:
        head = f"<div><span class='hnb-muted'>edit</span> <code>{html.escape(path)}</code></div>"
        return head + diff_block(old, new) + _fields(args, ("path", "old_string", "new_string"))
    return _fields(args)


def call_subject(call: ToolCall, width: int = 80) -> str:
    """What a one-line summary names of ``call``: a bash command itself, a file's path,
    else the call's brief form."""
    try:
        args = call.parsed_arguments()
    except ValueError:
        return call.brief(width)
    for key in ("command", "path"):
        value = args.get(key)
        if isinstance(value, str) and call.name in ("bash", "write_file", "edit_file", "read_file"):
            line = " ".join(value.split())
            subject = line if call.name == "bash" else f"{call.name} {line}"
            return subject if len(subject) <= width else subject[: width - 1] + "…"
    return call.brief(width)
