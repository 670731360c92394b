"""Where spans go: the program's own tracer provider when it has set one (Phoenix's
``register()``, Logfire, an SDK set up by hand), else one of this process's that exports
over OTLP. That one is configured by the standard variables, read by the SDK and its
exporter themselves: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``) or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``…_HEADERS``, ``…_TIMEOUT``, ``…_COMPRESSION``,
``…_CERTIFICATE``, ``OTEL_SERVICE_NAME`` (default ``harness_nb``),
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_BSP_*`` (batching), ``OTEL_SDK_DISABLED``; and, here,
``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``) and ``OTEL_EXPORTER_OTLP_PROTOCOL``
(``http/protobuf``; ``grpc`` with ``opentelemetry-exporter-otlp-proto-grpc`` installed).

Spans leave in batches from the SDK's own thread: ending one never waits for the network.
"""

from __future__ import annotations

import logging
import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from ..core import ConfigError

log = logging.getLogger("harness_nb.tracing")

SCOPE = "harness_nb"
DEFAULT_SERVICE = "harness_nb"

_own: TracerProvider | None = None
_lock = threading.Lock()


def tracer() -> trace.Tracer:
    """The tracer of harness_nb's spans: from the program's provider, else from ours (made
    on first use)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):  # the program has set none
        provider = own_provider()
    return provider.get_tracer(SCOPE)


def own_provider() -> TracerProvider:
    """This process's provider, exporting as the ``OTEL_*`` variables say (see the module
    doc); a ``ConfigError`` for an exporter or protocol it cannot use."""
    global _own
    with _lock:
        if _own is None:
            resource = Resource.create()
            if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
                resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
            provider = TracerProvider(resource=resource)  # flushed and shut down at exit
            for exporter in _exporters():
                provider.add_span_processor(BatchSpanProcessor(exporter))
            _own = provider
        return _own


def flush(timeout_ms: int = 5_000) -> None:
    """Send the spans our provider still holds (blocking: call it from a thread). Nothing
    to do with the program's own provider, which it flushes itself."""
    if _own is not None:
        _own.force_flush(timeout_ms)


def _exporters() -> list[SpanExporter]:
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    found: list[SpanExporter] = []
    for name in names:
        if name == "otlp":
            found.append(_otlp())
        elif name == "console":
            found.append(ConsoleSpanExporter())
        elif name != "none":
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER={name!r}: harness_nb exports to 'otlp', 'console' or 'none'; set one of those "
                "(or set up your own tracer provider before the run: harness_nb then uses it)"
            )
    return found


def _otlp() -> SpanExporter:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    )
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            raise ConfigError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs pip install opentelemetry-exporter-otlp-proto-grpc; or send "
                "over HTTP: OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (port 4318)"
            ) from None
        return GrpcExporter()
    raise ConfigError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: harness_nb sends 'http/protobuf' (or 'grpc'); set one of those"
    )
