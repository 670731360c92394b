"""``Tracing``: a harness's tracing, wired at each launch.

A traced launch (a run, a ``%@name`` run, a background subagent started from outside a run)
gets an event sink that feeds a ``SpanTree`` before passing each event on to the sink it was
given; an untraced one keeps its sink as it is, and nothing of OpenTelemetry is imported
until the first traced launch. A teammate's turns reach the team's event listeners, not a
launch's sink: each turn that starts while tracing is on is a launch of its own, whose
parent is the tool call that spawned the teammate (``spans.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..core import ConfigError, Event, RunStarted, run_blocking

if TYPE_CHECKING:
    from .spans import SpanTree

log = logging.getLogger("harness_nb.tracing")

EventSink = Callable[[Event], Any]
AttributeValue = str | bool | int | float
INSTALL = "pip install 'harness_nb[otel]'"


class TraceSwitch(Protocol):
    """What decides tracing (``RunSettings.tracing``): ``mode`` (``off`` or ``otel``) and
    whether spans record what was said (``content``)."""

    @property
    def mode(self) -> str: ...

    @property
    def content(self) -> bool: ...


class Tracing:
    """The tracing of one harness. ``switch_now`` gives the tracing settings in force (for a
    teammate's turn, which no launch wires)."""

    def __init__(self, switch_now: Callable[[], TraceSwitch]) -> None:
        self.switch_now = switch_now
        self._used = False
        self._teammates: dict[str, SpanTree] = {}

    def observe(
        self, sink: EventSink | None, switch: TraceSwitch, attributes: Mapping[str, AttributeValue] | None = None
    ) -> EventSink | None:
        """The sink of a launch under ``switch``: ``sink`` itself when tracing is off, else one
        that makes its spans (with ``attributes`` on each run's span) and then calls ``sink``.
        A ``ConfigError`` when OpenTelemetry is not installed or its variables are wrong."""
        if switch.mode != "otel":
            return sink
        tree = self._tree(switch, attributes)

        def traced(event: Event) -> None:
            tree.see(event)
            if sink is not None:
                sink(event)

        return traced

    def _tree(self, switch: TraceSwitch, attributes: Mapping[str, AttributeValue] | None = None) -> SpanTree:
        try:
            from .provider import tracer
            from .spans import SpanTree
        except ImportError as exc:
            raise ConfigError(f"tracing='otel' needs OpenTelemetry: {INSTALL} ({exc})") from None
        self._used = True
        return SpanTree(tracer(), content=switch.content, attributes=attributes)

    def teammate_event(self, name: str, event: Event) -> None:
        """A teammate's event (a ``TeamManager.on_event`` listener): a turn starting while
        tracing is on is traced to its end."""
        tree = self._teammates.get(name)
        if tree is None:
            if not isinstance(event, RunStarted):
                return
            switch = self.switch_now()
            if switch.mode != "otel":
                return
            try:
                tree = self._teammates[name] = self._tree(switch)
            except ConfigError as exc:
                log.warning("teammate %s is not traced: %s", name, exc)
                return
        tree.see(event)
        if not tree.running:  # its turn is over, and whatever the turn started
            del self._teammates[name]

    async def aclose(self) -> None:
        """Send the spans still waiting in our exporter's batch (not the program's provider's)."""
        if self._used:
            from .provider import flush

            await run_blocking(flush)
