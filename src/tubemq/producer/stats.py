"""The producer's metrics: its counters, gauges and its brokers' health (docs/guide/metrics.md).

Why a module of its own: the engine bumps plain ints on its hot paths; this is where they are named
for snapshots, which run on the client's loop thread. It takes the parts it reads, not the engine, so
the engine builds on it and not the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..metrics import Metrics
from ..net.health import SessionHealth
from .buffer import SendBuffer
from .quality import BrokerQuality


def register_metrics(m: Metrics, counts: SendBuffer, session: Any, quality: BrokerQuality,
                     gauges: Callable[[], tuple[int, int, int]],
                     io: Callable[[str], dict[str, int]]) -> SessionHealth:
    """Register the producer's counters (kept by the send buffer, ``counts``) and gauges on ``m``;
    returns its health sections.

    ``gauges()``: (outstanding, in flight, backlog); ``io(address)``: wire bytes of connections
    outside the pool (the blocking senders' own)."""
    m.register_counter("producer.accepted", lambda: counts.acknowledged + counts.failed + gauges()[0])
    m.register_counter("producer.sent", lambda: counts.sent)
    m.register_counter("producer.acknowledged", lambda: counts.acknowledged)
    m.register_counter("producer.failed", lambda: counts.failed)
    m.register_counter("producer.retried", lambda: counts.retried)
    m.register_counter("producer.bytes_sent", lambda: counts.bytes_sent)
    m.inc("producer.unknown_outcome", 0)  # present from the start (counted on the failure path)
    m.set_gauge("producer.outstanding", lambda: gauges()[0])
    m.set_gauge("producer.in_flight", lambda: gauges()[1])
    m.set_gauge("producer.backlog", lambda: gauges()[2])
    return SessionHealth(m, session, lambda: broker_addresses(session, quality),
                         lambda address, broker_id: broker_extra(quality, broker_id), io)


def broker_addresses(session: Any, quality: BrokerQuality) -> dict[str, int]:
    """address -> broker id: brokers of the published topics, plus any being shielded."""
    out = {p.address: p.broker_id for t in list(session.topics) for p in session.partitions.get(t, ())}
    errors, _, shielded = quality.snapshot()
    for bid in set(errors) | shielded:
        b = session.brokers.get(bid)
        if b is not None:
            out.setdefault(b.address, bid)
    return out


def broker_extra(quality: BrokerQuality, broker_id: int) -> dict[str, Any]:
    """The producer's own figures for one broker's entry in ``snapshot()["brokers"]``."""
    errors, failures, _ = quality.snapshot()
    return {
        "send_errors": errors.get(broker_id, 0),
        "consecutive_failures": failures.get(broker_id, 0),
        "shielded": quality.is_shielded(broker_id),
    }


__all__ = ["broker_addresses", "broker_extra", "register_metrics"]
