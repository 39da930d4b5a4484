"""Spark Kafka options: the ones the tubemq source does not implement are errors that say so; the
timestamp options, minPartitions and includeHeaders work (planning checked directly against the
embedded server, then one real Spark local[2] job reads through all of them)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import tubemq
from tubemq.errors import ConfigError
from tubemq.spark.offsets import ENTRY_SIZE
from tubemq.spark.options import parse_read_options

BASE = {"tubemq.master": "127.0.0.1:8715", "subscribe": "topic-a"}


def _err(streaming: bool | None = False, **extra: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_read_options({**BASE, **extra}, streaming=streaming)
    return str(info.value)


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ("minOffsetsPerTrigger", "never delays a micro-batch"),
        ("maxTriggerDelay", "only goes with minOffsetsPerTrigger"),
        ("subscribePattern", "named topics"),
        ("maxRecordsPerPartition", "minPartitions"),
        ("kafka.bootstrap.servers", "tubemq.master"),
        ("kafka.group.id", "do not apply"),
    ],
)
def test_unimplemented_kafka_options_are_errors(option: str, words: str) -> None:
    msg = _err(**{option: "10"})
    assert words in msg and "did you mean" not in msg


def test_timestamp_option_checks() -> None:
    assert "adminUrl" in _err(startingTimestamp="1700000000000")
    assert "adminUrl" in _err(endingOffsetsByTimestamp='{"topic-a": {"0": 1}}')
    assert "only for batch" in _err(streaming=True, endingTimestamp="1", adminUrl="h:1")
    assert "'error' or 'latest'" in _err(startingTimestamp="1", adminUrl="h:1", startingOffsetsByTimestampStrategy="x")
    assert "not read" in _err(startingOffsetsByTimestamp='{"other": {"0": 1}}', adminUrl="h:1")
    assert "epoch milliseconds" in _err(startingOffsetsByTimestamp='{"topic-a": {"0": -5}}', adminUrl="h:1")
    assert "valueFormat=raw" in _err(includeHeaders="true", valueFormat="inlongmsg")
    assert "not both" in _err(pollTimeoutMs="1000", **{"kafkaConsumer.pollTimeoutMs": "2000"})
    opts = parse_read_options({**BASE, "kafkaConsumer.pollTimeoutMs": "2500", "startingTimestamp": "5",
                               "startingOffsetsByTimestamp": '{"topic-a": {"0": 9}}', "adminUrl": "h:1",
                               "minPartitions": "4", "includeHeaders": "true"}, streaming=False)
    assert opts.poll_timeout_ms == 2500 and opts.starting_timestamp == 5  # Kafka's precedence
    assert opts.admin_url == "http://h:1" and opts.min_partitions == 4 and opts.include_headers
    by = parse_read_options({**BASE, "startingOffsetsByTimestamp": '{"topic-a": {"0": 9, "1:10000": 8}}',
                             "adminUrl": "h:1"}, streaming=True)
    assert by.starting_timestamp == {"topic-a": {"*:0": 9, "1:10000": 8}}


def test_split_ranges() -> None:
    pytest.importorskip("pyspark")
    from tubemq.spark.reader import TubeMQInputPartition, split_ranges

    big = TubeMQInputPartition("t", 1, 0, 0, 30 * ENTRY_SIZE)
    small = TubeMQInputPartition("t", 1, 1, 0, 10 * ENTRY_SIZE)
    out = split_ranges([big, small], 4)
    assert len(out) >= 4 and all(r.end > r.start and (r.end - r.start) % ENTRY_SIZE == 0 for r in out)
    for part in (0, 1):  # the pieces of a partition tile its range exactly
        pieces = sorted((r.start, r.end) for r in out if r.partition_id == part)
        assert pieces[0][0] == 0 and all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))
        assert pieces[-1][1] == (30 if part == 0 else 10) * ENTRY_SIZE
    assert split_ranges([big], None) == [big]


def _load(tube: Any, topic: str) -> tuple[int, int]:
    """4 ``early`` messages, then (after ``t1``) 4 ``mid``, then (after ``t2``) 4 ``late``; attributes on all."""
    tube.create_topic(topic, partitions=1)
    with tubemq.Producer(tube.master_address) as p:
        marks = []
        for phase in ("early", "mid", "late"):
            for i in range(4):
                p.send(topic, f"{phase}{i}".encode(), attributes={"phase": phase, "n": str(i)})
            time.sleep(0.05)
            marks.append(int(time.time() * 1000))
            time.sleep(0.05)
    return marks[0], marks[1]


def test_timestamp_planning_against_the_server(tube: Any, topic_name: str) -> None:
    pytest.importorskip("pyspark")
    from tubemq.spark._compat import TubeMQSparkError
    from tubemq.spark.reader import plan_batch_ranges
    from tubemq.spark.stream import TubeMQStreamReader

    t1, t2 = _load(tube, topic_name)
    common = {"tubemq.master": tube.master_address, "subscribe": topic_name, "adminUrl": tube.admin_url}
    opts = parse_read_options({**common, "startingTimestamp": str(t1), "endingTimestamp": str(t2)}, streaming=False)
    (r,) = plan_batch_ranges(opts)
    assert (r.start, r.end) == (4 * ENTRY_SIZE, 8 * ENTRY_SIZE)
    opts = parse_read_options({**common, "startingOffsetsByTimestamp": f'{{"{topic_name}": {{"0": {t2}}}}}'},
                              streaming=False)
    (r,) = plan_batch_ranges(opts)
    assert (r.start, r.end) == (8 * ENTRY_SIZE, 12 * ENTRY_SIZE)
    future = str(t2 + 3_600_000)
    with pytest.raises(TubeMQSparkError, match="no message at or after"):
        plan_batch_ranges(parse_read_options({**common, "startingTimestamp": future}, streaming=False))
    late = parse_read_options({**common, "startingTimestamp": future, "startingOffsetsByTimestampStrategy": "latest"},
                              streaming=True)
    reader = TubeMQStreamReader(late, None)  # type: ignore[arg-type]
    try:
        assert reader.initialOffset() == {topic_name: {"1:0": 12 * ENTRY_SIZE}}
    finally:
        reader.stop()


def test_spark_job_with_timestamps_min_partitions_and_headers(spark: Any, tube: Any, topic_name: str) -> None:
    t1, t2 = _load(tube, topic_name)
    df = (
        spark.read.format("tubemq")
        .option("tubemq.master", tube.master_address)
        .option("subscribe", topic_name)
        .option("adminUrl", tube.admin_url)
        .option("startingTimestamp", str(t1))
        .option("endingTimestamp", str(t2))
        .option("minPartitions", "3")
        .option("includeHeaders", "true")
        .load()
    )
    started = time.monotonic()
    rows = df.select("value", "headers", "offset").collect()
    print(f"spark read: {time.monotonic() - started:.2f}s, {df.rdd.getNumPartitions()} partitions")
    assert df.rdd.getNumPartitions() >= 3
    assert sorted(bytes(r.value) for r in rows) == [b"mid0", b"mid1", b"mid2", b"mid3"]
    headers = {bytes(r.value): {h.key: bytes(h.value) for h in r.headers} for r in rows}
    assert headers[b"mid2"] == {"phase": b"mid", "n": b"2"}
