"""The headless notebook runner prints what a run view showed, from the saved widget state."""

from __future__ import annotations

import json

import nbformat
import pytest

from harness_nb.notebook.widgets.theme import STYLE
from harness_nb.notebook.widgets.view_static import MARK_OPEN
from harness_nb.testing.run_notebook import execute, text_outputs, widget_text

STATE = {
    "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_head", "IPY_MODEL_acts"]}},
    "head": {"model_name": "HTMLModel", "state": {"value": "<b>✓ main</b> · <code>m</code> · done"}},
    "acts": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_say", "IPY_MODEL_tool", "IPY_MODEL_gone"]}},
    "say": {
        "model_name": "OutputModel",
        "state": {"outputs": [{"output_type": "display_data", "data": {"text/markdown": "Looking **now**."}}]},
    },
    "tool": {
        "model_name": "HTMLModel",
        "state": {
            "value": "<details><summary><code>→ grep(pattern=&#x27;x&#x27;)</code> ✓ a.py:1</summary>"
            "<pre>a.py:1: x\na.py:9: x again</pre></details>"
        },
    },
}


def test_a_widget_tree_reads_as_its_lines_with_tool_results_folded():
    assert widget_text("box", STATE) == [
        "✓ main · m · done",
        "Looking **now**.",
        "→ grep(pattern='x') ✓ a.py:1",
    ]


def test_outputs_use_the_widget_state_when_there_is_one_and_text_otherwise():
    cell = {
        "outputs": [
            {
                "output_type": "display_data",
                "data": {"text/plain": "agent run: main", "application/vnd.jupyter.widget-view+json": {"model_id": "box"}},
            },
            {"output_type": "execute_result", "data": {"text/plain": "'x'", "text/markdown": "the *answer*"}},
            {"output_type": "stream", "text": "printed\n"},
            {"output_type": "error", "ename": "UsageError", "evalue": "no model configured"},
        ]
    }
    assert list(text_outputs(cell, STATE)) == [
        "✓ main · m · done\nLooking **now**.\n→ grep(pattern='x') ✓ a.py:1",
        "the *answer*",
        "printed\n",
        "UsageError: no model configured",
    ]
    assert next(iter(text_outputs(cell, None))) == "agent run: main"


def test_a_view_style_sheet_is_never_printed_as_text():
    """A background run's view carries the view's <style> in an HTML widget: the printout
    shows the view's lines, not 21 lines of CSS."""
    state = {"head": {"model_name": "HTMLModel", "state": {"value": f"{STYLE}<div class='hnb'><b>● explore</b> · running</div>"}}}
    lines = widget_text("head", state)
    assert lines == ["● explore · running"]
    assert not any("--hnb" in line or "{" in line for line in lines)


@pytest.mark.kernel
def test_a_saved_background_cell_keeps_the_finished_run_not_running(tmp_path):
    """nbclient (nbconvert, papermill, run_notebook) saves only what a cell's own messages
    say; a background run finishes after its cell, so the saved cell said "running · 0
    tokens" for good. The next cell to run publishes its finished static copy again."""
    script = {"agents": {"explore": [{"text": "Counted: north 3, south 3.", "delay": 0.3}]}}
    (tmp_path / "script.yaml").write_text(json.dumps(script))
    cells = [
        "%load_ext harness_nb",
        "%config HarnessNB.model = 'scripted/script.yaml'",
        "%%agent --bg --agent explore\ncount the orders per region",
        "%task wait bg-1",
        "1 + 1",
    ]
    path = tmp_path / "bg.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    nb = execute(path, timeout=120)
    html = "".join(str(o.get("data", {}).get("text/html", "")) for o in nb.cells[2].outputs)
    assert MARK_OPEN in html, "the background cell holds no static copy"
    assert "Counted: north 3, south 3." in html
    assert ">running<" not in html and "0 tokens" not in html
