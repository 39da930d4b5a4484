"""The ``tubemq`` command end to end, as subprocesses against an embedded server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from .conftest import CLI_SERVER
from .helpers import cli_env, interrupt, needs_posix_signals, run_cli, wait_for


def _create_topic(cluster: Any, name: str, partitions: int = 1) -> None:
    r = run_cli(["topic", "create", name, "--partitions", str(partitions), "--admin-url", cluster.admin_url])
    assert r.returncode == 0, r.stderr


def _consume_all(cluster: Any, topic: str, group: str, out: Path, *, count: int | None = None,
                 fmt: str = "raw", idle: float = 5.0, extra: list[str] | None = None) -> subprocess.CompletedProcess[bytes]:
    args = ["consume", "--topic", topic, "--group", group, "--master", cluster.master_address,
            "--format", fmt, "--timeout", str(idle), "--output", str(out), *(extra or [])]
    if count is not None:
        args += ["--count", str(count)]
    r = run_cli(args, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def test_produce_file_then_consume_identical(cluster: Any, tmp_path: Path) -> None:
    _create_topic(cluster, "cli_rt", partitions=1)  # one partition: a total order to compare
    lines = [f"line {i} \u00e9\u00e8 {'x' * (i % 50)}" for i in range(3000)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = run_cli(["produce", "--topic", "cli_rt", "--master", cluster.master_address, str(src),
                 "--json-summary"], timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["acknowledged"] == 3000 and summary["failed"] == 0 and summary["unknown"] == 0
    assert b"acknowledged" in r.stderr  # the human summary
    out = tmp_path / "out.txt"
    _consume_all(cluster, "cli_rt", "g_rt", out, count=3000)
    assert out.read_bytes() == src.read_bytes()


def test_multi_partition_roundtrip_with_attributes(cluster: Any, tmp_path: Path) -> None:
    _create_topic(cluster, "cli_attr", partitions=3)
    src = tmp_path / "events.jsonl"
    src.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(500)), encoding="utf-8")
    r = run_cli(["produce", "-t", "cli_attr", "-m", cluster.master_address, "--format", "jsonl",
                 "--attr", "source=test", "--attr", "k=v", "--stream-id", "s1", str(src)], timeout=120)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out.jsonl"
    _consume_all(cluster, "cli_attr", "g_attr", out, count=500, fmt="json")
    recs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(json.loads(r["data"])["n"] for r in recs) == list(range(500))
    for rec in recs:
        assert rec["topic"] == "cli_attr" and rec["stream_id"] == "s1"
        assert rec["attributes"].get("source") == "test" and rec["attributes"].get("k") == "v"
        assert rec["partition"] in (0, 1, 2) and rec["offset"] is None  # no per-message offset in the protocol
    # the json output is an envelope file: copy the topic through it, then compare
    _create_topic(cluster, "cli_copy", partitions=1)
    r = run_cli(["produce", "-t", "cli_copy", "-m", cluster.master_address, "--format", "envelope", str(out)],
                timeout=120)
    assert r.returncode == 0, r.stderr
    out2 = tmp_path / "copy.jsonl"
    _consume_all(cluster, "cli_copy", "g_copy", out2, count=500, fmt="json")
    copied = [json.loads(line) for line in out2.read_text(encoding="utf-8").splitlines()]
    assert sorted(c["data"] for c in copied) == sorted(r["data"] for r in recs)
    assert all(c["stream_id"] == "s1" and c["attributes"].get("source") == "test" for c in copied)


def test_consume_stream_id_filter(cluster: Any, tmp_path: Path) -> None:
    _create_topic(cluster, "cli_filter", partitions=2)
    for sid in ("a", "b"):
        r = run_cli(["produce", "-t", "cli_filter", "-m", cluster.master_address, "--stream-id", sid, "-"],
                    input="".join(f"{sid}-{i}\n" for i in range(100)).encode(), timeout=120)
        assert r.returncode == 0, r.stderr
    out = tmp_path / "b.txt"
    _consume_all(cluster, "cli_filter", "g_filter", out, idle=4, extra=["--stream-id", "b"])
    got = out.read_text().split()
    assert sorted(got) == sorted(f"b-{i}" for i in range(100))


def test_unknown_topic_fails_cleanly(cluster: Any, tmp_path: Path) -> None:
    r = run_cli(["produce", "-t", "no_such_topic", "-m", cluster.master_address,
                 "-"], input=b"x\n", timeout=120)
    assert r.returncode == 1, r.stderr
    assert b"Traceback" not in r.stderr
    assert b"first error" in r.stderr


def test_bad_client_option_is_usage_error(cluster: Any) -> None:
    r = run_cli(["produce", "-t", "t", "-m", cluster.master_address, "-X", "no_such_option=1", "-"], input=b"x\n")
    assert r.returncode == 2 and b"no_such_option" in r.stderr and b"Traceback" not in r.stderr


def test_topic_commands(cluster: Any) -> None:
    url = cluster.admin_url
    r = run_cli(["topic", "create", "cli_topic", "--partitions", "4", "--stores", "2", "--admin-url", url])
    assert r.returncode == 0, r.stderr
    r = run_cli(["topic", "create", "cli_topic", "--admin-url", url])
    assert r.returncode == 1 and b"cli_topic" in r.stderr and b"Traceback" not in r.stderr
    r = run_cli(["topic", "create", "cli_topic", "--admin-url", url, "--if-not-exists"])
    assert r.returncode == 0
    r = run_cli(["topic", "list", "--admin-url", url, "-o", "json"])
    assert r.returncode == 0
    rows = {row["topic"]: row for row in json.loads(r.stdout)}
    assert rows["cli_topic"]["partitions"] == 8 and rows["cli_topic"]["stores"] == 2
    r = run_cli(["topic", "list", "--admin-url", url])
    assert r.returncode == 0 and b"cli_topic" in r.stdout and b"PARTITIONS" in r.stdout
    r = run_cli(["topic", "describe", "cli_topic", "--admin-url", url])
    assert r.returncode == 0 and b"partitions" in r.stdout
    r = run_cli(["topic", "delete", "cli_topic", "--admin-url", url])
    assert r.returncode == 1 and b"[406]" in r.stderr and b"--stop-first" in r.stderr  # a real master's rule
    r = run_cli(["topic", "delete", "cli_topic", "--admin-url", url, "--stop-first"])
    assert r.returncode == 0, r.stderr
    r = run_cli(["topic", "describe", "cli_topic", "--admin-url", url])
    assert r.returncode == 1 and b"not found" in r.stderr
    r = run_cli(["topic", "delete", "cli_topic", "--admin-url", url, "--if-exists"])
    assert r.returncode == 0
    r = run_cli(["topic", "create", "1bad", "--admin-url", url])
    assert r.returncode == 1 and b"Traceback" not in r.stderr


def test_topic_admin_token(tmp_path: Path) -> None:
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path / "d", admin_token="s3cret", **CLI_SERVER) as c:
        r = run_cli(["topic", "create", "tok_topic", "--admin-url", c.admin_url])
        assert r.returncode == 1 and b"Traceback" not in r.stderr
        r = run_cli(["topic", "create", "tok_topic", "--admin-url", c.admin_url, "--token", "s3cret"])
        assert r.returncode == 0, r.stderr
        r = run_cli(["topic", "list", "--admin-url", c.admin_url, "-o", "names"],
                    env=cli_env(TUBEMQ_ADMIN_TOKEN="s3cret"))
        assert r.returncode == 0 and r.stdout.split() == [b"tok_topic"]
        assert b"s3cret" not in r.stderr


@needs_posix_signals
def test_sigint_during_produce_loses_nothing_acknowledged(cluster: Any, tmp_path: Path) -> None:
    """Lines stream in through stdin; Ctrl-C mid-stream; every acknowledged line must be in the topic."""
    _create_topic(cluster, "cli_sigint", partitions=2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tubemq", "produce", "-t", "cli_sigint", "-m", cluster.master_address,
         "--progress", "--json-summary", "--inflight", "500", "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
    )
    assert proc.stdin is not None and proc.stderr is not None and proc.stdout is not None
    written = 0
    stop_writing = threading.Event()
    err_chunks: list[bytes] = []

    def writer() -> None:
        nonlocal written
        try:
            while not stop_writing.is_set() and written < 2_000_000:
                proc.stdin.write(b"".join(b"msg-%d\n" % (written + i) for i in range(200)))
                proc.stdin.flush()
                written += 200
        except (BrokenPipeError, OSError, ValueError):  # ValueError: the test closed stdin meanwhile
            pass

    def reader() -> None:
        while chunk := proc.stderr.read1(4096):  # type: ignore[union-attr]
            err_chunks.append(chunk)

    tw = threading.Thread(target=writer, daemon=True)
    tr = threading.Thread(target=reader, daemon=True)
    tw.start()
    tr.start()
    try:
        # the progress bar shows acknowledgements: wait until a few thousand went through
        def progressed() -> bool:
            text = b"".join(err_chunks).decode(errors="replace")
            counts = re.findall(r"([0-9.]+)(k|M)? msg ", text)
            return any(unit in ("k", "M") and float(n) >= 2 for n, unit in counts)

        wait_for(progressed, 90, what="progress with >1k acknowledged messages")
        interrupt(proc)  # SIGINT, as Ctrl-C
        stdout, _ = proc.communicate(timeout=90)
    finally:
        stop_writing.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        tw.join(10)
        tr.join(10)
    stderr = b"".join(err_chunks).decode(errors="replace")
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    summary = json.loads(stdout)
    acked, submitted = summary["acknowledged"], summary["submitted"]
    assert acked > 1000
    assert summary["failed"] == 0 and summary["unknown"] == 0 and acked == submitted
    out = tmp_path / "got.txt"
    _consume_all(cluster, "cli_sigint", "g_sigint", out, count=None, idle=5)
    got = out.read_bytes().split()
    assert len(got) == len(set(got)), "duplicates in the topic"
    # lines are read and submitted in order: the topic holds exactly the first `submitted` lines
    assert set(got) == {b"msg-%d" % i for i in range(submitted)}


def test_bench_produce_and_consume(tmp_path: Path) -> None:
    r = run_cli(["bench", "produce", "--count", "3000", "--size", "200", "--json", "--no-progress"], timeout=180)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["messages"] == 3000 and res["msg_per_s"] > 0 and res["mb_per_s"] > 0
    assert 0 < res["latency_ms"]["p50"] <= res["latency_ms"]["p99"] <= res["latency_ms"]["p999"]
    assert b"no --master given" in r.stderr
    r = run_cli(["bench", "consume", "--count", "3000", "--json", "--no-progress"], timeout=180)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["messages"] >= 3000 and res["msg_per_s"] > 0
    r = run_cli(["bench", "produce", "--duration", "1", "--size", "10"], timeout=180)
    assert r.returncode == 0, r.stderr
    assert b"p999" in r.stdout and b"msg/s" in r.stdout


@pytest.mark.slow
def test_demo_end_to_end() -> None:
    r = run_cli(["demo", "--events", "20000", "--no-progress"], timeout=600)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "OK: every acknowledged event consumed" in out
    assert "20,000" in out
    assert "no --master given" in r.stderr.decode()


@needs_posix_signals
def test_serve_foreground_and_sigterm(tmp_path: Path) -> None:
    from tubemq.cli.common import start_on_free_ports

    def spawn(ports: list[int]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tubemq", "serve", "--data-dir", str(tmp_path / "data"), "--master-port",
             str(ports[0]), "--broker-port", str(ports[1]), "--admin-port", str(ports[2]), "--balance-period-ms",
             "200"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=cli_env(),
        )

    proc, (mport, _, aport) = start_on_free_ports(spawn, 3, 60)
    try:
        assert proc.poll() is None, f"serve exited early: {proc.stdout.read()!r}"  # type: ignore[union-attr]
        master = f"127.0.0.1:{mport}"
        r = run_cli(["topic", "create", "served", "--master", master, "--admin-port", str(aport)])
        assert r.returncode == 0, r.stderr
        r = run_cli(["produce", "-t", "served", "-m", master, "-"], input=b"a\nb\nc\n")
        assert r.returncode == 0, r.stderr
        out = tmp_path / "o.txt"
        r = run_cli(["consume", "-t", "served", "-g", "g", "-m", master, "--count", "3", "--timeout", "30",
                     "-o", str(out)], timeout=120)
        assert r.returncode == 0, r.stderr
        assert sorted(out.read_bytes().split()) == [b"a", b"b", b"c"]
        proc.terminate()
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, output
    assert b"Traceback" not in output


def test_authentication_options(tmp_path: Path) -> None:
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path / "d", auth_enabled=True, auth_users={"alice": "s3cret"},
                         visit_token_check=True, **CLI_SERVER) as c:
        c.create_topic("secure", partitions=1)
        # the refused register is tried 5 times, register_retry_wait_ms apart (1 s by default)
        r = run_cli(["produce", "-t", "secure", "-m", c.master_address, "-X", "register_retry_wait_ms=100", "-"],
                    input=b"x\n", timeout=120)
        assert r.returncode == 1
        err = r.stderr.decode()
        assert "Traceback" not in err and "auth_user" in err
        assert len(err.strip().splitlines()) == 1, err
        creds = ["-X", "auth_user=alice", "-X", "auth_password=s3cret"]
        r = run_cli(["produce", "-t", "secure", "-m", c.master_address, *creds, "-"], input=b"top secret\n",
                    timeout=120)
        assert r.returncode == 0, r.stderr
        assert b"s3cret" not in r.stderr
        out = tmp_path / "o.txt"
        _consume_all(c, "secure", "g_sec", out, count=1, extra=creds)
        assert out.read_bytes() == b"top secret\n"


@needs_posix_signals
def test_killed_demo_leaves_no_server_behind() -> None:
    """The temporary server is a child process; it must go away (with its data) even after kill -9."""
    import os
    import time

    proc = subprocess.Popen([sys.executable, "-m", "tubemq", "demo", "--events", "5000000", "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env())
    assert proc.stderr is not None
    try:
        line = b""
        deadline = time.monotonic() + 60
        while b"started an embedded" not in line:
            assert time.monotonic() < deadline and proc.poll() is None, "demo did not start its server"
            line = proc.stderr.readline()
        pid = int(line.split(b"(pid ")[1].split(b",")[0])
        data_dir = line.split(b"data in ")[1].split(b")")[0].decode()
        proc.kill()
        proc.wait(10)

        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return not os.path.exists(data_dir)
            return False

        wait_for(gone, 30, what="the orphaned server to exit and remove its data")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_raw_binary_message_and_limit(cluster: Any, tmp_path: Path) -> None:
    import base64

    _create_topic(cluster, "cli_raw", partitions=1)
    blob = bytes(range(256)) * 40  # not UTF-8, contains newlines
    src = tmp_path / "blob.bin"
    src.write_bytes(blob)
    r = run_cli(["produce", "-t", "cli_raw", "-m", cluster.master_address, "--format", "raw", str(src)])
    assert r.returncode == 0, r.stderr
    r = run_cli(["produce", "-t", "cli_raw", "-m", cluster.master_address, "--limit", "5", "--delimiter", ";", "-"],
                input=b"a;b;c;d;e;f;g;h")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "o.jsonl"
    _consume_all(cluster, "cli_raw", "g_raw", out, count=6, fmt="json")
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert base64.b64decode(recs[0]["data_b64"]) == blob
    assert [r["data"] for r in recs[1:]] == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("role", ["master", "broker", "admin"])
def test_serve_on_a_taken_port_is_one_clean_line(tmp_path: Path, role: str) -> None:
    """The port stays held by this test's listening socket, so the child's bind must fail."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        ports = {"master": "0", "broker": "0", "admin": "0", role: str(port)}
        r = run_cli(["serve", "--data-dir", str(tmp_path / "d"), "--master-port", ports["master"],
                     "--broker-port", ports["broker"], "--admin-port", ports["admin"]], timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 3, err  # EXIT_PORT_IN_USE: whoever picked the port may pick another
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0] == (f"tubemq serve: cannot start the server: {role} port {port} on 127.0.0.1: address already "
                        "in use (choose another port, or 0 for any free one)"), err
    # then only the line to run instead: free ports, and the env file that tells the other commands
    assert len(lines) == 2 and lines[1].lstrip().startswith("another program listens there"), err
    assert "--master-port 0 --broker-port 0 --admin-port 0" in lines[1] and "tubemq-serve.env" in lines[1], err


def test_start_on_free_ports_starts_again_only_when_a_port_was_taken(tmp_path: Path) -> None:
    """The first start is told a port this test holds (as if another process took it between the pick
    and the bind): the child exits with EXIT_PORT_IN_USE and is started again on new ports. A child
    that fails for another reason is not started again."""
    import socket

    from tubemq.cli.common import EXIT_PORT_IN_USE, EXIT_USAGE, start_on_free_ports

    spawned: list[list[int]] = []

    def serve(ports: list[int], *extra: str) -> subprocess.Popen[bytes]:
        spawned.append(ports)
        return subprocess.Popen(
            [sys.executable, "-m", "tubemq", "serve", "--data-dir", str(tmp_path / "d"), "--master-port",
             str(ports[0]), "--broker-port", str(ports[1]), "--admin-port", str(ports[2]), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cli_env())

    with socket.create_server(("127.0.0.1", 0)) as held:
        taken = held.getsockname()[1]
        proc, ports = start_on_free_ports(lambda p: serve([taken, *p[1:]] if not spawned else p), 3, 60)
        try:
            assert proc.poll() is None and len(spawned) == 2 and ports == spawned[1] and taken not in ports
        finally:
            proc.terminate()
            proc.wait(60)
    spawned.clear()
    proc, _ = start_on_free_ports(lambda p: serve(p, "--brokers", "0"), 3, 60)  # a usage error
    assert proc.returncode == EXIT_USAGE != EXIT_PORT_IN_USE and len(spawned) == 1
