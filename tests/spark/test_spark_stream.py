"""Structured Streaming through ``format("tubemq")``: availableNow, restarts, admission control, sinks."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from _support.spark import read_df

import tubemq

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 120


def produce(master: str, topic: str, values: list[bytes]) -> None:
    with tubemq.Producer(master) as producer:
        futures = [producer.send_async(topic, v) for v in values]
        for f in futures:
            f.result(30)


def stream_df(spark: Any, master: str, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("tubemq").option("tubemq.master", master).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df: Any, out: Path, checkpoint: Path) -> Any:
    """Run ``df`` to a parquet sink with Trigger.AvailableNow; returns the finished query."""
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    assert finished, "the availableNow query did not finish"
    if query.exception() is not None:
        raise AssertionError(f"streaming query failed: {query.exception()}")
    return query


def input_rows(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_available_now_then_restart_reads_only_new_rows(
    spark: Any, tube: Any, topic_name: str, tmp_path: Path
) -> None:
    tube.create_topic(topic_name, partitions=2)  # two partitions sharing one store
    first = [b"a-%03d" % i for i in range(40)]
    produce(tube.master_address, topic_name, first)
    dash = f"dash_{topic_name}"[:60]
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def stream() -> Any:
        return stream_df(
            spark, tube.master_address, topic_name, startingOffsets="earliest", commitOffsetsToGroup=dash
        ).selectExpr("cast(value as string) as v", "partition", "offset", "message_id")

    q1 = run_available_now(stream(), out, checkpoint)
    assert sum(input_rows(q1)) == 40
    got = spark.read.parquet(str(out))
    assert sorted(r["v"] for r in got.collect()) == sorted(v.decode() for v in first)

    second = [b"b-%03d" % i for i in range(25)]
    produce(tube.master_address, topic_name, second)
    q2 = run_available_now(stream(), out, checkpoint)  # same checkpoint: a restart
    assert sum(input_rows(q2)) == 25  # only the new rows
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 65
    assert sorted(r["v"] for r in rows) == sorted(v.decode() for v in first + second)
    assert len({r["message_id"] for r in rows}) == 65

    # the checkpointed offsets are {"topic": {"brokerId:partitionId": offset}}
    logged = sorted(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    ends = [json.loads(p.read_text().strip().splitlines()[-1]) for p in logged]
    assert set(ends[-1]) == {topic_name}
    assert set(ends[-1][topic_name]) == {"1:0", "1:1"}
    # Spark reports a micro-batch done to the source when the next one starts, so the dashboard group
    # holds the end of the batch before the last one (here: the end of the first run)
    detail = tube.group_offsets(dash)
    assert {f"1:{d['partition_id']}": d["committed_offset"] for d in detail} == ends[-2][topic_name]


@pytest.mark.parametrize(
    "layout",
    [{"partitions": 1, "stores": 3}, {"partitions": 3}],
    ids=["alone-in-their-stores", "one-shared-store"],
)
def test_max_offsets_per_trigger_counts_messages(
    spark: Any, tube: Any, topic_name: str, tmp_path: Path, layout: dict[str, int]
) -> None:
    """Three partitions, each alone in its store or all in one (their index entries interleave): the
    limit is messages per micro-batch, as with Kafka, not index entries per partition (which gave a
    shared store's partitions about a third of it)."""
    tube.create_topic(topic_name, **layout)
    values = [b"m-%04d" % i for i in range(150)]
    produce(tube.master_address, topic_name, values)
    df = stream_df(
        spark, tube.master_address, topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="40"
    ).selectExpr("cast(value as string) as v")
    query = run_available_now(df, tmp_path / "out", tmp_path / "checkpoint")
    assert input_rows(query) == [40, 40, 40, 30]
    got = sorted(r["v"] for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert got == sorted(v.decode() for v in values)


def test_streaming_write_from_file_source(spark: Any, tube: Any, topic_name: str, tmp_path: Path) -> None:
    tube.create_topic(topic_name, partitions=2)
    src = tmp_path / "in"
    src.mkdir()
    expected = []
    for f in range(3):
        lines = []
        for i in range(50):
            value = f"file{f}-row{i}"
            expected.append(value)
            lines.append(json.dumps({"value": value, "kind": f"k{i % 3}"}))
        (src / f"part-{f}.json").write_text("\n".join(lines) + "\n")
    df = (
        spark.readStream.schema("value STRING, kind STRING")
        .json(str(src))
        .selectExpr(
            "value",
            "map('kind', kind) as attributes",
            "kind as stream_id",
            "kind as key",  # routes by hash: one kind, one partition
            "timestamp'2024-05-06 07:08:09' as timestamp",  # -> msgTime 202405060708 (minute precision)
        )
    )
    query = (
        df.writeStream.format("tubemq")
        .option("tubemq.master", tube.master_address)
        .option("topic", topic_name)
        .option("stampAttributes", "true")
        .option("msgTimeZone", "UTC")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    assert query.exception() is None

    back = read_df(spark, tube.master_address, topic_name, includeAttributes="true", msgTimeZone="UTC").collect()
    assert sorted(bytes(r["value"]).decode() for r in back) == sorted(expected)
    # the test session's time zone is UTC, so Spark hands back naive UTC datetimes
    assert {r["timestamp"] for r in back} == {datetime.datetime(2024, 5, 6, 7, 8)}
    for r in back:
        attrs = dict(r["attributes"])
        assert attrs["kind"] == r["stream_id"]
        assert attrs["sparkQuery"] == str(query.id)  # the streaming query id
        assert attrs["sparkBatch"] == "0"
    by_kind: dict[str, set[str]] = {}
    for r in back:
        by_kind.setdefault(r["stream_id"], set()).add(r["partition"])
    assert sorted(by_kind) == ["k0", "k1", "k2"] and all(len(p) == 1 for p in by_kind.values())
    stamps = {(dict(r["attributes"])["sparkTask"], dict(r["attributes"])["sparkSeq"]) for r in back}
    assert len(stamps) == len(expected)  # (task, sequence) identifies every row of the batch

    # a complete-mode (overwriting) streaming write is refused with a clear message
    agg = spark.readStream.schema("value STRING, kind STRING").json(str(src)).groupBy("kind").count()
    with pytest.raises(Exception) as info:
        q = (
            agg.selectExpr("kind as value")
            .writeStream.format("tubemq")
            .outputMode("complete")
            .option("tubemq.master", tube.master_address)
            .option("topic", topic_name)
            .option("checkpointLocation", str(tmp_path / "checkpoint2"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(QUERY_TIMEOUT_S)
        finally:
            q.stop()
    assert "append-only" in str(info.value)
