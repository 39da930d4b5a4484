"""Producer against the embedded cluster over real TCP: sends, attributes, routing, sizes, errors."""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import threading

import pytest

import tubemq
import tubemq.aio
from tubemq.config import ProducerConfig
from tubemq.errors import (
    ClientClosedError,
    InvalidMessageError,
    MessageTooLargeError,
    TopicNotPublishedError,
    TubeMQError,
)

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}


def test_sync_send_with_and_without_attributes(cluster, stored) -> None:
    cluster.create_topic("demo", partitions=3)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        plain = p.send("demo", b"plain")
        attr = p.send("demo", b"with-attrs", attributes={"k1": "v1", "k2": "v2"})
        typed = p.send("demo", b"typed", attributes={"k": "v"}, stream_id="typeA", msg_time="202611221030")
        when = p.send("demo", b"when", msg_time=dt.datetime(2026, 1, 2, 3, 4))
    results = [plain, attr, typed, when]
    for r in results:
        assert r.topic == "demo" and r.partition.broker_id == 1 and r.partition.partition_id in (0, 1, 2)
        assert r.message_id > 0 and r.append_time > 0 and r.append_offset % 28 == 0
    assert len({r.message_id for r in results}) == 4
    msgs = {m.message_id: m for ms in stored(cluster.broker_address, "demo", [0, 1, 2]).values() for m in ms}
    assert set(msgs) == {r.message_id for r in results}
    assert msgs[plain.message_id].data == b"plain" and msgs[plain.message_id].attributes == {}
    assert msgs[plain.message_id].flag == 0
    assert msgs[attr.message_id].attributes == {"k1": "v1", "k2": "v2"}
    m = msgs[typed.message_id]
    assert m.data == b"typed" and m.stream_id == "typeA" and m.msg_time == "202611221030"
    assert m.attributes.get("k") == "v"
    assert msgs[when.message_id].msg_time == "202601020304"


def test_async_send_many(cluster, stored) -> None:
    cluster.create_topic("bulk", partitions=4)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        futs = [
            p.send_async("bulk", b"m%05d" % i, attributes={"i": str(i)} if i % 2 else None) for i in range(2000)
        ]
        assert p.flush(timeout=30) == 0
        results = [f.result(timeout=1) for f in futs]
        assert p.metrics()["counters"]["producer.sent"] == 2000
    assert len({r.message_id for r in results}) == 2000
    assert {r.partition.partition_id for r in results} == {0, 1, 2, 3}  # round robin spreads
    got = stored(cluster.broker_address, "bulk", range(4))
    bodies = sorted(m.data for ms in got.values() for m in ms)
    assert bodies == [b"m%05d" % i for i in range(2000)]


def test_one_mib_payloads_and_size_limit(cluster, stored) -> None:
    cluster.create_topic("big", partitions=1)
    body = bytes(range(256)) * 4096  # exactly 1 MiB: the default max message size
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        r = p.send("big", body)
        f = p.send_async("big", body[::-1])
        r2 = f.result(timeout=30)
        with pytest.raises(MessageTooLargeError) as ei:
            p.send("big", body + b"x")
        assert ei.value.code == 445
        with pytest.raises(MessageTooLargeError):  # attributes count towards the limit, like Java
            p.send("big", body, attributes={"a": "b"})
        assert p.metrics()["counters"]["producer.sent"] == 2
    got = {m.message_id: m for m in stored(cluster.broker_address, "big", [0])[0]}
    assert got[r.message_id].data == body and got[r2.message_id].data == body[::-1]
    assert len(got) == 2


def test_topic_with_bigger_max_size(cluster, stored) -> None:
    cluster.create_topic("big2", partitions=1, max_msg_size=2 * 1024 * 1024)
    body = b"z" * (1024 * 1024 + 5000)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        r = p.send("big2", body)
    assert stored(cluster.broker_address, "big2", [0])[0][0].message_id == r.message_id


def test_key_routing_is_stable(cluster) -> None:
    cluster.create_topic("keyed", partitions=5)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        same = {p.send("keyed", b"x", key="user-42").partition.partition_id for _ in range(30)}
        assert len(same) == 1
        spread = {p.send("keyed", b"x", key=f"k{i}").partition.partition_id for i in range(60)}
        assert len(spread) >= 3
    # a custom partitioner wins over round robin
    with tubemq.Producer(cluster.master_address, partitioner=lambda topic, key, parts: parts[-1], **FAST) as p:
        assert {p.send("keyed", b"x").partition.partition_id for _ in range(5)} == {4}


def test_two_store_topic_uses_all_partition_ids(cluster) -> None:
    cluster.create_topic("store2", partitions=2, stores=2)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        ids = {p.send("store2", b"x").partition.partition_id for _ in range(12)}
        assert ids == {0, 1, 10000, 10001}
        assert sorted(x.partition_id for x in p.partitions("store2")) == [0, 1, 10000, 10001]


def test_partition_cap_from_the_client_config(cluster, caplog) -> None:
    """A topicInfo answer over ``max_partitions`` is refused whole (logged, nothing routed to it)."""
    cluster.create_topic("pcap", partitions=2, stores=2)
    with caplog.at_level("WARNING", logger="tubemq.producer"):
        with tubemq.Producer(cluster.master_address, max_partitions=3, **FAST) as p:
            with pytest.raises(TopicNotPublishedError):
                p.send("pcap", b"x")
            assert p.partitions("pcap") == []
    assert any("'pcap': 4 partitions over the limit 3 (max_partitions)" in r.getMessage() for r in caplog.records)
    with tubemq.Producer(cluster.master_address, max_partitions=4, max_total_partitions=4, **FAST) as p:
        assert p.send("pcap", b"x").partition.topic == "pcap"
        assert len(p.partitions("pcap")) == 4
    with tubemq.Producer(f"tubemq://{cluster.master_address}?max_partitions=2", **FAST) as p:
        assert p.config.max_partitions == 2


def test_local_validation_errors(cluster) -> None:
    cluster.create_topic("demo", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        with pytest.raises(InvalidMessageError) as ei:
            p.send("demo", b"")
        assert ei.value.code == 442
        with pytest.raises(InvalidMessageError) as ei:
            p.send(" ", b"x")
        assert ei.value.code == 441
        with pytest.raises(TypeError, match="'data' must be bytes-like, not str"):
            p.send("demo", "text")  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError):
            p.send("demo", b"x", attributes={"a,b": "c"})
        with pytest.raises(InvalidMessageError):
            p.send("demo", b"x", attributes={"$msgType$": "c"})
        with pytest.raises(InvalidMessageError):
            p.send("demo", b"x", msg_time="2026-11-22")
        with pytest.raises(TopicNotPublishedError):
            p.send("no_such_topic", b"x")
        with pytest.raises(TopicNotPublishedError):
            p.publish(["no_such_topic"])
        assert p.publish(["demo", "no_such_topic"]) == {"demo"}
        assert p.send("demo", b"still fine").partition.partition_id == 0
        assert "no_such_topic" not in p._aio._core.session.topics  # not carried in heartbeats
    with pytest.raises(ClientClosedError):
        p.send("demo", b"x")
    with pytest.raises(ClientClosedError):
        p.send_async("demo", b"x")
    assert p.flush() == 0
    p.close()  # idempotent


def test_bad_options_raise_config_errors(cluster) -> None:
    with pytest.raises(tubemq.errors.ConfigError) as ei:
        tubemq.Producer(cluster.master_address, rpc_timeout_ms=1)
    assert ei.value.field == "rpc_timeout_ms"
    with pytest.raises(tubemq.errors.ConfigError):
        tubemq.Producer(cluster.master_address, no_such_option=1)


def test_dsn_and_config_object(cluster) -> None:
    cluster.create_topic("demo", partitions=1)
    with tubemq.Producer(f"tubemq://{cluster.master_address}?heartbeat_period_ms=300&retries=1") as p:
        assert p.config.retries == 1
        assert p.send("demo", b"x").message_id > 0
    cfg = ProducerConfig(master=cluster.master_address, **FAST)
    with tubemq.Producer(config=cfg) as p:
        assert p.send("demo", b"y").message_id > 0


def test_thread_safety_many_threads_one_producer(cluster, stored) -> None:
    cluster.create_topic("mt", partitions=3)
    n_threads, per_thread = 8, 150
    errors: list[BaseException] = []
    results: list[tubemq.SendResult] = []
    lock = threading.Lock()
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        def worker(t: int) -> None:
            try:
                mine = []
                futs = []
                for i in range(per_thread):
                    if i % 3 == 0:
                        mine.append(p.send("mt", b"t%d-%d" % (t, i)))
                    else:
                        futs.append(p.send_async("mt", b"t%d-%d" % (t, i), key=f"t{t}" if i % 3 == 2 else None))
                mine.extend(f.result(timeout=60) for f in futs)
                with lock:
                    results.extend(mine)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert len(results) == n_threads * per_thread
    assert len({r.message_id for r in results}) == n_threads * per_thread
    bodies = sorted(m.data for ms in stored(cluster.broker_address, "mt", range(3)).values() for m in ms)
    assert bodies == sorted(b"t%d-%d" % (t, i) for t in range(n_threads) for i in range(per_thread))


def test_asyncio_producer(cluster, stored) -> None:
    cluster.create_topic("aio", partitions=2)

    async def main() -> list[tubemq.SendResult]:
        async with tubemq.aio.Producer(cluster.master_address, **FAST) as p:
            one = await p.send("aio", b"first", attributes={"a": "1"}, stream_id="s1")
            many = await asyncio.gather(*(p.send("aio", b"n%d" % i) for i in range(300)))
            assert await p.flush(5) == 0
            keyed = {(await p.send("aio", b"k", key=b"same")).partition.partition_id for _ in range(5)}
            assert len(keyed) == 1
            with pytest.raises(InvalidMessageError):
                await p.send("aio", b"")
        with pytest.raises(ClientClosedError):
            await p.send("aio", b"x")
        return [one, *many]

    results = asyncio.run(asyncio.wait_for(main(), 60))
    assert len({r.message_id for r in results}) == 301
    got = {m.message_id: m for ms in stored(cluster.broker_address, "aio", [0, 1]).values() for m in ms}
    assert got[results[0].message_id].stream_id == "s1"
    assert set(got) >= {r.message_id for r in results}


def test_asyncio_producer_lazy_start_and_bounded_pending(cluster) -> None:
    cluster.create_topic("aio2", partitions=1)

    async def main() -> None:
        p = tubemq.aio.Producer(cluster.master_address, max_pending=4, **FAST)
        try:
            results = await asyncio.gather(*(p.send("aio2", b"x%d" % i) for i in range(50)))
            assert len(results) == 50
            assert p.metrics()["gauges"]["producer.outstanding"] == 0
        finally:
            await p.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_send_async_future_can_fail_typed_and_is_concurrent_future(cluster) -> None:
    cluster.create_topic("demo", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        f = p.send_async("unknown_topic_x", b"x")
        assert isinstance(f, concurrent.futures.Future)
        with pytest.raises(TopicNotPublishedError):
            f.result(timeout=30)
        assert isinstance(f.exception(), TubeMQError)


def test_metrics_and_stats_callback(cluster, poll) -> None:
    cluster.create_topic("demo", partitions=1)
    snapshots: list[dict] = []
    with tubemq.Producer(cluster.master_address, stats_interval_ms=50, stats_callback=snapshots.append,
                         **FAST) as p:
        for _ in range(20):
            p.send("demo", b"x")
        poll(lambda: any(s["counters"].get("producer.sent") == 20 for s in snapshots), timeout=10)
        m = p.metrics()
        assert m["counters"]["producer.sent"] == 20 and m["counters"]["producer.failed"] == 0
        assert m["counters"]["master.registrations"] == 1
        assert m["latency"]["producer.send_latency"]["count"] >= 2  # sampled: 1 message in 8
        assert m["gauges"]["producer.outstanding"] == 0
    assert p._aio._core.session._stats_task is None  # the reporting task ends with the producer


def test_blocking_send_from_a_loop_callback_is_refused(cluster, poll) -> None:
    cluster.create_topic("demo", partitions=1)
    errors: list[BaseException] = []
    holder: dict[str, tubemq.Producer] = {}

    def callback(snapshot: dict) -> None:  # runs on the client's event-loop thread
        producer = holder.get("p")
        if producer is not None and not errors:
            try:
                producer.send("demo", b"from the loop thread")
            except TubeMQError as exc:
                errors.append(exc)

    with tubemq.Producer(cluster.master_address, stats_interval_ms=50, stats_callback=callback, **FAST) as p:
        holder["p"] = p
        poll(lambda: errors, timeout=10)  # refused at once instead of deadlocking the loop
        assert p.send_async("demo", b"x").result(timeout=30).message_id > 0
    assert "send_async" in str(errors[0])
