"""A notebook that survives saving and reloading, in a real ipykernel: a finished run's
display becomes its static copy (what a notebook reopened without its kernel, nbconvert
and GitHub show), and an approval card lost from the page is found again — ``%approvals``
and the next cell show the same card, and a click there answers the run that asked."""

from __future__ import annotations

import pytest

from harness_nb.notebook.widgets.view_static import MARK_OPEN
from harness_nb.testing.kernel_driver import visible_text
from notebook_support import children, fresh_harness, kernel_json, read_text, result_text, tree, wait_for_widget_text

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RM_BUILD = {"name": "bash", "arguments": {"command": "rm -rf build"}}


def updates_of(k, display_id: str) -> list[dict]:
    """The ``update_display_data`` messages for ``display_id``, from whichever cell."""
    return [
        m for _, m in k.iopub
        if m["header"]["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id
    ]


async def test_a_finished_run_leaves_its_static_copy_in_the_cell(kernel, tmp_path):
    # no build folder: the approved call changes nothing, so no undo button keeps the view
    # a widget (test_notebook_checkpoints: a view with one settles once it is used or retired)
    script = {
        "agents": {
            "main": [
                {"match": "clean", "text": "Cleaning.", "tool_calls": [RM_BUILD]},
                {"match": "clean", "text": "Build folder removed."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
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


async def test_percent_approvals_shows_a_waiting_card_again_and_its_click_answers_the_run(kernel, tmp_path):
    (tmp_path / "build").mkdir()
    script = {"agents": {"general-purpose": [{"tool_calls": [RM_BUILD]}, {"text": "Background clean-up done."}]}}
    k = await fresh_harness(kernel, tmp_path, script)
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
    # all decided: the copies' static form stands in for them (a saved notebook keeps it)
    # (sent from the run's own task, so its parent is the cell that launched the run:
    # frontends apply it by its display id, across cells)
    final = await k.wait_for(lambda: updates_of(k, shown["transient"]["display_id"]), what="the static copy")
    final = final[-1]["content"]
    assert set(final["data"]) == {"text/plain", "text/html"}
    assert visible_text(final["data"]["text/html"]) == "1 approval shown again ✓ Approved by you: rm -rf build"
    assert "no approval or question is waiting" in k.text(await k.run("%approvals"))


async def test_a_cell_queued_from_a_reloaded_page_shows_the_foreground_card_and_its_click_answers(kernel, tmp_path):
    """A reload while a foreground run's card waits: the kernel is busy with that run, yet a
    cell run from the new page (a new client session) gets the card at once, while it
    queues; the page that shows the card already gets no copy in the cells it queues."""
    (tmp_path / "build").mkdir()
    script = {"agents": {"main": [{"tool_calls": [RM_BUILD]}, {"text": "Build folder removed."}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    run = k.execute("%%agent\nclean the build folder")
    approve = await k.wait_for_button("Approve")

    same_page = k.execute("2 + 2")  # Run All on the page that shows the card
    reloaded = k.execute("%approvals", page="a-reloaded-page")

    def card_box(cell):
        return next((o for o in cell.outputs if o["msg_type"] == "display_data" and WIDGET_VIEW in o["data"]), None)

    shown = await k.wait_for(lambda: card_box(reloaded), what="the card, shown in the queued cell")
    assert run.reply is None and reloaded.reply is None, "both still busy: the run waits, the cell queues"
    copy = shown["data"][WIDGET_VIEW]["model_id"]
    assert approve not in tree(k, copy), "a copy made of new widgets: the reloaded page knows no older one"
    (approve_copy,) = [
        cid for cid in tree(k, copy)
        if k.models[cid].get("_model_name") == "ButtonModel" and k.models[cid].get("description") == "Approve"
    ]
    assert shown["data"]["text/plain"].startswith("1 approval waiting:\napproval: bash(command='rm -rf build')")
    # the same page's request came first, and got nothing
    assert same_page.outputs == [] and same_page.reply is None

    again = k.execute("3 + 3", page="a-reloaded-page")  # that page has been told once
    k.click(approve_copy)  # on the card as shown in the queued cell
    await k.finished(run)
    assert result_text(run) == "Build folder removed."
    assert not (tmp_path / "build").exists(), "the click answered the run that asked"

    # the queued cells then run in their turn, in order
    assert result_text(await k.finished(same_page)) == "4"
    await k.finished(reloaded)
    assert "no approval or question is waiting" not in k.text(reloaded), "the decided card above says it all"
    assert [o["msg_type"] for o in reloaded.outputs] == ["display_data"], "shown once, nothing more"
    assert result_text(await k.finished(again)) == "6"
    assert not [o for o in again.outputs if o["msg_type"] == "display_data"], "told once"
    assert read_text(k, "✓ Approved by you: rm -rf build"), "the card folded to the decision"


async def test_a_forged_request_while_a_card_waits_is_passed_on_and_shown_nothing(kernel, tmp_path):
    """Reading the queue is a look, never a gate: a request with a wrong signature (or not
    a cell's) gets no card, ipykernel still sees it (and drops the forgery), and the
    waiting run and the cells after it go on."""
    (tmp_path / "build").mkdir()
    script = {"agents": {"main": [{"tool_calls": [RM_BUILD]}, {"text": "Build folder removed."}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    run = k.execute("%%agent\nclean the build folder")
    approve = await k.wait_for_button("Approve")

    forged = k.kc.session.msg("execute_request", {"code": "open('forged', 'w')", "silent": False})
    forged["header"]["session"] = "a-forging-page"
    frames = k.kc.session.serialize(forged)
    frames[1] = b"0" * len(frames[1])  # the HMAC signature
    await k.kc.shell_channel.socket.send_multipart(frames)
    inspect = k.kc.session.msg("inspect_request", {"code": "len", "cursor_pos": 3, "detail_level": 0})
    inspect["header"]["session"] = "a-reloaded-page"
    k.kc.shell_channel.send(inspect)
    reloaded = k.execute("1 + 1", page="a-reloaded-page")

    await k.wait_for(lambda: any(o["msg_type"] == "display_data" for o in reloaded.outputs), what="the card")
    shown_to = {m["parent_header"].get("msg_id") for _, m in k.iopub if m["header"]["msg_type"] == "display_data"}
    assert forged["header"]["msg_id"] not in shown_to and inspect["header"]["msg_id"] not in shown_to
    k.click(approve)
    assert result_text(await k.finished(run)) == "Build folder removed."
    assert result_text(await k.finished(reloaded)) == "2"
    assert not (tmp_path / "forged").exists(), "the forgery was dropped, not run"


async def test_unloading_hands_the_shell_stream_back(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path)
    setup = (
        "from harness_nb.notebook.kernel.queued_cells import _main_shell_stream\n"
        "_stream = _main_shell_stream(get_ipython().kernel)"
    )
    await k.run(setup)
    assert await kernel_json(k, "_stream._recv_callback.__qualname__") == "QueuedCells._receive"
    await k.run("%unload_ext harness_nb")
    assert await kernel_json(k, "_stream._recv_callback.__qualname__") == "_async_in_context.<locals>.run_in_context"
    await k.run("%load_ext harness_nb")
    assert await kernel_json(k, "_stream._recv_callback.__qualname__") == "QueuedCells._receive"
    assert result_text(await k.run("6 * 7")) == "42"


async def test_a_card_shown_to_a_queued_approvals_cell_is_not_shown_there_again(kernel, tmp_path):
    """A background run's card waits while another cell holds the kernel; a reloaded page
    queues ``%approvals`` and is shown the card at once. When that cell runs in its turn,
    the card (still waiting) is not shown a second time under the first."""
    (tmp_path / "build").mkdir()
    script = {"agents": {"general-purpose": [{"tool_calls": [RM_BUILD]}, {"text": "Background clean-up done."}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.background_approvals = 'ask'")
    await k.run(
        "import asyncio, ipywidgets\n_gate = asyncio.Event()\n"
        "_open = ipywidgets.Button(description='open the gate')\n_open.on_click(lambda _b: _gate.set())"
    )
    await k.run("%%agent --bg\nclean the build folder")
    await wait_for_widget_text(k, "Approve bash?")
    busy = k.execute("await _gate.wait()")  # holds the kernel until the gate opens
    reloaded = k.execute("%approvals", page="a-reloaded-page")
    await k.wait_for(lambda: reloaded.outputs, what="the card, shown in the queued cell")
    k.click(await k.wait_for_button("open the gate"))
    await k.finished(busy)
    await k.finished(reloaded)
    assert [o["msg_type"] for o in reloaded.outputs] == ["display_data"], "once, though it still waits"
    assert "no approval or question is waiting" not in k.text(reloaded)

    box = reloaded.outputs[0]["data"][WIDGET_VIEW]["model_id"]
    (approve,) = [
        cid for cid in tree(k, box)
        if k.models[cid].get("_model_name") == "ButtonModel" and k.models[cid].get("description") == "Approve"
    ]
    k.click(approve)
    assert result_text(await k.run("%task wait bg-1 --timeout 60")) == "Background clean-up done."
