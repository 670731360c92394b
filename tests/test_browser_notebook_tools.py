"""The notebook tools end to end: harness_nb's real kernel side, its real tools and a
scripted model, and the extension in a real page (JupyterLab light, Notebook 7 dark; the
page side alone is covered in all four combinations by test_browser_labext.py).

One notebook per frontend tells the story, each agent cell driving one tool through the
page as a person meets it:

- ``notebook_read`` then ``notebook_edit`` of the cell that failed: the diff card shows in
  that cell; **Accept and run** changes its source and fills its outputs, and the run's
  tool line shows what the model was told;
- ``notebook_edit`` rejected with a typed reason: the cell keeps its source, the tool line
  says "Denied by you: <reason>" and the model's tool result carries the reason;
- ``notebook_run``: the approval card shows the cell's code; Approve runs it, its outputs
  land in that cell and go back to the model;
- ``%fix`` after a failing cell: the edit card appears on that cell;
- ``ask_person`` from the main agent, answered by a click on an option, and from a
  foreground subagent (``task``), answered by typed text and Enter, its card labelled with
  the subagent;
- ``notebook_insert``: the cell lands at the position, with the agent's badge.

What the model was sent is read back in the page: a last cell prints the tool results the
scripted model received (``HARNESS.provider.requests``). Screenshots of each card go to
test-artifacts/browser/<frontend>-<theme>/notebook_tools-*.png.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from browser_support import Frontend, NotebookPage, Theme, needs_chromium, notebook_in_browser
from labext_support import EditCard, badge, printed, wait_source

pytestmark = [pytest.mark.browser, needs_chromium]

FAILING = "total = sum(1, 2)"
FIXED = "total = sum([1, 2])\nprint('total is', total)"
RATE = "rate = 0.1"
REASON = "keep the rate at 0.1"
TO_RUN = "print('run me', 6 * 7)"
MEAN = "values = [1, 2]\nmean = sum(values) / len(value)"
MEAN_FIXED = "values = [1, 2]\nmean = sum(values) / len(values)"
HEADING = "## Inputs, added by the agent"
BUTTON = ".jp-OutputArea button.jupyter-button"

# cell positions (before the insert, the last scenario, moves the cells below it down)
SETUP, FAILS, EDIT, TARGET, REJECT, RUN_TARGET, RUN = 0, 2, 3, 4, 5, 6, 7
MEAN_CELL, FIX, ASK, SUB_ASK, INSERT, TOLD = 8, 9, 10, 11, 12, 13
INSERT_AT = 2


def _call(name: str, match: str, text: str = "", **arguments: Any) -> dict[str, Any]:
    """A step of the main agent that calls NAME, taken only by the run whose prompt has MATCH."""
    step: dict[str, Any] = {"match": match, "tool_calls": [{"name": name, "arguments": arguments}]}
    return {**step, "text": text} if text else step


def _answer(match: str, text: str) -> dict[str, Any]:
    return {"match": match, "text": text}


SCRIPT: dict[str, list[dict[str, Any]]] = {
    "main": [
        _call("notebook_read", "failed", "Let me read the notebook."),
        _call("notebook_edit", "failed", cell=FAILS, new_source=FIXED, explanation="sum() takes one iterable."),
        _answer("failed", "Done: see the cell."),
        _call("notebook_edit", "rate", cell=TARGET, new_source="rate = 0.5", explanation="A higher rate."),
        _answer("rate", "Left the rate as it is."),
        _call("notebook_run", "Run the cell", cell=RUN_TARGET),
        _answer("Run the cell", "It printed its line."),
        _call("notebook_edit", "Fix the last error", cell=MEAN_CELL, new_source=MEAN_FIXED, explanation="A typo."),
        _answer("Fix the last error", "Fixed the typo."),
        _call("ask_person", "year", question="Which year?", options=["2023", "2024"]),
        _answer("year", "Using 2024."),
        _call("task", "Clean", subagent_type="general-purpose", description="clean rows", prompt="Clean the rows."),
        _answer("Clean", "Cleaned as you said."),
        _call("notebook_insert", "heading", position=INSERT_AT, source=HEADING, kind="markdown"),
        _answer("heading", "Added the heading."),
    ],
    "general-purpose": [
        {"tool_calls": [{"name": "ask_person", "arguments": {"question": "Where should the dropped rows go?"}}]},
        {"text": "Kept them in archive.csv."},
    ],
}

# What the scripted model was sent as tool results, per agent, each once and in order.
TOLD_SOURCE = (
    "import json\n"
    "_h = __import__('harness_nb.notebook').notebook.harness_magics(get_ipython()).controller.harness()\n"
    "_told = [[r.agent, m.content] for r in _h.provider.requests for m in r.messages if m.role == 'tool']\n"
    "print(json.dumps([list(t) for t in dict.fromkeys(map(tuple, _told))]))"
)

CELLS = [
    "%load_ext harness_nb\n%config HarnessNB.model = 'scripted/script.yaml'",
    ("markdown", "# Totals"),
    FAILING,
    "%%agent\nThe cell above failed: fix it.",
    RATE,
    "%%agent\nShould the rate be higher?",
    TO_RUN,
    "%%agent\nRun the cell that prints.",
    MEAN,
    "%fix",
    "%%agent\nPick a year for the report.",
    "%%agent\nClean the data.",
    "%%agent\nAdd a heading for the inputs.",
    TOLD_SOURCE,
]


@pytest.mark.parametrize(("frontend", "theme"), [("lab", "light"), ("notebook", "dark")])
def test_the_notebook_tools_end_to_end(tmp_path: Path, frontend: Frontend, theme: Theme) -> None:
    import yaml

    files = {"script.yaml": yaml.safe_dump({"agents": SCRIPT}, sort_keys=False)}
    with notebook_in_browser(
        tmp_path, "notebook_tools.ipynb", kind=frontend, theme=theme, cells=CELLS, files=files
    ) as nb:
        nb.run(SETUP)
        _edit_accepted_and_run(nb)
        _edit_rejected_with_a_reason(nb)
        _run_asks_then_fills_the_cell(nb)
        _fix_edits_the_failing_cell(nb)
        _main_agent_asks_answered_by_a_click(nb)
        _subagent_asks_answered_by_typed_text(nb)
        _insert_places_the_agents_cell(nb)
        _the_model_was_told_each_outcome(nb)


def _edit_accepted_and_run(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(FAILS)
    nb.finish(FAILS, raises=True)
    expect(nb.cell(FAILS)).to_contain_text("TypeError")
    nb.start(EDIT)
    card = EditCard(nb, FAILS)
    card.wait_waiting()
    assert card.diff() == [
        ("del", FAILING),
        ("add", "total = sum([1, 2])"),
        ("add", "print('total is', total)"),
    ]
    assert card.explanation() == "sum() takes one iterable."
    wait_source(nb, FAILS, FAILING)  # nothing changes before the person decides
    nb.shot("1-edit-card-on-the-failed-cell", FAILS)
    card.accept_and_run()
    nb.finish(EDIT)
    wait_source(nb, FAILS, FIXED)
    card.wait_state("accepted_and_run")
    outputs = nb.cell(FAILS).locator(".jp-OutputArea-output")
    expect(outputs).to_have_text("total is 3")
    expect(nb.cell(FAILS)).not_to_contain_text("TypeError")
    expect(nb.value(EDIT)).to_contain_text("Done: see the cell.")
    # the run's tool line carries what the model was told
    expect(nb.cell(EDIT)).to_contain_text("the person accepted and ran cell 2")
    expect(nb.cell(EDIT)).to_contain_text("total is 3")
    nb.shot("2-edit-accepted-and-run", FAILS)


def _edit_rejected_with_a_reason(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(REJECT)
    card = EditCard(nb, TARGET)
    card.wait_waiting()
    assert card.diff() == [("del", RATE), ("add", "rate = 0.5")]
    card.node.locator(".hnb-edit-reason").fill(REASON)
    nb.shot("3-edit-card-with-a-reason", TARGET)
    card.button("Reject").click()
    nb.finish(REJECT)
    card.wait_state("rejected")
    assert REASON in card.folded_text()
    wait_source(nb, TARGET, RATE)
    expect(nb.cell(TARGET).locator(".jp-OutputArea-output")).to_have_count(0)
    expect(nb.cell(REJECT)).to_contain_text(f"Denied by you: {REASON}")
    expect(nb.value(REJECT)).to_contain_text("Left the rate as it is.")
    nb.shot("4-edit-rejected", TARGET)


def _run_asks_then_fills_the_cell(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(RUN)
    approve = nb.cell(RUN).locator(BUTTON, has_text=re.compile(r"^\W*Approve$"))
    approve.wait_for(state="visible", timeout=30_000)
    card = nb.cell(RUN).locator(".hnb-card").filter(has=nb.page.locator("button.jupyter-button"))
    expect(card).to_contain_text("notebook_run")
    expect(card).to_contain_text(TO_RUN)  # the person sees what would run
    expect(nb.cell(RUN_TARGET).locator(".jp-OutputArea-output")).to_have_count(0)
    nb.shot("5-notebook-run-approval-card", RUN)
    approve.click()
    nb.finish(RUN)
    expect(nb.cell(RUN_TARGET).locator(".jp-OutputArea-output")).to_have_text("run me 42")
    expect(nb.cell(RUN)).to_contain_text("Approved by you")
    expect(nb.cell(RUN)).to_contain_text("run me 42")  # the tool line: what went back to the model
    expect(nb.value(RUN)).to_contain_text("It printed its line.")
    nb.shot("6-notebook-run-outputs-in-the-cell", RUN_TARGET)


def _fix_edits_the_failing_cell(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(MEAN_CELL)
    nb.finish(MEAN_CELL, raises=True)
    expect(nb.cell(MEAN_CELL)).to_contain_text("NameError")
    nb.start(FIX)
    card = EditCard(nb, MEAN_CELL)
    card.wait_waiting()
    assert card.diff() == [
        ("same", "values = [1, 2]"),
        ("del", "mean = sum(values) / len(value)"),
        ("add", "mean = sum(values) / len(values)"),
    ]
    for other in (FAILS, TARGET):
        expect(nb.cell(other).locator(".hnb-edit-waiting")).to_have_count(0)
    nb.shot("7-fix-edit-card-on-the-failing-cell", MEAN_CELL)
    card.accept()
    nb.finish(FIX)
    wait_source(nb, MEAN_CELL, MEAN_FIXED)
    card.wait_state("accepted")
    expect(nb.value(FIX)).to_contain_text("Fixed the typo.")


def _main_agent_asks_answered_by_a_click(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(ASK)
    cell = nb.cell(ASK)
    option = cell.locator(BUTTON, has_text=re.compile(r"^2024$"))
    option.wait_for(state="visible", timeout=30_000)
    expect(cell).to_contain_text("? Which year?")
    expect(cell).not_to_contain_text("[main]")  # the main agent's question is not labelled
    nb.shot("8-question-card-main-agent", ASK)
    option.click()
    nb.finish(ASK)
    expect(cell).to_contain_text("Which year? → 2024 (by you)")
    expect(nb.value(ASK)).to_contain_text("Using 2024.")


def _subagent_asks_answered_by_typed_text(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(SUB_ASK)
    cell = nb.cell(SUB_ASK)
    box = cell.locator("input[placeholder^='Your answer']")
    box.wait_for(state="visible", timeout=30_000)
    expect(cell).to_contain_text("? [general-purpose] Where should the dropped rows go?")
    box.fill("archive.csv")
    nb.shot("9-question-card-subagent", SUB_ASK)
    box.press("Enter")
    nb.finish(SUB_ASK)
    expect(cell).to_contain_text("[general-purpose] Where should the dropped rows go? → archive.csv (by you)")
    expect(nb.value(SUB_ASK)).to_contain_text("Cleaned as you said.")


def _insert_places_the_agents_cell(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(INSERT)
    nb.finish(INSERT + 1)  # the asking cell is one further down once the new one is in
    inserted = nb.cell(INSERT_AT)
    expect(inserted).to_have_class(re.compile(r"\bjp-MarkdownCell\b"))
    expect(inserted).to_contain_text(HEADING.removeprefix("## "))
    expect(badge(nb, INSERT_AT)).to_have_text("✦ main")
    expect(badge(nb, INSERT_AT + 1)).to_have_count(0)
    expect(nb.cell(INSERT_AT + 1)).to_contain_text(FAILING.split(" = ")[0])
    expect(nb.cell(INSERT + 1)).to_contain_text("inserted a markdown cell at index 2")
    expect(nb.value(INSERT + 1)).to_contain_text("Added the heading.")
    nb.shot("10-inserted-cell-with-badge", INSERT_AT)


def _the_model_was_told_each_outcome(nb: NotebookPage) -> None:
    nb.run(TOLD + 1)
    told: list[list[str]] = printed(nb, TOLD + 1)
    main = [text for agent, text in told if agent == "main"]
    sub = [text for agent, text in told if agent == "general-purpose"]
    read, ran, rejected, run, fixed, year, task, inserted = main
    assert "# Totals" in read and FAILING in read and "TypeError" in read, read
    assert ran == "the person accepted and ran cell 2:\ntotal is 3\nstatus: ok", ran
    assert rejected == (
        f'error: the person rejected the edit of cell 4. Their reason: "{REASON}". Do not retry it unchanged: '
        "take their reason into account."
    ), rejected
    assert "run me 42" in run, run
    assert fixed == "cell 8 now holds your source (the person accepted it; not run)", fixed
    assert year == 'The person answered: "2024"', year
    assert "Kept them in archive.csv." in task, task
    assert inserted.startswith("inserted a markdown cell at index 2"), inserted
    assert sub == ['The person answered: "archive.csv"'], json.dumps(told)[:3000]
