"""The tracing tests' pieces: the SDK's in-memory exporter behind the process's tracer
provider (set once per process, as a program using OpenTelemetry does), the spans it caught
read as a tree, and a script run in a fresh process (where harness_nb makes its own
provider)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ROOT = Path(__file__).resolve().parents[1]
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


def run_in_fresh_process(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this interpreter in a process of its own (no tracer provider set,
    none of this process's ``OTEL_*`` variables), in ``tmp_path``, with ``env`` added."""
    script = tmp_path / "traced.py"
    script.write_text(code)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
    )
