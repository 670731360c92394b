"""A run view as static HTML: what a saved notebook keeps of a run when no widget can be
drawn — a notebook reopened without its kernel, nbconvert's HTML, GitHub's viewer.

The same pieces as the live view (header, the activity folded behind a ``<details>``,
decided cards as their one line, subagent lines, what tools displayed, background
results), with no script and nothing that moves: a running mark is a ◐, not a spinner.
Every copy is wrapped in ``MARK_OPEN`` … ``MARK_CLOSE`` so that nbval can compare it as one
token (its figures, elapsed times above all, differ from run to run).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import mistune

from ...core.media import STATIC_VIEW_CLOSE as MARK_CLOSE
from ...core.media import STATIC_VIEW_OPEN as MARK_OPEN

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# raw HTML in the Markdown (the model wrote it) is shown as text, never as markup
_MARKDOWN = mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])


def markdown_html(text: str) -> str:
    """Markdown (an answer, narration) as HTML, with any HTML in it escaped."""
    return f"<div class='hnb-markdown'>{_MARKDOWN(text)}</div>"


def output_html(output: dict[str, Any]) -> str:
    """One ``display_data`` output (a tool's display, an answer's Markdown) as HTML: its
    HTML, an image as a data URL, else its text."""
    data = output.get("data", {})
    if "text/html" in data:
        return f"<div class='hnb-display'>{_joined(data['text/html'])}</div>"
    for kind in IMAGE_TYPES:
        if kind in data:
            alt = html.escape(str(data.get("text/plain", "image")), quote=True)
            return f"<div class='hnb-display'><img src='data:{kind};base64,{_joined(data[kind])}' alt='{alt}' style='max-width:100%'></div>"
    if "text/markdown" in data:
        return markdown_html(_joined(data["text/markdown"]))
    text = data.get("text/plain") or output.get("text", "")
    return f"<div style='white-space:pre-wrap'>{html.escape(_joined(text))}</div>"


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def outputs_html(outputs: Iterable[dict[str, Any]]) -> str:
    return "".join(output_html(o) for o in outputs)


def page(style: str, header: str, activity: list[str], summary: str, exhibits: list[str], tail: list[str]) -> str:
    """The whole static view: ``activity`` (HTML pieces, in order) folded behind
    ``summary``; ``exhibits`` (what tools displayed) and ``tail`` (streamed text,
    background results) below it."""
    folded = (
        f"<details class='hnb-activity-static'><summary class='hnb-muted'>{html.escape(summary)}</summary>"
        f"<div class='hnb-activity'>{''.join(f'<div>{piece}</div>' for piece in activity)}</div></details>"
        if activity
        else ""
    )
    body = "".join(exhibits) + "".join(tail)
    return (
        f"{MARK_OPEN}{style}<div class='hnb hnb-run hnb-static'><div class='hnb-header'>{header}</div>"
        f"{folded}{body}</div>{MARK_CLOSE}"
    )
