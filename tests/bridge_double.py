"""The kernel's side of the notebook bridge (docs/notebook-bridge.md), small, for testing
the extension's page side on its own: it runs in the notebook's kernel (a browser test
copies it beside its notebook, and a cell imports it), registers the target, opens the
comm, and sends requests exactly as the protocol says — to the page that ran the current
cell, again to a page that says hello while an edit waits, ``settled`` to the others.

A cell awaits a request's reply (``await bridge.request("read")``): ipykernel ≥ 7.4
handles comm messages while a cell awaits, which is what the real kernel side relies on.
``accepted_and_run`` is answered as the kernel does: the new source runs here, and its
printed output goes back to the cell with ``outputs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from typing import Any

from comm import create_comm, get_comm_manager
from IPython import get_ipython

TARGET = "harness_nb.notebook"


class BridgeDouble:
    """The kernel end: pages by session id, requests by id, everything it heard in ``log``."""

    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []
        self.pages: dict[str, Any] = {}  # page (session id) -> the comm it said hello on
        self.waiting: dict[int, tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = {}
        self._ids = 0
        self._hello = asyncio.Event()
        get_comm_manager().register_target(TARGET, self._on_page_comm)
        self.comm = create_comm(target_name=TARGET, data={"protocol": 1})
        self.comm.on_msg(self._handler(self.comm))

    @staticmethod
    def current_page() -> str:
        """The page that sent the running cell: its execute request's session."""
        return str(get_ipython().kernel.get_parent()["header"]["session"])

    async def hello(self, timeout: float = 30) -> dict[str, Any]:
        """The hello of the page that runs this cell, once it came."""
        page = self.current_page()
        async with asyncio.timeout(timeout):
            while page not in self.pages:
                self._hello.clear()
                await self._hello.wait()
        return next(
            entry["data"]
            for entry in reversed(self.log)
            if entry["page"] == page and entry["data"].get("type") == "hello"
        )

    async def request(
        self, kind: str, /, *, timeout: float = 120, cancel_after: float | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Send a KIND request to the page of the running cell and return its reply; with
        CANCEL_AFTER, stop waiting after that many seconds as the kernel does (it sends
        ``cancel``) and return ``{"cancelled": id}``."""
        self._ids += 1
        data = {"type": kind, "id": self._ids, "page": self.current_page(), **fields}
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[self._ids] = (data, future)
        self.pages[data["page"]].send(data)
        try:
            async with asyncio.timeout(cancel_after or timeout):
                return await future
        except TimeoutError:
            if cancel_after is None:
                raise
            self._ids += 1
            self.pages[data["page"]].send({"type": "cancel", "id": self._ids, "page": data["page"], "of": data["id"]})
            return {"cancelled": data["id"]}
        finally:
            self.waiting.pop(data["id"], None)

    def _on_page_comm(self, comm: Any, msg: dict[str, Any]) -> None:
        """A page opened a comm of its own: its data is its hello."""
        comm.on_msg(self._handler(comm))
        self._heard(comm, msg)

    def _handler(self, comm: Any) -> Any:
        return lambda msg: self._heard(comm, msg)

    def _heard(self, comm: Any, msg: dict[str, Any]) -> None:
        page = msg["header"]["session"]
        data = msg["content"]["data"]
        self.log.append({"page": page, "data": data})
        if data.get("type") == "hello":
            self.pages[page] = comm
            self._hello.set()
            for request, _ in list(self.waiting.values()):
                if request["type"] == "edit":
                    request["page"] = page
                    comm.send(request)
        elif data.get("type") == "reply" and data.get("id") in self.waiting:
            request, future = self.waiting[data["id"]]
            if future.done():
                return
            future.set_result(data)
            if request["type"] == "edit":
                self._settle(request, data, page)

    def _settle(self, request: dict[str, Any], reply: dict[str, Any], page: str) -> None:
        for other, comm in self.pages.items():
            if other != page:
                self._ids += 1
                comm.send(
                    {
                        "type": "settled",
                        "id": self._ids,
                        "page": other,
                        "of": request["id"],
                        "decision": reply.get("decision"),
                    }
                )
        if reply.get("decision") == "accepted_and_run":
            asyncio.get_running_loop().create_task(self._run(request, page))

    async def _run(self, request: dict[str, Any], page: str) -> None:
        """Run the accepted source here, as the kernel side does, and send its output."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(request["new_source"], get_ipython().user_ns)  # noqa: S102 - the test's own source
        outputs = [{"output_type": "stream", "name": "stdout", "text": printed.getvalue()}]
        self._ids += 1
        data = {
            "type": "outputs",
            "id": self._ids,
            "page": page,
            "cell": request["cell"],
            "execution_count": 99,
            "outputs": outputs,
        }
        self.pages[page].send(data)
