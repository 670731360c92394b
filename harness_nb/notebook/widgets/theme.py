"""How the live views look: one style sheet, the state marks and colours, agent colours.

Everything here renders without an emoji font (a CSS spinner and ● ✓ ✗ ■ from basic
fonts) and in light and dark themes: colours are CSS variables with a light default and a
dark override (JupyterLab and Notebook 7 mark the body ``data-jp-theme-light="false"``),
chosen so that text reaches 4.5:1 contrast on either background. Inline ``var(--x,
fallback)`` keeps a static copy readable where the style sheet is stripped (GitHub's
viewer) or absent (nbconvert without the widget).
"""

from __future__ import annotations

import html
import re
import zlib

# The style sheet of every view: shipped once per view (an HTML widget of its own) and in
# each static copy. Text colours: light ≥ 4.5:1 on white, dark ≥ 4.5:1 on #111.
STYLE = """<style>
.hnb { --hnb-fg: var(--jp-ui-font-color1, rgba(0,0,0,.87)); --hnb-muted: rgba(0,0,0,.62);
  --hnb-run: #0d47a1; --hnb-ok: #1b5e20; --hnb-warn: #8a3c00; --hnb-err: #b71c1c;
  --hnb-line: var(--jp-border-color2, #e0e0e0); --hnb-code-bg: var(--jp-layout-color2, #eee);
  color: var(--hnb-fg); font-size: var(--jp-content-font-size1, 14px); line-height: 1.45; }
body[data-jp-theme-light="false"] .hnb, .vscode-dark .hnb {
  --hnb-fg: var(--jp-ui-font-color1, rgba(255,255,255,.87)); --hnb-muted: rgba(255,255,255,.7);
  --hnb-run: #64b5f6; --hnb-ok: #81c784; --hnb-warn: #ffb74d; --hnb-err: #ef9a9a; }
body[data-jp-theme-light="false"] .hnb .hnb-agent, .vscode-dark .hnb .hnb-agent {
  color: color-mix(in srgb, var(--hnb-agent) 45%, white) !important; }
.hnb .hnb-spin { display: inline-block; width: .75em; height: .75em; vertical-align: -.1em;
  border: 2px solid var(--hnb-line); border-top-color: var(--hnb-run); border-radius: 50%;
  animation: hnb-spin .8s linear infinite; box-sizing: border-box; }
@keyframes hnb-spin { to { transform: rotate(360deg); } }
.hnb .hnb-nw { white-space: nowrap; }
.hnb .hnb-muted { color: var(--hnb-muted); }
.hnb code, .hnb pre { font-family: var(--jp-code-font-family, monospace); font-size: 90%; }
.hnb pre { background: var(--hnb-code-bg); padding: 6px 8px; margin: 4px 0; border-radius: 3px;
  white-space: pre-wrap; word-break: break-word; max-height: 20em; overflow: auto; }
.hnb details > summary { cursor: pointer; }
.hnb-activity { border-left: 2px solid var(--hnb-line); padding-left: 8px; margin: 2px 0 4px 2px;
  color: var(--hnb-muted); font-size: 92%; }
.hnb-toggle button, button.hnb-toggle { background: transparent !important; box-shadow: none !important;
  color: var(--hnb-muted) !important; padding: 0 4px !important; height: auto !important;
  font-size: 92% !important; text-align: left !important; }
.hnb-card { border-left: 4px solid var(--hnb-risk, var(--hnb-warn)); padding: 4px 8px; margin: 4px 0;
  background: var(--jp-layout-color1, transparent); }
</style>"""

STATE_COLORS = {
    "running": "var(--hnb-run, #0d47a1)",
    "waiting": "var(--hnb-warn, #8a3c00)",
    "done": "var(--hnb-ok, #1b5e20)",
    "failed": "var(--hnb-err, #b71c1c)",
    "interrupted": "var(--hnb-muted, #616161)",
    "stopped": "var(--hnb-warn, #8a3c00)",
}
STATE_MARKS = {"waiting": "●", "done": "✓", "failed": "✗", "interrupted": "■", "stopped": "!"}
SPINNER = "<span class='hnb-spin' role='img' aria-label='running'></span>"


def state_mark(state: str, *, spin: bool = True) -> str:
    """HTML for the mark of ``state`` (``stopped: max_turns`` is ``stopped``): a CSS
    spinner while running (``spin=False``: a ◐, for a copy that does not move), else a
    coloured glyph from a basic font."""
    kind = state.partition(":")[0]
    if kind == "running":
        return SPINNER if spin else f"<span style='color:{STATE_COLORS['running']}'>◐</span>"
    glyph = STATE_MARKS.get(kind, "")
    return f"<span style='color:{STATE_COLORS.get(kind, 'inherit')};font-weight:bold'>{glyph}</span>" if glyph else ""


def state_label(state: str) -> str:
    """The state's words, bold in its colour."""
    colour = STATE_COLORS.get(state.partition(":")[0], "inherit")
    return f"<span style='color:{colour};font-weight:600'>{html.escape(state)}</span>"


def nowrap(text: str) -> str:
    """``text`` (already HTML) kept on one line: a figure never breaks in the middle."""
    return f"<span class='hnb-nw' style='white-space:nowrap'>{text}</span>"


def joined(parts: list[str]) -> str:
    """Parts of a line (HTML) separated by `` · ``, each kept whole: the line wraps only
    between them."""
    return " · ".join(nowrap(p) for p in parts if p)


# Claude Code's agent colours, as CSS; an agent file's ``color`` is one of these or #rrggbb.
AGENT_COLORS = {
    "red": "#c62828",
    "orange": "#ef6c00",
    "yellow": "#f9a825",
    "green": "#2e7d32",
    "cyan": "#00838f",
    "blue": "#1565c0",
    "purple": "#6a1b9a",
    "magenta": "#ad1457",
    "pink": "#d81b60",
    "gray": "#616161",
    "grey": "#616161",
    "white": "#9e9e9e",  # white on a white notebook would hide the name
}
# Agents whose file sets no colour get one of these, by name, the same in every kernel.
PALETTE = ("#1565c0", "#6a1b9a", "#00838f", "#ad1457", "#2e7d32", "#ef6c00", "#5d4037", "#283593")
_HEX_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}){1,2}$")


def css_color(color: str | None) -> str | None:
    """The CSS colour for an agent file's ``color`` (a Claude Code colour name or
    ``#rrggbb``), ``None`` for anything else: the value comes from a file and goes into a
    ``style`` attribute, so only these forms ever reach it."""
    if not color:
        return None
    text = color.strip()
    return AGENT_COLORS.get(text.lower()) or (text if _HEX_COLOR.match(text) else None)


def agent_color(name: str, color: str | None = None) -> str:
    """The colour an agent is drawn in: its file's ``color`` when that is one, else a
    palette colour picked by its name (stable across kernels and runs)."""
    return css_color(color) or PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


def legible_color(color: str) -> str:
    """``color`` (``#rgb`` or ``#rrggbb``) darkened just enough to reach 4.5:1 as text on a
    white notebook: Claude Code's "yellow", say, is 1.9:1 as it is. Any other form is
    returned unchanged. (A dark theme lightens the pure colour instead: the style sheet.)"""
    if not _HEX_COLOR.match(color):
        return color
    digits = color[1:] if len(color) == 7 else "".join(c * 2 for c in color[1:])
    rgb = [int(digits[i : i + 2], 16) for i in (0, 2, 4)]
    for step in range(21):  # mixed with black, 5 % at a time
        shade = [round(c * (1 - step / 20)) for c in rgb]
        if _contrast_on_white(shade) >= 4.5:
            return color if step == 0 else "#" + "".join(f"{c:02x}" for c in shade)
    return "#000000"


def _contrast_on_white(rgb: list[int]) -> float:
    """WCAG 2's contrast ratio of an sRGB colour against white."""

    def linear(c: int) -> float:
        x = c / 255
        return x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 1.05 / (0.2126 * r + 0.7152 * g + 0.0722 * b + 0.05)


def agent_name(name: str, color: str) -> str:
    """The agent's name, bold in its colour: darkened where it is too light to read on
    white (``legible_color``), lightened in a dark theme by the style sheet."""
    return f"<b class='hnb-agent' style='--hnb-agent:{color};color:{legible_color(color)}'>{html.escape(name)}</b>"


_CELL = "text-align:left;vertical-align:top;padding:2px 10px 2px 0"


def table(head: list[str], rows: list[list[str]]) -> str:
    """An HTML table, left-aligned and top-aligned (JupyterLab right-aligns table cells by
    default, which suits numbers, not names and sentences). Cells are HTML already."""
    th = "".join(f"<th style='{_CELL}'>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td style='{_CELL}'>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='hnb-table' style='border-collapse:collapse'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
