#!/usr/bin/env python3
"""Batch ingestion with Spark: load a JSON Lines file into a DataFrame, write it to a TubeMQ topic,
then read the topic back as a DataFrame.

Run from the source tree with a local server (``tubemq serve --data-dir ./tubemq-data --detach``)::

    tubemq topic create orders --if-not-exists
    python examples/spark_batch_ingest.py --master 127.0.0.1:8715 --topic orders examples/data/orders.jsonl

Needs ``pip install 'tubemq[spark]'`` and Java 17+. Rows become messages: the ``value`` column is the
message body (here: each input row serialised back to JSON), ``stream_id`` and ``attributes`` columns
are optional. Reading uses ``startingOffsets``/``endingOffsets`` like Spark's Kafka source.
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
    ap.add_argument("input", help="JSON Lines file (one object per line)")
    ap.add_argument("--master", default="127.0.0.1:8715")
    ap.add_argument("--topic", required=True)
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("tubemq-batch-ingest")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(TubeMQDataSource)  # optional when pyspark_tubemq is importable
    try:
        rows = spark.read.json(args.input)
        out = rows.select(
            F.to_json(F.struct(*rows.columns)).alias("value"),
            F.lit("spark-ingest").alias("stream_id"),
            F.create_map(F.lit("source"), F.lit(os.path.basename(args.input))).alias("attributes"),
        )
        out.write.format("tubemq").option("tubemq.master", args.master).option("topic", args.topic) \
            .mode("append").save()
        written = out.count()

        back = (spark.read.format("tubemq")
                .option("tubemq.master", args.master)
                .option("subscribe", args.topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                .option("includeAttributes", "true")
                .load())
        in_topic = back.where(F.col("stream_id") == "spark-ingest").count()
        print(f"wrote {written} rows to {args.topic}; the topic now holds {in_topic} rows from this job")
        back.select("partition", "offset", F.col("value").cast("string").alias("value")).show(3, truncate=60)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
