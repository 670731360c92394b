"""The run view as a person sees it, in JupyterLab and in Notebook 7, light and dark, driven
by Playwright in headless Chromium (see tests/browser_support.py).

One small notebook of the test's own (written into the temporary root, with its scripted
model and an agent file) goes through every moment the run view has to get right:

- a live run: while the model "thinks" (a delayed step) the header's clock moves and a
  spinner says "waiting for the model…";
- approval cards: a bash command as a shell block, a ``run_python`` call's code as lines
  of code (not one JSON-escaped string); a decided card folds to one line;
- a subagent's line, drawn in its agent file's colour;
- a background result landing in its own cell while a later cell is still busy;
- the team view, made after the teammates worked, backfilled with their activity;
- the stop button: one line "Interrupted", no traceback;
- the notebook saved, its kernel shut down, the page reloaded: each run's static copy
  shows its tool lines and its answer;
- a page reload while a background run's card waits: ``%approvals`` shows the card again,
  and a click on it lets the run finish;
- a page reload while a foreground run's card waits, its cell still busy: the next cell
  run from the reloaded page queues and shows the card at once; a click there lets the run
  finish, and the queued cell runs after it.

Screenshots of each moment go to test-artifacts/browser/<frontend>-<theme>/run_view-*.png.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from browser_support import FRONTENDS, Frontend, NotebookPage, Theme, needs_chromium, notebook_in_browser

pytestmark = [pytest.mark.browser, needs_chromium]

SCRIPT = """\
model: scripts/run_view.yaml
chunk_delay: 0.005
agents:
  main:
    # live: the model thinks for a while before its first word
    - delay: 4
      text: "Let me look at the data first."
      tool_calls:
        - name: read_file
          arguments: {path: data.csv}
      usage: {input_tokens: 900, output_tokens: 20}
    - text: "**data.csv** has 3 rows: north, south and east."
      usage: {input_tokens: 1000, output_tokens: 20}
    # approvals: a shell command, then Python code
    - text: "First the scratch folder."
      tool_calls:
        - name: bash
          arguments: {command: "rm -rf scratch"}
      usage: {input_tokens: 1100, output_tokens: 20}
    - text: "Now the count, in Python."
      tool_calls:
        - name: run_python
          arguments:
            code: |
              rows = ["north", "south", "east"]
              for row in sorted(rows):
                  print("region", row)
      usage: {input_tokens: 1200, output_tokens: 40}
    - text: "Scratch is gone and the regions are east, north and south."
      usage: {input_tokens: 1300, output_tokens: 20}
    # a subagent
    - text: "I'll ask the checker."
      tool_calls:
        - name: task
          arguments:
            subagent_type: checker
            description: check data.csv
            prompt: "Read data.csv and report empty cells."
      usage: {input_tokens: 1400, output_tokens: 30}
    - text: "The checker found no empty cell."
      usage: {input_tokens: 1500, output_tokens: 20}
    # a foreground question while the background task runs
    - delay: 4
      text: "2 + 2 is 4."
      usage: {input_tokens: 1600, output_tokens: 10}
    # a team of two
    - text: "Starting a review team."
      tool_calls:
        - name: task
          arguments: {subagent_type: explore, team_name: review, name: alice, prompt: "Profile data.csv."}
        - name: task
          arguments: {subagent_type: explore, team_name: review, name: bob, prompt: "Read report.py."}
      usage: {input_tokens: 1700, output_tokens: 60}
    - text: "Both teammates are working."
      usage: {input_tokens: 1800, output_tokens: 10}
    # interrupted while it thinks
    - delay: 60
      text: "never shown"
  checker:
    - tool_calls:
        - name: read_file
          arguments: {path: data.csv}
      usage: {input_tokens: 300, output_tokens: 10}
    - text: "No empty cell in data.csv."
      usage: {input_tokens: 400, output_tokens: 10}
    # the background run
    - delay: 1
      tool_calls:
        - name: read_file
          arguments: {path: data.csv}
      usage: {input_tokens: 300, output_tokens: 10}
    - delay: 1
      text: "data.csv has 3 rows."
      usage: {input_tokens: 400, output_tokens: 10}
  general-purpose:
    # the background run whose card waits across a page reload (on the reopened
    # notebook's new kernel, whose scripted model starts from the top of each list)
    - tool_calls:
        - name: bash
          arguments: {command: "rm -rf tmpdir"}
      usage: {input_tokens: 300, output_tokens: 10}
    - text: "tmpdir removed."
      usage: {input_tokens: 400, output_tokens: 10}
  cleaner:
    # the foreground run whose card waits across a page reload
    - tool_calls:
        - name: bash
          arguments: {command: "rm -rf logs"}
      usage: {input_tokens: 300, output_tokens: 10}
    - text: "logs removed."
      usage: {input_tokens: 400, output_tokens: 10}
  alice:
    - tool_calls:
        - name: read_file
          arguments: {path: data.csv}
      usage: {input_tokens: 300, output_tokens: 10}
    - text: "data.csv: 3 rows, no empty cell."
      usage: {input_tokens: 400, output_tokens: 10}
  bob:
    - tool_calls:
        - name: read_file
          arguments: {path: report.py}
      usage: {input_tokens: 300, output_tokens: 10}
    - text: "report.py sums the units per region."
      usage: {input_tokens: 400, output_tokens: 10}
"""

CHECKER = """\
---
name: checker
description: Checks a CSV file for empty cells. Read-only.
tools: read_file, bash
color: purple
---
You check CSV files and report empty cells.
"""

CLEANER = """\
---
name: cleaner
description: Removes the folders it is asked to remove.
tools: bash
---
You remove the folders you are asked to remove.
"""

FILES = {
    "scripts/run_view.yaml": SCRIPT,
    "agents/checker.md": CHECKER,
    "agents/cleaner.md": CLEANER,
    "logs/old.log": "old\n",
    "data.csv": "region,units\nnorth,12\nsouth,7\neast,4\n",
    "report.py": "def revenue(rows):\n    return sum(r['units'] for r in rows)\n",
}
PURPLE = "#6a1b9a"  # Claude Code's "purple", the checker's colour

CELLS = [
    '%load_ext harness_nb\n%config HarnessNB.model = "scripted/scripts/run_view.yaml"\n'
    '%config HarnessNB.background_approvals = "ask"\n%config HarnessNB.teams = True',
    "%%agent\nWhat is in data.csv?",
    "%%agent\nRemove the scratch folder, then list the regions in Python.",
    "%%agent\nHave the checker look at data.csv.",
    "%%agent --bg --agent checker\nCount the rows of data.csv.",
    "%%agent\nMeanwhile: what is 2 + 2?",
    "%%agent\nStart a review team for data.csv and report.py.",
    "%team wait alice",
    "%team wait bob",
    "%team",
    "%%agent\nThink about it for a long time.",
    "%%agent --bg\nRemove tmpdir.",
    "%approvals",
    "%task wait bg-1",  # the first background task of the reopened notebook's kernel
    "%@cleaner Remove the logs folder.",
    "%approvals",
    'import os\nprint("logs is there:", os.path.exists("logs"))',
]
BUTTON = ".jp-OutputArea button.jupyter-button"
# WCAG's contrast ratio of an element's text colour on the first opaque background behind it
CONTRAST = """element => {
    const rgb = text => text.match(/[\\d.]+/g).map(Number);
    const luminance = ([r, g, b]) => {
        const lin = c => (c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
        return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
    };
    let behind = element, bg = null;
    while (behind && !bg) {
        const c = rgb(getComputedStyle(behind).backgroundColor);
        if (c.length === 3 || c[3] === 1) bg = c.slice(0, 3);
        behind = behind.parentElement;
    }
    const fg = rgb(getComputedStyle(element).color);
    const alpha = fg.length === 4 ? fg[3] : 1;
    const seen = [0, 1, 2].map(k => fg[k] * alpha + (bg || [255, 255, 255])[k] * (1 - alpha));
    const [hi, lo] = [luminance(seen), luminance(bg || [255, 255, 255])].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
}"""


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("frontend", FRONTENDS)
def test_run_view(tmp_path: Path, frontend: Frontend, theme: Theme) -> None:
    with notebook_in_browser(tmp_path, "run_view.ipynb", kind=frontend, theme=theme, cells=CELLS, files=FILES) as nb:
        nb.run(0)
        _live_run(nb, 1)
        _approvals(nb, 2)
        _subagent(nb, 3)
        _background(nb, 4, 5)
        _team(nb, 6)
        _interrupt(nb, 10)
        _reopened_without_kernel(nb)
        _card_recovered_after_reload(nb, 11)
        _foreground_card_recovered_after_reload(nb, 14)


def _approve(nb: NotebookPage, i: int) -> Any:
    return nb.cell(i).locator(BUTTON, has_text=re.compile(r"^\W*Approve$"))


def _live_run(nb: NotebookPage, i: int) -> None:
    from playwright.sync_api import expect

    nb.start(i)
    cell = nb.cell(i)
    status = cell.locator(".hnb-status")
    expect(status).to_contain_text("waiting for the model…", timeout=10_000)
    expect(status.locator(".hnb-spin")).to_be_visible()
    header = cell.locator(".hnb-header")
    first = header.inner_text()
    nb.shot("01-live-waiting-for-the-model", i)
    # the clock ticks while nothing else happens (the text changes; no duration asserted)
    expect(header).not_to_have_text(first, timeout=5_000)
    expect(status).to_contain_text("waiting for the model…")
    nb.finish(i)
    expect(nb.value(i)).to_contain_text("data.csv has 3 rows")
    expect(cell).to_contain_text("read_file(path='data.csv')")


def _approvals(nb: NotebookPage, i: int) -> None:
    from playwright.sync_api import expect

    cell = nb.cell(i)
    nb.start(i)
    approve = _approve(nb, i)
    approve.wait_for(state="visible", timeout=30_000)
    card = cell.locator(".hnb-card").filter(has=nb.page.locator("button.jupyter-button"))
    shell = card.locator("pre.hnb-shell")
    expect(shell).to_have_text("$ rm -rf scratch")
    expect(cell).to_contain_text("awaiting your approval")
    reason = card.get_by_text("recursive or forced delete")
    ratio = reason.evaluate(CONTRAST)
    assert ratio >= 4.5, f"the card's reason text has a contrast of {ratio:.2f}:1"
    nb.shot("02-approval-card-shell", i)
    approve.click()

    # the Python card: its code as lines, not one JSON-escaped string
    code = card.locator("pre.hnb-code")
    expect(code).to_contain_text('for row in sorted(rows):', timeout=30_000)
    lines = code.inner_text().splitlines()
    assert lines[:3] == ['rows = ["north", "south", "east"]', "for row in sorted(rows):", '    print("region", row)'], lines
    assert "\\n" not in code.inner_text()
    # the first card, decided, is one line now
    decided = cell.locator(".hnb-card", has_text="Approved by you")
    expect(decided).to_have_count(1)
    expect(decided).to_contain_text("rm -rf scratch")
    assert len(decided.inner_text().strip().splitlines()) == 1, decided.inner_text()
    expect(decided.locator("button")).to_have_count(0)
    nb.shot("03-approval-card-python-and-a-decided-card", i)
    _approve(nb, i).click()
    nb.finish(i)
    expect(nb.value(i)).to_contain_text("regions are east, north and south")
    expect(cell.get_by_text(re.compile(r"Approved by you"))).to_have_count(2)
    expect(cell.locator(BUTTON, has_text=re.compile(r"Approve"))).to_have_count(0)
    nb.shot("04-approved-cards-folded", i)


def _subagent(nb: NotebookPage, i: int) -> None:
    from playwright.sync_api import expect

    cell = nb.cell(i)
    nb.run(i)
    expect(nb.value(i)).to_contain_text("The checker found no empty cell.")
    line = cell.locator("code", has=nb.page.locator(".hnb-agent", has_text="checker")).filter(has_text="check data.csv")
    expect(line.first).to_contain_text("finished")
    name = line.first.locator(".hnb-agent")
    assert PURPLE in (name.get_attribute("style") or ""), name.get_attribute("style")
    _open_activity(nb, i)
    nb.shot("05-subagent-line", i)


def _background(nb: NotebookPage, background: int, meanwhile: int) -> None:
    from playwright.sync_api import expect

    nb.run(background)
    nb.start(meanwhile)
    nb.text_while_busy(background, "data.csv has 3 rows", meanwhile)
    nb.shot("06-background-result-while-busy", background)
    nb.finish(meanwhile)
    expect(nb.value(meanwhile)).to_contain_text("2 + 2 is 4")


def _team(nb: NotebookPage, start: int) -> None:
    from playwright.sync_api import expect

    for i in range(start, start + 4):
        nb.run(i)
    view = nb.cell(start + 3)
    expect(view.locator("table.hnb-table")).to_contain_text("alice")
    expect(view).to_contain_text("alice reported: data.csv: 3 rows, no empty cell.")
    expect(view).not_to_contain_text("no activity yet")
    # alice's area, opened: what she did before the view existed
    view.get_by_text(re.compile(r"alice \(explore, review\)")).first.click()
    expect(view).to_contain_text("→ read_file(path='data.csv')")
    nb.shot("07-team-view-backfilled", start + 3)


def _interrupt(nb: NotebookPage, i: int) -> None:
    from playwright.sync_api import expect

    cell = nb.cell(i)
    nb.start(i)
    expect(cell.locator(".hnb-status")).to_contain_text("waiting for the model…", timeout=10_000)
    nb.page.locator(".jp-NotebookPanel-toolbar [data-jp-item-name='interrupt'] button, "
                    ".jp-NotebookPanel-toolbar [data-jp-item-name='interrupt']").first.click()
    nb.finish(i, raises=True)
    errors = cell.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    expect(errors).to_have_count(1)
    expect(errors).to_have_text("Interrupted")
    expect(cell).not_to_contain_text("Traceback")
    expect(cell).not_to_contain_text("CancelledError")
    nb.shot("08-interrupted", i)


def _reopened_without_kernel(nb: NotebookPage) -> None:
    """Saved, its kernel shut down, reopened: the runs' static copies show what happened."""
    from playwright.sync_api import expect

    nb.save()
    nb.server.shutdown_kernels()
    nb.open()  # a new page, on a new kernel that has none of the runs' widgets
    first = nb.cell(1)
    static = first.locator(".hnb-static")
    expect(static).to_have_count(1)
    expect(first.locator(".jp-OutputArea")).not_to_contain_text("Error displaying widget")
    expect(nb.value(1)).to_contain_text("data.csv has 3 rows")
    static.locator("details > summary").first.click()
    expect(static).to_contain_text("read_file(path='data.csv')")
    expect(static.get_by_text(re.compile(r"read_file\(path='data.csv'\)")).first).to_be_visible()
    approvals = nb.cell(2).locator(".hnb-static")
    expect(approvals).to_contain_text("Approved by you")
    expect(approvals).to_contain_text("rm -rf scratch")
    expect(nb.cell(3).locator(".hnb-static")).to_contain_text("checker")
    nb.shot("09-reopened-without-its-kernel", 1)


def _card_recovered_after_reload(nb: NotebookPage, i: int) -> None:
    """A background run's card waits; the page reloads before the notebook was saved, and
    the card is gone from its cell: ``%approvals`` shows it again, a click there answers."""
    from playwright.sync_api import expect

    nb.run(0)
    nb.run(i)
    _approve(nb, i).wait_for(state="visible", timeout=30_000)
    expect(nb.cell(i).locator("pre.hnb-shell")).to_have_text("$ rm -rf tmpdir")
    nb.shot("10-background-card-waiting", i)
    nb.open()  # reload, unsaved: the card's output is not in the file
    expect(_approve(nb, i)).to_have_count(0)
    nb.run(i + 1)
    again = _approve(nb, i + 1)
    expect(again).to_be_visible(timeout=10_000)
    expect(nb.cell(i + 1)).to_contain_text("1 approval waiting")
    expect(nb.cell(i + 1).locator("pre.hnb-shell")).to_have_text("$ rm -rf tmpdir")
    expect(nb.cell(i + 1)).not_to_contain_text("not run yet")  # the magic ran, and returned nothing to show
    nb.shot("11-approvals-shows-the-card-again", i + 1)
    again.click()
    expect(nb.cell(i + 1).locator(".hnb-card", has_text="Approved by you")).to_contain_text("rm -rf tmpdir")
    nb.run(i + 2)
    expect(nb.value(i + 2)).to_contain_text("tmpdir removed.")
    nb.shot("12-approved-after-reload", i + 1)


def _foreground_card_recovered_after_reload(nb: NotebookPage, i: int) -> None:
    """A foreground run's card waits, the kernel busy with its cell; the page reloads before
    the notebook was saved: the next cell run from the reloaded page queues behind the run
    and shows the card at once, a click there lets the run finish, then the cell runs."""
    from playwright.sync_api import expect

    nb.start(i)
    _approve(nb, i).wait_for(state="visible", timeout=30_000)
    expect(nb.cell(i).locator("pre.hnb-shell")).to_have_text("$ rm -rf logs")
    nb.open(kernel_idle=False)  # reload, unsaved, the cell still busy
    expect(_approve(nb, i)).to_have_count(0)
    nb.start(i + 1)
    again = _approve(nb, i + 1)
    expect(again).to_be_visible(timeout=10_000)
    expect(nb.cell(i + 1).locator("pre.hnb-shell")).to_have_text("$ rm -rf logs")
    expect(nb.prompt(i + 1)).to_have_text("[*]:")  # queued: the run that asks still holds the kernel
    nb.shot("13-foreground-card-in-a-queued-cell", i + 1)
    again.click()
    expect(nb.cell(i + 1).locator(".hnb-card", has_text="Approved by you")).to_contain_text("rm -rf logs")
    nb.finish(i + 1)
    expect(nb.cell(i + 1)).not_to_contain_text("no approval or question is waiting")  # it ran: the card above says it
    nb.run(i + 2)
    expect(nb.cell(i + 2)).to_contain_text("logs is there: False")
    nb.shot("14-foreground-approved-after-reload", i + 1)


def _open_activity(nb: NotebookPage, i: int) -> None:
    """Unfold a finished run's activity: its display is the static copy by then, the
    activity folded behind "N tool calls · S s ▸"."""
    from playwright.sync_api import expect

    folded = nb.cell(i).locator("details.hnb-activity-static")
    folded.locator("> summary").click()
    expect(folded).to_have_attribute("open", "")
