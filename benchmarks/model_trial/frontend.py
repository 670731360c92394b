"""Run a task notebook as a person at a JupyterLab page with harness_nb's extension would:
``run_trial.py --frontend`` (and every task with a ``person.yaml``).

nbclient sends ``allow_stdin=false``, which harness_nb takes for an unattended run: no one
to ask (``ask_person`` is not offered), approvals decided by
``HarnessNB.unattended_approvals``, and no page, so none of the notebook tools
(``notebook_read``, ``notebook_edit``, ``notebook_insert``, ``notebook_run``). Here the
cells run in a real kernel through jupyter_client (``KernelDriver``) with
``allow_stdin=true``, sent one at a time, in order, from a page played in Python
(``harness_nb.testing.fake_page.FakePage``) that holds the notebook in memory and answers
the extension's protocol: ``read`` sees every cell with the outputs the page kept, an
inserted cell lands where asked, an accepted edit changes the cell (a later cell runs as
edited). The person (``person.py``, from the task's ``person.yaml``) decides each edit
card, and clicks the real widgets of approval and question cards as JupyterLab does (a
comm message to the button; typed text set on the box, then Send). A cell the agent
inserted is not run by the person; the agent may run it (``notebook_run``).

The executed notebook is the page's cells at the end (outputs, counts, inserted cells
marked with their agent, widget state saved as nbclient saves it), so ``outputs.txt`` and
``run.json`` are made as for nbclient's runs; ``run.json`` adds what the person did.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from person import Person

from harness_nb.notebook.widgets.approval import REASON_PLACEHOLDER
from harness_nb.notebook.widgets.question import ANSWER_PLACEHOLDER
from harness_nb.testing.fake_page import FakePage
from harness_nb.testing.kernel_driver import Cell, KernelDriver, visible_text

ALIVE_CHECK = 5.0  # seconds between checks that the kernel still lives while a cell runs
LEAVE_WITHIN = 10.0  # seconds the person's task gets to return once the last cell is done
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_APPROVE_HEAD = re.compile(r"^Approve (\S+)\?")


def _id(ref: Any) -> str:
    return str(ref).removeprefix("IPY_MODEL_")


class Widgets:
    """The widget models the page holds, as a tree: children and their parents."""

    def __init__(self, models: dict[str, dict[str, Any]]) -> None:
        self.models = models
        self.parent: dict[str, str] = {}
        for model_id, state in models.items():
            for child in state.get("children", ()) or ():
                self.parent[_id(child)] = model_id

    def children(self, model_id: str) -> list[str]:
        return [_id(c) for c in self.models.get(model_id, {}).get("children", ()) or () if _id(c) in self.models]

    def up(self, model_id: str, steps: int) -> str | None:
        """The ancestor ``steps`` levels up, if the page holds it yet."""
        found: str | None = model_id
        for _ in range(steps):
            found = self.parent.get(found) if found is not None else None
        return found if found in self.models else None

    def enabled(self, model: str, **match: Any) -> Iterator[str]:
        """The enabled widgets of ``model`` (``ButtonModel``, ``TextModel``) matching ``match``."""
        for model_id, state in self.models.items():
            if state.get("_model_name") == model and not state.get("disabled"):
                if all(state.get(k) == v for k, v in match.items()):
                    yield model_id

    def text(self, model_id: str) -> str:
        value = self.models.get(model_id, {}).get("value")
        return visible_text(value) if isinstance(value, str) else ""

    def find(self, inside: str, model: str, **match: Any) -> str | None:
        """The first widget of ``model`` matching ``match`` in the tree under ``inside``."""
        for child in self.children(inside):
            state = self.models[child]
            if state.get("_model_name") == model and all(state.get(k) == v for k, v in match.items()):
                return child
            found = self.find(child, model, **match)
            if found is not None:
                return found
        return None


class PersonAtThePage:
    """Clicks the approval and question cards that wait in the page, each once, as
    ``person`` decides (see ``person.py``)."""

    def __init__(self, k: KernelDriver, person: Person) -> None:
        self.k = k
        self.person = person
        self.handled: set[str] = set()  # the cards decided (their summary's model id)
        self.leaving = False  # set when the last cell is done: ``serve`` returns

    def waiting(self) -> list[tuple[str, str, str]]:
        """The cards not yet decided: (kind, card id, the enabled widget found)."""
        tree = Widgets(self.k.models)
        found = []
        for button in tree.enabled("ButtonModel", description="Approve"):
            card = tree.up(button, 2)  # the button, its row, the card
            if card is not None and tree.children(card) and tree.children(card)[0] not in self.handled:
                found.append(("approval", card, button))
        for box in tree.enabled("TextModel", placeholder=ANSWER_PLACEHOLDER):
            card = tree.up(box, 3)  # the box, its HBox with Send, the row of options, the card
            if card is not None and tree.children(card) and tree.children(card)[0] not in self.handled:
                found.append(("question", card, box))
        return found

    async def serve(self) -> None:
        """Decide every card as it appears, until ``leaving`` is set. (Not by cancelling:
        Python 3.11's ``asyncio.wait_for``, under ``KernelDriver.wait_for``, can swallow a
        cancel that comes as its wait ends, and the loop would go on.)"""
        while not self.leaving:
            found = await self.k.wait_for(lambda: self.leaving or self.waiting(), timeout=24 * 3600, what="a card")
            for kind, card, widget in found if isinstance(found, list) else ():
                tree = Widgets(self.k.models)
                summary = tree.children(card)[0]
                self.handled.add(summary)
                if kind == "approval":
                    self._approve(tree, card, widget, tree.text(summary))
                else:
                    self._answer(tree, card, widget, tree.text(summary))

    def _approve(self, tree: Widgets, card: str, approve: str, shown: str) -> None:
        head = _APPROVE_HEAD.match(shown)
        decision, reason = self.person.approval(head.group(1) if head else "?", shown)
        if decision == "approve":
            self.k.click(approve)
            return
        box = tree.find(card, "TextModel", placeholder=REASON_PLACEHOLDER)
        deny = tree.find(card, "ButtonModel", description="Deny")
        if reason and box is not None:
            self.k.set_state(box, {"value": reason})
        if deny is not None:
            self.k.click(deny)

    def _answer(self, tree: Widgets, card: str, box: str, shown: str) -> None:
        row = tree.up(box, 2)
        options = [
            str(tree.models[b].get("description", ""))
            for b in (tree.children(row) if row is not None else [])
            if tree.models[b].get("_model_name") == "ButtonModel"
        ]
        click = self.person.answer(shown.removeprefix("?").strip(), options)
        if click.label:
            button = tree.find(card, "ButtonModel", description=click.label)
            if button is not None:
                self.k.click(button)
        elif click.text:
            self.k.set_state(box, {"value": click.text})
            send = tree.find(card, "ButtonModel", description="Send")
            if send is not None:
                self.k.click(send)


async def answer_stdin(k: KernelDriver, person: Person) -> None:
    """Answer every ``input()`` with an empty line (a person who just pressed Enter),
    noting the prompt: no task should ask on stdin, and a kernel waiting on it would hang."""
    while True:
        msg = await k.kc.get_stdin_msg()
        if msg["header"]["msg_type"] == "input_request":
            person.noted("stdin", prompt=str(msg["content"].get("prompt", ""))[:300], typed="")
            k.kc.input("")


async def run_cell(k: KernelDriver, page: FakePage, cell_id: str, idle: set[str], *, timeout: float) -> str | None:
    """Run one cell from the page and wait for its reply and idle status; why the run must
    stop (a timeout, a dead kernel), or None."""
    ran: Cell = page.run(cell_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (ran.reply is not None and ran.msg_id in idle):
        left = deadline - loop.time()
        if left <= 0:
            await k.interrupt()
            return f"a cell ran past --cell-timeout ({timeout:g} s): {page.cell_by_id(cell_id)['source'][:80]!r}"
        try:
            await k.wait_for(lambda: ran.reply is not None and ran.msg_id in idle, min(left, ALIVE_CHECK), "the cell")
        except TimeoutError:
            if not await k.km.is_alive():
                return "the kernel died"
    k.iopub.clear()  # nothing here reads it again; a long run would keep every message
    return None


def page_cell(cell: Any) -> dict[str, Any]:
    """A task notebook cell as the page holds it."""
    kind = cell.cell_type if cell.cell_type in ("code", "markdown") else "raw"
    return {
        "id": cell.get("id") or uuid.uuid4().hex[:8],
        "kind": kind,
        "source": cell.source,
        "outputs": [],
        "execution_count": None,
        "metadata": dict(cell.get("metadata", {})),
    }


def saved_notebook(original: Any, page: FakePage, models: dict[str, dict[str, Any]]) -> Any:
    """The notebook a person would save from the page: its cells now, with their outputs and
    counts, a cell an agent inserted marked so, and the widget state (as nbclient saves it)."""
    nb = nbformat.v4.new_notebook(metadata=dict(original.metadata))
    for cell in page.cells:
        metadata = dict(cell.get("metadata", {}))
        if cell["agent"]:
            metadata["harness_nb"] = {"agent": cell["agent"]}
        if cell["kind"] == "code":
            made = nbformat.v4.new_code_cell(
                cell["source"],
                execution_count=page.execution_count(cell),
                outputs=[nbformat.from_dict(o) for o in cell["outputs"]],
            )
        elif cell["kind"] == "markdown":
            made = nbformat.v4.new_markdown_cell(cell["source"])
        else:
            made = nbformat.v4.new_raw_cell(cell["source"])
        made.id, made.metadata = cell["id"], nbformat.from_dict(metadata)
        nb.cells.append(made)
    state = {
        model_id: {
            "model_name": st.get("_model_name"),
            "model_module": st.get("_model_module"),
            "model_module_version": st.get("_model_module_version"),
            "state": st,
        }
        for model_id, st in models.items()
    }
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    return nb


async def run_with_page(
    notebook: Path, work: Path, env: dict[str, str], person: Person, *, cell_timeout: float
) -> tuple[Any, str]:
    """Run ``notebook``'s code cells in order in ``work`` from a page with the extension,
    ``person`` deciding what the page asks; return the notebook as the page holds it at the
    end and how the run ended (``"completed"``, or why it stopped early)."""
    original = nbformat.read(notebook, as_version=4)
    idle: set[str] = set()

    def note_idle(msg: dict[str, Any]) -> None:
        if msg["header"]["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
            idle.add(msg["parent_header"].get("msg_id", ""))

    async with KernelDriver(cwd=work, env=env, inherit_env=False) as k:
        k.listeners.append(note_idle)
        page = FakePage(k, [page_cell(c) for c in original.cells], notebook=notebook.name)
        page.decide = person.edit
        clicker = PersonAtThePage(k, person)
        helpers = [
            asyncio.create_task(clicker.serve(), name="trial:person-at-the-page"),
            asyncio.create_task(answer_stdin(k, person), name="trial:stdin"),
        ]
        ended = "completed"
        try:
            unknown = person.not_run - {c["id"] for c in page.cells}
            if unknown:
                raise SystemExit(
                    f"person.yaml: not_run names cells {sorted(unknown)} that {notebook.name} does not have"
                )
            for cell_id in [c["id"] for c in page.cells if c["kind"] == "code" and c["id"] not in person.not_run]:
                if not page.cell_by_id(cell_id)["source"].strip():
                    continue
                stopped = await run_cell(k, page, cell_id, idle, timeout=cell_timeout)
                if stopped is not None:
                    ended = stopped
                    break
        finally:
            clicker.leaving = True  # serve() sees it within KernelDriver.wait_for's half-second poll
            await asyncio.wait(helpers[:1], timeout=LEAVE_WITHIN)
            for task in helpers:
                task.cancel()
            for task, outcome in zip(helpers, await asyncio.gather(*helpers, return_exceptions=True)):
                if isinstance(outcome, Exception):  # the person stopped answering: the log must say so
                    person.noted("runner error", task=task.get_name(), error=f"{type(outcome).__name__}: {outcome}")
        for problem in page.errors:
            person.noted("page error", error=problem)
        return saved_notebook(original, page, k.models), ended
