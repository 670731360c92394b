"""A notebook page with harness_nb's frontend extension, played in Python over a real
kernel: ``FakePage`` speaks the protocol of docs/notebook-bridge.md on the comm target
``harness_nb.notebook`` and answers the kernel's requests from a notebook it holds in
memory, as the TypeScript extension does from JupyterLab's model. The tests of the bridge
use it, and so does the model trial's ``--frontend`` runner (benchmarks/model_trial/).

    page = FakePage(k, [code("x = 1"), markdown("# Notes")])
    page.connect()                       # a page that connected after %load_ext
    page.decide = lambda edit: ("accepted", "")
    cell = page.execute("%%agent\\nfix cell 0")   # the agent's cell, sent from this page

A page is one client session (the ``session`` of its messages' headers): the driver's own
(``k.kc.session.session``) unless another is given, as for a second tab or a reloaded page.
Every page sees every iopub message; it keeps those on its comm addressed to it
(``received``). What it does with an ``edit`` is ``decide(request)`` — a decision and a
reason, or ``None`` to leave the card waiting (``answer`` decides later). ``hostile``, when
set, replaces every reply with what it returns (a malformed or huge one; ``None``: no
reply at all).

The cells it runs (``execute``, ``run``) get their outputs as JupyterLab keeps them: as
nbformat outputs, streams merged, ``clear_output`` and display updates applied (an update
reaches every output of its display id, in any cell), so ``read`` shows them as a page
would, and ``cells`` hold what a person would save.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from harness_nb.testing.kernel_driver import Cell, KernelDriver

TARGET = "harness_nb.notebook"
Decision = tuple[str, str] | None


OUTPUT_MESSAGES = ("stream", "display_data", "execute_result", "error", "update_display_data", "clear_output")


def code(source: str, *, outputs: list[dict[str, Any]] | None = None, count: int | None = None) -> dict[str, Any]:
    """A code cell of the page's notebook."""
    return {"kind": "code", "source": source, "outputs": outputs or [], "execution_count": count}


def markdown(source: str) -> dict[str, Any]:
    return {"kind": "markdown", "source": source, "outputs": [], "execution_count": None}


class FakePage:
    """One page with the extension (see the module doc)."""

    def __init__(
        self,
        k: KernelDriver,
        cells: list[dict[str, Any]] | None = None,
        *,
        session: str | None = None,
        notebook: str = "analysis.ipynb",
        frontend: str = "jupyterlab",
    ) -> None:
        self.k = k
        self.session = session or str(k.kc.session.session)
        self.notebook = notebook
        self.frontend = frontend
        self.cells: list[dict[str, Any]] = [{"id": uuid.uuid4().hex[:8], "agent": None, **c} for c in cells or []]
        self.comm_id: str | None = None
        self.received: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.decide: Callable[[dict[str, Any]], Decision] = lambda _edit: None
        self.hostile: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
        self.waiting: dict[int, dict[str, Any]] = {}  # edits shown as cards, by request id
        self.running: Cell | None = None
        self._running_id: str | None = None
        self._executed: dict[str, Cell] = {}  # cells run from this page, by id: their counts
        self._output_of: dict[str, str] = {}  # execute request id -> the id of the cell it runs
        self._clear_pending: set[str] = set()  # cells whose outputs go at their next output (clear_output wait)
        self._displays: dict[str, list[dict[str, Any]]] = {}  # display id -> the outputs showing it
        k.listeners.append(self._heard)

    # ------------------------------------------------------------------ sending
    def _send(self, msg_type: str, content: dict[str, Any]) -> None:
        msg = self.k.kc.session.msg(msg_type, content)
        msg["header"]["session"] = self.session
        self.k.kc.shell_channel.send(msg)

    def _hello(self) -> dict[str, Any]:
        return {"type": "hello", "protocol": 1, "frontend": self.frontend, "notebook": self.notebook}

    def connect(self) -> None:
        """Open a comm of its own with the ``hello`` as its data (a page that loaded after
        ``%load_ext``, or was reloaded)."""
        self.comm_id = uuid.uuid4().hex
        self._send("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": self._hello()})

    def say(self, data: dict[str, Any]) -> None:
        """Send ``data`` on the page's comm."""
        assert self.comm_id is not None, "the page has no comm yet: connect() first"
        self._send("comm_msg", {"comm_id": self.comm_id, "data": data})

    def bye(self) -> None:
        self.say({"type": "bye"})

    def leave(self) -> None:
        """Stop listening (the page is closed)."""
        if self._heard in self.k.listeners:
            self.k.listeners.remove(self._heard)

    def execute(self, source: str) -> Cell:
        """Run a new cell holding ``source`` from this page: it is added at the end of the
        notebook and marked running until its reply comes."""
        cell = {"id": uuid.uuid4().hex[:8], "agent": None, **code(source)}
        self.cells.append(cell)
        return self.run(cell["id"])

    def run(self, cell_id: str) -> Cell:
        """Run the page's cell ``cell_id`` as it is now, as Shift+Enter does: its outputs
        are cleared and it is marked running until its reply comes."""
        cell = self.cell_by_id(cell_id)
        cell["outputs"], cell["execution_count"] = [], None
        self._clear_pending.discard(cell_id)
        self.running, self._running_id = self.k.execute(cell["source"], page=self.session), cell_id
        self._executed[cell_id] = self.running
        self._output_of[self.running.msg_id] = cell_id
        return self.running

    # ------------------------------------------------------------------ receiving
    def _heard(self, msg: dict[str, Any]) -> None:
        try:
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind in OUTPUT_MESSAGES:
                self._output(kind, content, self._output_of.get(msg["parent_header"].get("msg_id", "")))
            elif kind == "comm_open" and content.get("target_name") == TARGET and self.comm_id is None:
                self.comm_id = content["comm_id"]  # the kernel's comm: every page answers hello on it
                self.say(self._hello())
            elif kind == "comm_msg" and content.get("comm_id") == self.comm_id:
                data = content.get("data", {})
                if data.get("page") == self.session:
                    self.received.append(data)
                    self._handle(data)
            elif kind == "comm_close" and content.get("comm_id") == self.comm_id:
                self.comm_id = None
        except Exception as exc:  # noqa: BLE001 - reported by the test, never lost in the driver's reader
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _output(self, kind: str, content: dict[str, Any], cell_id: str | None) -> None:
        """Keep an output of a cell this page ran as an nbformat output, as JupyterLab
        does; a display update reaches every output showing its display id."""
        display_id = content.get("transient", {}).get("display_id")
        if kind == "update_display_data":
            for shown in self._displays.get(display_id, ()):
                shown["data"], shown["metadata"] = content.get("data", {}), content.get("metadata", {})
            return
        if cell_id is None:
            return
        outputs = self.cell_by_id(cell_id)["outputs"]
        if kind == "clear_output":
            if content.get("wait"):
                self._clear_pending.add(cell_id)
            else:
                outputs.clear()
            return
        if cell_id in self._clear_pending:
            self._clear_pending.discard(cell_id)
            outputs.clear()
        if kind == "stream":
            last = outputs[-1] if outputs else None
            if last is not None and last["output_type"] == "stream" and last["name"] == content["name"]:
                last["text"] += content["text"]
            else:
                outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
            return
        if kind == "error":
            fields = ("ename", "evalue", "traceback")
            outputs.append({"output_type": "error", **{f: content.get(f) for f in fields}})
            return
        out = {"output_type": kind, "data": content.get("data", {}), "metadata": content.get("metadata", {})}
        if kind == "execute_result":
            out["execution_count"] = content.get("execution_count")
        outputs.append(out)
        if display_id:
            self._displays.setdefault(display_id, []).append(out)

    def _handle(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "outputs":
            cell = self.cell_by_id(data["cell"])
            cell["outputs"], cell["execution_count"] = data["outputs"], data["execution_count"]
            self._executed.pop(cell["id"], None)  # the kernel ran it: its count is the notice's now
            self._reply(data["id"], {})  # as the extension does: a notice's answer, ignored
        elif kind in ("cancel", "settled"):
            self.waiting.pop(data["of"], None)
            self._reply(data["id"], {})
        elif kind in ("read", "edit", "insert"):
            if self.hostile is not None:
                reply = self.hostile(data)
                if reply is not None:
                    self._reply(data["id"], reply)
            elif kind == "read":
                self._reply(data["id"], {"notebook": self.notebook, "cells": self.snapshot()})
            elif kind == "insert":
                self._insert(data)
            else:
                self.waiting[data["id"]] = data
                decision = self.decide(data) if data["ask"] else ("accepted", "")
                if decision is not None:
                    self.answer(data["id"], *decision)

    def _reply(self, request_id: int, fields: dict[str, Any]) -> None:
        self.say({"type": "reply", "id": request_id, **fields})

    def _insert(self, data: dict[str, Any]) -> None:
        index, count = data["index"], len(self.cells)
        if index > count:
            self._reply(data["id"], {"error": f'"index" is {index} but the notebook has {count} cells'})
            return
        cell = {"id": uuid.uuid4().hex[:8], "agent": data["agent"], **code(data["source"]), "kind": data["kind"]}
        self.cells.insert(index, cell)
        self._reply(data["id"], {"cell": cell["id"], "index": index})

    def answer(self, request_id: int, decision: str, reason: str = "") -> None:
        """Click on the card of edit ``request_id``: the source changes on an accept, unless
        the cell no longer holds the source the card showed (then ``stale``)."""
        edit = self.waiting.pop(request_id)
        cell = self.cell_by_id(edit["cell"])
        if decision != "rejected" and cell["source"] != edit["old_source"]:
            decision = "stale"
        if decision in ("accepted", "accepted_and_run"):
            cell["source"] = edit["new_source"]
        self._reply(request_id, {"decision": decision, "reason": reason})

    # ------------------------------------------------------------------ the notebook
    def cell_by_id(self, cell_id: str) -> dict[str, Any]:
        return next(c for c in self.cells if c["id"] == cell_id)

    def execution_count(self, cell: dict[str, Any]) -> int | None:
        """The cell's count: its execute reply's when this page ran it and the reply came
        (a cell run again waits for its new one), else the one it holds."""
        ran = self._executed.get(cell["id"])
        if ran is not None and self._output_of.get(ran.msg_id) == cell["id"]:
            return ran.reply["content"].get("execution_count") if ran.reply is not None else None
        count: int | None = cell["execution_count"]
        return count

    def snapshot(self) -> list[dict[str, Any]]:
        """The cells as a ``read`` reply gives them."""
        running = self._running_id if self.running is not None and self.running.reply is None else None
        return [
            {
                "id": c["id"],
                "index": n,
                "kind": c["kind"],
                "source": c["source"],
                "execution_count": self.execution_count(c),
                "outputs": c["outputs"],
                "running": c["id"] == running,
                "agent": c["agent"],
            }
            for n, c in enumerate(self.cells)
        ]

    def requests(self, kind: str) -> list[dict[str, Any]]:
        """The messages of ``kind`` the kernel sent this page."""
        return [m for m in self.received if m.get("type") == kind]
