"""``ask_person`` in a real ipykernel, driven as JupyterLab drives it: the question is a card
in the running cell — the main agent's, and a foreground subagent's in its parent's cell,
labelled with it — answered by a click on an option or by typed text (Send, or Enter); the
card folds to one line and the model reads the answer. Where no one can answer — a
background subagent under the default ``background_approvals``, a notebook run by nbclient
— the tool is not offered, and a call anyway is answered "no one to ask" at once. A card
lost by a page reload is shown again like an approval card; an interrupt withdraws it."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from harness_nb.engine.ask import NO_ONE_TO_ASK
from harness_nb.notebook.widgets.question import ANSWER_PLACEHOLDER
from harness_nb.testing.kernel_driver import KernelDriver
from notebook_support import (
    HARNESS,
    error_name,
    fresh_harness,
    kernel_json,
    model_requests,
    notebook,
    read_text,
    result_text,
    tool_results,
    tree,
    widgets_opened_by,
    write_script,
)

pytestmark = pytest.mark.kernel
SHARED_LOOP = pytest.mark.asyncio(loop_scope="module")  # the module's kernel lives on it

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
NO_ONE = f"No answer ({NO_ONE_TO_ASK}). Go on with your own best judgement, and say in your reply what you assumed."


def ask(question: str, options: list[str] | None = None) -> dict:
    arguments: dict = {"question": question}
    if options is not None:
        arguments["options"] = options
    return {"name": "ask_person", "arguments": arguments}


async def answer_box(k: KernelDriver) -> str:
    """The comm id of the waiting card's answer box (the one not yet disabled)."""
    box = {"_model_name": "TextModel", "placeholder": ANSWER_PLACEHOLDER, "disabled": False}
    (found,) = await k.wait_for(lambda: k.find_models(**box), what="the question card's answer box")
    return found


async def offered(k: KernelDriver, agent: str) -> list[list[str]]:
    """The tools each request of ``agent`` offered the model."""
    found: list[list[str]] = await kernel_json(
        k, f"[[t.name for t in r.tools] for r in {HARNESS}.provider.requests if r.agent == {agent!r}]"
    )
    return found


@SHARED_LOOP
async def test_the_main_agent_asks_in_its_cell_answered_by_a_click_then_by_typed_text(kernel, tmp_path):
    script = {
        "agents": {
            "main": [
                {"match": "pick a year", "text": "Two years are there.", "tool_calls": [ask("Which year?", ["2023", "2024"])]},
                {"match": "pick a year", "text": "Using 2024."},
                {"match": "save it", "tool_calls": [ask("What should the file be called?")]},
                {"match": "save it", "text": "Saved."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    cell = k.execute("%%agent\npick a year")
    card = await k.wait_for(lambda: read_text(k, "? Which year?"), what="the question card")
    assert card == "? Which year?", "the main agent's question carries no agent label"
    assert cell.reply is None, "the cell stays busy while the question waits"
    header = await k.wait_for(lambda: read_text(k, "● main"), what="the run waiting")
    assert "· waiting ·" in header
    k.click(await k.wait_for_button("2024"))
    await k.finished(cell)
    assert cell.status == "ok", k.error(cell)
    assert result_text(cell) == "Using 2024."
    assert read_text(k, "? Which year? → 2024 (by you)"), "the answered card is one line"
    assert {cid for cid in k.find_models(_model_name="ButtonModel", description="2024")} <= widgets_opened_by(k, cell)

    typed = k.execute("%%agent\nsave it")
    box = await answer_box(k)
    k.set_state(box, {"value": "sales_\x1b[1m2024\x1b[0m.csv"})  # as JupyterLab sends it
    k.click(await k.wait_for_button("Send"))
    await k.finished(typed)
    assert result_text(typed) == "Saved."
    assert read_text(k, "? What should the file be called? → sales_2024.csv (by you)")

    requests = await model_requests(k, "main")
    assert tool_results(requests[1]) == ['The person answered: "2024"']
    assert tool_results(requests[3])[-1] == 'The person answered: "sales_2024.csv"'
    assert all("ask_person" in tools for tools in await offered(k, "main"))


@SHARED_LOOP
async def test_a_foreground_subagent_asks_in_its_parents_cell_labelled_by_click_and_by_enter(kernel, tmp_path):
    script = {
        "agents": {
            "main": [
                {"tool_calls": [{"name": "task", "arguments": {"subagent_type": "general-purpose", "prompt": "clean"}}]},
                {"text": "Cleaned as you said."},
            ],
            "general-purpose": [
                {"tool_calls": [ask("Drop the rows with no date?", ["yes", "no"])]},
                {"tool_calls": [ask("Where should the dropped rows go?")]},
                {"text": "Kept them in archive.csv."},
            ],
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    cell = k.execute("%%agent\nclean the data")
    card = await k.wait_for(lambda: read_text(k, "? [general-purpose] Drop"), what="the subagent's question card")
    assert card == "? [general-purpose] Drop the rows with no date?", "the question names the subagent that asks"
    k.click(await k.wait_for_button("no"))
    await k.wait_for(lambda: read_text(k, "? [general-purpose] Where"), what="the second question card")
    box = await answer_box(k)
    k.set_state(box, {"value": "archive.csv"})
    k.submit(box)  # Enter
    await k.finished(cell)
    assert cell.status == "ok", k.error(cell)
    assert result_text(cell) == "Cleaned as you said."
    assert read_text(k, "? [general-purpose] Drop the rows with no date? → no (by you)")
    assert read_text(k, "? [general-purpose] Where should the dropped rows go? → archive.csv (by you)")
    assert set(k.find_models(_model_name="TextModel", placeholder=ANSWER_PLACEHOLDER)) <= widgets_opened_by(k, cell)

    requests = await model_requests(k, "general-purpose")
    assert tool_results(requests[-1]) == ['The person answered: "no"', 'The person answered: "archive.csv"']


@SHARED_LOOP
async def test_a_background_subagent_under_the_default_setting_gets_no_one_to_ask_and_no_card(kernel, tmp_path):
    script = {
        "agents": {
            "general-purpose": [{"tool_calls": [ask("Drop the rows with no date?", ["yes", "no"])]}, {"text": "Kept them."}]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%%agent --bg\nclean the data")
    assert result_text(await k.run("%task wait bg-1 --timeout 60")) == "Kept them."

    assert [("ask_person" in tools) for tools in await offered(k, "general-purpose")] == [False, False]
    assert tool_results((await model_requests(k, "general-purpose"))[-1]) == [NO_ONE]
    assert not k.find_models(_model_name="TextModel", placeholder=ANSWER_PLACEHOLDER), "no card was shown"


@SHARED_LOOP
async def test_a_question_lost_by_a_reload_is_shown_in_a_queued_cell_and_its_copy_answers(kernel, tmp_path):
    script = {"agents": {"main": [{"tool_calls": [ask("Which year?", ["2023", "2024"])]}, {"text": "Using 2023."}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    run = k.execute("%%agent\npick a year")
    original = await k.wait_for_button("2023")
    reloaded = k.execute("%approvals", page="a-reloaded-page")

    def card_box() -> dict | None:
        return next((o for o in reloaded.outputs if o["msg_type"] == "display_data" and WIDGET_VIEW in o["data"]), None)

    shown = await k.wait_for(card_box, what="the question, shown in the queued cell")
    assert shown["data"]["text/plain"] == "1 question waiting:\nquestion: Which year?"
    (copy,) = [
        cid for cid in tree(k, shown["data"][WIDGET_VIEW]["model_id"])
        if k.models[cid].get("_model_name") == "ButtonModel" and k.models[cid].get("description") == "2023"
    ]
    assert copy != original
    k.click(copy)
    await k.finished(run)
    assert result_text(run) == "Using 2023."
    await k.finished(reloaded)
    assert tool_results((await model_requests(k, "main"))[-1]) == ['The person answered: "2023"']


@SHARED_LOOP
async def test_an_interrupt_withdraws_the_question(tmp_path):
    script = {"agents": {"main": [{"tool_calls": [ask("Which year?")]}, {"match": "again", "text": "Here."}]}}
    async with notebook(tmp_path, script) as k:
        cell = k.execute("%%agent\npick a year")
        await k.wait_for(lambda: read_text(k, "? Which year?"), what="the question card")
        await k.interrupt()
        await k.finished(cell, timeout=30)
        assert error_name(cell) in ("CancelledError", "KeyboardInterrupt"), k.error(cell)
        folded = "? Which year? → interrupted before you answered"
        assert read_text(k, folded), "the card folded"
        assert not k.find_models(_model_name="TextModel", placeholder=ANSWER_PLACEHOLDER, disabled=False)
        assert result_text(await k.run("%%agent\nare you there again?")) == "Here."


def test_a_notebook_run_by_nbclient_is_not_offered_the_tool_and_gets_no_one_to_ask_at_once(tmp_path: Path) -> None:
    """nbclient sends ``allow_stdin=false``: no one can click, so ``ask_person`` is not
    offered and a call anyway is answered at once (a wait for a click would outlast the
    cell's timeout)."""
    from harness_nb.testing.run_notebook import execute

    script = {"agents": {"main": [{"tool_calls": [ask("Which year?", ["2023", "2024"])]}, {"text": "Assumed 2024."}]}}
    name = write_script(tmp_path, script)
    cells = [
        "%load_ext harness_nb",
        f"%config HarnessNB.model = 'scripted/{name}'",
        "%%agent\npick a year",
        "import json\n"
        f"print(json.dumps([[[t.name for t in r.tools], [getattr(m, 'content', '') for m in r.messages if m.role == 'tool']] "
        f"for r in {HARNESS}.provider.requests]))",
    ]
    path = tmp_path / "unattended.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    nb = execute(path, timeout=60)

    (answer,) = [o for o in nb.cells[2].outputs if o["output_type"] == "execute_result"]
    assert answer["data"]["text/plain"] == "Assumed 2024."
    (printed,) = [o for o in nb.cells[3].outputs if o["output_type"] == "stream"]
    requests = json.loads(printed["text"])
    assert ["ask_person" in tools for tools, _results in requests] == [False, False]
    assert requests[1][1] == [NO_ONE]
