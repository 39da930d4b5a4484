"""A new consumer group gets its partitions on its first heartbeat (first_balance_delay_ms=0), so a
consumer with the DEFAULT 13 s heartbeat period receives a message in about a second."""

from __future__ import annotations

import time
from pathlib import Path

import tubemq
from tubemq.server import EmbeddedCluster


def test_new_consumer_receives_within_seconds(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path) as cluster:  # default server settings, like `tubemq serve`
        cluster.create_topic("orders", partitions=3)
        with tubemq.Producer(cluster.master_address) as producer:
            producer.send("orders", b"first")
        t0 = time.monotonic()
        with tubemq.Consumer(
            cluster.master_address, group="fresh", topics=["orders"], consume_from="earliest", iter_timeout_ms=10_000
        ) as consumer:
            got = []
            for msg in consumer:
                got.append(msg.data)
                break
        elapsed = time.monotonic() - t0
    print(f"first message after {elapsed:.2f} s (default client heartbeat period 13 s)")
    assert got == [b"first"]
    assert elapsed < 10.0, f"first assignment took {elapsed:.1f} s"


def test_real_master_timing_is_an_option(tmp_path: Path) -> None:
    """first_balance_delay_ms=-1: the group waits for the periodic round, and the event for the
    heartbeat after it (the real master's sequence)."""
    with EmbeddedCluster(tmp_path, first_balance_delay_ms=-1, balance_period_ms=300) as cluster:
        cluster.create_topic("orders", partitions=1)
        with tubemq.Producer(cluster.master_address) as producer:
            producer.send("orders", b"x")
        t0 = time.monotonic()
        with tubemq.Consumer(
            cluster.master_address,
            group="slow",
            topics=["orders"],
            consume_from="earliest",
            heartbeat_period_ms=2000,
            iter_timeout_ms=10_000,
        ) as consumer:
            got = []
            for msg in consumer:
                got.append(msg.data)
                break
        elapsed = time.monotonic() - t0
    print(f"real-master timing: first message after {elapsed:.2f} s (heartbeat 2 s, rounds 0.3 s)")
    assert got == [b"x"]
    assert elapsed >= 1.5  # waited for the second heartbeat at least


def test_delayed_first_balance(tmp_path: Path) -> None:
    """first_balance_delay_ms > 0: the new group is balanced that long after its register; the event
    then waits for the consumer's next heartbeat (here 300 ms)."""
    with EmbeddedCluster(tmp_path, first_balance_delay_ms=800, balance_period_ms=3_600_000) as cluster:
        cluster.create_topic("orders", partitions=1)
        with tubemq.Producer(cluster.master_address) as producer:
            producer.send("orders", b"late")
        t0 = time.monotonic()
        with tubemq.Consumer(
            cluster.master_address, group="later", topics=["orders"], consume_from="earliest",
            heartbeat_period_ms=300, iter_timeout_ms=10_000,
        ) as consumer:
            got = []
            for msg in consumer:
                got.append(msg.data)
                break
        elapsed = time.monotonic() - t0
    print(f"delayed first balance (800 ms): first message after {elapsed:.2f} s")
    assert got == [b"late"]
    assert elapsed >= 0.8
