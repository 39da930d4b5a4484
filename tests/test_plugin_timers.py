"""The plugin's server timers against the clients' default heartbeat: a user's default-settings
``Consumer`` in ``tubemq_cluster`` keeps its registration (no expiry between two heartbeats, no 410
"Duplicated Register" churn)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

import tubemq
from tubemq.config import ConsumerConfig, ProducerConfig
from tubemq.server.testing import CLIENT_EXPIRY_FACTOR, FAST_CLIENT_TIMERS, FAST_TIMERS


def _default_heartbeat_ms(config: type) -> int:
    default = next(f.default for f in dataclasses.fields(config) if f.name == "heartbeat_period_ms")
    assert isinstance(default, int)
    return default


_EXPIRIES = ("consumer_heartbeat_timeout_ms", "producer_heartbeat_timeout_ms", "consumer_reg_timeout_ms")


def test_fast_timers_outlast_the_default_client_heartbeat() -> None:
    """The master answers carry no heartbeat-period hint, so the server must outwait the client's default."""
    period = max(_default_heartbeat_ms(ConsumerConfig), _default_heartbeat_ms(ProducerConfig))
    assert CLIENT_EXPIRY_FACTOR >= 2.5
    for name in _EXPIRIES:
        assert FAST_TIMERS[name] >= CLIENT_EXPIRY_FACTOR * period, (name, FAST_TIMERS[name], period)
        # the suite-only set is for clients heartbeating at least 2.5 times per expiry
        assert FAST_CLIENT_TIMERS[name] >= CLIENT_EXPIRY_FACTOR * 200
    assert FAST_TIMERS["balance_period_ms"] == FAST_CLIENT_TIMERS["balance_period_ms"] <= 1000


@pytest.mark.slow
@pytest.mark.tubemq_cluster(topics={"steady": 1})
def test_default_consumer_stays_registered(tubemq_cluster: Any, tubemq_master: str) -> None:
    """Two default heartbeat periods and a margin: the member keeps its partition throughout."""
    period_s = _default_heartbeat_ms(ConsumerConfig) / 1000.0
    got: list[bytes] = []
    with tubemq.Producer(tubemq_master) as p, \
            tubemq.Consumer(tubemq_master, group="g_steady", topics=["steady"], consume_from="earliest") as c:
        p.send("steady", b"first")
        t0 = time.monotonic()
        end = t0 + 2 * period_s + 3.0
        sent = 1
        while time.monotonic() < end:
            batch = c.poll(0.5)
            if batch:
                got.extend(m.data for m in batch)
                c.confirm(batch)
            if time.monotonic() - t0 > sent * 5.0:  # a message every 5 s: the producer stays usable too
                p.send("steady", b"m%d" % sent)
                sent += 1
        p.send("steady", b"last")
        deadline = time.monotonic() + 30
        while b"last" not in got and time.monotonic() < deadline:
            batch = c.poll(0.5)
            if batch:
                got.extend(m.data for m in batch)
                c.confirm(batch)
        counters = c.metrics()["counters"]
        print(f"held {time.monotonic() - t0:.1f} s, {len(got)} messages, counters {counters}")
    assert got == [b"first", *(b"m%d" % i for i in range(1, sent)), b"last"]
    assert counters["master.registrations"] == 1, counters  # one registration, never timed out
    assert counters["consumer.partitions_assigned"] == 1, counters
    assert counters["consumer.partitions_revoked"] == 0, counters
    assert counters.get("consumer.partitions_lost", 0) == 0, counters
