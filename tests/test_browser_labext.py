"""The harness-nb extension's page side (docs/notebook-bridge.md) in a real browser, in
JupyterLab and Notebook 7, light and dark.

The kernel side here is ``bridge_double`` (tests/bridge_double.py), run in the notebook's
own kernel: it opens the comm and sends the protocol's requests from the cells, so what is
tested is the page: it says hello; ``read`` sees markdown and cells never run; an edit
shows a diff in its cell and changes nothing before Accept; Undo on the card and the
notebook's own Ctrl+Z restore; Reject leaves the cell and sends the reason; an edit the
rules allow applies at once; a stale edit is refused; ``outputs`` fill a cell; ``insert``
places the agent's cell with its badge; ``%%agent`` cells are highlighted as Markdown
(following the first line as it is typed); while an edit waits, a second tab and a reload
each show it again, Accept and run in one sends the run's outputs back into its cell, and
the other's card folds as decided elsewhere (``settled``); ``cancel`` withdraws a card.

One notebook tells the whole story per frontend and theme (one server, one kernel each: a
Jupyter server's start is most of a browser test's time). Screenshots go to
test-artifacts/browser/<frontend>-<theme>/labext-*.png.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from browser_support import FRONTENDS, Frontend, NotebookPage, Theme, needs_chromium, notebook_in_browser
from labext_support import BRIDGE_DOUBLE, EditCard, badge, editor, editor_language, printed, wait_source

pytestmark = [pytest.mark.browser, needs_chromium]

TARGET = "total = 1 + 1"
NEW = "total = 1 + 2\nprint(total)"
PROSE = "%%agent\nSummarise what this notebook does, in **two** lines."


def _edit(
    old: str,
    new: str,
    *,
    ask: bool = True,
    index: int = 3,
    why: str = "Add one more and show the total.",
    **more: object,
) -> str:
    """A cell that asks for an edit of cell-3 and prints the reply (MORE: the double's
    own options, as ``cancel_after``)."""
    fields = {
        "cell": "cell-3",
        "index": index,
        "old_source": old,
        "new_source": new,
        "explanation": why,
        "agent": "main",
        "ask": ask,
        **more,
    }
    return f"show(await b.request('edit', **{fields!r}))"


CELLS = [
    ("markdown", "# A notebook the agent reads\nIts **markdown** cells too."),
    # 1: the kernel side, and this page's hello
    "import json\nfrom bridge_double import BridgeDouble\n"
    "def show(x): print(json.dumps(x, sort_keys=True))\n"
    "b = BridgeDouble()\nshow(await b.hello())",
    PROSE,  # 2: never run
    TARGET,  # 3: never run; every edit below is of this cell
    "show(await b.request('read'))",  # 4
    _edit(TARGET, NEW),  # 5: accepted, then undone from the card
    _edit(TARGET, NEW, ask=False),  # 6: a rule allows it: applied at once
    _edit(TARGET, NEW),  # 7: rejected with a reason
    _edit("total = 0", NEW),  # 8: stale: the cell does not hold that
    "show(await b.request('outputs', cell='cell-3', execution_count=42,"
    " outputs=[{'output_type': 'stream', 'name': 'stdout', 'text': 'from the kernel\\n'}]))",  # 9
    "show(await b.request('insert', index=3, kind='markdown', source='## The agent wrote this', agent='explore'))",  # 10
    "show([c for c in (await b.request('read'))['cells'] if c['agent']])",  # 11 (12 once the insert is in)
    _edit(TARGET, NEW, index=4, why="Show the total."),  # 12 (13): waits across a reload
    "show(b.log)",  # 13 (14)
    _edit(NEW, TARGET, index=4, why="Back to two.", cancel_after=1),  # 14 (15): the kernel stops waiting
]


def _answer(reply: dict[str, object]) -> dict[str, object]:
    """A reply's fields past its type and id (the id checked to be the request's kind)."""
    assert reply["type"] == "reply" and isinstance(reply["id"], int), reply
    return {k: v for k, v in reply.items() if k not in ("type", "id")}


def _double() -> dict[str, str]:
    return {BRIDGE_DOUBLE: (Path(__file__).parent / BRIDGE_DOUBLE).read_text(encoding="utf-8")}


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("frontend", FRONTENDS)
def test_page_side_of_the_bridge(tmp_path: Path, frontend: Frontend, theme: Theme) -> None:
    with notebook_in_browser(tmp_path, "labext.ipynb", kind=frontend, theme=theme, cells=CELLS, files=_double()) as nb:
        _hello(nb, frontend)
        _read_sees_markdown_and_unrun_cells(nb)
        _prose_cells_highlight_as_markdown(nb)
        _edit_applies_only_on_accept_and_undo_restores(nb)
        _edit_allowed_by_a_rule_applies_at_once_and_ctrl_z_restores(nb)
        _reject_leaves_the_cell_and_sends_the_reason(nb)
        _stale_edit_changes_nothing(nb)
        _outputs_fill_the_cell(nb)
        _insert_places_the_agents_cell(nb)
        _a_waiting_edit_reaches_a_new_tab_and_a_reload_and_settles_in_the_others(nb)
        _cancel_withdraws_a_waiting_edit(nb)


def _hello(nb: NotebookPage, frontend: Frontend) -> None:
    nb.run(1)
    hello = printed(nb, 1)
    assert hello == {
        "type": "hello",
        "protocol": 1,
        "frontend": "jupyterlab" if frontend == "lab" else "notebook",
        "notebook": "labext.ipynb",
    }


def _read_sees_markdown_and_unrun_cells(nb: NotebookPage) -> None:
    nb.run(4)
    reply = printed(nb, 4)
    assert reply["notebook"] == "labext.ipynb"
    cells = reply["cells"]
    assert [c["kind"] for c in cells] == ["markdown"] + ["code"] * (len(CELLS) - 1)
    assert [c["id"] for c in cells] == [f"cell-{n}" for n in range(len(CELLS))]
    assert [c["index"] for c in cells] == list(range(len(CELLS)))
    assert cells[0]["source"] == CELLS[0][1] and cells[0]["execution_count"] is None
    assert cells[2]["source"] == PROSE and cells[2]["execution_count"] is None and cells[2]["outputs"] == []
    assert cells[3]["source"] == TARGET and cells[3]["running"] is False
    assert cells[1]["execution_count"] == 1
    assert cells[1]["outputs"][0]["output_type"] == "stream" and '"type": "hello"' in cells[1]["outputs"][0]["text"]
    assert cells[4]["running"] is True  # the cell that asked is running
    assert all(c["agent"] is None for c in cells)


def _prose_cells_highlight_as_markdown(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    expect(editor(nb, 2)).to_have_attribute("data-language", "markdown")
    assert editor_language(nb, 3) == "python", "an ordinary code cell keeps the kernel's language"
    nb.shot("1-prose-cell-as-markdown", 2)
    # The language follows the first line as it is typed: no longer a %%agent cell, then
    # one again.
    editor(nb, 2).click()
    nb.page.keyboard.press("Control+Home")
    nb.page.keyboard.press("Delete")
    expect(editor(nb, 2)).to_have_attribute("data-language", "python")
    nb.page.keyboard.type("%")
    expect(editor(nb, 2)).to_have_attribute("data-language", "markdown")
    nb.page.keyboard.press("Escape")
    wait_source(nb, 2, PROSE)


def _edit_applies_only_on_accept_and_undo_restores(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(5)
    card = EditCard(nb, 3)
    card.wait_waiting()
    assert card.diff() == [("del", "total = 1 + 1"), ("add", "total = 1 + 2"), ("add", "print(total)")]
    assert card.explanation() == "Add one more and show the total."
    wait_source(nb, 3, TARGET)
    expect(nb.prompt(5)).to_have_text("[*]:")
    nb.shot("2-edit-card-waiting", 3)
    card.accept()
    nb.finish(5)
    assert _answer(printed(nb, 5)) == {"decision": "accepted", "reason": ""}
    wait_source(nb, 3, NEW)
    card.wait_state("accepted")
    assert "accepted" in card.folded_text()
    nb.shot("3-edit-accepted", 3)
    card.undo()
    card.wait_state("undone")
    wait_source(nb, 3, TARGET)


def _edit_allowed_by_a_rule_applies_at_once_and_ctrl_z_restores(nb: NotebookPage) -> None:
    nb.run(6)
    assert printed(nb, 6)["decision"] == "accepted"
    wait_source(nb, 3, NEW)
    card = EditCard(nb, 3)
    card.wait_state("accepted")
    # the notebook's own undo, in the cell's editor
    editor(nb, 3).click()
    nb.page.keyboard.press("Control+z")
    nb.page.keyboard.press("Escape")
    wait_source(nb, 3, TARGET)


def _reject_leaves_the_cell_and_sends_the_reason(nb: NotebookPage) -> None:
    nb.start(7)
    card = EditCard(nb, 3)
    card.wait_waiting()
    card.reject("keep it at two")
    nb.finish(7)
    assert _answer(printed(nb, 7)) == {"decision": "rejected", "reason": "keep it at two"}
    wait_source(nb, 3, TARGET)
    card.wait_state("rejected")
    assert "keep it at two" in card.folded_text()
    nb.shot("4-edit-rejected", 3)


def _stale_edit_changes_nothing(nb: NotebookPage) -> None:
    nb.run(8)
    assert printed(nb, 8)["decision"] == "stale"
    EditCard(nb, 3).wait_state("stale")
    wait_source(nb, 3, TARGET)


def _outputs_fill_the_cell(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.run(9)
    assert _answer(printed(nb, 9)) == {}
    expect(nb.cell(3).locator(".jp-OutputArea-output")).to_have_text("from the kernel")
    expect(nb.prompt(3)).to_have_text("[42]:")


def _insert_places_the_agents_cell(nb: NotebookPage) -> None:
    from playwright.sync_api import expect

    nb.start(10)
    nb.finish(11)  # the cell that asked is one further down once the new one is in
    reply = _answer(printed(nb, 11))
    assert reply["index"] == 3 and reply["cell"], reply
    inserted = nb.cell(3)
    expect(inserted).to_have_class(re.compile(r"\bjp-MarkdownCell\b"))
    expect(inserted).to_contain_text("The agent wrote this")
    expect(badge(nb, 3)).to_have_text("✦ explore")
    expect(badge(nb, 4)).to_have_count(0)
    nb.shot("5-inserted-cell", 3)
    nb.run(12)
    (agent_cell,) = printed(nb, 12)
    assert agent_cell == {**agent_cell, "id": reply["cell"], "index": 3, "kind": "markdown", "agent": "explore"}


def _a_waiting_edit_reaches_a_new_tab_and_a_reload_and_settles_in_the_others(nb: NotebookPage) -> None:
    """An edit waits in this page; a second tab on the notebook, then this page reloaded,
    each get it on their hello; Accept and run in the reloaded page runs it (the kernel
    sends the outputs) and folds the second tab's card as decided elsewhere."""
    from playwright.sync_api import expect

    nb.start(13)
    EditCard(nb, 4).wait_waiting()
    nb.save()  # what the new pages load is what was saved
    second = nb.page.context.browser.new_page(viewport={"width": 1280, "height": 1000})
    tab = NotebookPage(second, nb.server, nb.notebook, artifacts=nb.artifacts, prefix=f"{nb.prefix}tab-")
    tab.open(kernel_idle=False)
    EditCard(tab, 4).wait_waiting()
    nb.open(kernel_idle=False)  # the reload
    card = EditCard(nb, 4)
    card.wait_waiting()
    wait_source(nb, 4, TARGET)
    nb.shot("6-edit-card-after-reload", 4)
    card.accept_and_run()
    # the kernel runs the new source and sends its outputs into the cell
    expect(nb.cell(4).locator(".jp-OutputArea-output")).to_have_text("3")
    expect(nb.prompt(4)).to_have_text("[99]:")
    wait_source(nb, 4, NEW)
    nb.shot("7-accepted-and-run-after-reload", 4)
    elsewhere = EditCard(tab, 4)
    elsewhere.wait_state("settled")
    assert "decided in another view: accepted and run" in elsewhere.folded_text()
    wait_source(tab, 4, TARGET)
    tab.shot("8-settled-in-the-other-tab", 4)
    tab.page.close()
    nb.wait_for_kernel()
    nb.run(14)
    log = printed(nb, 14)
    hellos = [entry["page"] for entry in log if entry["data"]["type"] == "hello"]
    assert len(set(hellos)) == 3, f"the tab and the reloaded page said hello as new pages: {json.dumps(log)[:2000]}"
    (reply,) = [e for e in log if e["data"].get("decision") == "accepted_and_run"]
    assert reply["page"] == hellos[-1]


def _cancel_withdraws_a_waiting_edit(nb: NotebookPage) -> None:
    nb.run(15)
    assert "cancelled" in printed(nb, 15)
    card = EditCard(nb, 4)
    card.wait_state("cancelled")
    assert "withdrawn" in card.folded_text()
    wait_source(nb, 4, NEW)
