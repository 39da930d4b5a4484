"""A BoundConsumer whose broker closes the connection: restarted, stopped, or the connection reset
(``tubemq.testing`` fault proxy), against the embedded server over real TCP on 127.0.0.1.

The broker heartbeat period is long here (30 s), so nothing but the closed connection and the fetches
themselves tell the consumer: it must attach the partition again at its bound offset and read on, or
raise a typed connection error within the fetch's timeout while the broker stays away.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tubemq
from tubemq.errors import TubeMQConnectionError, TubeMQError
from tubemq.testing import proxy_cluster

from ._produce import produce
from .conftest import FAST_CLIENT

OPTS: dict[str, Any] = {**FAST_CLIENT, "consume_from": "earliest", "heartbeat_period_ms": 30000}


def first_batch(bc: Any, part: Any, timeout: float = 10.0) -> Any:
    batch = bc.fetch(part, timeout=timeout)
    assert batch is not None, f"no batch within {timeout} s"
    return batch


def read_all(bc: Any, part: Any, count: int, timeout: float = 20.0) -> tuple[list[bytes], list[Any]]:
    """``count`` messages from ``part``, each batch confirmed; (bodies, batches)."""
    got: list[bytes] = []
    batches: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        batch = bc.fetch(part, timeout=1.0)
        if batch is not None:
            got.extend(bytes(m.data) for m in batch)
            assert bc.confirm(batch) is True
            batches.append(batch)
    return got, batches


@contextlib.contextmanager
def read_first(cluster: Any, topic: str, count: int) -> Iterator[tuple[Any, Any, int]]:
    """A bound consumer that read and confirmed the ``count`` messages of a new one-partition
    ``topic``: (consumer, partition, its bound offset)."""
    cluster.create_topic(topic, partitions=1)
    produce(cluster, topic, [b"a%02d" % i for i in range(count)])
    with tubemq.BoundConsumer(cluster.master_address, f"g_{topic}", [topic], **OPTS) as bc:
        part = bc.partitions()[0]
        bc.attach(part, 0)
        before, batches = read_all(bc, part, count)
        assert before == [b"a%02d" % i for i in range(count)]
        yield bc, part, batches[-1].next_offset


def test_restarted_broker_is_attached_again_at_the_bound_offset(cluster: Any) -> None:
    with read_first(cluster, "bgone", 20) as (bc, part, bound_at):
        cluster.stop_broker()  # the registration is gone with it, the data is kept
        cluster.start_broker()
        produce(cluster, "bgone", [b"b%02d" % i for i in range(5)])
        t0 = time.monotonic()
        batch = first_batch(bc, part)
        print(f"first batch after the restart {time.monotonic() - t0:.2f} s later")
        assert batch.start_offset == bound_at
        after = [bytes(m.data) for m in batch]
        assert bc.confirm(batch) is True
        rest, _ = read_all(bc, part, 5 - len(after))
        assert after + rest == [b"b%02d" % i for i in range(5)]
        assert [p.key for p in bc.attached()] == [part.key]


def test_stopped_broker_raises_typed_then_reading_goes_on(cluster: Any) -> None:
    with read_first(cluster, "bstop", 10) as (bc, part, bound_at):
        cluster.stop_broker()
        for _ in range(2):  # the first after the close, and one on a partition already let go of
            t0 = time.monotonic()
            with pytest.raises(TubeMQConnectionError):
                bc.fetch(part, timeout=2.0)
            took = time.monotonic() - t0
            print(f"typed error after {took:.2f} s (promised: the timeout plus one rpc_timeout_ms)")
            assert took < 60, f"fetch took {took:.1f} s: not bounded"  # generous: a hang, not speed
        cluster.start_broker()
        produce(cluster, "bstop", [b"b%02d" % i for i in range(5)])
        batch = first_batch(bc, part)
        assert batch.start_offset == bound_at
        after = [bytes(m.data) for m in batch]
        assert bc.confirm(batch) is True
        rest, _ = read_all(bc, part, 5 - len(after))
        assert after + rest == [b"b%02d" % i for i in range(5)]


def test_reset_connection_keeps_the_batch_and_the_position(cluster: Any) -> None:
    """A reset broke the connection, the broker kept the registration: the unconfirmed batch is still
    committed on a new connection, and reading goes on right after it."""
    cluster.create_topic("breset", partitions=1)
    produce(cluster, "breset", [b"a%02d" % i for i in range(10)])
    with proxy_cluster(cluster) as proxies, \
            tubemq.BoundConsumer(proxies.master_address, "g_breset", ["breset"], pool="private", **OPTS) as bc:
        part = bc.partitions()[0]
        bc.attach(part, 0)
        batch = first_batch(bc, part)
        broker = next(iter(proxies.brokers.values()))
        broker.reset()
        time.sleep(0.3)
        broker.heal()
        deadline = time.monotonic() + 20
        while True:  # the first attempt may meet the reset connection: typed, then fine
            try:
                assert bc.confirm(batch) is True
                break
            except TubeMQError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        produce(cluster, "breset", [b"b%02d" % i for i in range(5)])
        rest, later = read_all(bc, part, 10 - len(batch) + 5)
        assert later[0].start_offset == batch.next_offset
        assert [bytes(m.data) for m in batch] + rest == [b"a%02d" % i for i in range(10)] + [
            b"b%02d" % i for i in range(5)]
