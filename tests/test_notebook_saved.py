"""A notebook that survives saving and reloading, in a real ipykernel: a finished run's
display becomes its static copy (what a notebook reopened without its kernel, nbconvert
and GitHub show), and an approval card lost from the page is found again — ``%approvals``
and the next cell show the same card, and a click there answers the run that asked."""

from __future__ import annotations

import pytest

from harness_nb.notebook.view_static import MARK_OPEN
from harness_nb.testing.kernel_driver import visible_text
from notebook_support import notebook, read_text, result_text, wait_for_widget_text

pytestmark = pytest.mark.kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RM_BUILD = {"name": "bash", "arguments": {"command": "rm -rf build"}}


def children(k, model_id: str) -> list[str]:
    return [str(ref).removeprefix("IPY_MODEL_") for ref in k.models.get(model_id, {}).get("children", ())]


def tree(k, model_id: str) -> set[str]:
    """``model_id`` and every widget below it."""
    found, todo = set(), [model_id]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children(k, current))
    return found


async def test_a_finished_run_leaves_its_static_copy_in_the_cell(tmp_path):
    (tmp_path / "build").mkdir()
    script = {
        "agents": {
            "main": [
                {"match": "clean", "text": "Cleaning.", "tool_calls": [RM_BUILD]},
                {"match": "clean", "text": "Build folder removed."},
            ]
        }
    }
    async with notebook(tmp_path, script) as k:
        cell = k.execute("%%agent\nclean the build")
        await wait_for_widget_text(k, "Approve bash?")
        k.click(await k.wait_for_button("Approve"))
        await k.finished(cell)
        assert result_text(cell) == "Build folder removed."

        (shown,) = [o for o in cell.outputs if o["msg_type"] == "display_data"]
        assert set(shown["data"]) == {WIDGET_VIEW, "text/plain", "text/html"}, "the live widget, with its copy beside it"
        display_id = shown["transient"]["display_id"]
        (final,) = [o for o in cell.outputs if o["msg_type"] == "update_display_data"]
        assert final["transient"]["display_id"] == display_id, "the same output, updated in place"
        assert set(final["data"]) == {"text/plain", "text/html"}, "settled: the static copy stands in for the widget"
        assert final["data"]["text/plain"] == shown["data"]["text/plain"] == "agent run: main · scripted/script.yaml"
        page = final["data"]["text/html"]
        assert page.startswith(MARK_OPEN)
        read = visible_text(page)
        assert read.startswith("✓ main · scripted/script.yaml · done · ")
        assert "✓ Approved by you: rm -rf build" in read and "Cleaning." in read and "1 tool call · " in read


async def test_percent_approvals_shows_a_waiting_card_again_and_its_click_answers_the_run(tmp_path):
    (tmp_path / "build").mkdir()
    script = {"agents": {"general-purpose": [{"tool_calls": [RM_BUILD]}, {"text": "Background clean-up done."}]}}
    async with notebook(tmp_path, script) as k:
        await k.run("%config HarnessNB.background_approvals = 'ask'")
        await k.run("%%agent --bg\nclean the build folder")
        await wait_for_widget_text(k, "Approve bash?")

        # the next cell run shows the waiting card (once), above its own output
        nxt = await k.run("1 + 1")
        assert result_text(nxt) == "2"
        assert k.text(nxt).startswith("1 approval waiting:\napproval: bash(command='rm -rf build')")
        assert "approval waiting" not in k.text(await k.run("2 + 2")), "each card once this way"

        # a reload lost the card from its cell: %approvals finds it, any time
        again = await k.run("%approvals")
        (shown,) = [o for o in again.outputs if o["msg_type"] == "display_data"]
        assert not [o for o in again.outputs if o["msg_type"] == "execute_result"], "the magic ran: no value to show"
        box = shown["data"][WIDGET_VIEW]["model_id"]
        approve = next(
            cid for cid in tree(k, box) if k.models[cid].get("_model_name") == "ButtonModel"
            and k.models[cid].get("description") == "Approve"
        )
        assert "waiting" in visible_text(k.models[children(k, box)[1]]["value"])
        k.click(approve)  # the card as shown again
        assert result_text(await k.run("%task wait bg-1 --timeout 60")) == "Background clean-up done."
        assert not (tmp_path / "build").exists(), "the click answered the run that asked"
        assert read_text(k, "✓ Approved by you: rm -rf build"), "both copies fold to the decision"
        assert "no approval is waiting" in k.text(await k.run("%approvals"))
