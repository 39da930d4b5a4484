"""stats_interval_ms, and stats_interval_s as its deprecated alias (one release)."""

from __future__ import annotations

import time
import warnings

import pytest

import tubemq
from tubemq.config import ClientConfig, ProducerConfig
from tubemq.errors import ConfigError


def test_stats_interval_ms_and_the_deprecated_seconds_alias() -> None:
    assert ClientConfig(master="127.0.0.1:8715", stats_interval_ms=250).stats_interval_ms == 250
    with pytest.warns(DeprecationWarning, match="stats_interval_ms") as rec:
        cfg = ProducerConfig(master="127.0.0.1:8715", stats_interval_s=1.5)
    assert cfg.stats_interval_ms == 1500 and cfg.stats_interval_s is None
    assert rec[0].filename == __file__  # the warning points at the caller, not into tubemq
    with pytest.raises(ConfigError) as err:
        ClientConfig(master="127.0.0.1:8715", stats_interval_ms=-1)
    assert err.value.field == "stats_interval_ms"
    with pytest.raises(ConfigError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ClientConfig(master="127.0.0.1:8715", stats_interval_s=-1)


def test_deprecated_alias_through_the_client_drives_the_callback(cluster) -> None:
    snapshots: list[dict] = []
    with pytest.warns(DeprecationWarning):
        producer = tubemq.Producer(cluster.master_address, stats_interval_s=0.05, stats_callback=snapshots.append,
                                   heartbeat_period_ms=300)
    with producer:
        assert producer.config.stats_interval_ms == 50
        cluster.create_topic("stats", partitions=1)
        producer.send("stats", b"x")
        for _ in range(200):
            if snapshots:
                break
            time.sleep(0.05)
    assert snapshots and "counters" in snapshots[-1]


def test_dsn_takes_both_interval_spellings() -> None:
    assert ProducerConfig.from_dsn("tubemq://127.0.0.1:8715?stats_interval_ms=200").stats_interval_ms == 200
    with pytest.warns(DeprecationWarning):
        cfg = ProducerConfig.from_dsn("tubemq://127.0.0.1:8715?stats_interval_s=0.5")
    assert cfg.stats_interval_ms == 500
