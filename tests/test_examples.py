"""Every script in examples/ runs as its header says (so the examples cannot rot).

The header's commands run verbatim, one after the other, in a directory holding an ``examples`` link to
this tree, against an empty `tubemq serve --detach` (on free ports, with the master's port changed in
the commands, when another program holds a default one). The long-running consumers are also stopped
with Ctrl-C (SIGINT), which must end them cleanly. The Spark examples run only when Java is present,
both in one process (one JVM; see ``_SEQUENTIAL``). A few more runs with other arguments check what the
examples leave behind (committed offsets, enriched events).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _java import java_missing
from _support.ports import port_busy

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


#: What each example prints when its header's commands run verbatim against an empty server.
HEADER_EXPECT: dict[str, list[str]] = {
    "ingest_file.py": [r"sent 200, acknowledged 200, failed 0, still pending 0"],
    "consumer_group_worker.py": [r"processed 1000 messages"],
    "asyncio_pipeline.py": [r"enriched 300 events from raw into enriched"],
    "inlongmsg_asyncio.py": [r"sent 300 records in", r"decoded 300 records from \d+ messages \(0 not InLong"],
    "metrics_export.py": [r"tubemq_producer_acknowledged_total\{client=\"demo\"\} 500\.0",
                          r"otel: tubemq\.producer\.acknowledged 500, messaging\.client\.sent\.messages 500, failed 0"],
}
#: Examples whose header runs in tests with Spark (one JVM for both: see ``_SEQUENTIAL``).
SPARK_EXAMPLES = {"spark_batch_ingest.py", "spark_streaming_parquet.py"}


def header_commands(script: str) -> list[str]:
    """The shell commands of an example's header: the indented lines after its ``::``, continuations joined."""
    doc = ast.get_docstring(ast.parse((EXAMPLES / script).read_text(encoding="utf-8"))) or ""
    _, sep, rest = doc.partition("::\n\n")
    assert sep, f"{script}: the header shows how to run it after a '::' line"
    out: list[str] = []
    for line in rest.splitlines():
        if not line.startswith("    "):
            if line.strip():
                break
            continue
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1].rstrip() + " " + line.strip()
        else:
            out.append(line.strip())
    return out


@contextlib.contextmanager
def detached_server(tmp: Path) -> Iterator[tuple[str, dict[str, str], Path]]:
    """`tubemq serve --detach` as the headers say, with nothing on it: (master, environment, work dir).

    The work directory holds an ``examples`` link to this tree, so the header's relative paths work as in
    a checkout. When another program holds a default port the server gets free ones: the commands then
    get the master's port changed and find it through $TUBEMQ_MASTER, nothing else changes.
    """
    from tubemq.cli.common import free_port

    work = tmp / "work"
    work.mkdir()
    (work / "examples").symlink_to(EXAMPLES, target_is_directory=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", SPARK_LOCAL_IP="127.0.0.1", TUBEMQ_RUNTIME_DIR=str(tmp / "run"))
    env.pop("TUBEMQ_MASTER", None)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    ports = [8715, 8123, 8080]
    for attempt in range(5):  # a default or picked port can be taken meanwhile (parallel workers): exit 3
        if attempt or any(port_busy(p) for p in ports):
            ports = [free_port() for _ in ports]
            env["TUBEMQ_MASTER"] = f"127.0.0.1:{ports[0]}"
        r = subprocess.run([sys.executable, "-m", "tubemq", "serve", "--data-dir", str(tmp / "tubemq-data"),
                            "--master-port", str(ports[0]), "--broker-port", str(ports[1]), "--admin-port",
                            str(ports[2]), "--detach"], capture_output=True, text=True, timeout=120, env=env)
        if r.returncode != 3:
            break
    assert r.returncode == 0, r.stderr
    pid = int((tmp / "tubemq-data" / "tubemq-serve.pid").read_text())
    try:
        yield f"127.0.0.1:{ports[0]}", env, work
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


@pytest.fixture
def empty_server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Path]]:
    with detached_server(tmp_path) as server:
        yield server


POSIX_SHELL = pytest.mark.skipif(sys.platform == "win32",
                                 reason="the headers are POSIX shell lines (`seq`, `tubemq serve --detach`)")


@POSIX_SHELL
@pytest.mark.parametrize("script", sorted(HEADER_EXPECT))
def test_example_runs_as_its_header_says(script: str, empty_server: tuple[str, dict[str, str], Path]) -> None:
    master, env, work = empty_server
    out = ""
    for command in header_commands(script):
        command = command.replace("127.0.0.1:8715", master)
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", command], capture_output=True, text=True,
                           timeout=180, cwd=work, env=env)
        print(f"$ {command}\n{r.stdout[-500:]}{r.stderr[-500:]}")
        assert r.returncode == 0, f"{command} failed ({r.returncode}):\n{r.stdout[-1000:]}\n{r.stderr[-3000:]}"
        out += r.stdout
    missing = [p for p in HEADER_EXPECT[script] if not re.search(p, out)]
    assert not missing, f"{script}: output lacks {missing}:\n{out[-2000:]}"


@POSIX_SHELL
@pytest.mark.parametrize("script", ["consumer_group_worker.py", "asyncio_pipeline.py", "inlongmsg_asyncio.py"])
def test_example_stops_cleanly_on_ctrl_c(script: str, empty_server: tuple[str, dict[str, str], Path]) -> None:
    """The header's consumer without --idle-timeout (run until Ctrl-C): SIGINT ends it, exit 0, no traceback."""
    master, env, work = empty_server
    *setup, command = header_commands(script)
    for line in setup:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", line], capture_output=True, text=True, timeout=180,
                           cwd=work, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
    argv = shlex.split(command.replace("127.0.0.1:8715", master))
    i = argv.index("--idle-timeout")
    del argv[i:i + 2]
    assert argv[0] == "python"
    proc = subprocess.Popen([sys.executable, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=work, env=env)
    try:
        assert proc.stdout is not None
        first = ""
        for _ in range(10):  # "... (Ctrl-C to stop)" is printed once its signal handlers are in place
            line = proc.stdout.readline().decode()
            first += line
            if not line or "Ctrl-C to stop" in line:
                break
        assert "Ctrl-C to stop" in first, first + (proc.stderr.read().decode() if proc.stderr else "")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    print(first + out.decode(), err.decode())
    assert proc.returncode == 0, err.decode()[-3000:]
    assert "Traceback" not in err.decode(), err.decode()[-3000:]
    assert re.search(r"processed|enriched|decoded", out.decode()), out.decode()


def test_every_example_is_tested() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(HEADER_EXPECT) | SPARK_EXAMPLES
    for script in SPARK_EXAMPLES:  # their headers name the input and output the Spark tests use
        assert any("python examples/" + script in c for c in header_commands(script))


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
    """Each selected Spark example run as its header says, against one empty `tubemq serve --detach`: the
    header's setup lines in a shell, then the example scripts together in one process (``_SEQUENTIAL``)."""
    from types import SimpleNamespace

    selected = {item.originalname for item in request.session.items if item.module is request.module}
    scripts = [s for s, test in (("spark_batch_ingest.py", "test_spark_batch_ingest"),
                                 ("spark_streaming_parquet.py", "test_spark_streaming_parquet")) if test in selected]
    with detached_server(tmp_path_factory.mktemp("spark-examples")) as (master, env, work):
        runs = SparkRuns(SimpleNamespace(master_address=master), work)
        plan: list[tuple[str, list[str]]] = []
        for script in scripts:
            *setup, command = header_commands(script)
            for line in setup:
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", line.replace("127.0.0.1:8715", master)],
                                   capture_output=True, text=True, timeout=180, cwd=work, env=env)
                assert r.returncode == 0, f"{line}: {r.stderr[-2000:]}"
            argv = shlex.split(command.replace("127.0.0.1:8715", master))
            assert argv[:2] == ["python", f"examples/{script}"], argv
            plan.append((str(EXAMPLES / script), argv[2:]))
        todo = json.dumps(plan)
        r = subprocess.run([sys.executable, "-c", _SEQUENTIAL, todo], capture_output=True, text=True,
                           timeout=300 + 300 * len(plan), env=env, cwd=work)  # <= SPARK_EXAMPLES_TIMEOUT_S
        runs.stderr = r.stderr
        rest = r.stdout
        for script, _ in plan:
            before, marker, after = rest.partition(f"<<<example {os.path.basename(script)} exit ")
            if not marker:
                break
            code, _, rest = after.partition(">>>\n")
            runs.stdout[os.path.basename(script)] = (before, code)
        yield runs


@spark_example
@POSIX_SHELL
def test_spark_batch_ingest(spark_runs: SparkRuns) -> None:
    out = spark_runs.output("spark_batch_ingest.py")
    assert "wrote 200 rows to orders; the topic now holds 200 rows from this job" in out
    msgs = _drain(spark_runs.cluster, "orders", "ex_spark_check", 200)
    assert sorted(json.loads(m.data)["order"] for m in msgs) == list(range(200))
    assert all(m.stream_id == "spark-ingest" and m.attributes.get("source") == "orders.jsonl" for m in msgs)


@spark_example
@POSIX_SHELL
def test_spark_streaming_parquet(spark_runs: SparkRuns) -> None:
    out = spark_runs.output("spark_streaming_parquet.py")
    assert "./events_parquet now holds 1000 rows from events" in out
    import pyarrow.parquet as pq

    bodies = pq.read_table(spark_runs.tmp / "events_parquet").column("body").to_pylist()
    assert sorted(bodies) == sorted(str(i) for i in range(1, 1001))
    assert (spark_runs.tmp / "events_ckpt" / "offsets").is_dir()  # the offsets a restarted query resumes from
