"""Widgets without a kernel: a comm that records what it would send, and a clock the test
moves by hand.

``WidgetWire`` is what ipywidgets' own tests do (a comm class whose messages are kept,
installed for widget creation), built on the ``comm`` package's ``BaseComm`` so every
widget opens, updates and closes through the real code path; only ``publish_msg`` (the
iopub send) is replaced. Frontend messages (a click, a typed value) are delivered through
the comm as JupyterLab would send them.

``wire`` is the fixture that installs one for a test (autouse in the modules importing it).

``ManualClock`` is a ``Scheduler`` for ``LiveBox``: ``call_later`` callbacks run only when
``advance`` moves the time past them, so a test states exactly when a refresh may happen.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import comm
import ipywidgets as widgets
import pytest
from comm.base_comm import BaseComm, BuffersType, MaybeDict


@dataclass(frozen=True)
class CommMessage:
    """One message a widget sent: its comm id, ``comm_open`` / ``comm_msg`` / ``comm_close``,
    and the data (``{"method": "update", "state": {...}}`` for a state update)."""

    comm_id: str
    msg_type: str
    data: dict[str, Any]


class _RecordingComm(BaseComm):
    def __init__(self, log: list[CommMessage], **kwargs: Any) -> None:
        self._log = log
        super().__init__(**kwargs)

    def publish_msg(
        self,
        msg_type: str,
        data: MaybeDict = None,
        metadata: MaybeDict = None,
        buffers: BuffersType = None,
        **keys: Any,
    ) -> None:
        self._log.append(CommMessage(self.comm_id, msg_type, dict(data or {})))


class WidgetWire:
    """Records the messages of every widget created while it is installed."""

    def __init__(self) -> None:
        self.messages: list[CommMessage] = []
        self._original: Callable[..., BaseComm] | None = None

    def install(self) -> None:
        self._original = comm.create_comm
        comm.create_comm = lambda **kwargs: _RecordingComm(self.messages, **kwargs)

    def uninstall(self) -> None:
        if self._original is not None:
            comm.create_comm = self._original
            self._original = None

    def updates(self, widget: widgets.Widget, key: str | None = None, *, since: int = 0) -> list[dict[str, Any]]:
        """The state updates ``widget`` sent, oldest first: only those touching ``key``, and
        only after the first ``since`` messages (a ``count()`` taken earlier)."""
        found = []
        for m in self.messages[since:]:
            if m.comm_id == widget.model_id and m.msg_type == "comm_msg" and m.data.get("method") == "update":
                if key is None or key in m.data["state"]:
                    found.append(m.data["state"])
        return found

    def count(self) -> int:
        """How many messages were sent so far."""
        return len(self.messages)

    def frontend(self, widget: widgets.Widget, data: dict[str, Any]) -> None:
        """Deliver a message from the frontend to ``widget``, as a comm message."""
        widget.comm.handle_msg({"content": {"comm_id": widget.model_id, "data": data}, "buffers": []})

    def click(self, button: widgets.Button) -> None:
        """What JupyterLab sends when the button is clicked."""
        self.frontend(button, {"method": "custom", "content": {"event": "click"}})

    def type_into(self, box: widgets.Text, value: str) -> None:
        """What JupyterLab sends when the person types ``value`` into a text box."""
        self.frontend(box, {"method": "update", "state": {"value": value}, "buffer_paths": []})


@dataclass(order=True)
class _Timer:
    when: float
    seq: int
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A ``Scheduler`` whose time moves only in ``advance``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._timers: list[_Timer] = []
        self._seq = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], object], /) -> _Timer:
        timer = _Timer(self.now + max(0.0, delay), next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def pending(self) -> list[float]:
        """When the timers not yet run or cancelled are due, soonest first."""
        return sorted(t.when for t in self._timers if not t.cancelled)

    def advance(self, seconds: float = 0.0) -> None:
        """Move the time on by ``seconds``, running every timer that falls due, in order
        (each at its own due time)."""
        end = self.now + seconds
        while self._timers and self._timers[0].when <= end:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self.now = max(self.now, timer.when)
            timer.callback()
        self.now = end


@pytest.fixture(autouse=True)
def wire() -> Iterator[WidgetWire]:
    """Widgets made in the test send their messages to a ``WidgetWire``."""
    recorder = WidgetWire()
    recorder.install()
    yield recorder
    recorder.uninstall()
