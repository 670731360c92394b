"""The quickstart notebook in a real browser, in JupyterLab and in Notebook 7, driven by
Playwright in headless Chromium.

What a person sees: a cell that needs approval shows an Approve button (and a box for a
denial's reason) while it is busy; clicking it in the page lets the run finish (and the
command really runs); a delegated subagent's progress line and the final Markdown answer
render; a background task's result appears in its own cell while a later cell is still busy.

Each run starts its own server (this interpreter, 127.0.0.1, a token, temporary Jupyter
folders) on a copy of notebooks/quickstart.ipynb with its outputs cleared, and uses Debian's
chromium (never a browser downloaded by Playwright); see tests/browser_support.py for the
readiness signals each frontend needs. Screenshots of the key moments go to
test-artifacts/browser/<frontend>-light/quickstart-*.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser_support import FRONTENDS, Frontend, NotebookPage, needs_chromium, notebook_in_browser

pytestmark = [pytest.mark.browser, needs_chromium]


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_quickstart(tmp_path: Path, frontend: Frontend) -> None:
    with notebook_in_browser(tmp_path, "quickstart.ipynb", kind=frontend, folders=("scripts", "project")) as nb:
        _drive(nb)


def _drive(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    cell, prompt, value = nb.cell, nb.prompt, nb.value
    first_run = nb.index_of("Would the project's revenue report handle this data correctly?")
    delegate = nb.index_of("Delegate the reading to the explore subagent")
    approval = nb.index_of("Delete the scratch folder")
    exists = nb.index_of('Path("scratch").exists()')
    background = nb.index_of("%%agent --bg --agent explore")
    meanwhile = nb.index_of("which columns does `orders` have?")
    wait = nb.index_of("%task wait bg-1")

    for i, (kind, _) in enumerate(nb.cells):
        if kind != "code":
            continue
        nb.start(i)
        if i == approval:
            # The card shows while the run waits; the cell is still busy.
            approve = cell(i).locator(".jp-OutputArea button.jupyter-button", has_text=re.compile(r"^Approve$"))
            approve.wait_for(state="visible", timeout=30_000)
            expect(prompt(i)).to_have_text("[*]:")
            expect(cell(i)).to_contain_text("rm -rf scratch")
            # the box for a denial's reason renders beside Deny (the kernel tests type into it)
            reason = cell(i).locator(".jp-OutputArea input[placeholder='Reason (optional) — tells the agent why']")
            expect(reason).to_be_visible()
            nb.shot("1-approval-card", i)
            approve.click()
            nb.finish(i)
            expect(value(i)).to_contain_text("If you approved it")
            # the card folds to one line with the decision (the run's view is its static copy
            # by now: the same classes)
            decided = cell(i).locator(".hnb-card", has_text="Approved by you: rm -rf scratch")
            expect(decided).to_have_count(1)
            expect(approve).to_have_count(0)  # nothing left to click
            expect(reason).to_have_count(0)
            nb.shot("2-approved", i)
        elif i == meanwhile:
            # While this foreground run is busy, the background task's result lands in ITS cell.
            expect(prompt(i)).to_have_text("[*]:")
            # the live widget's Output, or the static copy that replaces it once settled
            within = ".widget-output .jp-RenderedMarkdown, .hnb-completions"
            landed = nb.text_while_busy(background, "north 3, south 3, east 2", meanwhile, within=within)
            assert "bg-1" in landed and "completed" in landed, landed
            nb.shot("4-background-result-while-busy", background)
            nb.finish(i)
        else:
            nb.finish(i)

        if i == first_run:
            answer = value(i)
            expect(answer).to_contain_text("order 1004 has no unit count")
            expect(answer.locator("table")).to_have_count(1)  # the Markdown table rendered
            expect(cell(i)).to_contain_text("inspect_variable(name='orders')")
        elif i == delegate:
            # One progress line for the subagent, finished, with its title and tool count.
            line = cell(i).locator(".hnb-sub", has_text="explore — check orders.csv")
            expect(line).to_have_count(1)
            expect(line).to_contain_text("finished · 1 tool")
            expect(value(i)).to_contain_text("8 orders")
            nb.shot("3-subagent-progress-and-answer", i)
        elif i == exists:
            # Approved in the page, so the command really ran.
            expect(cell(i).locator(".jp-OutputArea-output")).to_have_text("False")
        elif i == wait:
            expect(value(i)).to_contain_text("north 3, south 3, east 2")
    nb.shot("5-finished")
