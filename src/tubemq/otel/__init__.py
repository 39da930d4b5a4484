"""OpenTelemetry for tubemq (the ``otel`` extra): spans, context propagation, metrics.

Off until :func:`instrument` (or ``opentelemetry-instrument``, through :class:`TubeMQInstrumentor`) turns
it on: until then the client runs no OpenTelemetry code. Follows the messaging semantic conventions
named by :data:`SEMCONV_VERSION` (docs/guide/otel.md):

* ``send {topic}`` (PRODUCER) per message, ended when the broker answers; the context travels in the
  message attributes (W3C ``traceparent``, ``tracestate``, ``baggage``, see :mod:`.propagation`), unless
  the application set a ``traceparent`` itself;
* ``receive {topic}`` (CLIENT) per batch handed out, from the poll (or the fetch request) to delivery,
  linked to each message's send; ``process {topic}`` (CONSUMER) around each push-listener call;
* ``messaging.client.sent.messages``, ``messaging.client.consumed.messages``,
  ``messaging.client.operation.duration`` and ``messaging.process.duration`` (the spec's buckets);
* ``instrument(spans=False)``: those metrics only, no span per message (bounded cost);
* :func:`observe`: a client's own ``metrics()`` registry as OpenTelemetry instruments;
  :mod:`tubemq.otel.prometheus`: the same for Prometheus.
"""

from __future__ import annotations

from typing import Any

from .bridge import MetricsBridge, observe
from .instrumentation import instrument, is_instrumented, spans_enabled, uninstrument
from .propagation import decode_value, encode_value, extract, inject
from .semconv import DURATION_BUCKETS, SEMCONV_VERSION, SYSTEM


def __getattr__(name: str) -> Any:
    """``TubeMQInstrumentor`` needs opentelemetry-instrumentation: imported on first use only."""
    if name == "TubeMQInstrumentor":
        from .instrumentor import TubeMQInstrumentor
        return TubeMQInstrumentor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DURATION_BUCKETS", "SEMCONV_VERSION", "SYSTEM", "MetricsBridge", "TubeMQInstrumentor",
           "decode_value", "encode_value", "extract", "inject", "instrument", "is_instrumented", "observe",
           "spans_enabled", "uninstrument"]
