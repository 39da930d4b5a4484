"""The Spark part of ``tubemq demo --spark``: the same kind of ingestion through the Spark data source.

A local[2] SparkSession generates ``events`` JSON events with ``spark.range``, writes them with
``df.write.format("tubemq")`` and reads the topic back with ``spark.read.format("tubemq")``
(``startingOffsets=earliest``, ``endingOffsets=latest``), counting distinct event ids.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from .common import CliError

__all__ = ["java_problem", "run_spark_demo"]


def java_problem() -> str | None:
    """Why Spark cannot start here (no usable Java), or None."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return "Spark needs Java 17+ on PATH or in JAVA_HOME, and none was found"
    try:
        subprocess.run([java, "-version"], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the Java runtime at {java} does not run ({exc})"
    return None


def _session(workdir: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tubemq-demo")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", os.path.join(workdir, "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={workdir}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_spark_demo(master: str, topic: str, events: int, *, partitions: int = 4) -> dict[str, Any]:
    """Write ``events`` rows to ``topic`` (which must exist) through Spark, read them back, count them."""
    problem = java_problem()
    if problem:
        raise CliError(f"--spark: {problem}")
    try:
        from tubemq.spark import require_pyspark

        require_pyspark()
        from pyspark.sql import functions as F

        from tubemq.spark import TubeMQDataSource
    except ImportError as exc:
        raise CliError(f"--spark: {exc}") from None

    workdir = tempfile.mkdtemp(prefix="tubemq-spark-")
    spark = _session(workdir)
    try:
        spark.dataSource.register(TubeMQDataSource)
        df = spark.range(0, events, numPartitions=max(1, min(partitions, 4))).select(
            F.to_json(
                F.struct(
                    F.col("id"),
                    F.format_string("u%05d", F.col("id") % 50000).alias("user"),
                    (F.col("id") % 500 + F.lit(0.25)).alias("amount"),
                )
            ).alias("value")
        )
        t0 = time.monotonic()
        df.write.format("tubemq").option("tubemq.master", master).option("topic", topic).mode("append").save()
        write_seconds = time.monotonic() - t0
        t1 = time.monotonic()
        back = (
            spark.read.format("tubemq")
            .option("tubemq.master", master)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
        )
        ids = back.select(F.get_json_object(F.col("value").cast("string"), "$.id").cast("long").alias("id"))
        row = ids.agg(F.count("id").alias("n"), F.countDistinct("id").alias("distinct")).collect()[0]
        read_seconds = time.monotonic() - t1
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "written": events,
        "read": int(row["distinct"]),
        "rows_read": int(row["n"]),
        "write_seconds": write_seconds,
        "read_seconds": read_seconds,
    }
