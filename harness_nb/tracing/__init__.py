"""OpenTelemetry traces of a harness's runs, opt in (``tracing="otel"``): an observer of the
events the engine already emits, wired at each launch (``hub.py``), that makes spans
following the GenAI semantic conventions (``spans.py``) and sends them where the program's
tracer provider, or the ``OTEL_*`` variables, say (``provider.py``). What was said goes on
the spans only with ``tracing_content``, scrubbed (``content.py``).

Off (the default) it costs nothing: no sink is added and OpenTelemetry is never imported;
only ``hub.py`` is loaded, and it imports ``opentelemetry`` at the first traced launch.
"""

from .hub import INSTALL, AttributeValue, TraceSwitch, Tracing

__all__ = ["INSTALL", "AttributeValue", "TraceSwitch", "Tracing"]
