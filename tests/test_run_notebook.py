"""The headless notebook runner prints what a run view showed, from the saved widget state."""

from __future__ import annotations

from harness_nb.testing.run_notebook import text_outputs, widget_text

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
