"""Batch write and read through ``format("tubemq")`` on real Spark ``local[2]`` and an embedded cluster."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

import pytest
from _support.spark import read_df

import tubemq

pytestmark = pytest.mark.spark


def test_batch_write_then_read_100k(spark: Any, tube: Any, topic_name: str) -> None:
    tube.create_topic(topic_name, partitions=3)
    n = 100_000
    df = spark.range(n).selectExpr(
        "concat('row-', cast(id as string)) as value",  # STRING values are sent as UTF-8
        "map('i', cast(id as string)) as attributes",
        "case when id % 2 = 0 then 'even' else 'odd' end as stream_id",
        "'ignored-column' as note",
    )
    (
        df.write.format("tubemq")
        .option("tubemq.master", tube.master_address)
        .option("topic", topic_name)
        .mode("append")
        .save()
    )

    # one scan checks everything (each Spark job costs seconds on a small machine)
    back = read_df(spark, tube.master_address, topic_name, includeAttributes="true")
    stats = (
        back.selectExpr(
            "cast(substring(cast(value as string), 5) as bigint) as n",
            "*",
        )
        .selectExpr(
            "count(*) as rows",
            "count(distinct value) as values",
            "min(n) as lo",
            "max(n) as hi",
            "sum(case when cast(value as string) = concat('row-', cast(n as string)) then 0 else 1 end) as bad_value",
            "count(distinct message_id) as ids",
            "count(distinct partition) as partitions",
            "count(distinct partition, offset) as positions",
            "min(offset) as first_offset",
            "sum(case when partition = concat('1:', topic, ':', cast(partition_id as string)) then 0 else 1 end) "
            "as bad_partition",
            "min(broker_id) as bmin",
            "max(broker_id) as bmax",
            f"sum(case when topic = '{topic_name}' then 0 else 1 end) as wrong_topic",
            # attributes survive and are the row's own; no system headers ($msgType$) among them
            "sum(case when attributes['i'] = cast(n as string) then 0 else 1 end) as bad_attr",
            "max(size(attributes)) as attrs",
            # stream ids survive and match the parity of the row number
            "sum(case when stream_id = case when n % 2 = 0 then 'even' else 'odd' end then 0 else 1 end) as bad_stream",
        )
        .collect()[0]
    )
    # n distinct well-formed values 'row-0' .. 'row-<n-1>': exactly the rows written
    assert (stats["rows"], stats["values"], stats["lo"], stats["hi"], stats["bad_value"]) == (
        n,
        n,
        0,
        n - 1,
        0,
    )
    assert stats["ids"] == n
    assert stats["partitions"] == 3
    # offset: the start of the fetch a row came in (a consumed message has no offset of its own)
    assert 1 <= stats["positions"] <= n and stats["first_offset"] == 0
    assert stats["bad_partition"] == 0  # partition = brokerId:topic:partitionId
    assert (stats["bmin"], stats["bmax"]) == (1, 1)
    assert stats["wrong_topic"] == 0
    assert stats["bad_attr"] == 0
    assert stats["attrs"] == 1
    assert stats["bad_stream"] == 0


def produce(master: str, topic: str, count: int) -> dict[int, list[tuple[int, bytes]]]:
    """Send ``count`` messages; per partition id, the (append offset, value) of each, in order."""
    sent: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    with tubemq.Producer(master) as producer:
        for i in range(count):
            value = b"m-%05d" % i
            result = producer.send(topic, value, attributes={"n": str(i)})
            sent[result.partition.partition_id].append((result.append_offset, value))
    for items in sent.values():
        items.sort()
    return sent


@pytest.mark.parametrize("stores", [1, 2], ids=["shared-store", "own-store"])
def test_offset_ranges_are_exact(spark: Any, tube: Any, topic_name: str, stores: int) -> None:
    # stores=1: both partitions share one store, so their offsets interleave (the TubeMQ default);
    # stores=2 with one partition each: every partition has its own store and dense offsets.
    topic = f"{topic_name}_{stores}"
    tube.create_topic(topic, partitions=3 - stores, stores=stores)
    sent = produce(tube.master_address, topic, 60)
    assert len(sent) == 2
    pids = sorted(sent)
    first, second = pids
    items = sent[first]
    lo, hi = items[5][0], items[15][0]
    start = {topic: {f"1:{first}": lo}}
    end = {topic: {f"1:{first}": hi}}

    from tubemq.spark import TubeMQDataSource

    spark.dataSource.register(TubeMQDataSource)  # explicit registration works as well as discovery
    df = read_df(
        spark,
        tube.master_address,
        topic,
        startingOffsets=json.dumps(start),
        endingOffsets=json.dumps(end),
    )
    rows = df.orderBy("partition_id", "offset").collect()
    got_first = [bytes(r["value"]) for r in rows if r["partition_id"] == first]
    assert sorted(got_first) == sorted(v for _, v in items[5:15])  # exactly [start, end): no more, no less
    got_second = [bytes(r["value"]) for r in rows if r["partition_id"] == second]
    assert sorted(got_second) == sorted(v for _, v in sent[second])  # unlisted partition: earliest .. latest
    # each row's offset is its fetch's exact start: at or before the message, never before the range
    true_offset = {v: o for o, v in items}
    for r in rows:
        if r["partition_id"] == first:
            assert lo <= r["offset"] <= true_offset[bytes(r["value"])]
    # a re-run (as a retried task would do) returns the same rows
    again = df.orderBy("partition_id", "offset").collect()
    assert sorted((r["value"], r["message_id"]) for r in again) == sorted((r["value"], r["message_id"]) for r in rows)

    # the two halves of a split range add up to the whole, without overlap; read with a schema naming
    # only the columns used (the source then builds only those, in the schema's order)
    mid = items[10][0]
    halves = []
    for a, b in ((lo, mid), (mid, hi)):
        part = read_df(
            spark,
            tube.master_address,
            topic,
            schema="partition_id INT, Offset BIGINT, value BINARY",
            startingOffsets=json.dumps({topic: {f"1:{first}": a}}),
            endingOffsets=json.dumps({topic: {f"1:{first}": b}}),
        )
        assert part.columns == ["partition_id", "Offset", "value"]
        part = part.where(f"partition_id = {first}")
        halves.append(sorted(bytes(r["value"]) for r in part.collect()))
    assert halves == [sorted(v for _, v in items[5:10]), sorted(v for _, v in items[10:15])]


def test_stream_id_filter_and_bad_partition(spark: Any, tube: Any, topic_name: str) -> None:
    tube.create_topic(topic_name, partitions=1)
    with tubemq.Producer(tube.master_address) as producer:
        for i in range(20):
            producer.send(topic_name, b"x%d" % i, stream_id="keep" if i % 4 == 0 else "drop")
    kept = read_df(spark, tube.master_address, topic_name, streamIds="keep").collect()
    assert sorted(bytes(r["value"]) for r in kept) == sorted(b"x%d" % i for i in range(0, 20, 4))
    assert {r["stream_id"] for r in kept} == {"keep"}

    with pytest.raises(Exception) as info:
        (
            spark.read.format("tubemq")
            .option("tubemq.master", tube.master_address)
            .option("assign", json.dumps({topic_name: ["1:7"]}))
            .load()
            .collect()
        )
    assert re.search(r"assigned partitions \['1:7'\] of topic '\w+' exists", str(info.value))
