"""Every script in examples/ runs against an embedded server (so the examples cannot rot).

Each example runs as a subprocess with a timeout; the Spark examples run only when Java is present, both
in one subprocess (one JVM; see ``_SEQUENTIAL``).
The master is given as a DSN with a short heartbeat period so consumer groups get their partitions
within a second or two instead of Java's 13 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _java import java_missing

import tubemq

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def tube(tmp_path: Path) -> Iterator[Any]:
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path / "data", balance_period_ms=200) as cluster:
        yield cluster


def _dsn(cluster: Any) -> str:
    return f"tubemq://{cluster.master_address}?heartbeat_period_ms=500"


def _run(script: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    assert r.returncode == 0, f"{script} failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-4000:]}"
    return r


def _fill(cluster: Any, topic: str, bodies: list[bytes]) -> None:
    with tubemq.Producer(cluster.master_address) as p:
        futures = [p.send_async(topic, b) for b in bodies]
        assert p.flush(30) == 0
        for f in futures:
            f.result(30)


def _drain(cluster: Any, topic: str, group: str, expected: int, timeout: float = 60) -> list[tubemq.Message]:
    import time

    got: list[tubemq.Message] = []
    deadline = time.monotonic() + timeout
    with tubemq.Consumer(_dsn(cluster), group=group, topics=[topic], consume_from="earliest") as c:
        while len(got) < expected and time.monotonic() < deadline:
            batch = c.poll(timeout=0.5)
            if batch:
                got.extend(batch)
                c.confirm(batch)
    return got


def test_every_example_is_tested() -> None:
    tested = {"ingest_file.py", "consumer_group_worker.py", "asyncio_pipeline.py", "spark_batch_ingest.py",
              "spark_streaming_parquet.py", "inlongmsg_asyncio.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_ingest_file(tube: Any, tmp_path: Path) -> None:
    tube.create_topic("ex_ingest", partitions=2)
    src = tmp_path / "access.log"
    src.write_text("".join(f"GET /item/{i} 200\n" for i in range(1000)) + "\n\n")
    r = _run("ingest_file.py", "--master", tube.master_address, "--topic", "ex_ingest", "--window", "64", str(src))
    assert "sent 1000, acknowledged 1000, failed 0, still pending 0" in r.stdout
    msgs = _drain(tube, "ex_ingest", "ex_ingest_check", 1000)
    assert sorted(m.data for m in msgs) == sorted(f"GET /item/{i} 200".encode() for i in range(1000))
    assert all(m.attributes.get("source") == "ingest_file" for m in msgs)


def test_consumer_group_worker(tube: Any) -> None:
    tube.create_topic("ex_worker", partitions=3)
    _fill(tube, "ex_worker", [json.dumps({"n": i}).encode() for i in range(600)])
    r = _run("consumer_group_worker.py", "--master", _dsn(tube), "--topic", "ex_worker", "--group", "workers",
             "--max-messages", "600", "--idle-timeout", "30")
    assert "processed 600 messages" in r.stdout
    # the worker confirmed what it processed: the group has nothing left
    r = _run("consumer_group_worker.py", "--master", _dsn(tube), "--topic", "ex_worker", "--group", "workers",
             "--idle-timeout", "4")
    assert "processed 0 messages" in r.stdout


def test_consumer_group_worker_as_documented(tmp_path: Path) -> None:
    """Plain master address, server defaults, --idle-timeout 5 (issue 14.1): the idle clock starts when the
    group has given the worker its partitions, so the first assignment's wait (a balance round plus a
    heartbeat, 13 s by default) does not end the worker before its first message."""
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path / "defaults") as cluster:
        cluster.create_topic("ex_worker_doc", partitions=3)
        _fill(cluster, "ex_worker_doc", [json.dumps({"n": i}).encode() for i in range(100)])
        r = _run("consumer_group_worker.py", "--master", cluster.master_address, "--topic", "ex_worker_doc",
                 "--group", "workers", "--idle-timeout", "5")
    assert "processed 100 messages" in r.stdout, r.stdout


def test_asyncio_pipeline(tube: Any) -> None:
    tube.create_topic("ex_raw", partitions=2)
    tube.create_topic("ex_enriched", partitions=2)
    _fill(tube, "ex_raw", [json.dumps({"order": i}).encode() for i in range(300)])
    r = _run("asyncio_pipeline.py", "--master", _dsn(tube), "--source", "ex_raw", "--sink", "ex_enriched",
             "--group", "enricher", "--max-messages", "300", "--idle-timeout", "30")
    assert "enriched 300 events" in r.stdout
    out = [json.loads(m.data) for m in _drain(tube, "ex_enriched", "ex_check", 300)]
    assert sorted(e["order"] for e in out) == list(range(300))
    assert all(isinstance(e["enriched_at"], int) for e in out)


def test_inlongmsg_asyncio(tube: Any) -> None:
    from tubemq.inlongmsg import InLongMsgBuilder

    tube.create_topic("ex_inlong", partitions=2)
    b = InLongMsgBuilder(version=2, compress=False)  # a container built outside the example, plus junk
    for i in range(10):
        b.add("groupId=g&streamId=external", b"x%d" % i)
    _fill(tube, "ex_inlong", [b.build(), b"not a container"])
    r = _run("inlongmsg_asyncio.py", "--master", _dsn(tube), "--topic", "ex_inlong", "--group", "inl",
             "--produce", "300", "--idle-timeout", "3")
    assert "sent 300 records in" in r.stdout
    assert "decoded 310 records from" in r.stdout and "(1 not InLong containers)" in r.stdout
    for line in ("  external: 10", "  stream0: 100", "  stream1: 100", "  stream2: 100"):
        assert line in r.stdout


needs_spark = pytest.mark.skipif(java_missing() is not None, reason=str(java_missing()))
#: the first Spark example test pays for the module fixture (both examples in one child process, bounded by
#: its own subprocess timeout): pytest-timeout's default 300 s is not enough on a loaded 2-core machine
SPARK_EXAMPLES_TIMEOUT_S = 900 + 60


def spark_example(test: Any) -> Any:
    """The marks of a Spark example's test: ``spark``, its timeout, skipped without Java."""
    for mark in (needs_spark, pytest.mark.timeout(SPARK_EXAMPLES_TIMEOUT_S), pytest.mark.spark):
        test = mark(test)
    return test

#: Runs example scripts one after the other in ONE Python process, each exactly as ``python SCRIPT ARGS``
#: would (``__main__``, its own argv, its directory first on sys.path, the environment restored between
#: scripts), and prints ``<<<example SCRIPT exit CODE>>>`` after each. The scripts' SparkSessions then
#: share one JVM: a Spark example's own work takes seconds, the JVM's start and warm-up most of a minute
#: on a small machine, so the second example no longer pays it again.
_SEQUENTIAL = r"""
import json, os, runpy, sys, traceback
for script, args in json.loads(sys.argv[1]):
    env, path = dict(os.environ), list(sys.path)
    sys.argv, sys.path[0] = [script, *args], os.path.dirname(script)
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    sys.stdout.flush()
    print(f"<<<example {os.path.basename(script)} exit {code}>>>", flush=True)
"""


class SparkRuns:
    """The Spark examples' runs (see ``_SEQUENTIAL``): their cluster, inputs and outputs."""

    def __init__(self, cluster: Any, tmp: Path) -> None:
        self.cluster, self.tmp = cluster, tmp
        self.stdout: dict[str, tuple[str, str]] = {}  # script: (its stdout, its exit code)
        self.stderr = ""

    def output(self, script: str) -> str:
        """The script's stdout; fails with its stderr unless it exited 0."""
        assert script in self.stdout, f"{script} did not run:\n{self.stderr[-4000:]}"
        out, code = self.stdout[script]
        assert code == "0", f"{script} failed ({code}):\n{out}\n{self.stderr[-4000:]}"
        return out


@pytest.fixture(scope="module")
def spark_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkRuns]:
    """Each selected Spark example prepared against one embedded cluster, then all run in one process."""
    from tubemq.server import EmbeddedCluster

    selected = {item.originalname for item in request.session.items if item.module is request.module}
    tmp = tmp_path_factory.mktemp("spark-examples")
    with EmbeddedCluster(data_dir=tmp / "data", balance_period_ms=200) as cluster:
        runs = SparkRuns(cluster, tmp)
        plan: list[tuple[str, list[str]]] = []
        if "test_spark_batch_ingest" in selected:
            cluster.create_topic("ex_spark_batch", partitions=2)
            src = tmp / "orders.jsonl"
            src.write_text("".join(json.dumps({"order": i, "amount": i * 1.5}) + "\n" for i in range(200)))
            plan.append(("spark_batch_ingest.py",
                         ["--master", cluster.master_address, "--topic", "ex_spark_batch", str(src)]))
        if "test_spark_streaming_parquet" in selected:
            cluster.create_topic("ex_spark_stream", partitions=2)
            _fill(cluster, "ex_spark_stream", [b"event-%d" % i for i in range(300)])
            plan.append(("spark_streaming_parquet.py",
                         ["--master", cluster.master_address, "--topic", "ex_spark_stream", "--output",
                          str(tmp / "parquet"), "--checkpoint", str(tmp / "ckpt"), "--available-now",
                          "--max-per-trigger", "120"]))
        env = dict(os.environ, PYTHONUNBUFFERED="1", SPARK_LOCAL_IP="127.0.0.1")
        todo = json.dumps([(str(EXAMPLES / script), args) for script, args in plan])
        r = subprocess.run([sys.executable, "-c", _SEQUENTIAL, todo], capture_output=True, text=True,
                           timeout=300 + 300 * len(plan), env=env)  # <= SPARK_EXAMPLES_TIMEOUT_S
        runs.stderr = r.stderr
        rest = r.stdout
        for script, _ in plan:
            before, marker, after = rest.partition(f"<<<example {script} exit ")
            if not marker:
                break
            code, _, rest = after.partition(">>>\n")
            runs.stdout[script] = (before, code)
        yield runs


@spark_example
def test_spark_batch_ingest(spark_runs: SparkRuns) -> None:
    out = spark_runs.output("spark_batch_ingest.py")
    assert "wrote 200 rows to ex_spark_batch; the topic now holds 200 rows from this job" in out
    msgs = _drain(spark_runs.cluster, "ex_spark_batch", "ex_spark_check", 200)
    assert sorted(json.loads(m.data)["order"] for m in msgs) == list(range(200))
    assert all(m.stream_id == "spark-ingest" and m.attributes.get("source") == "orders.jsonl" for m in msgs)


@spark_example
def test_spark_streaming_parquet(spark_runs: SparkRuns) -> None:
    out = spark_runs.output("spark_streaming_parquet.py")
    assert "now holds 300 rows from ex_spark_stream" in out
    import pyarrow.parquet as pq

    bodies = pq.read_table(spark_runs.tmp / "parquet").column("body").to_pylist()
    assert sorted(bodies) == sorted(f"event-{i}" for i in range(300))
    assert (spark_runs.tmp / "ckpt" / "offsets").is_dir()  # the offsets a restarted query resumes from
