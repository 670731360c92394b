"""The notebook bridge's kernel side in a real ipykernel, the page played in Python over
the real protocol (``harness_nb.testing.fake_page.FakePage``, docs/notebook-bridge.md):
the notebook tools are offered only where the running cell's page has the extension; ``notebook_read``
sees every cell, bounded and masked; an edit is decided on its own card (accepted,
rejected with the reason, stale, accepted and run), or applied unasked under an allow
rule or ``acceptEdits``; staleness is judged by what this conversation read;
``notebook_insert``; ``notebook_run`` shows the source on its card and runs only that, and
its failure is what ``%fix`` fixes; requests go to the running cell's page only, a
reloaded page gets a waiting edit again, an interrupt withdraws it; a hostile page gets
bounded, clear errors; ``%fix`` asks for an edit; nbclient offers none of it.

The tests share the module's kernel, each with a fresh harness and no page left from the
test before; the one that interrupts starts its own."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest

from harness_nb.notebook.bridge.cells import READ_CHARS
from harness_nb.notebook.prompt import BRIDGE_PROMPT
from harness_nb.testing.fake_page import TARGET, FakePage, code, markdown
from harness_nb.testing.kernel_driver import KernelDriver
from notebook_support import (
    CONTROLLER,
    HARNESS,
    error_name,
    fresh_harness,
    kernel_json,
    last_user_text,
    model_requests,
    notebook,
    read_text,
    tool_results,
)

pytestmark = pytest.mark.kernel
on_the_kernels_loop = pytest.mark.asyncio(loop_scope="module")  # the tests that share its kernel

NOTEBOOK_TOOLS = {"notebook_read", "notebook_edit", "notebook_insert", "notebook_run"}
REPLACED = {"notebook_history", "propose_cell"}
TOKEN = "tok-5f3a9c2e7b1d4f6a8c0e"


async def fresh(kernel: KernelDriver, folder: Path, script: dict[str, Any]) -> KernelDriver:
    """A fresh harness, and no page of an earlier test still listening."""
    kernel.listeners.clear()
    return await fresh_harness(kernel, folder, script)


def _script(*steps: dict[str, Any]) -> dict[str, Any]:
    """A scripted model for the main agent: ``steps`` in order."""
    return {"agents": {"main": list(steps)}}


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def _offered(k: KernelDriver) -> list[dict[str, Any]]:
    """Each main request's tool names and whether its system prompt has the bridge's part."""
    found: list[dict[str, Any]] = await kernel_json(
        k,
        f"[{{'tools': [t.name for t in r.tools], 'bridged': {BRIDGE_PROMPT.splitlines()[0]!r} in r.system}} "
        f"for r in {HARNESS}.provider.requests if r.agent == 'main']",
    )
    return found


def _results(requests: list[dict[str, Any]]) -> list[str]:
    """Every tool result of a run, in order (its last request holds them all)."""
    return tool_results(requests[-1])


async def _ran(k: KernelDriver, page: FakePage, prompt: str) -> list[str]:
    """Run ``prompt`` as an agent cell from ``page``; the tool results of that run (the
    conversation goes on across cells: the earlier ones are left out)."""
    before = await model_requests(k, "main")
    earlier = len(_results(before)) if before else 0
    cell = await k.finished(page.execute(f"%%agent\n{prompt}"))
    assert cell.status == "ok", k.error(cell)
    assert not page.errors, page.errors
    return _results(await model_requests(k, "main"))[earlier:]


@on_the_kernels_loop
async def test_the_notebook_tools_are_offered_only_where_the_running_cells_page_has_the_extension(kernel, tmp_path):
    """Without a page that said hello the model has ``notebook_history`` and
    ``propose_cell`` as before; in a cell run from a page with the extension it has the
    four notebook tools instead (and the prompt's two sentences on them); a cell from
    another page, one without the extension, is back to the first set. ``%agents`` says
    which, and how to get the extension."""
    script = _script({"text": "one"}, {"text": "two"}, {"text": "three"})
    k = await fresh(kernel, tmp_path, script)
    await k.run("%%agent\nno extension yet")
    page = FakePage(k, [code("x = 1")])
    page.connect()
    await k.finished(page.execute("%%agent\nwith the extension"))
    other = FakePage(k, session=str(uuid.uuid4()))  # a second tab without the extension
    await k.finished(other.execute("%%agent\nfrom a page without it"))
    without, bridged, elsewhere = await _offered(k)
    assert REPLACED <= set(without["tools"]) and not NOTEBOOK_TOOLS & set(without["tools"])
    assert NOTEBOOK_TOOLS <= set(bridged["tools"]) and not REPLACED & set(bridged["tools"])
    assert elsewhere == without
    assert bridged["bridged"] and not without["bridged"]

    connected = k.text(await k.finished(page.execute("%agents")))
    missing = k.text(await k.finished(other.execute("%agents")))
    assert "notebook extension: connected in jupyterlab (analysis.ipynb)" in connected
    assert "notebook_edit" in connected and "notebook_edit" not in missing
    assert "notebook extension: not in this page" in missing and "pip install harness_nb" in missing
    assert "reload the page" in missing


@on_the_kernels_loop
async def test_a_page_open_at_the_load_says_hello_on_the_kernels_comm(kernel, tmp_path):
    """``%load_ext`` opens the kernel's comm; a page already open answers hello on it and
    is asked on it. ``%unload_ext`` closes it: the page has no comm until the next load."""
    k = await fresh(kernel, tmp_path, _script(_call("notebook_read"), {"text": "read"}))
    page = FakePage(k, [code("q = 1")])
    await k.run("%unload_ext harness_nb")
    await k.run("%load_ext harness_nb\n%config HarnessNB.model = 'scripted/script.yaml'")
    opened = [m for _, m in k.iopub if m["header"]["msg_type"] == "comm_open" and m["content"]["target_name"] == TARGET]
    assert opened[-1]["content"]["data"] == {"protocol": 1} and page.comm_id == opened[-1]["content"]["comm_id"]
    (read,) = await _ran(k, page, "read")
    assert "q = 1" in read and page.requests("read")
    await k.run("%unload_ext harness_nb")
    await k.wait_for(lambda: page.comm_id is None, what="the kernel's comm closed")
    await k.run("%load_ext harness_nb")  # as the next test's fresh harness expects


@on_the_kernels_loop
async def test_read_shows_every_cell_with_outputs_bounded_and_secrets_masked(kernel, tmp_path):
    """Markdown and unrun cells are there; outputs as text, a 100 KB one cut, an image by
    its kind, an error once without its colour codes; the value of a credential-named
    variable is masked wherever an output shows it; the running cell is marked; a range
    reads those cells only."""
    error = {
        "output_type": "error",
        "ename": "KeyError",
        "evalue": "'x'",
        "traceback": ["\x1b[0;31m---------\x1b[0m", "Cell In[4], line 1", "\x1b[0;31mKeyError\x1b[0m: 'x'"],
    }
    cells = [
        markdown("# Sales\nNotes on the data."),
        code("import os", count=1),
        code("print(api_token)", outputs=[{"output_type": "stream", "name": "stdout", "text": f"{TOKEN}\n"}], count=2),
        code("print('x' * 100_000)", outputs=[{"output_type": "stream", "name": "stdout", "text": "x" * 100_000}], count=3),
        code("df['x']", outputs=[error], count=4),
        code("never_ran()"),
        code("plot()", outputs=[{"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}}]),
    ]
    script = _script(_call("notebook_read"), _call("notebook_read", start=4, end=4), {"text": "read"})
    k = await fresh(kernel, tmp_path, script)
    await k.run(f"api_token = {TOKEN!r}")
    page = FakePage(k, cells)
    page.connect()
    whole, one = await _ran(k, page, "read my notebook")
    assert whole.startswith("analysis.ipynb: 8 cells; cell 7 is running now\n=== [0] markdown\n# Sales\nNotes on the data.")
    assert "=== [1] code · In [1]\nimport os" in whole
    assert "=== [5] code · not run\nnever_ran()" in whole
    assert TOKEN not in whole and "[redacted]" in whole
    assert "=== [4] code · In [4] · error\ndf['x']\n--- output\n---------\nCell In[4], line 1\nKeyError: 'x'" in whole
    assert whole.count("KeyError: 'x'") == 1 and "\x1b[" not in whole
    assert "=== [6] code · not run\nplot()\n--- output\n[image/png]" in whole
    assert "=== [7] code · not run · running now (this prompt)\n%%agent\nread my notebook" in whole
    assert "characters not shown" in whole and len(whole) <= READ_CHARS + 500, len(whole)
    assert one == "analysis.ipynb: 8 cells; cell 7 is running now\n" + whole[whole.index("=== [4]") : whole.index("=== [5]")].rstrip()


@on_the_kernels_loop
async def test_an_edit_is_decided_on_its_own_card_and_the_model_is_told_the_outcome(kernel, tmp_path):
    """Each edit shows the page's card (``ask: true``) and no generic approval card: an
    accepted one changes the cell; a rejected one leaves it and the model reads the
    person's reason verbatim (cleaned); one the person changed before deciding is stale;
    accept-and-run runs the new source in the kernel, sends the cell its outputs and
    returns them. A cell the person changed after the model read it is refused as stale
    before any card is shown."""
    script = _script(
        _call("notebook_read"),
        _call("notebook_edit", cell=0, new_source="total = 1 + 1", explanation="add"),
        _call("notebook_edit", cell=1, new_source="name = 'b'", explanation="rename"),
        _call("notebook_edit", cell=2, new_source="rate = 0.2", explanation="raise the rate"),
        _call("notebook_edit", cell=3, new_source="answer = 6 * 7\nprint(answer)", explanation="compute"),
        _call("notebook_edit", cell=4, new_source="late = 2", explanation="tidy"),
        {"text": "edited"},
    )
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [code("total = 1"), code("name = 'a'"), code("rate = 0.1"), code("answer = None"), code("late = 1")])
    page.connect()

    def decide(edit: dict[str, Any]) -> tuple[str, str]:
        index = edit["index"]
        if index == 0:
            page.cells[4]["source"] = "late = 'typed by the person meanwhile'"
            return ("accepted", "")
        if index == 1:
            return ("rejected", "keep the old\x1b[31m name\n")
        if index == 2:
            page.cells[2]["source"] = "rate = 0.15  # the person's own change"
            return ("accepted", "")
        return ("accepted_and_run", "")

    page.decide = decide
    _read, accepted, rejected, stale, ran, refused = await _ran(k, page, "edit my cells")
    assert accepted == "cell 0 now holds your source (the person accepted it; not run)"
    assert rejected == (
        'error: the person rejected the edit of cell 1. Their reason: "keep the old name". Do not retry it '
        "unchanged: take their reason into account."
    )
    assert stale.startswith("error: cell 2 changed before the person decided (they edited it), so nothing was changed")
    assert ran == "the person accepted and ran cell 3:\n42\nstatus: ok"
    assert refused == (
        "error: the person changed cell 4 since you read it, so nothing was changed: notebook_read it again, then edit"
    )
    sources = [c["source"] for c in page.cells[:5]]
    assert sources == [
        "total = 1 + 1",
        "name = 'a'",
        "rate = 0.15  # the person's own change",
        "answer = 6 * 7\nprint(answer)",
        "late = 'typed by the person meanwhile'",
    ]
    edits = page.requests("edit")
    assert [e["index"] for e in edits] == [0, 1, 2, 3] and all(e["ask"] for e in edits)
    assert edits[0]["old_source"] == "total = 1" and edits[0]["explanation"] == "add" and edits[0]["agent"] == "main"
    (outputs,) = page.requests("outputs")
    assert outputs["cell"] == page.cells[3]["id"] and outputs["outputs"] == [
        {"output_type": "stream", "name": "stdout", "text": "42\n"}
    ]
    assert await kernel_json(k, "answer") == 42
    assert not k.find_models(_model_name="ButtonModel", description="Approve"), "no generic approval card"


@on_the_kernels_loop
async def test_an_allow_rule_applies_an_edit_unasked_and_a_deny_rule_refuses_it(kernel, tmp_path):
    """``notebook_edit`` is judged by the permission hook like every tool: an allow rule
    sends the edit with ``ask: false`` (the page applies it at once); a deny rule refuses
    it before the page hears of it."""
    script = _script(
        {"match": "allowed", **_call("notebook_edit", cell=0, new_source="a = 2", explanation="two")},
        {"match": "allowed", "text": "done"},
        {"match": "denied", **_call("notebook_edit", cell=0, new_source="a = 3", explanation="three")},
        {"match": "denied", "text": "not done"},
    )
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [code("a = 1")])
    page.connect()
    await k.run("%config HarnessNB.allow = ['notebook_edit']")
    (allowed,) = await _ran(k, page, "allowed edit")
    assert allowed == "cell 0 now holds your source (applied unasked, as a permission rule or mode allows; not run)"
    assert [e["ask"] for e in page.requests("edit")] == [False] and page.cells[0]["source"] == "a = 2"
    await k.run("%config HarnessNB.allow = []\n%config HarnessNB.deny = ['notebook_edit']")
    (denied,) = await _ran(k, page, "denied edit")
    assert denied.startswith("error: denied: denied by the rule notebook_edit")
    assert len(page.requests("edit")) == 1 and page.cells[0]["source"] == "a = 2"


@on_the_kernels_loop
async def test_insert_places_a_cell_marked_as_the_agents_and_later_indices_follow(kernel, tmp_path):
    """``notebook_insert`` adds a markdown or code cell where asked, marked with the
    agent's name, and returns its index; an edit by the indices the model now knows (the
    cells below moved down) is not taken for stale; a position past the end is the page's
    error, told to the model."""
    script = _script(
        _call("notebook_read"),
        _call("notebook_insert", position=1, source="## Cleaning", kind="markdown"),
        _call("notebook_edit", cell=2, new_source="clean = True", explanation="flag"),
        _call("notebook_insert", position=9, source="past the end"),
        {"text": "inserted"},
    )
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [code("load()"), code("clean = False")])
    page.connect()
    page.decide = lambda _edit: ("accepted", "")
    _read, inserted, edited, past = await _ran(k, page, "add a heading")
    assert inserted == "inserted a markdown cell at index 1, not run; any cells from index 1 on moved down by one"
    heading = page.cells[1]
    assert (heading["kind"], heading["source"], heading["agent"]) == ("markdown", "## Cleaning", "main")
    assert edited == "cell 2 now holds your source (the person accepted it; not run)"
    assert page.cells[2]["source"] == "clean = True"
    assert past == 'error: the notebook page could not insert: "index" is 9 but the notebook has 4 cells'


@on_the_kernels_loop
async def test_notebook_run_asks_then_runs_the_cell_in_the_kernel_and_returns_its_outputs(kernel, tmp_path):
    """``notebook_run`` asks on the approval card as ``run_python`` does, the card showing
    the cell's source as the page has it; approved, it runs that source (magics too) in the
    kernel, sends the page its outputs as nbformat outputs (printed text, an HTML display,
    the last value) and returns them to the model; a failing cell comes back as an error
    output and an error result."""
    script = _script(_call("notebook_run", cell=0), _call("notebook_run", cell=1), {"text": "ran"})
    k = await fresh(kernel, tmp_path, script)
    shown = "from IPython.display import HTML, display\ndisplay(HTML('<b>bold</b>'))\n"
    page = FakePage(k, [code(f"%time x = 6 * 7\n{shown}print('hi')\nx"), code("1 / 0")])
    page.connect()
    run = page.execute("%%agent\nrun my cells")
    for n, cell in enumerate(page.cells[:2]):
        card = await k.wait_for(lambda: read_text(k, f"run cell {n} "), what=f"the approval card of cell {n}")  # noqa: B023
        assert card.startswith("Approve notebook_run? notebook_run always asks for approval · risk medium"), card
        assert f"run cell {n} {' '.join(cell['source'].split())} raw arguments" in card, card
        k.click(await k.wait_for_button("Approve"))
        await k.wait_for(lambda: not k.find_models(_model_name="ButtonModel", description="Approve", disabled=False))
    await k.finished(run)
    ok, failed = _results(await model_requests(k, "main"))
    assert "Wall time" in ok and ok.endswith("hi\n<IPython.core.display.HTML object>\n42\nstatus: ok"), ok
    assert failed.startswith("error: Traceback") and "ZeroDivisionError" in failed
    first, second = page.requests("outputs")
    assert first["cell"] == page.cells[0]["id"] and first["execution_count"] is None
    kinds = [o["output_type"] for o in first["outputs"]]
    assert kinds == ["stream", "display_data", "execute_result"] and first["outputs"][2]["data"]["text/plain"] == "42"
    assert first["outputs"][1]["data"]["text/html"] == "<b>bold</b>"
    assert "hi" in first["outputs"][0]["text"]
    assert [o["output_type"] for o in second["outputs"]] == ["error"] and second["outputs"][0]["ename"] == "ZeroDivisionError"


@on_the_kernels_loop
async def test_notebook_run_runs_only_the_source_the_person_approved(kernel, tmp_path):
    """The person changes the cell while its card waits: approving it runs nothing —
    neither the source they approved, no longer the cell's, nor the new one, which nobody
    approved — and the model is told to read it again; the next card shows the new
    source. Denied, nothing runs and the model reads the person's denial."""
    script = _script(_call("notebook_run", cell=0), _call("notebook_run", cell=0), {"text": "done"})
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [code("ran = 'as first read'")])
    page.connect()
    run = page.execute("%%agent\nrun cell 0")
    await k.wait_for(lambda: read_text(k, "run cell 0 ran = 'as first read' raw"), what="the first card")
    page.cells[0]["source"] = "ran = 'typed while the card waited'"
    k.click(await k.wait_for_button("Approve"))
    await k.wait_for(lambda: read_text(k, "run cell 0 ran = 'typed while the card waited' raw"), what="the second card")
    k.click(await k.wait_for_button("Deny"))
    await k.finished(run)
    stale, denied = _results(await model_requests(k, "main"))
    assert stale == (
        "error: cell 0 changed while the person was asked to approve running it (they edited or deleted it), so "
        "nothing ran: notebook_read it, then notebook_run it again"
    )
    assert denied.startswith("error: the person denied this call (they gave no reason)")
    assert not page.requests("outputs") and await kernel_json(k, "'ran' in globals()") is False


@on_the_kernels_loop
async def test_a_cell_the_agent_ran_that_failed_is_the_error_fix_fixes(kernel, tmp_path):
    """A ``notebook_run`` whose cell raised is the notebook's last error: ``%fix`` sends
    that cell's source and traceback (from the cell's own line on, named by its index) and
    asks for an edit of it."""
    script = _script(_call("notebook_run", cell=1), {"text": "it failed"}, {"text": "use a list"})
    k = await fresh(kernel, tmp_path, script)
    await k.run("%config HarnessNB.allow = ['notebook_run']")
    page = FakePage(k, [markdown("# Totals"), code("total = sum(1, 2)")])
    page.connect()
    (failed,) = await _ran(k, page, "run the total")
    assert "TypeError" in failed
    fix = await k.finished(page.execute("%fix"))
    assert fix.status == "ok", k.error(fix)
    prompt = last_user_text((await model_requests(k, "main"))[-1])
    assert prompt.startswith(
        "Fix the last error: the failed cell and its traceback are below. Propose the fix as one notebook_edit of "
        "cell 1: the person reviews the diff there."
    )
    context = prompt[prompt.index("--- notebook context") :]
    assert context.startswith(
        "--- notebook context (added by harness_nb): the last cell that failed (run without a history number) ---\n"
        "total = sum(1, 2)\n--- its error ---\nTraceback (most recent call last):\n  Cell [1], line 1, in <module>\n"
    ), context
    assert "TypeError: " in context and "kernel/tools.py" not in context  # the harness's frames left out


@on_the_kernels_loop
async def test_stale_edits_are_judged_by_what_this_conversation_read(kernel, tmp_path):
    """The main agent read cell 0; the person changed it; a subagent read it since. The
    main agent's edit is still refused as stale: it has not seen the person's change, and
    another conversation's read does not count for it."""
    task = {"tool_calls": [{"name": "task", "arguments": {"subagent_type": "general-purpose", "prompt": "read it"}}]}
    script = {
        "agents": {
            "main": [
                _call("notebook_read"),
                {"text": "read"},
                task,
                _call("notebook_edit", cell=0, new_source="rate = 0.3", explanation="raise the rate"),
                {"text": "done"},
            ],
            "general-purpose": [_call("notebook_read"), {"text": "cell 0 sets the rate"}],
        }
    }
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [code("rate = 0.1")])
    page.connect()
    page.decide = lambda _edit: ("accepted", "")
    await _ran(k, page, "read my notebook")
    page.cells[0]["source"] = "rate = 0.2  # the person's"
    _delegated, refused = await _ran(k, page, "have it read, then raise the rate")
    (read_by_subagent,) = tool_results((await model_requests(k, "general-purpose"))[-1])
    assert "rate = 0.2  # the person's" in read_by_subagent
    assert refused == (
        "error: the person changed cell 0 since you read it, so nothing was changed: notebook_read it again, then edit"
    )
    assert not page.requests("edit") and page.cells[0]["source"] == "rate = 0.2  # the person's"


@on_the_kernels_loop
async def test_an_accept_edits_agent_edits_cells_without_the_card(kernel, tmp_path):
    """A subagent in ``permissionMode: acceptEdits`` has its cell edits applied at once
    (``ask: false``, no card), as its file edits are; running a cell would still ask."""
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "tidy.md").write_text(
        "---\nname: tidy\ndescription: Tidies cells.\ntools: notebook_read, notebook_edit\n"
        "permissionMode: acceptEdits\n---\nTidy the cells.\n"
    )
    task = {"tool_calls": [{"name": "task", "arguments": {"subagent_type": "tidy", "prompt": "tidy cell 0"}}]}
    script = {
        "agents": {
            "main": [task, {"text": "tidied"}],
            "tidy": [_call("notebook_edit", cell=0, new_source="x = 1", explanation="spacing"), {"text": "done"}],
        }
    }
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [code("x=1")])
    page.connect()
    await _ran(k, page, "tidy up")
    (edited,) = tool_results((await model_requests(k, "tidy"))[-1])
    assert edited == "cell 0 now holds your source (applied unasked, as a permission rule or mode allows; not run)"
    (edit,) = page.requests("edit")
    assert (edit["ask"], edit["agent"], page.cells[0]["source"]) == (False, "tidy", "x = 1")
    assert not k.find_models(_model_name="ButtonModel", description="Approve")


@on_the_kernels_loop
async def test_requests_go_only_to_the_page_that_ran_the_cell(kernel, tmp_path):
    """Two pages on one kernel, both with the extension: a run started from one sends its
    requests to that one; the other hears nothing."""
    script = _script(_call("notebook_read"), {"text": "b"}, _call("notebook_read"), {"text": "a"})
    k = await fresh(kernel, tmp_path, script)
    a = FakePage(k, [code("from_a = 1")])
    b = FakePage(k, [code("from_b = 1")], session=str(uuid.uuid4()), notebook="other.ipynb")
    a.connect()
    b.connect()
    (read_b,) = await _ran(k, b, "read it")
    assert "from_b = 1" in read_b and len(b.requests("read")) == 1 and not a.received
    (read_a,) = await _ran(k, a, "read it")
    assert "from_a = 1" in read_a and len(a.requests("read")) == 1 and len(b.received) == 1


@on_the_kernels_loop
async def test_a_page_that_says_hello_while_an_edit_waits_gets_it_again_and_the_first_reply_wins(kernel, tmp_path):
    """An edit waits on page A's card; a second view of the notebook (a reload, a second
    tab) says hello and is sent the same edit; its reply decides, and A is told the edit
    is settled. Once A has gone, the run's next request goes to the page that replaced it."""
    script = _script(
        _call("notebook_edit", cell=0, new_source="y = 2", explanation="two"),
        _call("notebook_read"),
        {"text": "done"},
    )
    k = await fresh(kernel, tmp_path, script)
    a = FakePage(k, [code("y = 1")])
    a.connect()
    run = a.execute("%%agent\nedit y")
    await k.wait_for(lambda: a.requests("edit"), what="the edit sent to page A")
    b = FakePage(k, session=str(uuid.uuid4()))
    b.cells = copy.deepcopy(a.cells)
    b.connect()
    (edit,) = await k.wait_for(lambda: b.requests("edit"), what="the edit sent again to page B")
    assert edit["id"] == a.requests("edit")[0]["id"] and edit["new_source"] == "y = 2"
    a.bye()  # A reloads: gone before B answers; B's reply still decides
    b.answer(edit["id"], "accepted")
    await k.finished(run)
    edited, read = _results(await model_requests(k, "main"))
    assert edited == "cell 0 now holds your source (the person accepted it; not run)"
    assert "y = 2" in read and len(b.requests("read")) == 1, "the run's next request went to the page that replaced A"
    assert len(a.requests("read")) == 1 and not b.errors  # A had only the edit's own read


@on_the_kernels_loop
async def test_a_second_tab_deciding_first_settles_the_card_in_the_other(kernel, tmp_path):
    """Two tabs show the same waiting edit; the first reply wins, the other tab is told
    ``settled`` with the decision, and its late reply changes nothing."""
    script = _script(_call("notebook_edit", cell=0, new_source="z = 2", explanation="two"), {"text": "ok"})
    k = await fresh(kernel, tmp_path, script)
    a = FakePage(k, [code("z = 1")])
    a.connect()
    run = a.execute("%%agent\nedit z")
    (edit,) = await k.wait_for(lambda: a.requests("edit"), what="the edit sent to page A")
    b = FakePage(k, session=str(uuid.uuid4()))
    b.cells = copy.deepcopy(a.cells)
    b.connect()
    await k.wait_for(lambda: b.requests("edit"), what="the edit sent again to page B")
    b.answer(edit["id"], "rejected", "not now")
    (settled,) = await k.wait_for(lambda: a.requests("settled"), what="settled sent to page A")
    assert settled | {"id": 0} == {"type": "settled", "id": 0, "of": edit["id"], "decision": "rejected", "page": a.session}
    a.say({"type": "reply", "id": edit["id"], "decision": "accepted", "reason": ""})  # too late: ignored
    await k.finished(run)
    (result,) = _results(await model_requests(k, "main"))
    assert 'Their reason: "not now"' in result and b.cells[0]["source"] == "z = 1"
    assert not b.requests("settled") and not a.requests("outputs")


@on_the_kernels_loop
async def test_a_hostile_page_gets_bounded_clear_errors(kernel, tmp_path):
    """Replies of the wrong shape, far too large, failing with a huge message, with a
    field of the wrong type, or never coming: each is one bounded error the model can act
    on, and the kernel goes on. Junk messages (an unknown id, another protocol, a kind that
    is no string) are ignored; a huge hello is cut."""
    k = await fresh(kernel, tmp_path, _script(*[_call("notebook_read")] * 5, {"text": "survived"}))
    page = FakePage(k, [code("b = 1")])
    page.connect()
    page.say({"type": "reply", "id": 999_999, "cells": []})
    page.say({"type": "hello", "protocol": 2})
    page.say({"type": ["not", "a", "kind"]})
    page.say({"type": "hello", "protocol": 1, "frontend": "x" * 10_000, "notebook": "n" * 2_000_000})
    await k.run(f"{CONTROLLER}.bridge.reply_timeout = 1")
    huge = [{"id": f"c{n}", "kind": "code", "source": "s" * 100, "outputs": [], "execution_count": n} for n in range(3_000)]
    huge[0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "o" * 1_000_000}]
    replies = [
        {"cells": "lots"},
        {"notebook": "x.ipynb", "cells": huge},
        {"error": "broken " * 20_000},
        None,  # no reply at all
        {"cells": [{"id": "c0", "kind": "code", "source": "b = 1", "execution_count": True}]},
    ]
    page.hostile = lambda _request: replies.pop(0)
    shape, big, failing, silent, bad_count = await _ran(k, page, "read it")
    assert shape.startswith("error: the notebook page sent a malformed reply (cells is not a list); reload the page")
    assert big.startswith("x.ipynb: 3000 cells\n=== [0] code · In [0]") and len(big) <= READ_CHARS + 500, len(big)
    assert "not shown: notebook_read start=" in big
    assert failing.startswith("error: the notebook page could not read: broken broken") and len(failing) <= 1_200
    assert silent == "error: the notebook page did not answer read within 1 s; reload the page"
    assert bad_count.startswith("error: the notebook page sent a malformed reply (cell 0's execution_count is not")
    shown = await kernel_json(k, f"[[len(p.notebook), p.frontend] for p in [{CONTROLLER}.bridge.current()]][0]")
    assert shown == [1_000, "other"]


@on_the_kernels_loop
async def test_an_unknown_decision_is_a_malformed_reply(kernel, tmp_path):
    """A page answering an edit with a decision the protocol does not have: the model is
    told the reply was malformed; nothing is run."""
    script = _script(_call("notebook_edit", cell=0, new_source="c = 2", explanation="two"), {"text": "ok"})
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [code("c = 1")])
    page.connect()
    page.decide = lambda _edit: ("maybe", "")
    (result,) = await _ran(k, page, "edit c")
    assert result.startswith("error: the notebook page sent a malformed reply (decision 'maybe')")


@on_the_kernels_loop
async def test_fix_asks_for_an_edit_of_the_failing_cell(kernel, tmp_path):
    """``%fix`` in a page with the extension names the failing cell by its index in the
    page's notebook and asks for the fix as a ``notebook_edit`` of it."""
    script = _script(
        _call("notebook_edit", cell=1, new_source="total = sum([1, 2])", explanation="sum a list"),
        {"text": "fixed"},
    )
    k = await fresh(kernel, tmp_path, script)
    page = FakePage(k, [markdown("# Totals")])
    page.connect()
    page.decide = lambda _edit: ("accepted", "")
    failed = await k.finished(page.execute("total = sum(1, 2)"))
    assert error_name(failed) == "TypeError"
    fix = await k.finished(page.execute("%fix"))
    assert fix.status == "ok", k.error(fix)
    first, last = await model_requests(k, "main")
    assert first["messages"][0]["content"].startswith(
        "Fix the last error: the failed cell and its traceback are below. Propose the fix as one notebook_edit of "
        "cell 1: the person reviews the diff there."
    )
    assert tool_results(last) == ["cell 1 now holds your source (the person accepted it; not run)"]
    assert page.cells[1]["source"] == "total = sum([1, 2])"


def test_nbclient_offers_none_of_the_notebook_tools(tmp_path):
    """A notebook run headless by nbclient (no page, no extension): the model is offered
    ``notebook_history`` and ``propose_cell`` as before and none of the notebook tools."""
    from harness_nb.testing.run_notebook import execute

    (tmp_path / "script.yaml").write_text(json.dumps(_script({"text": "Hello."})))
    cells = [
        "%load_ext harness_nb",
        "%config HarnessNB.model = 'scripted/script.yaml'",
        "%%agent\nhi",
        f"print(sorted(t.name for t in {HARNESS}.provider.requests[-1].tools))",
    ]
    path = tmp_path / "headless.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    printed = execute(path, timeout=120).cells[-1].outputs[0]["text"]
    assert "'notebook_history'" in printed and "'propose_cell'" in printed
    assert not any(f"'{name}'" in printed for name in NOTEBOOK_TOOLS), printed


async def test_an_interrupt_withdraws_the_waiting_edit(tmp_path):
    """Stop pressed while an edit waits on its card: the run ends interrupted and the page
    is told to take the card away (``cancel``)."""
    script = _script(_call("notebook_edit", cell=0, new_source="w = 2", explanation="two"), {"text": "no"})
    async with notebook(tmp_path, script) as k:
        page = FakePage(k, [code("w = 1")])
        page.connect()
        run = page.execute("%%agent\nedit w")
        (edit,) = await k.wait_for(lambda: page.requests("edit"), what="the edit sent to the page")
        await k.interrupt()
        await k.finished(run)
        assert error_name(run) == "CancelledError"
        (cancel,) = await k.wait_for(lambda: page.requests("cancel"), what="the edit withdrawn")
        assert cancel | {"id": 0} == {"type": "cancel", "id": 0, "of": edit["id"], "page": page.session}
        assert page.cells[0]["source"] == "w = 1" and not page.errors
