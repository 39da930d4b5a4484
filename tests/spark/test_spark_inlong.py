"""``valueFormat=inlongmsg`` on real Spark ``local[2]`` and an embedded cluster.

Read: containers built by ``InLongMsgBuilder`` (v1 raw, v2 snappy, v4 binary) explode into one row
per record. Write: rows packed into containers, read back both through Spark and by decoding the
TubeMQ messages directly.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import tubemq
from tubemq.inlongmsg import InLongMsgBuilder, binary_message, decode

pytestmark = pytest.mark.spark

DT_MS = 1700000000000


def _read(spark: Any, master: str, topic: str) -> Any:
    return (spark.read.format("tubemq").option("tubemq.master", master).option("subscribe", topic)
            .option("valueFormat", "inlongmsg").load())


def test_read_explodes_containers(spark: Any, tube: Any, topic_name: str) -> None:
    tube.create_topic(topic_name, partitions=2)
    expected: list[tuple[bytes, str | None, str | None, int]] = []
    containers = []
    for c in range(6):
        b = InLongMsgBuilder(version=1 + c % 2, compress=c % 2 == 1)
        for i in range(40):
            sid = f"s{i % 3}"
            b.add(f"groupId=g{c}&streamId={sid}&dt={DT_MS + c}", b"rec-%d-%d" % (c, i))
            expected.append((b"rec-%d-%d" % (c, i), f"g{c}", sid, DT_MS + c))
        containers.append(b.build())
    v4 = InLongMsgBuilder(4, compress=True)
    v4.add_binary(binary_message([b"bin-0", b"bin-1", b""], "m=0", group_id=7, stream_id=8, data_time=DT_MS // 1000))
    containers.append(v4.build())
    expected += [(b"bin-0", "7", "8", DT_MS), (b"bin-1", "7", "8", DT_MS), (b"", "7", "8", DT_MS)]
    with tubemq.Producer(tube.master_address) as producer:
        for data in containers:
            producer.send(topic_name, data)

    df = _read(spark, tube.master_address, topic_name)
    assert [f.name for f in df.schema.fields] == [
        "body", "attributes", "group_id", "stream_id", "dt", "topic", "partition", "broker_id", "partition_id",
        "offset", "message_id", "record_index",
    ]
    rows = df.collect()
    got = sorted((bytes(r["body"]), r["group_id"], r["stream_id"],
                  int(r["dt"].replace(tzinfo=dt.timezone.utc).timestamp() * 1000)) for r in rows)
    assert got == sorted(expected)
    for r in rows:
        assert r["attributes"]["groupId"] == r["group_id"] and r["topic"] == topic_name
        assert r["partition"] == f"{r['broker_id']}:{topic_name}:{r['partition_id']}"
    # records of one message share its message id and offset (its fetch's); record_index numbers them 0..n-1
    per_msg: dict[tuple[str, int], list[int]] = {}
    offsets: dict[tuple[str, int], set[int]] = {}
    for r in rows:
        per_msg.setdefault((r["partition"], r["message_id"]), []).append(r["record_index"])
        offsets.setdefault((r["partition"], r["message_id"]), set()).add(r["offset"])
    assert all(len(o) == 1 for o in offsets.values())
    assert len(per_msg) == len(containers)
    assert sorted(len(v) for v in per_msg.values()) == sorted([40] * 6 + [3])
    assert all(sorted(v) == list(range(len(v))) for v in per_msg.values())


def test_read_fails_on_plain_messages(spark: Any, tube: Any, topic_name: str) -> None:
    tube.create_topic(topic_name, partitions=1)
    with tubemq.Producer(tube.master_address) as producer:
        producer.send(topic_name, b"plain bytes, no container")
    with pytest.raises(Exception, match="not an InLong container"):
        _read(spark, tube.master_address, topic_name).collect()


def test_write_packs_rows_into_containers(spark: Any, tube: Any, topic_name: str) -> None:
    tube.create_topic(topic_name, partitions=1)
    n = 3000
    df = spark.range(n).selectExpr(
        "concat('body-', cast(id as string)) as body",
        "map('m', '0') as attributes",
        "'grp' as group_id",
        "concat('s', cast(id % 2 as string)) as stream_id",
        "timestamp_millis(1700000000000) as dt",
    )
    (df.write.format("tubemq").option("tubemq.master", tube.master_address).option("topic", topic_name)
     .option("valueFormat", "inlongmsg").option("capacity", "2000").mode("append").save())

    # straight from TubeMQ: containers grouped by attribute string, none much over capacity
    seen: list[tuple[str, bytes]] = []
    messages = 0
    with tubemq.Consumer(tube.master_address, group=f"{topic_name}_chk", topics=[topic_name],
                         consume_from="earliest", iter_timeout_ms=60000) as consumer:
        for msg in consumer:
            m = decode(msg.data)
            messages += 1
            assert len(m.attrs) == 1 and len(msg.data) < 2000 + 200
            assert msg.stream_id == m.attrs[0].split("streamId=")[1].split("&")[0]
            seen += [(a, bytes(b)) for a, b in m]
            if len(seen) >= n:
                break
    assert len(seen) == n and messages > n * 10 // 2000
    assert sorted(b for _, b in seen) == sorted(b"body-%d" % i for i in range(n))
    attrs = {a for a, _ in seen}
    assert attrs == {f"m=0&groupId=grp&streamId=s{k}&dt={DT_MS}" for k in (0, 1)}

    # and back through Spark
    back = _read(spark, tube.master_address, topic_name)
    stats = back.selectExpr("count(*) as rows", "count(distinct body) as bodies",
                            "sum(case when group_id = 'grp' then 0 else 1 end) as bad_group",
                            f"sum(case when dt = timestamp_millis({DT_MS}) then 0 else 1 end) as bad_dt").collect()[0]
    assert (stats["rows"], stats["bodies"], stats["bad_group"], stats["bad_dt"]) == (n, n, 0, 0)


def test_options_are_checked(spark: Any, tube: Any, topic_name: str) -> None:
    with pytest.raises(Exception, match="valueFormat"):
        (spark.read.format("tubemq").option("tubemq.master", tube.master_address).option("subscribe", topic_name)
         .option("valueFormat", "tdmsg").load())
    df = spark.range(1).selectExpr("cast(id as string) as other")
    with pytest.raises(Exception, match="body"):
        (df.write.format("tubemq").option("tubemq.master", tube.master_address).option("topic", topic_name)
         .option("valueFormat", "inlongmsg").mode("append").save())


def test_streaming_read_explodes_containers(spark: Any, tube: Any, topic_name: str, tmp_path: Any) -> None:
    tube.create_topic(topic_name, partitions=1)
    b = InLongMsgBuilder(version=1, compress=False)
    for i in range(25):
        b.add(f"groupId=g&streamId=s&dt={DT_MS}", b"s-%d" % i)
    with tubemq.Producer(tube.master_address) as producer:
        producer.send(topic_name, b.build())
    df = (spark.readStream.format("tubemq").option("tubemq.master", tube.master_address)
          .option("subscribe", topic_name).option("startingOffsets", "earliest")
          .option("valueFormat", "inlongmsg").load()
          .selectExpr("cast(body as string) as b", "stream_id", "record_index"))
    query = (df.writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r["record_index"], r["b"]) for r in rows) == [(i, f"s-{i}") for i in range(25)]
    assert {r["stream_id"] for r in rows} == {"s"}
