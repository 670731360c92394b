"""The tracing tests' pieces: the SDK's in-memory exporter behind the process's tracer
provider (set once per process, as a program using OpenTelemetry does), and the spans it
caught read as a tree."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_EXPORTER: InMemorySpanExporter | None = None


def _exporter() -> InMemorySpanExporter:
    global _EXPORTER
    if _EXPORTER is None:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        _EXPORTER = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    return _EXPORTER


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The exporter every span of this process reaches, emptied for the test."""
    exporter = _exporter()
    exporter.clear()
    yield exporter
    exporter.clear()


def tree(found: Sequence[ReadableSpan]) -> list[Any]:
    """The spans as nested ``(name, [children])`` pairs, each level in the order they started."""
    ids = {s.context.span_id for s in found}
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in found:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        children.setdefault(parent, []).append(s)

    def level(parent: int | None) -> list[Any]:
        ordered = sorted(children.get(parent, []), key=lambda s: s.start_time or 0)
        return [(s.name, level(s.context.span_id)) for s in ordered]

    return level(None)


def named(found: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called ``name``, in the order they started."""
    return sorted((s for s in found if s.name == name), key=lambda s: s.start_time or 0)


def parent_of(found: Sequence[ReadableSpan], span: ReadableSpan) -> ReadableSpan | None:
    ids = {s.context.span_id: s for s in found}
    return ids.get(span.parent.span_id) if span.parent is not None else None


def everything_said(found: Sequence[ReadableSpan]) -> str:
    """Every attribute value, status description and span-event attribute, as one text: what
    a trace backend would store."""
    parts: list[str] = []
    for s in found:
        parts += [str(v) for v in (s.attributes or {}).values()]
        parts.append(s.status.description or "")
        for event in s.events:
            parts += [str(v) for v in (event.attributes or {}).values()]
    return "\n".join(parts)
