"""``NotebookBridge``: the kernel's end of the comm to harness_nb's frontend extension.

The protocol is docs/notebook-bridge.md. In short: the kernel registers the comm target
``harness_nb.notebook`` and opens one comm on it; each page (a frontend connection, named
by the ``session`` of its messages' headers) says ``hello`` on that comm, or on a comm of
its own when it connected later. A request goes to one page — the one that ran the cell
running now — with an integer id, and waits for that page's reply.

Pages are untrusted: every field a page sends is checked and bounded here or by the
parser of its reply (``cells.py``); a reply that is late, malformed or an error becomes one
``ToolError`` naming the problem and what to do. An edit that asks the person is sent
again to each page that says ``hello`` while it waits (a reloaded page shows its card
again); the first reply wins and the other pages are told ``settled``. An edit that ends
without a reply — interrupted, timed out — is withdrawn with ``cancel``.

Comm messages are handled while a cell awaits (ipykernel ≥ 7.4 dispatches ``comm_msg``
concurrently with a busy cell), on the kernel's loop: a reply resolves the future the
tool awaits.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core import ToolError
from ...core.imports import shielded_imports
from ..kernel.history import clean
from .cells import Notebook, parse_notebook

log = logging.getLogger("harness_nb.notebook")  # a name the redacting filter is on (core.secret)

TARGET = "harness_nb.notebook"
PROTOCOL = 1
REPLY_TIMEOUT = 15.0  # seconds a page has to answer a request that asks nobody
MAX_PAGES = 32  # pages known at once; the oldest is forgotten past this
MAX_GONE = 256  # pages gone (reloaded, closed) remembered by notebook, to find their successor
MAX_TEXT = 1_000  # of a string a page names itself by (its notebook's path, an error)
FRONTENDS = ("jupyterlab", "notebook")
DECISIONS = ("accepted", "rejected", "accepted_and_run", "stale")  # an edit's
NO_PAGE = (
    "the page that ran this cell has no harness_nb extension (or has not connected yet), so the notebook "
    "cannot be read or changed from here: use propose_cell and notebook_history"
)


@dataclass
class Page:
    """One frontend page that said ``hello``: its session id, the comm it spoke on, what it
    is (``frontend``), its notebook's path, and when it said hello (``order``)."""

    session: str
    comm: Any
    frontend: str
    notebook: str
    order: int


@dataclass
class _Request:
    """A request waiting for its reply: the message (without ``page``), its future, the
    pages it was sent to, whether a page saying hello gets it too (``resend``: an edit
    that asks), and the notebook it is about."""

    message: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    notebook: str
    resend: bool
    pages: set[str] = field(default_factory=set)

    @property
    def id(self) -> int:
        return int(self.message["id"])


class NotebookBridge:
    """The comm endpoint of one kernel (see the module doc). ``page`` names the page whose
    request is being handled (``NotebookHarness.page``: the running cell's)."""

    def __init__(self, kernel: Any, *, page: Callable[[], str | None]) -> None:
        self.kernel = kernel
        self.page = page
        self.reply_timeout = REPLY_TIMEOUT
        self._comm: Any = None
        self._page_comms: dict[str, Any] = {}  # comm id -> a comm a page opened
        self._pages: OrderedDict[str, Page] = OrderedDict()
        self._gone: OrderedDict[str, str] = OrderedDict()  # session -> its notebook's path
        self._requests: dict[int, _Request] = {}
        self._ids = itertools.count(1)
        self._hellos = itertools.count(1)

    # ------------------------------------------------------------------ the comm
    def open(self) -> bool:
        """Register the target and open the kernel's comm (``%load_ext``); False outside a
        kernel (terminal IPython has no pages)."""
        if self.kernel is None or self._comm is not None:
            return self._comm is not None
        with shielded_imports():
            import comm

        comm.get_comm_manager().register_target(TARGET, self._opened_by_page)
        self._comm = comm.create_comm(target_name=TARGET, data={"protocol": PROTOCOL})
        self._listen(self._comm)
        return True

    def close(self) -> None:
        """Close every comm, forget every page and fail the requests still waiting
        (``%unload_ext``)."""
        if self._comm is None:
            return
        with shielded_imports():
            import comm

        manager = comm.get_comm_manager()
        if manager.targets.get(TARGET) == self._opened_by_page:
            manager.unregister_target(TARGET, self._opened_by_page)
        for each in [self._comm, *self._page_comms.values()]:
            try:
                each.close()
            except Exception:  # a comm already gone: nothing to close
                log.debug("harness_nb: closing a notebook comm failed", exc_info=True)
        self._comm = None
        self._page_comms.clear()
        self._pages.clear()
        for request in list(self._requests.values()):
            if not request.future.done():
                request.future.set_exception(ToolError("harness_nb was unloaded while the notebook page was asked"))

    def _listen(self, channel: Any) -> None:
        channel.on_msg(lambda msg: self._received(channel, msg))
        channel.on_close(lambda msg: self._closed(channel))

    def _opened_by_page(self, channel: Any, msg: dict[str, Any]) -> None:
        """The target's callback: a page that connected after the load opened a comm of
        its own, its ``hello`` as the data."""
        if len(self._page_comms) >= 2 * MAX_PAGES:
            log.warning("harness_nb: too many notebook comms opened; closing a new one")
            channel.close()
            return
        self._page_comms[channel.comm_id] = channel
        self._listen(channel)
        self._received(channel, msg)

    def _closed(self, channel: Any) -> None:
        """A page closed its comm (or every page the kernel's): its pages are gone."""
        self._page_comms.pop(getattr(channel, "comm_id", ""), None)
        if channel is self._comm:
            self._comm = None  # pages that connect from now on open their own
        for page in [p for p in self._pages.values() if p.comm is channel]:
            self._forget(page.session)

    def _received(self, channel: Any, msg: dict[str, Any]) -> None:
        """One message from a page (a comm_msg, or the data of a comm_open)."""
        try:
            session = msg.get("header", {}).get("session")
            data = msg.get("content", {}).get("data")
            if not isinstance(session, str) or not 0 < len(session) <= 200 or not isinstance(data, dict):
                return
            kind = data.get("type")
            if kind == "hello":
                self._hello(session, channel, data)
            elif kind == "bye":
                self._forget(session)
            elif kind == "reply":
                self._reply(session, data)
        except Exception:  # a page's message must never break the kernel's handling
            log.warning("harness_nb: a notebook page sent a message that could not be handled", exc_info=True)

    # ------------------------------------------------------------------ pages
    def _hello(self, session: str, channel: Any, data: dict[str, Any]) -> None:
        if data.get("protocol") != PROTOCOL:
            log.warning("harness_nb: a notebook page speaks protocol %r, not %d: update harness_nb", data.get("protocol"), PROTOCOL)
            return
        frontend = data.get("frontend")
        notebook = data.get("notebook")
        page = Page(
            session,
            channel,
            frontend if frontend in FRONTENDS else "other",
            notebook[:MAX_TEXT] if isinstance(notebook, str) else "",
            next(self._hellos),
        )
        self._pages.pop(session, None)
        self._pages[session] = page
        self._gone.pop(session, None)
        while len(self._pages) > MAX_PAGES:
            self._forget(next(iter(self._pages)))
        for request in list(self._requests.values()):  # edits waiting: shown again in this page
            same_notebook = not request.notebook or not page.notebook or request.notebook == page.notebook
            if request.resend and same_notebook and not request.future.done():
                self._send_request(request, page)

    def _forget(self, session: str) -> None:
        """``session`` is gone (bye, its comm closed, too many pages): its requests that no
        other page holds fail, unless a page saying hello gets them again (edits)."""
        page = self._pages.pop(session, None)
        if page is None:
            return
        self._gone[session] = page.notebook
        while len(self._gone) > MAX_GONE:
            self._gone.popitem(last=False)
        for request in self._requests.values():
            request.pages.discard(session)
            if not request.pages and not request.resend and not request.future.done():
                request.future.set_exception(ToolError("the notebook page closed before it answered; ask again"))

    def route(self, session: str | None) -> Page | None:
        """The page requests from ``session`` go to: that page, or — when it is gone (a
        reload) — the newest page on the same notebook that said hello after it."""
        if session is None:
            return None
        page = self._pages.get(session)
        if page is not None:
            return page
        notebook = self._gone.get(session)
        if not notebook:
            return None
        successors = [p for p in self._pages.values() if p.notebook == notebook]
        return max(successors, key=lambda p: p.order) if successors else None

    def current(self) -> Page | None:
        """The page of the cell running now, if it has the extension."""
        return self.route(self.page())

    def offered(self) -> bool:
        """Whether the notebook tools are offered now: the running cell's page said hello."""
        return self.current() is not None

    # ------------------------------------------------------------------ requests
    async def request(
        self, kind: str, fields: dict[str, Any], *, timeout: float | None = None, resend: bool = False, late: str = ""
    ) -> dict[str, Any]:
        """Send request ``kind`` to the running cell's page and return its reply (a dict
        with ``type`` and ``id``; a reply with ``error`` raises it as a ``ToolError``).
        ``timeout`` defaults to ``reply_timeout``; past it, or when the run is
        interrupted, an edit is withdrawn (``cancel``). ``late``: the error past the
        timeout (by default, that the page did not answer)."""
        page = self.current()
        if page is None:
            raise ToolError(NO_PAGE)
        limit = self.reply_timeout if timeout is None else timeout
        message = {"type": kind, "id": next(self._ids), **fields}
        request = _Request(message, asyncio.get_running_loop().create_future(), page.notebook, resend)
        self._requests[request.id] = request
        try:
            self._send_request(request, page)
            async with asyncio.timeout(limit):
                reply = await request.future
        except TimeoutError:
            self._withdraw(request)
            raise ToolError(late or f"the notebook page did not answer {kind} within {limit:g} s; reload the page") from None
        except asyncio.CancelledError:
            self._withdraw(request)
            raise
        finally:
            self._requests.pop(request.id, None)
        error = reply.get("error")
        if error is not None:
            said = clean(error[:MAX_TEXT], MAX_TEXT) if isinstance(error, str) else "(an error that is not text)"
            raise ToolError(f"the notebook page could not {kind}: {said}")
        return reply

    async def read(self) -> Notebook:
        """The running cell's page's notebook (``read``), checked and bounded."""
        return parse_notebook(await self.request("read", {}))

    def notify(self, kind: str, fields: dict[str, Any]) -> bool:
        """Send a notice (``outputs``) to the running cell's page; False when it has none.
        A notice has an id as a request does, and needs no reply (one is ignored)."""
        page = self.current()
        if page is None:
            return False
        self._send(page, {"type": kind, "id": next(self._ids), **fields})
        return True

    def _send_request(self, request: _Request, page: Page) -> None:
        request.pages.add(page.session)
        self._send(page, request.message)

    def _send(self, page: Page, message: dict[str, Any]) -> None:
        try:
            page.comm.send({**message, "page": page.session})
        except Exception:  # a comm closed under us: the page is gone
            log.debug("harness_nb: sending to a notebook page failed", exc_info=True)
            self._forget(page.session)

    def _withdraw(self, request: _Request) -> None:
        """An edit ended without a reply: take its card away from every page showing it."""
        if request.resend:
            self._tell_others(request, {"type": "cancel", "of": request.id}, but=None)

    def _tell_others(self, request: _Request, notice: dict[str, Any], *, but: str | None) -> None:
        for session in sorted(request.pages - {but} if but else request.pages):
            page = self._pages.get(session)
            if page is not None:
                self._send(page, {**notice, "id": next(self._ids)})

    def _reply(self, session: str, data: dict[str, Any]) -> None:
        """A page's reply: resolves its request's future, if that page was asked and no
        other page answered first (then the others are told ``settled``)."""
        key = data.get("id")
        request = self._requests.get(key) if isinstance(key, int) and not isinstance(key, bool) else None
        if request is None or session not in request.pages or request.future.done():
            return
        request.future.set_result(data)
        if request.resend and len(request.pages) > 1:
            decision = data.get("decision")
            # an error or a decision the protocol lacks decides nothing: the others' cards go
            ended = {"type": "settled", "of": request.id, "decision": decision} if decision in DECISIONS else None
            self._tell_others(request, ended or {"type": "cancel", "of": request.id}, but=session)

    def describe(self) -> str:
        """One line for ``%agents``: the running cell's page and the extension, or how to
        get it."""
        page = self.current()
        if page is not None:
            where = f" ({page.notebook})" if page.notebook else ""
            return f"notebook extension: connected in {page.frontend}{where}: the agent reads, edits and runs cells"
        return (
            "notebook extension: not in this page, so the agent cannot read, edit or run your cells (it proposes "
            "new cells instead). It ships with harness_nb: pip install harness_nb in the environment JupyterLab or "
            "Notebook 7 runs from, then reload the page."
        )
