"""``tubemq group ...`` and ``tubemq topic ...`` on the public admin client, against the embedded server
over HTTP on 127.0.0.1 (in-process ``main``; the subprocess form is covered by tests/cli)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from _support.produce import send_around_a_split

import tubemq
from tubemq.cli import main
from tubemq.cli.group import parse_time


def _offsets(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["group", "offsets", "g1", "--admin-url", url, "-o", "json", *extra]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return rows


def test_group_commands(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = cluster.admin_url
    assert main(["topic", "create", "cli_t", "--partitions", "2", "--admin-url", url]) == 0
    with tubemq.Producer(cluster.master_address) as p:
        split = send_around_a_split(p, "cli_t", [b"x%d" % i for i in range(4)], [b"y%d" % i for i in range(4)])
    assert main(["group", "reset", "g1", "--topic", "cli_t", "--to-latest", "--admin-url", url]) == 0
    rows = _offsets(url, capsys)
    assert [(r["topic"], r["partition_id"], r["offset"], r["lag"]) for r in rows] == [
        ("cli_t", 0, 224, 0), ("cli_t", 1, 224, 0)
    ]
    assert main(["group", "reset", "g1", "--topic", "cli_t", "--to-datetime", str(split), "--dry-run",
                 "--admin-url", url]) == 0
    assert "112" in capsys.readouterr().out
    assert [r["offset"] for r in _offsets(url, capsys)] == [224, 224]  # dry run changed nothing
    assert main(["group", "reset", "g1", "--topic", "cli_t", "--to-datetime", str(split), "--admin-url", url]) == 0
    assert [r["offset"] for r in _offsets(url, capsys)] == [112, 112]
    assert main(["group", "reset", "g1", "--topic", "cli_t", "--to-earliest", "--admin-url", url]) == 0
    assert [r["lag"] for r in _offsets(url, capsys)] == [224, 224]
    assert main(["group", "reset", "g1", "--topic", "cli_t", "--to-offset", "56", "--admin-url", url]) == 0
    assert [r["offset"] for r in _offsets(url, capsys, "--topic", "cli_t")] == [56, 56]
    assert main(["group", "clone", "g1", "g2", "--admin-url", url]) == 0
    capsys.readouterr()
    assert main(["group", "list", "--admin-url", url]) == 0
    assert capsys.readouterr().out.split() == ["g1", "g2"]
    assert main(["group", "offsets", "g2", "--admin-url", url]) == 0
    out = capsys.readouterr().out
    assert "LAG" in out and "cli_t" in out
    assert main(["group", "describe", "g1", "--admin-url", url]) == 1  # no member online: unknown to the master
    assert "group g1 is not known to the master" in capsys.readouterr().err


def test_group_reset_refusals(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = cluster.admin_url
    assert main(["group", "reset", "g1", "--topic", "nope", "--to-earliest", "--admin-url", url]) == 1
    assert "nope" in capsys.readouterr().err
    assert main(["group", "reset", "g1", "--topic", "nope", "--to-datetime", "yesterday", "--admin-url", url]) == 2
    assert main(["group", "clone", "ghost", "g2", "--admin-url", url]) == 1
    assert "ghost" in capsys.readouterr().err


def test_parse_time() -> None:
    assert parse_time("1700000000000") == 1700000000000
    assert parse_time("2026-01-31T12:00:00Z").utcoffset() is not None  # type: ignore[union-attr]


def test_group_command_as_a_process(cluster: Any) -> None:
    """The installed entry point: a real ``python -m tubemq`` process over HTTP."""
    import os
    import subprocess
    import sys

    url = cluster.admin_url
    cluster.create_topic("proc_t", partitions=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUBEMQ_")}

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "tubemq", *args, "--admin-url", url],
                              capture_output=True, timeout=60, env=env)

    r = run("group", "reset", "gp", "--topic", "proc_t", "--to-latest")
    assert r.returncode == 0, r.stderr
    r = run("group", "offsets", "gp", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [(row["topic"], row["offset"]) for row in json.loads(r.stdout)] == [("proc_t", 0)]
    r = run("group", "reset", "gp", "--topic", "proc_t")
    assert r.returncode == 2 and b"one of the arguments" in r.stderr and b"Traceback" not in r.stderr


def test_reset_to_datetime_by_msg_time(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """--by-msg-time: the offsets from the messages' own msgTime (what works on a real broker), set for the group."""
    import datetime as dt
    import urllib.parse


    cluster.create_topic("cli_ts", partitions=2)
    minutes = ["202601011200"] * 6 + ["202601011202"] * 5
    with tubemq.Producer(cluster.master_address) as p:
        for i, m in enumerate(minutes):
            p.send("cli_ts", b"v%02d" % i, msg_time=m)
    port = urllib.parse.urlsplit(cluster.admin_url).port
    when = dt.datetime(2026, 1, 1, 12, 1, 30).isoformat()
    conn = ["--master", cluster.master_address, "--admin-port", str(port)]
    assert main(["group", "reset", "gts", "--topic", "cli_ts", "--to-datetime", when, "--by-msg-time",
                 "--dry-run", *conn]) == 0
    assert "NEW_OFFSET" in capsys.readouterr().out
    assert main(["group", "reset", "gts", "--topic", "cli_ts", "--to-datetime", when, "--by-msg-time", *conn]) == 0
    capsys.readouterr()
    got: list[bytes] = []
    with tubemq.Consumer(cluster.master_address, group="gts", topics=["cli_ts"], consume_from="latest") as c:
        end = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < end:
            batch = c.poll(timeout=1.0)
            if batch is not None:
                got += [m.data for m in batch]
                c.confirm(batch)
    assert sorted(got) == [b"v%02d" % i for i in range(6, 11)]  # exactly the 12:02 messages
    assert main(["group", "reset", "gts", "--topic", "cli_ts", "--to-datetime", when, "--by-msg-time",
                 "--admin-url", cluster.admin_url]) == 2  # the search needs the master
