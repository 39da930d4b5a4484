"""The producer's metrics: counters of both routes (the loop's and the callers' own round trips),
gauges, and its brokers' health (docs/guide/metrics.md).

Why a module of its own: the dispatcher keeps plain ints on its hot paths; this is where they are named
and summed for snapshots, which run on the client's loop thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..net.health import SessionHealth

if TYPE_CHECKING:
    from .core import ProducerCore


def register_metrics(core: ProducerCore) -> SessionHealth:
    """Register the producer's counters and gauges on ``core.metrics``; returns its health sections."""
    m = core.metrics
    m.register_counter("producer.accepted", lambda: core.acknowledged + core.external_acknowledged + core.failed
                       + core._ext_failed + core.outstanding)
    m.register_counter("producer.sent", lambda: core.sent + core.external_figures()[0])
    m.register_counter("producer.acknowledged", lambda: core.acknowledged + core.external_acknowledged)
    m.register_counter("producer.failed", lambda: core.failed + core._ext_failed)
    m.register_counter("producer.retried", lambda: core.retried + core._ext_retried)
    m.register_counter("producer.bytes_sent", lambda: core.bytes_sent + core.external_figures()[1])
    m.inc("producer.unknown_outcome", 0)  # present from the start (counted on the failure path)
    m.set_gauge("producer.outstanding", lambda: core.outstanding)
    m.set_gauge("producer.in_flight", lambda: len(core._inflight))
    m.set_gauge("producer.backlog", lambda: len(core._backlog) + core.queued_elsewhere())
    return SessionHealth(m, core.session, lambda: broker_addresses(core),
                         lambda address, broker_id: broker_extra(core, broker_id),
                         lambda address: core.external_io(address))


def broker_addresses(core: ProducerCore) -> dict[str, int]:
    """address -> broker id: brokers of the published topics, plus any being shielded."""
    session = core.session
    out = {p.address: p.broker_id for t in list(session.topics) for p in session.partitions.get(t, ())}
    errors, _, shielded = core.quality.snapshot()
    for bid in set(errors) | shielded:
        b = session.brokers.get(bid)
        if b is not None:
            out.setdefault(b.address, bid)
    return out


def broker_extra(core: ProducerCore, broker_id: int) -> dict[str, Any]:
    """The producer's own figures for one broker's entry in ``snapshot()["brokers"]``."""
    errors, failures, _ = core.quality.snapshot()
    return {
        "send_errors": errors.get(broker_id, 0),
        "consecutive_failures": failures.get(broker_id, 0),
        "shielded": core.quality.is_shielded(broker_id),
    }


__all__ = ["broker_addresses", "broker_extra", "register_metrics"]
