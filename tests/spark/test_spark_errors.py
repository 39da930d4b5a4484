"""Bad options fail when the query is planned, in real Spark, with a message naming the option."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.spark


def failure(fn: Any) -> str:
    with pytest.raises(Exception) as info:  # Spark wraps Python errors (AnalysisException, PythonException)
        fn()
    return str(info.value)


def test_bad_read_options_fail_at_load(spark: Any) -> None:
    msg = failure(lambda: spark.read.format("tubemq").option("subscribe", "t").load().schema)
    assert "tubemq.master" in msg and "is required" in msg

    msg = failure(lambda: spark.read.format("tubemq").option("tubemq.master", "127.0.0.1:1").load().schema)
    assert "subscribe" in msg and "assign" in msg

    msg = failure(
        lambda: (
            spark.read.format("tubemq")
            .option("tubemq.master", "127.0.0.1:1")
            .option("subscribe", "t")
            .option("startingOffsets", '{"t": {"1:0": 13}}')
            .load()
            .schema
        )
    )
    assert "startingOffsets" in msg and "multiples of 28" in msg

    msg = failure(
        lambda: (
            spark.read.format("tubemq")
            .option("tubemq.master", "127.0.0.1:1")
            .option("subscribe", "t")
            .option("startingOffset", "earliest")
            .load()
            .schema
        )
    )
    assert "did you mean 'startingOffsets'" in msg


def test_batch_only_and_stream_only_options(spark: Any) -> None:
    def batch() -> Any:
        return (
            spark.read.format("tubemq")
            .option("tubemq.master", "127.0.0.1:1")
            .option("subscribe", "t")
            .option("maxOffsetsPerTrigger", "10")
            .load()
            .collect()
        )

    msg = failure(batch)
    assert "maxOffsetsPerTrigger" in msg and "only for streaming" in msg

    def stream() -> Any:
        df = (
            spark.readStream.format("tubemq")
            .option("tubemq.master", "127.0.0.1:1")
            .option("subscribe", "t")
            .option("endingOffsets", "latest")
            .load()
        )
        q = df.writeStream.format("noop").start()
        try:
            q.awaitTermination(60)
        finally:
            q.stop()

    msg = failure(stream)
    assert "endingOffsets" in msg and "only for batch" in msg


def test_user_schema_of_another_type_is_refused(spark: Any) -> None:
    msg = failure(
        lambda: (
            spark.read.format("tubemq")
            .schema("value STRING")
            .option("tubemq.master", "127.0.0.1:1")
            .option("subscribe", "t")
            .load()
            .collect()
        )
    )
    assert "column 'value' is BINARY, not STRING" in msg


def test_bad_write_options_and_columns(spark: Any) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    msg = failure(
        lambda: df.write.format("tubemq").option("tubemq.master", "127.0.0.1:1").mode("append").save()
    )
    assert "topic" in msg and "'topic' column" in msg

    msg = failure(
        lambda: (
            df.write.format("tubemq")
            .option("tubemq.master", "127.0.0.1:1")
            .option("topic", "t")
            .mode("overwrite")
            .save()
        )
    )
    assert "append-only" in msg

    ints = spark.range(3).selectExpr("id as value")
    msg = failure(
        lambda: (
            ints.write.format("tubemq")
            .option("tubemq.master", "127.0.0.1:1")
            .option("topic", "t")
            .mode("append")
            .save()
        )
    )
    assert "'value'" in msg and "BINARY or STRING" in msg

    msg = failure(
        lambda: (
            df.write.format("tubemq")
            .option("tubemq.master", "127.0.0.1:1")
            .option("topic", "t")
            .option("tubemq.max_pending", "0")
            .mode("append")
            .save()
        )
    )
    assert "tubemq.max_pending" in msg


def test_offsets_beyond_the_data_fail_at_planning(spark: Any, tube: Any, topic_name: str) -> None:
    tube.create_topic(topic_name, partitions=1)
    msg = failure(
        lambda: (
            spark.read.format("tubemq")
            .option("tubemq.master", tube.master_address)
            .option("subscribe", topic_name)
            .option("endingOffsets", f'{{"{topic_name}": {{"1:0": 2800}}}}')
            .load()
            .collect()
        )
    )
    assert "endingOffsets 2800" in msg and "beyond the latest offset 0" in msg

    msg = failure(
        lambda: (
            spark.read.format("tubemq")
            .option("tubemq.master", tube.master_address)
            .option("subscribe", "no_such_topic")
            .load()
            .collect()
        )
    )
    assert "subscribe: topic(s) no_such_topic not deployed" in msg
