"""A new consumer group gets its partitions on its first heartbeat (first_balance_delay_ms=0), so a
consumer with the DEFAULT 13 s heartbeat period receives a message in about a second."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import tubemq
from tubemq.server import EmbeddedCluster


def first_message(cluster: Any, topic: str, group: str, body: bytes, **options: Any) -> tuple[list[bytes], float]:
    """Send ``body`` to ``topic`` (1 or more partitions), then open a consumer of a new ``group`` and read the
    first message; returns what was read and the seconds from the consumer's creation to it."""
    with tubemq.Producer(cluster.master_address) as producer:
        producer.send(topic, body)
    t0 = time.monotonic()
    with tubemq.Consumer(cluster.master_address, group=group, topics=[topic], consume_from="earliest",
                         iter_timeout_ms=10_000, **options) as consumer:
        got = []
        for msg in consumer:
            got.append(msg.data)
            break
    return got, time.monotonic() - t0


def test_new_consumer_receives_within_seconds(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path) as cluster:  # default server settings, like `tubemq serve`
        cluster.create_topic("orders", partitions=3)
        got, elapsed = first_message(cluster, "orders", "fresh", b"first")
    print(f"first message after {elapsed:.2f} s (default client heartbeat period 13 s)")
    assert got == [b"first"]
    assert elapsed < 10.0, f"first assignment took {elapsed:.1f} s"


def test_real_master_timing_is_an_option(tmp_path: Path) -> None:
    """first_balance_delay_ms=-1: the group waits for the periodic round, and the event for the
    heartbeat after it (the real master's sequence)."""
    # A round that falls between the register and the first heartbeat (sent right after it) is delivered
    # at once: rare, but not on a loaded machine, so a fresh group tries again (at most 3 groups).
    times: list[float] = []
    with EmbeddedCluster(tmp_path, first_balance_delay_ms=-1, balance_period_ms=300) as cluster:
        cluster.create_topic("orders", partitions=1)
        for attempt in range(3):
            got, elapsed = first_message(cluster, "orders", f"slow{attempt}", b"x", heartbeat_period_ms=2000)
            assert got == [b"x"]
            times.append(elapsed)
            if elapsed >= 1.5:
                break
    print(f"real-master timing: first message after {', '.join(f'{t:.2f}' for t in times)} s"
          " (heartbeat 2 s, rounds 0.3 s)")
    assert max(times) >= 1.5  # waited for the second heartbeat at least


def test_delayed_first_balance(tmp_path: Path) -> None:
    """first_balance_delay_ms > 0: the new group is balanced that long after its register; the event
    then waits for the consumer's next heartbeat (here 300 ms)."""
    with EmbeddedCluster(tmp_path, first_balance_delay_ms=800, balance_period_ms=3_600_000) as cluster:
        cluster.create_topic("orders", partitions=1)
        got, elapsed = first_message(cluster, "orders", "later", b"late", heartbeat_period_ms=300)
    print(f"delayed first balance (800 ms): first message after {elapsed:.2f} s")
    assert got == [b"late"]
    assert elapsed >= 0.8
