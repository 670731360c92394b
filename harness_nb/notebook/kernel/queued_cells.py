"""Waiting approval and question cards for a page that cannot see them, shown in a cell
queued behind the busy one.

A page reloaded before the notebook was saved (or a second tab on the same notebook)
does not show the card of a foreground run that waits for the person: the run's cell
output is not in the file, and its later output has a parent request the new page does
not know. The kernel cannot run that page's next cell until the run ends — but it
receives the request at once. ``QueuedCells`` reads each request as it arrives on the
main shell: an execute request from a page that was never shown a waiting card gets the
cards displayed as that cell's output right away, and the request itself stays in the
queue and runs in its turn. So "run any cell, or ``%approvals``" finds a lost card, busy
kernel or not.

The cards shown are copies made of new widgets (``Card.copy``): a page reloaded
while the kernel is busy does not get back the widgets made before it loaded (seen in
JupyterLab 4.6 and Notebook 7.6: "widget model not found", its status "Unknown" until the
run ends), but it renders the widgets the kernel opens from then on. A click on a copy
answers the run that waits.

A request from the page that already shows the card (Run All queueing the cells below
it) gets nothing: each page is told once, recognised by the client session id every
Jupyter frontend puts in its requests' headers. (A page's next cell is shown a waiting
card once more by the ``pre_run_cell`` hook, when it runs.) This holds whether the kernel
is busy or not at that instant: a request that arrives just behind the one that will keep
the kernel busy is read before that one has started, so "busy" is not a test here.

How: a pass-through around the receive callback of ipykernel's main-shell stream — each
message is read (its header and content, the signature checked and not recorded, as
ipykernel's own peek does) and handed on unchanged, in order, to the callback that was
there. ipykernel 7.4–7.x keeps that stream at
``kernel.shell_channel_thread.manager._shell_channel_to_main.to_stream`` (with its
shell-channel thread) or ``kernel.shell_stream``; where neither is found nothing is
installed, and ``%approvals`` once the kernel is free is the way back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import copy_context
from typing import Any

from ..widgets.approval import Card, PendingApprovals

log = logging.getLogger("harness_nb.notebook")  # a name the redacting filter is on (core.secret)


class QueuedCells:
    """Shows ``pending`` cards to a page whose cell queues behind a busy one, through
    ``show`` (which displays them in the current request's cell and marks them seen by its
    page: ``NotebookHarness.show_waiting``)."""

    def __init__(self, kernel: Any, pending: PendingApprovals, show: Callable[[list[Card]], object]) -> None:
        self.kernel = kernel
        self.pending = pending
        self.show = show
        self._stream: Any = None
        self._passed_to: Callable[[Any], Any] | None = None

    @property
    def installed(self) -> bool:
        return self._passed_to is not None

    def install(self) -> bool:
        """Start reading the main shell's requests; False (and nothing changed) where this
        ipykernel does not keep them where expected."""
        if self.installed:
            return True
        if self.kernel is None:  # terminal IPython: no frontend pages, no queue
            return False
        stream = _main_shell_stream(self.kernel)
        original = getattr(stream, "_recv_callback", None)
        if stream is None or not callable(original) or getattr(self.kernel, "session", None) is None:
            log.info("harness_nb: this ipykernel's shell stream was not found; a lost card comes back with %approvals")
            return False
        self._stream, self._passed_to = stream, original
        stream.on_recv(self._receive, copy=getattr(stream, "_recv_copy", False))
        return True

    def uninstall(self) -> None:
        """Hand the stream back to the callback it had (unless somebody replaced ours)."""
        if self._stream is not None and self._passed_to is not None:
            if getattr(self._stream, "_recv_callback", None) == self._receive:
                self._stream.on_recv(self._passed_to, copy=getattr(self._stream, "_recv_copy", False))
        self._stream = self._passed_to = None

    def _receive(self, frames: list[Any]) -> Any:
        """The stream's callback: look, then hand the message on as it came."""
        passed_to = self._passed_to
        if len(self.pending):
            try:
                self._offer(frames)
            except Exception:  # never let a look at a message lose the message
                log.debug("harness_nb: could not read a queued shell request", exc_info=True)
        assert passed_to is not None
        return passed_to(frames)

    def _offer(self, frames: list[Any]) -> None:
        """Show the waiting cards to the page ``frames`` came from, if it is a cell's
        request and that page was never shown them."""
        session = self.kernel.session
        idents, rest = session.feed_identities(frames, copy=False)
        # content=False: the signature is checked but not recorded, so ipykernel's own
        # reading of this message later does not take it for a replay
        request = session.deserialize(rest, content=False, copy=False)
        header = request["header"]
        page = header.get("session")
        if header.get("msg_type") != "execute_request" or header.get("subshell_id") or not page:
            return
        request["content"] = content = session.unpack(request["content"])
        if content.get("silent"):
            return  # a frontend's own request (a variable inspector): it shows no output
        cards = self.pending.not_seen_by(page)
        if not cards:
            return
        # nothing below may disturb the run that holds the kernel: the display happens in a
        # copy of the context, and the "latest request" ipykernel keeps for plain threads
        # is put back
        latest = getattr(self.kernel, "_shell_context", None)
        try:
            copy_context().run(self._show_to, idents, request, cards)
        finally:
            if latest is not None:
                self.kernel._shell_context = latest
        # (``show`` noted the page as having seen them: it ran as this request)
        self.pending.shown_by_hook.update(id(c) for c in cards)  # its pre_run_cell has shown them
        self.pending.shown_in(header["msg_id"], cards)  # and so has it, if it is %approvals

    def _show_to(self, idents: list[bytes], request: dict[str, Any], cards: list[Card]) -> None:
        self.kernel.set_parent(idents, request, channel="shell")
        self.show(cards)


def _main_shell_stream(kernel: Any) -> Any:
    """The stream on which the main shell's requests reach the kernel's main thread."""
    thread = getattr(kernel, "shell_channel_thread", None)
    if thread is not None:
        pair = getattr(getattr(thread, "manager", None), "_shell_channel_to_main", None)
        return getattr(pair, "to_stream", None)
    return getattr(kernel, "shell_stream", None)
