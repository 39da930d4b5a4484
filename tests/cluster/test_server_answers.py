"""Server answers the clients must survive, injected into the embedded broker (``inject_fault``):
419 (receive overflow) on send, 452 (consume speed limit, with minLimitTime) and 301 (moved) on
getMessage. Checked end to end over TCP: the producer's retry and re-route, the consumer's back-off."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tubemq
from tubemq.errors import ServerOverflowError
from tubemq.protocol.constants import ErrorCode
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS


@contextmanager
def two_overflows(tmp_path: Path, **producer_options: Any) -> Iterator[tuple[Any, tubemq.Producer]]:
    """A cluster with topic "ovf" and a warmed-up producer; the broker answers the next two sends 419."""
    with EmbeddedCluster(tmp_path, **FAST_TIMERS) as cluster:
        cluster.create_topic("ovf", partitions=1)
        with tubemq.Producer(cluster.master_address, **producer_options) as producer:
            producer.send("ovf", b"warm-up")
            cluster.inject_fault(ErrorCode.SERVER_RECEIVE_OVERFLOW, count=2)
            yield cluster, producer


def test_419_is_retried_after_the_backoff(tmp_path: Path) -> None:
    with two_overflows(tmp_path, retries=2, retry_backoff_ms=150) as (cluster, producer):
        result = producer.send("ovf", b"after two 419s")
        retried = producer.metrics()["counters"]["producer.retried"]
        log = cluster.fault_log()
    waits = [r.next_call_after_s for r in log]
    print(f"\n419 x2: acknowledged at offset {result.append_offset}, retried {retried}, resent after {waits}")
    assert [r.code for r in log] == [419, 419]
    assert retried == 2
    assert all(w is not None and w >= 0.14 for w in waits)


def test_419_beyond_the_retries_is_a_typed_error(tmp_path: Path) -> None:
    with two_overflows(tmp_path, retries=1, retry_backoff_ms=10) as (_, producer):
        with pytest.raises(ServerOverflowError) as info:
            producer.send("ovf", b"refused twice")
        assert info.value.code == 419 and "overflow" in str(info.value)
        assert producer.send("ovf", b"fine again").append_offset > 0


def test_419_resend_may_reroute_to_another_broker(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path, brokers=2, **FAST_TIMERS) as cluster:
        cluster.create_topic("ovf", partitions=1)
        with tubemq.Producer(cluster.master_address, retries=2, retry_backoff_ms=10) as producer:
            for _ in range(4):
                producer.send("ovf", b"warm-up")
            cluster.inject_fault(ErrorCode.SERVER_RECEIVE_OVERFLOW, count=1, broker_id=1)
            results = [producer.send("ovf", b"m%d" % i) for i in range(10)]
        log = cluster.fault_log(broker_id=1)
    print(f"\n419 on broker 1: stored on brokers {[r.broker_id for r in results]}")
    assert len(log) == 1 and len(results) == 10


def _first_message_after_fault(tmp_path: Path, code: int, min_limit_ms: int) -> tuple[float, list[float | None]]:
    with EmbeddedCluster(tmp_path, **FAST_TIMERS) as cluster:
        cluster.create_topic("slow", partitions=1)
        with tubemq.Producer(cluster.master_address) as producer:
            producer.send("slow", b"payload")
        cluster.inject_fault(code, count=2, min_limit_ms=min_limit_ms)
        t0 = time.monotonic()
        with tubemq.Consumer(cluster.master_address, group="g", topics=["slow"], consume_from="earliest",
                             iter_timeout_ms=10_000) as consumer:
            got = []
            for msg in consumer:
                got.append(bytes(msg.data))
                break
        elapsed = time.monotonic() - t0
        log = cluster.fault_log()
    assert got == [b"payload"]
    assert [r.code for r in log] == [code, code]
    return elapsed, [r.next_call_after_s for r in log]


def test_452_consumer_waits_min_limit_time(tmp_path: Path) -> None:
    elapsed, waits = _first_message_after_fault(tmp_path, ErrorCode.SERVER_CONSUME_SPEED_LIMIT, 700)
    print(f"\n452 (minLimitTime 700 ms) x2: next fetch after {waits} s; message after {elapsed:.2f} s")
    assert all(w is not None and w >= 0.65 for w in waits), waits


def test_301_consumer_backs_off_and_reads_on(tmp_path: Path) -> None:
    elapsed, waits = _first_message_after_fault(tmp_path, ErrorCode.MOVED, 0)
    print(f"\n301 x2: next fetch after {waits} s; message after {elapsed:.2f} s (Java waits 200 ms)")
    assert all(w is not None and w >= 0.15 for w in waits), waits
