"""The harness-nb extension's parts of a page, for the browser tests: a cell's edit card
(its diff, its buttons, its folded line), a cell's editor (its text and the language it
highlights), the agent's badge, and the JSON a cell printed.

Written against the page alone, so the same helpers serve tests that drive the kernel side
with ``bridge_double`` and tests that go through harness_nb's real notebook tools.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from browser_support import NotebookPage

BRIDGE_DOUBLE = "bridge_double.py"


class EditCard:
    """The edit card in cell I of NB (at most one card a cell is expected)."""

    def __init__(self, nb: NotebookPage, i: int) -> None:
        self.nb = nb
        self.i = i
        self.node = nb.cell(i).locator(".hnb-edit")

    def wait_waiting(self, timeout: float = 30_000) -> None:
        """Until the card shows, waiting for a click."""
        self.nb.cell(self.i).locator(".hnb-edit.hnb-edit-waiting").wait_for(state="visible", timeout=timeout)

    def wait_state(self, state: str, timeout: float = 30_000) -> None:
        from playwright.sync_api import expect

        expect(self.node).to_have_attribute("data-state", state, timeout=timeout)

    def diff(self) -> list[tuple[str, str]]:
        """The diff's rows as (kind, text): kind is same, del, add or skip."""
        rows = self.node.locator(".hnb-diff-row")
        found = []
        for n in range(rows.count()):
            row = rows.nth(n)
            kind = re.search(r"hnb-diff-(same|del|add|skip)", row.get_attribute("class") or "")
            text = (
                row.locator(".hnb-diff-text").inner_text()
                if row.locator(".hnb-diff-text").count()
                else row.inner_text()
            )
            found.append((kind.group(1) if kind else "?", text.replace("\u200b", "")))
        return found

    def explanation(self) -> str:
        return str(self.node.locator(".hnb-edit-why").inner_text())

    def button(self, label: str) -> Any:
        return self.node.get_by_role("button", name=label, exact=True)

    def accept(self) -> None:
        self.button("Accept").click()

    def accept_and_run(self) -> None:
        self.button("Accept and run").click()

    def reject(self, reason: str = "") -> None:
        if reason:
            self.node.locator(".hnb-edit-reason").fill(reason)
        self.button("Reject").click()

    def undo(self) -> None:
        self.button("Undo").click()

    def folded_text(self) -> str:
        return str(self.node.locator(".hnb-edit-folded").inner_text())


def editor(nb: NotebookPage, i: int) -> Any:
    """Cell I's CodeMirror content (for a markdown cell: its editor, shown when editing)."""
    return nb.cell(i).locator(".jp-InputArea-editor .cm-content")


def editor_text(nb: NotebookPage, i: int) -> str:
    """Cell I's source as its editor shows it (a short cell: every line is drawn)."""
    return str(editor(nb, i).inner_text()).replace("\u200b", "")


def wait_source(nb: NotebookPage, i: int, text: str, timeout: float = 10) -> None:
    """Until cell I's editor shows TEXT (a click's change reaches the editor a moment
    later); fails with what it showed last."""
    deadline = time.monotonic() + timeout
    while (shown := editor_text(nb, i)) != text:
        assert time.monotonic() < deadline, f"cell {i} shows {shown!r}, not {text!r}"
        time.sleep(0.05)


def editor_language(nb: NotebookPage, i: int) -> str | None:
    """The language cell I's editor highlights (CodeMirror's ``data-language``)."""
    return editor(nb, i).get_attribute("data-language")  # type: ignore[no-any-return]


def printed(nb: NotebookPage, i: int) -> Any:
    """The JSON that cell I printed (its last stdout line)."""
    text = (
        nb.cell(i).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']").last.inner_text()
    )
    return json.loads(text.strip().splitlines()[-1])


def badge(nb: NotebookPage, i: int) -> Any:
    """The badge naming the agent that inserted cell I."""
    return nb.cell(i).locator(".hnb-agent-badge")
