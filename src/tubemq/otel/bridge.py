"""A client's own metrics registry as OpenTelemetry instruments: :func:`observe`.

Counters become observable counters, gauges (buffer, in-flight, backlog ...) observable gauges,
master and per-broker health observable gauges and counters with ``server.address`` / ``server.port``
(and ``tubemq.broker.id``), each named ``tubemq.<registry name>``. The latency histograms become
OpenTelemetry histograms on the registry's own log-linear boundaries (every 4th, 16 us .. 134 s, so
bucket counts are exact): the OpenTelemetry API has no observable histogram, so at each collection
the samples recorded since the last one are replayed (one record per sample, at its bucket's middle:
the sum is then within a bucket width of the true one).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from .propagation import api
from .registry import EXPORT_BOUNDS, HEALTH_COUNTERS, HEALTH_GAUGES, Source, number, representative_s
from .semconv import SCHEMA_URL


class MetricsBridge:
    """What :func:`observe` returns: ``close()`` stops reporting (the instruments then observe nothing)."""

    def __init__(self, client: Any, meter_provider: Any = None, name: str | None = None) -> None:
        _, metrics, _, _ = api()
        self.source = src = Source(client, name)
        self.attrs = {"tubemq.client": src.name}
        self.closed = False
        self._lock = threading.Lock()
        self._seen: dict[str, list[int]] = {}
        meter = metrics.get_meter("tubemq.metrics", schema_url=SCHEMA_URL, meter_provider=meter_provider)
        obs = metrics.Observation
        for cname in src.counter_names:
            meter.create_observable_counter(f"tubemq.{cname}", [self._counter(obs, cname)],
                                            unit="By" if "bytes" in cname else "1")
        for gname in src.gauge_names:
            meter.create_observable_gauge(f"tubemq.{gname}", [self._gauge(obs, gname)], unit="1")
        for role in ("master", "broker"):
            for field in sorted(HEALTH_GAUGES):
                meter.create_observable_gauge(f"tubemq.{role}.{field}", [self._health(obs, role, field)],
                                              unit="s" if field.endswith("_s") else "1")
            for field in sorted(HEALTH_COUNTERS):
                meter.create_observable_counter(f"tubemq.{role}.{field}", [self._health(obs, role, field)],
                                                unit="By" if "bytes" in field else "1")
        self._hists = {}
        for hname in src.histogram_names:
            self._hists[hname] = meter.create_histogram(
                f"tubemq.{hname}", unit="s", description=f"{hname} (the client's log-linear histogram)",
                explicit_bucket_boundaries_advisory=list(EXPORT_BOUNDS))
            hist = src.histogram(hname)
            if hist is not None:
                self._seen[hname] = hist.buckets()[0]  # samples before the bridge are not replayed
        meter.create_observable_counter("tubemq.latency.samples", [self._replay(obs)], unit="1",
                                        description="latency samples exported (and replayed into the histograms)")

    def close(self) -> None:
        self.closed = True

    def _counter(self, obs: Any, name: str) -> Any:
        def cb(options: Any) -> Iterable[Any]:
            if self.closed:
                return []
            return [obs(self.source.counters().get(name, 0), self.attrs)]
        return cb

    def _gauge(self, obs: Any, name: str) -> Any:
        def cb(options: Any) -> Iterable[Any]:
            if self.closed:
                return []
            value = self.source.snapshot().get("gauges", {}).get(name)
            return [] if value is None else [obs(value, self.attrs)]
        return cb

    def _health(self, obs: Any, role: str, field: str) -> Any:
        def cb(options: Any) -> Iterable[Any]:
            if self.closed:
                return []
            out = []
            for r, attrs, entry in self.source.health():
                value = number(entry.get(field)) if r == role else None
                if value is not None:
                    out.append(obs(value, {**self.attrs, **attrs}))
            return out
        return cb

    def _replay(self, obs: Any) -> Any:
        """Record the histogram samples that arrived since the last collection (collections run the
        callbacks before reading the histograms, so the samples are in this collection)."""
        def cb(options: Any) -> Iterable[Any]:
            if self.closed:
                return []
            total = 0
            with self._lock:
                for name, instrument in self._hists.items():
                    hist = self.source.histogram(name)
                    if hist is None:
                        continue
                    counts, _ = hist.buckets()
                    before = self._seen.get(name) or [0] * len(counts)
                    for idx, n in enumerate(counts):
                        delta = n - before[idx]
                        if delta > 0:
                            value = representative_s(idx)
                            for _ in range(delta):
                                instrument.record(value, self.attrs)
                    self._seen[name] = counts
                    total += sum(counts)
            return [obs(total, self.attrs)]
        return cb


def observe(client: Any, meter_provider: Any = None, *, name: str | None = None) -> MetricsBridge:
    """Report ``client``'s own metrics (any tubemq client) through OpenTelemetry instruments;
    ``name`` (default: the client's class name) is the ``tubemq.client`` attribute."""
    return MetricsBridge(client, meter_provider, name)


__all__ = ["MetricsBridge", "observe"]
