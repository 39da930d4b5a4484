"""stats_interval_ms: validated, taken from a DSN, and driving stats_callback through a client."""

from __future__ import annotations

import time

import pytest

import tubemq
from tubemq.config import ClientConfig, ProducerConfig
from tubemq.errors import ConfigError


def test_stats_interval_ms_is_validated_and_the_seconds_spelling_is_gone() -> None:
    assert ClientConfig(master="127.0.0.1:8715", stats_interval_ms=250).stats_interval_ms == 250
    with pytest.raises(ConfigError) as err:
        ClientConfig(master="127.0.0.1:8715", stats_interval_ms=-1)
    assert err.value.field == "stats_interval_ms"
    with pytest.raises(TypeError, match="stats_interval_s"):
        ClientConfig(master="127.0.0.1:8715", stats_interval_s=1.5)  # type: ignore[call-arg]


def test_stats_interval_through_the_client_drives_the_callback(cluster) -> None:
    snapshots: list[dict] = []
    producer = tubemq.Producer(cluster.master_address, stats_interval_ms=50, stats_callback=snapshots.append,
                               heartbeat_period_ms=300)
    with producer:
        cluster.create_topic("stats", partitions=1)
        producer.send("stats", b"x")
        for _ in range(200):
            if snapshots:
                break
            time.sleep(0.05)
    assert snapshots and "counters" in snapshots[-1]


def test_dsn_takes_the_interval() -> None:
    assert ProducerConfig.from_dsn("tubemq://127.0.0.1:8715?stats_interval_ms=200").stats_interval_ms == 200
