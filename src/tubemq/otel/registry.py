"""A client's own metrics registry (``client.metrics()`` and its latency histograms) read for export.

Shared by the OpenTelemetry bridge and the Prometheus collector: one snapshot per collection (reused
for a moment, as a collection reads many instruments), the counter names a client can report (some
appear only once they happened), per-broker and master health as numbers, and the latency histograms
on the registry's own log-linear boundaries.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..metrics import Histogram, Metrics, bucket_upper_s

#: counters a registry has only once they were first counted (rare events)
RARE_COUNTERS = ("producer.unknown_outcome", "consumer.close_timeouts", "consumer.commit_failures",
                 "consumer.confirm_timeouts", "consumer.partitions_lost", "consumer.decode_errors",
                 "consumer.dropped_messages", "consumer.fetch_errors", "master.registrations",
                 "master.register_failures", "master.heartbeats", "master.heartbeat_failures")
#: numeric fields of a ``master`` / ``brokers`` entry that only grow (the rest are current values)
HEALTH_COUNTERS = frozenset({"connects", "reconnects", "connect_failures", "disconnects", "bytes_sent",
                             "bytes_received", "send_errors", "fetch_errors", "heartbeat_failures"})
HEALTH_GAUGES = frozenset({"connected", "registered", "in_flight", "backing_off", "backoff_s",
                           "consecutive_connect_failures", "consecutive_failures", "shielded", "healthy",
                           "partitions", "consecutive_heartbeat_failures"})
#: every 4th boundary of the registry's histograms (16 per power of two), 16 us .. 134 s: each export
#: bucket is a whole number of registry buckets, so the counts are exact
_SUB = 16
EXPORT_BUCKETS: tuple[int, ...] = tuple(e * _SUB + sub for e in range(1, 24) for sub in (3, 7, 11, 15))
EXPORT_BOUNDS: tuple[float, ...] = tuple(bucket_upper_s(i) for i in EXPORT_BUCKETS)


def registry_of(client: Any) -> Metrics | None:
    """The :class:`~tubemq.metrics.Metrics` behind ``client.metrics()`` (sync or asyncio client, bound or
    not), for its histograms' buckets; None if it has none."""
    engine = getattr(getattr(client, "_aio", client), "_core", None)
    for name in ("metrics", "stats"):
        reg = getattr(engine, name, None)
        if isinstance(reg, Metrics):
            return reg
    return None


def number(value: Any) -> float | None:
    """A health field as a number (True = 1, a list = its length), None if it is no figure."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return float(len(value))
    return None


def server_attrs(address: str) -> dict[str, Any]:
    host, _, port = address.rpartition(":")
    return {"server.address": host or address, "server.port": int(port) if port.isdigit() else 0}


class Source:
    """One client's figures; a snapshot serves the instruments of one collection (``max_age`` s)."""

    def __init__(self, client: Any, name: str | None = None, max_age: float = 0.1) -> None:
        self.client = client
        self.name = name or type(client).__name__
        self.max_age = max_age
        self.registry = registry_of(client)
        self._lock = threading.Lock()
        self._snap: dict[str, Any] | None = None
        self._at = 0.0
        first = self.snapshot()
        counters = set(first.get("counters", {}))
        kinds = {n.split(".", 1)[0] for n in counters}
        self.counter_names = sorted(counters | {n for n in RARE_COUNTERS if n.split(".", 1)[0] in kinds})
        self.gauge_names = sorted(first.get("gauges", {}))
        self.histogram_names = sorted(first.get("latency", {}))
        self._snap = None  # the next collection takes its own

    def refresh(self) -> dict[str, Any]:
        """A fresh snapshot (the start of a collection)."""
        with self._lock:
            self._snap = None
        return self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            if self._snap is None or now - self._at > self.max_age:
                try:
                    self._snap = self.client.metrics()
                except Exception:  # a closed client or loop: report nothing rather than fail the exporter
                    self._snap = {}
                self._at = now
            return self._snap

    def counters(self) -> dict[str, int]:
        counts = self.snapshot().get("counters", {})
        return {n: int(counts.get(n, 0)) for n in self.counter_names}

    def health(self) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """``(role, attributes, entry)`` for the master and each broker."""
        snap = self.snapshot()
        out = []
        master = snap.get("master")
        if isinstance(master, dict) and master.get("address"):
            out.append(("master", server_attrs(str(master["address"])), master))
        for address, entry in (snap.get("brokers") or {}).items():
            if isinstance(entry, dict):
                attrs = server_attrs(str(address))
                if "broker_id" in entry:
                    attrs["tubemq.broker.id"] = int(entry["broker_id"])
                out.append(("broker", attrs, entry))
        return out

    def histogram(self, name: str) -> Histogram | None:
        return self.registry.histogram(name) if self.registry is not None else None


def export_counts(buckets: list[int]) -> list[int]:
    """Registry bucket counts folded onto :data:`EXPORT_BOUNDS` (non-cumulative; one more for +Inf)."""
    out = [0] * (len(EXPORT_BUCKETS) + 1)
    j = 0
    for idx, n in enumerate(buckets):
        if not n:
            continue
        while j < len(EXPORT_BUCKETS) and idx > EXPORT_BUCKETS[j]:
            j += 1
        out[j] += n
    return out


def representative_s(idx: int) -> float:
    """A value inside registry bucket ``idx`` (its middle), in seconds."""
    low = bucket_upper_s(idx - 1) if idx > 0 else 0.0
    return (low + bucket_upper_s(idx)) / 2


__all__ = ["EXPORT_BOUNDS", "HEALTH_COUNTERS", "HEALTH_GAUGES", "RARE_COUNTERS", "Source", "export_counts",
           "number", "registry_of", "representative_s", "server_attrs"]
