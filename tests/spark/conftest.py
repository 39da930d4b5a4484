"""Fixtures for the Spark data source tests: one local[2] SparkSession and one embedded cluster.

Both are session-scoped because starting them dominates the run time (a JVM, a TubeMQ server): one of
each per xdist worker, and tests/conftest.py schedules all Spark tests on one worker;
every test creates its own topics, so tests stay independent. Everything binds to 127.0.0.1.
The tests are skipped, with the reason, only when no Java 17+ runtime is installed (tests/_java.py).
"""

from __future__ import annotations

import os
import sys
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _java import java_missing

#: Fast balancing like tests/conftest.py FAST_SERVER, but the real (30 s) heartbeat and registration
#: timeouts: the source's clients heartbeat every 13 s (the Java default) and Spark tasks and the
#: streaming driver keep consumers open for longer than FAST_SERVER's 6 s would allow. The source
#: passes ``tubemq.*`` options to every client it opens (planning, tasks, streaming driver, writer),
#: so FAST_SERVER would work with ``tubemq.heartbeat_period_ms`` on every DataFrame; measured, that
#: gains nothing (no test waits for an expiry: reads use private groups and close their consumers),
#: so the tests keep the plain options users write. tests/spark/test_task.py does run the read task
#: against FAST_SERVER with ``tubemq.heartbeat_period_ms``.
SPARK_SERVER: dict[str, Any] = {"balance_period_ms": 200}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tubemq-spark-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={warehouse}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    try:
        session.stop()
    except Exception as exc:  # noqa: BLE001 - the JVM is already gone (a test that failed killed it)
        warnings.warn(f"SparkSession.stop() failed: {exc!r}", stacklevel=1)


@pytest.fixture(scope="session")
def tube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running embedded TubeMQ cluster shared by the Spark tests (each test uses its own topics)."""
    from tubemq.server import EmbeddedCluster

    data_dir: Path = tmp_path_factory.mktemp("tubemq-spark-data")
    with EmbeddedCluster(data_dir=data_dir, **SPARK_SERVER) as cluster:
        yield cluster


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (TubeMQ names: letter first, <= 64 chars, [A-Za-z0-9_-])."""
    base = "".join(c if c.isalnum() else "_" for c in request.node.name)
    if len(base) > 40:  # cut: a checksum of the whole name keeps parametrized cases apart
        base = f"{base[:31]}_{zlib.crc32(request.node.name.encode()):08x}"
    return f"t_{base}"
