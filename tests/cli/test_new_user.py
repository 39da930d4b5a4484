"""What a new user ran into (issue 25, items 1-6), each kept fixed: a server that returns when ready,
host names and URLs as --master, a hint for a missing topic, --count in messages/records with the
commit said, and help texts without noise."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import cli_env, run_cli

POSIX = pytest.mark.skipif(sys.platform == "win32", reason="`tubemq serve --detach` is POSIX only")


@pytest.fixture
def detached(tmp_path: Path) -> Iterator[tuple[dict[str, str], str, Path]]:
    """`tubemq serve --detach` on free ports: (environment, master address, data dir); killed after."""
    env = cli_env(TUBEMQ_RUNTIME_DIR=str(tmp_path / "run"))
    data = tmp_path / "tubemq-data"
    args = ["serve", "--data-dir", str(data), "--master-port", "0", "--broker-port", "0", "--admin-port", "0",
            "--detach"]
    r = run_cli(args, env=env, timeout=120)
    out = r.stdout.decode()
    print(out, r.stderr.decode())
    assert r.returncode == 0, r.stderr.decode()
    m = re.search(r"ready \(master (\S+), admin (\S+), pid (\d+)\)", out)
    assert m, out
    pid = int(m.group(3))
    assert int((data / "tubemq-serve.pid").read_text()) == pid
    # the addresses for the next commands, as a shell sources them
    assert (data / "tubemq-serve.env").read_text() == (f"export TUBEMQ_MASTER={m.group(1)}\n"
                                                      f"export TUBEMQ_ADMIN_URL={m.group(2)}\n")
    try:
        yield env, m.group(1), data
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


@POSIX
def test_serve_detach_returns_when_serving(detached: tuple[dict[str, str], str, Path]) -> None:
    env, master, data = detached
    # the very next command works: no "connection refused" race
    port = master.rpartition(":")[2]
    r = run_cli(["topic", "create", "orders", "--master", f"localhost:{port}"], env=env)
    assert r.returncode == 0, r.stderr.decode()
    r = run_cli(["produce", "--topic", "orders", "--master", master], input=b"a\nb\nc\n", env=env)
    assert r.returncode == 0, r.stderr.decode()
    # the recipe run a second time: the server is already there, and says so
    again = run_cli(["serve", "--data-dir", str(data), "--master-port", "0", "--broker-port", "0",
                     "--admin-port", "0", "--detach"], env=env)
    assert again.returncode == 0, again.stderr.decode()
    assert "already running" in again.stderr.decode()


@POSIX
def test_serve_detach_reports_a_taken_port(detached: tuple[dict[str, str], str, Path], tmp_path: Path) -> None:
    env, master, _ = detached
    port = master.rpartition(":")[2]
    r = run_cli(["serve", "--data-dir", str(tmp_path / "other"), "--master-port", port, "--broker-port", "0",
                 "--admin-port", "0", "--detach"], env=env, timeout=120)
    assert r.returncode == 3, (r.returncode, r.stderr.decode())
    assert "before it was ready" in r.stderr.decode()
    # what to run instead, and no pid file of a server that never ran
    assert "--master-port 0 --broker-port 0 --admin-port 0" in r.stderr.decode()
    assert "tubemq-serve.env" in r.stderr.decode()
    assert not (tmp_path / "other" / "tubemq-serve.pid").exists()


@POSIX
def test_host_name_master_finds_the_published_admin_api(detached: tuple[dict[str, str], str, Path]) -> None:
    env, master, _ = detached
    r = run_cli(["topic", "list", "--master", "localhost:" + master.rpartition(":")[2]], env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert "TOPIC" in r.stdout.decode()


def test_url_as_master_is_a_clear_usage_error() -> None:
    for command in (["topic", "list"], ["consume", "--topic", "t", "--group", "g"], ["produce", "--topic", "t"]):
        r = run_cli([*command, "--master", "http://127.0.0.1:8080/webapi.htm"], input=b"")
        err = r.stderr.decode()
        assert r.returncode == 2, err
        assert "--admin-url" in err and "HOST:PORT" in err, err


def test_consuming_a_missing_topic_says_create_it(cluster: Any) -> None:
    r = run_cli(["consume", "--master", cluster.master_address, "--topic", "missing", "--group", "g",
                 "--count", "1", "--timeout", "30"], timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "431" in err and "tubemq topic create" in err, err


def test_consume_count_counts_messages_and_says_what_it_committed(cluster: Any) -> None:
    import tubemq

    cluster.create_topic("counted", partitions=1)
    with tubemq.Producer(cluster.master_address) as p:
        for i in range(20):
            p.send("counted", b"m%d" % i)
    base = ["consume", "--master", cluster.master_address, "--topic", "counted", "--group", "g1",
            "--timeout", "20", "--no-progress"]
    r = run_cli([*base, "--count", "5"], timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().splitlines() == [f"m{i}" for i in range(5)]
    err = r.stderr.decode()
    m = re.search(r"committed\s+(\d+) messages; (\d+) of a batch cut by --count were not", err)
    assert m, err
    done = int(m.group(1))  # whole batches before the cut (one partition: the first ones)
    assert done < 5
    # the rest, read in whole batches up to the end of the topic: all committed, nothing left for the group
    r = run_cli([*base, "--count", str(20 - done)], timeout=120)
    assert r.stdout.decode().splitlines() == [f"m{i}" for i in range(done, 20)], r.stderr.decode()
    assert re.search(rf"committed\s+{20 - done} messages\s*$", r.stderr.decode(), re.M), r.stderr.decode()
    r = run_cli([*base, "--timeout", "4"], timeout=120)
    assert r.stdout == b"", r.stdout


def test_consume_count_inlongmsg_counts_records(cluster: Any) -> None:
    import tubemq
    from tubemq.inlongmsg import InLongMsgBuilder

    cluster.create_topic("inl", partitions=1)
    with tubemq.Producer(cluster.master_address) as p:
        for c in range(3):
            b = InLongMsgBuilder(version=1, compress=False)
            for i in range(100):
                b.add("groupId=g&streamId=s", b"r%d-%d" % (c, i))
            p.send("inl", b.build())
    r = run_cli(["consume", "--master", cluster.master_address, "--topic", "inl", "--group", "g",
                 "--format", "inlongmsg", "--count", "3", "--timeout", "20", "--no-progress"], timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert len(r.stdout.decode().splitlines()) == 3, r.stdout.decode()[:500]
    assert re.search(r"records\s+3\b", r.stderr.decode()), r.stderr.decode()


@pytest.mark.parametrize("command", [["serve"], ["produce"], ["consume"], ["demo"], ["bench", "produce"],
                                     ["bench", "consume"], ["topic", "create"]])
def test_help_texts_are_clean(command: list[str]) -> None:
    r = run_cli([*command, "--help"])
    text = r.stdout.decode()
    assert r.returncode == 0 and text
    assert "(default: None)" not in text
    assert "``" not in text and ":mod:" not in text and "tubemq.cli" not in text
    if command == ["bench", "consume"]:
        assert "--duration" not in text
