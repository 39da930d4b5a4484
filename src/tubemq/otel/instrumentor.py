"""``TubeMQInstrumentor``: the :class:`BaseInstrumentor` that ``opentelemetry-instrument`` loads.

Registered as the ``tubemq`` entry point of the ``opentelemetry_instrumentor`` group, so
``opentelemetry-instrument python app.py`` instruments tubemq with the global providers it set up.
``OTEL_PYTHON_TUBEMQ_SPANS=false`` chooses the metrics-only mode there (no span per message).
Needs opentelemetry-instrumentation (it ships ``opentelemetry-instrument``).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from . import instrumentation

#: environment variable for the zero-code mode: "false" / "0" / "no" = metrics only
SPANS_ENV = "OTEL_PYTHON_TUBEMQ_SPANS"


class TubeMQInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """``TubeMQInstrumentor().instrument(tracer_provider=..., meter_provider=..., spans=True)``;
    ``uninstrument()`` restores the plain client methods."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # tubemq itself is the instrumented library: no other package to check

    def _instrument(self, **kwargs: Any) -> None:
        spans = kwargs.get("spans")
        if spans is None:
            spans = os.environ.get(SPANS_ENV, "true").strip().lower() not in ("false", "0", "no", "off")
        instrumentation.instrument(kwargs.get("tracer_provider"), kwargs.get("meter_provider"), spans=bool(spans))

    def _uninstrument(self, **kwargs: Any) -> None:
        instrumentation.uninstrument()


__all__ = ["SPANS_ENV", "TubeMQInstrumentor"]
