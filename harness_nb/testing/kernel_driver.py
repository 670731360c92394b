"""``KernelDriver``: a small frontend for tests — starts a real ipykernel through
jupyter_client, runs cells, records every iopub message, tracks widget models, clicks
buttons (the comm message JupyterLab sends), answers stdin and interrupts.

    async with KernelDriver(cwd=tmp_path) as k:
        reply = await k.run("%load_ext harness_nb")
        cell = k.execute("%%agent\\nhello")          # returns at once
        button = await k.wait_for_button("Approve")
        k.click(button)
        await k.finished(cell)
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

_STYLE_SHEET = re.compile(r"<style.*?</style>", re.DOTALL)
_BLOCK_TAG = re.compile(r"</?(?:div|p|br|pre|details|summary|tr|td|th|li|ul|table|h\d)\b[^>]*>")
_TAG = re.compile(r"<[^>]+>")


def visible_text(value: str) -> str:
    """The text a person reads in an HTML value: style sheets dropped, block tags a space,
    other tags nothing, entities decoded, whitespace runs made one space."""
    text = _TAG.sub("", _BLOCK_TAG.sub(" ", _STYLE_SHEET.sub("", value)))
    return " ".join(html.unescape(text).split())


@dataclass
class Cell:
    """One execute request and what came back for it."""

    msg_id: str
    reply: dict[str, Any] | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str | None:
        return None if self.reply is None else self.reply["content"]["status"]


class KernelDriver:
    """Drives one kernel. ``python`` picks the interpreter (default: this one); ``env`` is
    laid over this process's environment, or is the kernel's whole environment without
    ``inherit_env`` (a run that must not pass on what a developer exported)."""

    def __init__(
        self,
        *,
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
        python: str | None = None,
        inherit_env: bool = True,
    ):
        self.cwd = str(cwd or os.getcwd())
        self.env = env or {}
        self.inherit_env = inherit_env
        self.python = python or sys.executable
        self.iopub: list[tuple[float, dict[str, Any]]] = []
        self.models: dict[str, dict[str, Any]] = {}
        # called with each iopub message as it arrives (a page played in Python answers the
        # kernel's comm messages from here)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self._t0 = time.monotonic()
        self._changed = asyncio.Event()

    async def __aenter__(self) -> KernelDriver:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    async def start(self) -> None:
        # A private kernelspec pointing at ``self.python``: tests never depend on which
        # "python3" kernel happens to be installed on the machine.
        self._spec_dir = tempfile.TemporaryDirectory(prefix="harness-kernelspec-")
        spec = Path(self._spec_dir.name) / "harness-test"
        spec.mkdir()
        argv = [self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "harness test", "language": "python"}))
        self.km = AsyncKernelManager(
            kernel_name="harness-test", kernel_spec_manager=KernelSpecManager(kernel_dirs=[self._spec_dir.name])
        )
        env = {**os.environ, **self.env} if self.inherit_env else dict(self.env)
        env.pop("JPY_PARENT_PID", None)
        await self.km.start_kernel(cwd=self.cwd, env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=60)
        self._reader = asyncio.create_task(self._read_iopub(), name="kernel-driver:iopub")
        self._shell_reader = asyncio.create_task(self._read_shell(), name="kernel-driver:shell")
        self._cells: dict[str, Cell] = {}

    async def stop(self) -> None:
        for t in (self._reader, self._shell_reader):
            t.cancel()
        await asyncio.gather(self._reader, self._shell_reader, return_exceptions=True)
        self.kc.stop_channels()
        await self.km.shutdown_kernel(now=True)
        self._spec_dir.cleanup()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def forget(self) -> None:
        """Forget every message, cell and widget model seen so far: a test that shares the
        kernel with the tests before it sees only its own (updates to widgets it never saw
        opened are ignored, as a freshly opened page ignores them)."""
        self.iopub.clear()
        self.models.clear()
        self._cells.clear()

    async def _read_iopub(self) -> None:
        while True:
            msg = await self.kc.get_iopub_msg()
            self.iopub.append((self.now(), msg))
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
                self.models[content["comm_id"]] = dict(content["data"].get("state", {}))
            elif kind == "comm_msg" and content["comm_id"] in self.models:
                data = content.get("data", {})
                if data.get("method") in ("update", "echo_update"):
                    self.models[content["comm_id"]].update(data.get("state", {}))
            parent = msg["parent_header"].get("msg_id")
            cell = self._cells.get(parent) if parent else None
            if cell is not None and kind in ("stream", "display_data", "execute_result", "error", "update_display_data"):
                cell.outputs.append({"msg_type": kind, **content})
            for listen in list(self.listeners):
                listen(msg)
            self._changed.set()

    async def _read_shell(self) -> None:
        while True:
            # Polled again every half second: the shell socket is also sent on (a page played
            # in Python answers comm messages from the iopub reader), and a send can take the
            # socket's edge-triggered wake-up from a poll waiting with no timeout, leaving a
            # reply unread until the next message comes — maybe never.
            try:
                msg = await self.kc.get_shell_msg(timeout=0.5)
            except Empty:
                continue
            parent = msg["parent_header"].get("msg_id")
            if parent in self._cells and msg["header"]["msg_type"] == "execute_reply":
                self._cells[parent].reply = msg
                self._changed.set()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every message) and return it."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))
            except TimeoutError:
                pass

    # ------------------------------------------------------------------ cells
    def execute(
        self,
        code: str,
        *,
        allow_stdin: bool = True,
        store_history: bool = True,
        page: str | None = None,
        cell_id: str | None = None,
    ) -> Cell:
        """Send a cell and return at once (the cell may still be running). Without
        ``store_history`` the cell runs as nbval runs every cell: no ``In`` entry, no number.
        ``page``: the client session id the request carries instead of this client's (a
        reloaded page, or a second tab, sends a new one); ``cell_id``: the id of the
        notebook's cell, which JupyterLab sends in the request's metadata."""
        if page is None and cell_id is None:
            msg_id = self.kc.execute(code, allow_stdin=allow_stdin, store_history=store_history)
        else:
            content = {
                "code": code,
                "silent": False,
                "store_history": store_history,
                "user_expressions": {},
                "allow_stdin": allow_stdin,
                "stop_on_error": True,
            }
            msg = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id} if cell_id else {})
            if page is not None:
                msg["header"]["session"] = page
            self.kc.shell_channel.send(msg)
            msg_id = msg["header"]["msg_id"]
        cell = Cell(msg_id)
        self._cells[msg_id] = cell
        return cell

    async def finished(self, cell: Cell, timeout: float = 60) -> Cell:
        """Wait for the cell's reply and its idle status."""
        await self.wait_for(lambda: cell.reply is not None and self._idle(cell.msg_id), timeout, f"cell {cell.msg_id[:8]}")
        return cell

    async def run(
        self,
        code: str,
        *,
        timeout: float = 60,
        allow_stdin: bool = True,
        check: bool = True,
        store_history: bool = True,
        cell_id: str | None = None,
    ) -> Cell:
        """Run a cell to the end; with ``check`` a failing cell raises with its traceback."""
        sent = self.execute(code, allow_stdin=allow_stdin, store_history=store_history, cell_id=cell_id)
        cell = await self.finished(sent, timeout)
        if check and cell.status != "ok":
            raise AssertionError(f"cell failed: {self.error(cell)}\n--- code ---\n{code}")
        return cell

    def _idle(self, msg_id: str) -> bool:
        return any(
            m["header"]["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle"
            and m["parent_header"].get("msg_id") == msg_id
            for _, m in self.iopub
        )

    @staticmethod
    def text(cell: Cell) -> str:
        """Everything the cell printed or displayed as text/plain, in order. An update of a
        display counts only when the display is this cell's own: a frontend applies an
        update sent from this cell to another cell's display there, not here."""
        parts = []
        own = {out.get("transient", {}).get("display_id") for out in cell.outputs if out["msg_type"] == "display_data"}
        for out in cell.outputs:
            if out["msg_type"] == "stream":
                parts.append(out["text"])
            elif out["msg_type"] == "update_display_data" and out.get("transient", {}).get("display_id") not in own:
                continue
            elif out["msg_type"] in ("display_data", "execute_result", "update_display_data"):
                parts.append(out["data"].get("text/plain", "") + "\n")
            elif out["msg_type"] == "error":
                parts.append(f"{out['ename']}: {out['evalue']}\n")
        return "".join(parts)

    @staticmethod
    def error(cell: Cell) -> str:
        for out in cell.outputs:
            if out["msg_type"] == "error":
                return f"{out['ename']}: {out['evalue']}\n" + "\n".join(out.get("traceback", []))
        if cell.reply is not None and cell.reply["content"]["status"] == "error":
            c = cell.reply["content"]
            return f"{c.get('ename')}: {c.get('evalue')}"
        return ""

    def messages_for(self, cell: Cell) -> list[dict[str, Any]]:
        return [m for _, m in self.iopub if m["parent_header"].get("msg_id") == cell.msg_id]

    # ------------------------------------------------------------------ widgets
    def find_models(self, **match: Any) -> list[str]:
        return [cid for cid, st in self.models.items() if all(st.get(k) == v for k, v in match.items())]

    async def wait_for_button(self, description: str, *, enabled: bool = True, timeout: float = 30) -> str:
        """The comm id of a Button with this label (waits until one exists)."""
        def find() -> str | None:
            for cid, st in self.models.items():
                if st.get("_model_name") == "ButtonModel" and st.get("description") == description:
                    if not enabled or not st.get("disabled"):
                        return cid
            return None

        found: str = await self.wait_for(find, timeout, f"a {description!r} button")
        return found

    def click(self, comm_id: str) -> str:
        """Click a Button as JupyterLab does (a custom comm message)."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}})
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def submit(self, comm_id: str) -> str:
        """Press Enter in a Text box as JupyterLab does (a custom ``submit`` comm message)."""
        data = {"method": "custom", "content": {"event": "submit"}}
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def set_state(self, comm_id: str, state: dict[str, Any]) -> str:
        """Change a widget's state as the frontend does when a person types."""
        data = {"method": "update", "state": state, "buffer_paths": []}
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)
        self.models.get(comm_id, {}).update(state)
        return str(msg["header"]["msg_id"])

    def widget_texts(self) -> list[str]:
        """The ``value`` of every HTML/Label/Text widget, and the text of Output widgets."""
        texts = []
        for st in self.models.values():
            if isinstance(st.get("value"), str):
                texts.append(st["value"])
            for out in st.get("outputs", ()) or ():
                data = out.get("data", {})
                texts.append(data.get("text/markdown") or data.get("text/plain") or out.get("text", ""))
        return texts

    # ------------------------------------------------------------------ control
    async def interrupt(self) -> None:
        await self.km.interrupt_kernel()

    async def answer_stdin(self, value: str, timeout: float = 10) -> dict[str, Any]:
        msg: dict[str, Any] = await self.kc.get_stdin_msg(timeout=timeout)
        self.kc.input(value)
        return msg
