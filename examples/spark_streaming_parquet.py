#!/usr/bin/env python3
"""Structured Streaming from a TubeMQ topic into Parquet files, with exactly-once file output.

Run from the source tree with a local server (``tubemq serve --data-dir ./tubemq-data --detach``)::

    tubemq topic create events --if-not-exists
    seq 1 1000 | tubemq produce --topic events
    python examples/spark_streaming_parquet.py --master 127.0.0.1:8715 --topic events \
        --output ./events_parquet --checkpoint ./events_ckpt --available-now

Offsets live in the Spark checkpoint, so a restarted query continues where it stopped, and the
Parquet sink writes each micro-batch atomically. ``--available-now`` processes what is in the topic
and exits (``Trigger.AvailableNow``: handy for scheduled jobs); without it the query runs until Ctrl-C.
Needs ``pip install 'tubemq[spark]'`` and Java 17+.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tubemq.spark import TubeMQDataSource


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default="127.0.0.1:8715")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--output", required=True, help="Parquet directory")
    ap.add_argument("--checkpoint", required=True, help="checkpoint directory (keeps the offsets)")
    ap.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    ap.add_argument("--max-per-trigger", type=int, default=100000, help="maxOffsetsPerTrigger")
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("tubemq-streaming-parquet")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(TubeMQDataSource)
    try:
        stream = (spark.readStream.format("tubemq")
                  .option("tubemq.master", args.master)
                  .option("subscribe", args.topic)
                  .option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", str(args.max_per_trigger))
                  .load())
        rows = stream.select(
            "partition", "offset", "message_id", "stream_id",
            F.col("value").cast("string").alias("body"),
            F.current_timestamp().alias("ingested_at"),
        )
        writer = (rows.writeStream.format("parquet")
                  .option("path", args.output)
                  .option("checkpointLocation", args.checkpoint)
                  .outputMode("append"))
        if args.available_now:
            query = writer.trigger(availableNow=True).start()
            query.awaitTermination()
        else:
            query = writer.trigger(processingTime="5 seconds").start()
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                query.stop()
        total = spark.read.parquet(args.output).count()
        print(f"{args.output} now holds {total} rows from {args.topic}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
