"""The executor-side range reader on its own (no JVM): exact ranges, early close, broker restarts."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import tubemq
from tubemq.spark.options import parse_read_options
from tubemq.spark.reader import TubeMQInputPartition, plan_batch_ranges
from tubemq.spark.schema import read_schema
from tubemq.spark.task import read_partition


def options(master: str, topic: str, **extra: str) -> Any:
    return parse_read_options(
        {
            "tubemq.master": master,
            "subscribe": topic,
            "arrowBatchSize": "100",
            "fetchOffset.retryIntervalMs": "200",
            "tubemq.heartbeat_period_ms": "1000",  # the test cluster expires registrations after 6 s
            **extra,
        },
        streaming=False,
    )


def fill(master: str, topic: str, count: int) -> list[bytes]:
    values = [b"v-%05d" % i for i in range(count)]
    with tubemq.Producer(master) as producer:
        for f in [producer.send_async(topic, v) for v in values]:
            f.result(30)
    return values


def rows(batches: Any) -> list[tuple[bytes, int]]:
    out = []
    for batch in batches:
        d = batch.to_pydict()
        out.extend(zip(d["value"], d["message_id"], strict=True))
    return out


def test_read_partition_is_exact_and_repeatable(cluster: Any) -> None:
    cluster.create_topic("ranges", partitions=2)
    values = fill(cluster.master_address, "ranges", 600)
    opts = options(cluster.master_address, "ranges")
    plan = plan_batch_ranges(opts)
    assert len(plan) == 2
    schema = read_schema(False)
    first = [rows(read_partition(opts, schema, p)) for p in plan]
    assert sorted(v for part in first for v, _ in part) == values
    assert [rows(read_partition(opts, schema, p)) for p in plan] == first  # a retried task: same rows
    # a range split in two at a broker offset: the halves are disjoint and complete
    p = plan[0]
    mid = p.start + (p.end - p.start) // 56 * 28
    halves = [
        rows(read_partition(opts, schema, TubeMQInputPartition(p.topic, p.broker_id, p.partition_id, a, b)))
        for a, b in ((p.start, mid), (mid, p.end))
    ]
    assert halves[0] and halves[1]
    assert halves[0] + halves[1] == first[0]


def test_closing_early_releases_the_consumer(cluster: Any) -> None:
    cluster.create_topic("early", partitions=1)
    fill(cluster.master_address, "early", 500)
    opts = options(cluster.master_address, "early")
    (part,) = plan_batch_ranges(opts)
    before = threading.active_count()
    gen = read_partition(opts, read_schema(False), part)
    assert next(gen).num_rows == 100
    gen.close()  # what Spark does after a LIMIT is satisfied
    assert threading.active_count() <= before  # the task's loop thread is gone


def test_broker_restart_mid_range_resumes_without_duplicates(cluster: Any, caplog: Any) -> None:
    cluster.create_topic("restart", partitions=2)
    fill(cluster.master_address, "restart", 1000)
    opts = options(cluster.master_address, "restart")
    part = plan_batch_ranges(opts)[0]
    expected = rows(read_partition(opts, read_schema(False), part))
    assert len(expected) > 300

    caplog.set_level(logging.WARNING, logger="tubemq.spark.task")
    caplog.set_level(logging.WARNING, logger="tubemq.consumer.partitions")
    got: list[tuple[bytes, int]] = []
    gen = read_partition(opts, read_schema(False), part)
    try:
        got.extend(rows([next(gen)]))
        cluster.stop_broker()
        cluster.start_broker()
        got.extend(rows(gen))
    finally:
        gen.close()
    assert got == expected
    # the restart really happened under the read: the bound consumer attached the partition again
    # at its position, or (a failure it raised) the task resumed with a fresh consumer
    assert "its broker closed the connection" in caplog.text or "resuming at offset" in caplog.text


@pytest.mark.parametrize("fail", [True, False])
def test_partition_gone_at_read_time(cluster: Any, fail: bool) -> None:
    cluster.create_topic("gone", partitions=1)
    fill(cluster.master_address, "gone", 10)
    opts = options(cluster.master_address, "gone", failOnDataLoss=str(fail).lower())
    ghost = TubeMQInputPartition("gone", 1, 7, 0, 280)  # planned, but no such partition any more
    if fail:
        from tubemq.spark import TubeMQSparkError

        with pytest.raises(TubeMQSparkError, match="partition 1:7 of topic 'gone' is gone"):
            list(read_partition(opts, read_schema(False), ghost))
    else:
        assert list(read_partition(opts, read_schema(False), ghost)) == []


def test_range_ending_in_siblings_entries_completes_at_once(cluster: Any) -> None:
    """The rest of a range holds only the other partition's entries (one store): the task ends when
    the position passes them, long before pollTimeoutMs (which it would otherwise wait out)."""
    cluster.create_topic("sibtail", partitions=2)
    with tubemq.Producer(cluster.master_address) as producer:
        mine = [producer.send("sibtail", b"p%d" % i, key="a") for i in range(5)]
        pid = mine[0].partition.partition_id
        sibling_key = None
        for k in "bcdefghijklmnopqrstuvwxyz":  # a key of the other partition
            r = producer.send("sibtail", b"k" + k.encode(), key=k)
            if r.partition.partition_id == pid:
                mine.append(r)
            else:
                sibling_key = k
                break
        assert sibling_key is not None
        for i in range(200):
            assert producer.send("sibtail", b"s%d" % i, key=sibling_key).partition.partition_id != pid
    opts = options(cluster.master_address, "sibtail", pollTimeoutMs="3600000")
    part = [p for p in plan_batch_ranges(opts) if p.partition_id == pid][0]
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.extend(rows(read_partition(opts, read_schema(False), part))), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the read task waited for pollTimeoutMs at the end of its range"
    assert [m for _, m in got] == [r.message_id for r in mine]  # exactly the partition's messages, in order
