"""Bad options fail when the query is planned, in real Spark, with a message naming the option."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.spark


MASTER = "127.0.0.1:1"  # nothing listens: these options must fail before any connection


def failure(fn: Any) -> str:
    with pytest.raises(Exception) as info:  # Spark wraps Python errors (AnalysisException, PythonException)
        fn()
    return str(info.value)


def read_failure(spark: Any, options: dict[str, str], *, schema: str | None = None, collect: bool = False) -> str:
    """The message of the failure of a batch read with ``options`` (at ``.load()``, or at ``.collect()``)."""

    def run() -> Any:
        reader = spark.read.format("tubemq")
        if schema is not None:
            reader = reader.schema(schema)
        df = reader.options(**options).load()
        return df.collect() if collect else df.schema

    return failure(run)


def write_failure(df: Any, options: dict[str, str], mode: str = "append") -> str:
    """The message of the failure of ``df.write`` with ``options``."""
    return failure(lambda: df.write.format("tubemq").options(**options).mode(mode).save())


def test_bad_read_options_fail_at_load(spark: Any) -> None:
    msg = read_failure(spark, {"subscribe": "t"})
    assert "tubemq.master" in msg and "is required" in msg

    msg = read_failure(spark, {"tubemq.master": MASTER})
    assert "subscribe" in msg and "assign" in msg

    msg = read_failure(spark, {"tubemq.master": MASTER, "subscribe": "t", "startingOffsets": '{"t": {"1:0": 13}}'})
    assert "startingOffsets" in msg and "multiples of 28" in msg

    msg = read_failure(spark, {"tubemq.master": MASTER, "subscribe": "t", "startingOffset": "earliest"})
    assert "did you mean 'startingOffsets'" in msg


def test_batch_only_and_stream_only_options(spark: Any) -> None:
    msg = read_failure(spark, {"tubemq.master": MASTER, "subscribe": "t", "maxOffsetsPerTrigger": "10"},
                       collect=True)
    assert "maxOffsetsPerTrigger" in msg and "only for streaming" in msg

    def stream() -> Any:
        df = (
            spark.readStream.format("tubemq")
            .options(**{"tubemq.master": MASTER, "subscribe": "t", "endingOffsets": "latest"})
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
    msg = read_failure(spark, {"tubemq.master": MASTER, "subscribe": "t"}, schema="value STRING", collect=True)
    assert "column 'value' is BINARY, not STRING" in msg


def test_bad_write_options_and_columns(spark: Any) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    msg = write_failure(df, {"tubemq.master": MASTER})
    assert "topic" in msg and "'topic' column" in msg

    msg = write_failure(df, {"tubemq.master": MASTER, "topic": "t"}, mode="overwrite")
    assert "append-only" in msg

    msg = write_failure(spark.range(3).selectExpr("id as value"), {"tubemq.master": MASTER, "topic": "t"})
    assert "'value'" in msg and "BINARY or STRING" in msg

    msg = write_failure(df, {"tubemq.master": MASTER, "topic": "t", "tubemq.max_pending": "0"})
    assert "tubemq.max_pending" in msg


def test_offsets_beyond_the_data_fail_at_planning(spark: Any, tube: Any, topic_name: str) -> None:
    tube.create_topic(topic_name, partitions=1)
    msg = read_failure(spark, {"tubemq.master": tube.master_address, "subscribe": topic_name,
                               "endingOffsets": f'{{"{topic_name}": {{"1:0": 2800}}}}'}, collect=True)
    assert "endingOffsets 2800" in msg and "beyond the latest offset 0" in msg

    msg = read_failure(spark, {"tubemq.master": tube.master_address, "subscribe": "no_such_topic"}, collect=True)
    assert "subscribe: topic(s) no_such_topic not deployed" in msg


def test_write_to_a_missing_topic_fails_at_planning(spark: Any, tube: Any) -> None:
    """The cause in the driver's exception, on one line, before any task ran (no executor log)."""
    df = spark.range(3).selectExpr("cast(id as string) as value")
    msg = write_failure(df, {"tubemq.master": tube.master_address, "topic": "no_such_topic_to_write"})
    last = next(line for line in msg.splitlines() if line.startswith("tubemq.errors."))  # one line: the cause
    assert "'no_such_topic_to_write' cannot be written" in last, msg
    assert "tubemq topic create no_such_topic_to_write" in last, msg
    assert "Failed to initialize Python data source writer" in msg  # planning, not a task
