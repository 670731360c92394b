"""The data science tutorial in a real browser, in JupyterLab and in Notebook 7, driven by
Playwright in headless Chromium (see tests/browser_support.py).

What a person sees: after ``%fix`` the agent's proposal appears as a new cell right below,
not run, and running it fixes the data; the plot that ``run_python`` draws renders as a PNG
image in the agent's cell; the map over the comments finishes with every row labelled; and a
reason typed into the approval card's box before clicking Deny reaches the model: it is in
the tool result of the model's next request, which a cell the test appends reads back from
the scripted model.

Screenshots of the key moments go to test-artifacts/browser/<frontend>-light/data_science-*.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser_support import FRONTENDS, Frontend, NotebookPage, needs_chromium, notebook_in_browser

pytestmark = [pytest.mark.browser, needs_chromium]

REASON = "keep it: the weekly report reads this file"
DENIED = f'the person denied this call. Their reason: "{REASON}"'
REASON_BOX = "input[placeholder='Reason (optional) — tells the agent why']"
# What the scripted model was sent last: the request after the denial, whose newest tool
# result is what the model read of it.
READ_BACK = (
    "# the browser test's own check: the tool results of the model's latest request\n"
    "from harness_nb.notebook import current_harness\n"
    "request = current_harness().provider.requests[-1]\n"
    "print('model read:', [m.content for m in request.messages if m.role == 'tool'][-1])"
)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_data_science(tmp_path: Path, frontend: Frontend) -> None:
    with notebook_in_browser(tmp_path, "data_science.ipynb", kind=frontend, append=[READ_BACK]) as nb:
        _drive(nb)


def _drive(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    broken = nb.index_of('orders["amount"].astype(float)')
    fix = nb.index_of("%fix")
    saved_proposal = nb.index_of("# Agent proposal 1:")
    plot = nb.index_of("horizontal bar chart")
    mapping = nb.index_of("%agent map --over orders.comment \"Positive")
    labels = nb.index_of("labels.series()")
    tidy = nb.index_of("Tidy up this folder")
    shown = nb.index_of("reply.result.messages")
    read_back = nb.index_of("provider.requests")

    shift = 0  # the proposal is one more cell in the page than in the file, from below %fix on
    for i, (kind, _) in enumerate(nb.cells):
        if kind != "code" or i == saved_proposal:
            continue  # the saved copy of the proposal: the test runs the cell the agent inserted
        at = i + shift
        cell = nb.cell(at)
        nb.start(at)
        if i == broken:
            nb.finish(at, raises=True)
            expect(cell.locator(".jp-OutputArea")).to_contain_text("could not convert string to float: '$12.50'")
        elif i == tidy:
            # The card waits in the busy cell; type a reason beside Deny, then deny.
            deny = cell.locator(".jp-OutputArea button.jupyter-button", has_text=re.compile(r"^\W*Deny$"))
            deny.wait_for(state="visible", timeout=30_000)
            expect(nb.prompt(at)).to_have_text("[*]:")
            expect(cell).to_contain_text("rm orders_labelled.csv")
            cell.locator(REASON_BOX).fill(REASON)
            nb.shot("4-denial-reason-typed", at)
            deny.click()
            nb.finish(at)
            expect(cell.locator(".hnb-card", has_text=f"Denied by you: {REASON}")).to_have_count(1)
            expect(cell.locator(REASON_BOX)).to_have_count(0)  # the decided card is one line
            nb.shot("5-denied", at)
        else:
            nb.finish(at)

        if i == fix:
            # The proposal is a new cell right below, not run; running it fixes `amount`.
            expect(nb.value(at)).to_contain_text("I proposed a cell below")
            expect(cell).to_contain_text("Agent proposal 1 (2 lines) was not run")
            proposal = nb.cell(at + 1)
            expect(proposal.locator(".jp-InputArea")).to_contain_text(
                '# Agent proposal 1: amount holds text such as "$12.50"'
            )
            expect(proposal.locator(".jp-InputArea")).to_contain_text('pd.to_numeric(orders["amount"]')
            expect(nb.prompt(at + 1)).to_have_text("[ ]:")
            nb.shot("1-proposed-cell", at)
            shift = 1
            nb.run(at + 1)
            expect(nb.cell(at + 1).locator(".jp-OutputArea-output")).to_have_text("dtype('float64')")
        elif i == plot:
            # run_python's figure renders in the run view, as a PNG image.
            image = cell.locator(".jp-OutputArea img[src^='data:image/png;base64,']")
            expect(image).to_have_count(1)
            expect(image).to_be_visible()
            assert image.evaluate("img => img.complete && img.naturalWidth > 0"), "the PNG did not decode"
            expect(nb.value(at)).to_contain_text("north brings in the most: 37.50 dollars")
            nb.shot("2-plot", at)
        elif i == mapping:
            expect(cell).to_contain_text("agent map · general-purpose · 6 rows · done")
            expect(cell.locator(".jp-OutputArea-executeResult")).to_contain_text(
                "<MapResult general-purpose over 6 rows: 6 done, 0 failed"
            )
        elif i == labels:
            table = cell.locator(".jp-OutputArea-executeResult table")
            expect(table).to_contain_text("mixed")
            nb.shot("3-map-labels", at)
        elif i == shown:
            expect(cell.locator(".jp-OutputArea-output")).to_contain_text(DENIED)
        elif i == read_back:
            expect(cell.locator(".jp-OutputArea-output")).to_contain_text(f"model read: error: {DENIED}")
    nb.shot("6-finished")
