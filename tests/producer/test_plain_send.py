"""The blocking send's compiled route (tubemq._bridge._plain) and its pure-Python twin: the same
results, the same accounting, and no stale route after the topic's partitions change."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _support import wait_for

import tubemq
from tubemq._bridge import _plain_py
from tubemq._bridge import producer as bridge_producer
from tubemq.producer.router import key_partition

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")


def _implementations() -> list[Any]:
    impls: list[Any] = [pytest.param(_plain_py, id="twin")]
    try:
        from tubemq._bridge import _plain
    except ImportError:
        if not NO_EXT:
            raise  # built extensions are expected: a missing one is a failure, not a skip
    else:
        impls.insert(0, pytest.param(_plain, id="compiled"))
    return impls


@pytest.fixture(params=_implementations())
def impl(request: Any, monkeypatch: Any) -> Any:
    """The implementation the producers made in the test use."""
    monkeypatch.setattr(bridge_producer, "_plain", request.param)
    return request.param


def test_the_loaded_implementation_matches_the_build() -> None:
    if NO_EXT:
        assert bridge_producer._plain.implementation == "python"
    else:
        assert bridge_producer._plain.implementation == "cython"


def test_plain_sends_round_robin_key_and_accounting(cluster: Any, stored: Any, impl: Any) -> None:
    """Every plain send after the first (which publishes the topic through the loop) is one call of
    the implementation: round-robin over both partitions, keys on the router's partition, results
    whole, counters and buffer back to rest, bodies stored once each in order per partition."""
    topic = f"plain_{impl.implementation}"
    cluster.create_topic(topic, partitions=2)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        assert isinstance(p._bridge.plain, impl.PlainSender)
        p.send(topic, b"warm-up")
        before = p._bridge.round_trips
        results = [p.send(topic, b"m%d" % i) for i in range(6)]
        keyed = [p.send(topic, b"k%d" % i, key=f"key{i}") for i in range(4)]
        direct = p._bridge.round_trips - before
        parts = p.partitions(topic)
        engine = p._bridge.engine
        metrics = p.metrics()
        assert (engine.buffer.used, engine.outstanding, metrics["gauges"]["producer.in_flight"]) == (0, 0, 0)
    assert direct == 10
    assert {r.partition.partition_id for r in results} == {pt.partition_id for pt in parts}
    assert [r.partition.partition_id for r in results[::2]] == [results[0].partition.partition_id] * 3
    for i, r in enumerate(keyed):
        assert r.partition == key_partition(f"key{i}", parts) and r.key == f"key{i}"
    for r in results + keyed:
        assert r.topic == topic and r.message_id > 0 and r.append_offset >= 0 and r.append_time > 0
    assert metrics["counters"]["producer.acknowledged"] == 11
    bodies = stored(cluster.broker_address, topic, [pt.partition_id for pt in parts])
    got = sorted(m.data for ms in bodies.values() for m in ms)
    assert got == sorted([b"warm-up"] + [b"m%d" % i for i in range(6)] + [b"k%d" % i for i in range(4)])


def test_compiled_and_twin_results_are_equal(cluster: Any) -> None:
    """The two implementations return equal SendResults for the same sends (message ids and times
    are the broker's, so the producers' results are compared field by field where they must agree)."""
    try:
        from tubemq._bridge import _plain
    except ImportError:
        pytest.skip("the compiled route is not built")
    outcomes = []
    for module in (_plain, _plain_py):
        topic = f"eq_{module.implementation}"
        cluster.create_topic(topic, partitions=1)
        bridge_producer_plain = bridge_producer._plain
        bridge_producer._plain = module
        try:
            with tubemq.Producer(cluster.master_address, **FAST) as p:
                p.send(topic, b"warm-up")
                rs = [p.send(topic, b"x" * n, key=k) for n, k in ((1, None), (100, "a"), (9000, b"b"))]
        finally:
            bridge_producer._plain = bridge_producer_plain
        outcomes.append([(type(r), r.partition.partition_id, r.append_offset, r.key, len(r)) for r in rs])
    assert outcomes[0] == outcomes[1]


@contextlib.contextmanager
def _cached_route(cluster: Any, impl: Any, prefix: str) -> Iterator[tuple[Any, str, Any]]:
    """A producer whose thread sent twice to a fresh one-partition topic (its route is cached):
    (producer, topic, the thread's lane)."""
    topic = f"{prefix}_{impl.implementation}"
    cluster.create_topic(topic, partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send(topic, b"warm-up")
        p.send(topic, b"cached")
        yield p, topic, p._bridge._lane()


def test_partition_change_between_two_sends_uses_the_new_route(cluster: Any, impl: Any) -> None:
    """A route cached by a thread is not used after the topic's partitions change: the topic is
    deleted and created again with another partition count between two sends; the session's
    ``route_gen`` moves and the next sends spread over the new partitions."""
    with _cached_route(cluster, impl, "rc") as (p, topic, lane):
        route = lane.routes[topic]
        gen = p._core.session.route_gen
        assert route.gen == gen and route.legs[0].part.partition_id == 0
        assert cluster.delete_topic(topic)
        wait_for(lambda: not p.partitions(topic), timeout=30, what="the deletion to reach the producer")
        cluster.create_topic(topic, partitions=3)
        wait_for(lambda: len(p.partitions(topic)) == 3, timeout=30, what="the new partitions")
        assert p._core.session.route_gen > gen
        before = p._bridge.round_trips
        t0 = time.monotonic()
        results = [p.send(topic, b"n%d" % i) for i in range(6)]
        print(f"6 sends after the change in {time.monotonic() - t0:.3f} s")
        assert p._bridge.round_trips - before == 6  # all on this thread: the new route, not the loop
        assert lane.routes[topic] is not route and len(lane.routes[topic].legs) == 3
    assert {r.partition.partition_id for r in results} == {0, 1, 2}


def test_route_cache_rebuilds_when_a_channel_was_dropped(cluster: Any, impl: Any) -> None:
    """A channel the general route dropped (closed) is never written to by a cached route: the
    route is rebuilt with the thread's new channel."""
    with _cached_route(cluster, impl, "drop") as (p, topic, lane):
        (channel,) = lane.channels.values()
        p._bridge._drop(lane, channel)
        assert channel.closed
        before = p._bridge.round_trips
        r = p.send(topic, b"two")
        assert p._bridge.round_trips - before == 1
        (again,) = lane.channels.values()
        assert again is not channel and lane.routes[topic].legs[0].channel is again
    assert r.message_id > 0


def test_a_rebuilt_route_goes_on_with_the_round_robin(cluster: Any, impl: Any) -> None:
    """A route rebuilt for the same partitions (here: its channel was dropped) continues the
    thread's round-robin where the old route stopped: the sends stay spread evenly."""
    topic = f"rr_{impl.implementation}"
    cluster.create_topic(topic, partitions=3)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send(topic, b"warm-up")
        lane = p._bridge._lane()
        ids = [p.send(topic, b"a%d" % i).partition.partition_id for i in range(4)]
        old = lane.routes[topic]
        for channel in list(lane.channels.values()):
            p._bridge._drop(lane, channel)
        ids += [p.send(topic, b"b%d" % i).partition.partition_id for i in range(8)]
        assert lane.routes[topic] is not old
    # consecutive sends take the partitions in turn across the rebuild: every window of 3 holds all 3
    assert all(len(set(ids[i:i + 3])) == 3 for i in range(len(ids) - 2)), ids
