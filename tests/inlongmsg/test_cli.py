"""``tubemq produce|consume --format inlongmsg`` as subprocesses against an embedded server on 127.0.0.1."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli.helpers import run_cli

import tubemq
from tubemq.inlongmsg import InLongMsgBuilder, decode, parse_attr


@pytest.fixture
def cli_cluster(tmp_path: Path) -> Iterator[Any]:
    """Short balance rounds, real client timeouts (the CLI clients heartbeat at their own periods)."""
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path / "tubemq-data", balance_period_ms=200) as c:
        yield c


def _consume_messages(master: str, topic: str, group: str, want: int) -> list[Any]:
    got: list[Any] = []
    with tubemq.Consumer(master, group=group, topics=[topic], consume_from="earliest",
                         iter_timeout_ms=60000) as consumer:
        for msg in consumer:
            got.append(msg)
            if len(got) >= want:
                break
    return got


def test_consume_format_inlongmsg(cli_cluster: Any, tmp_path: Path) -> None:
    cli_cluster.create_topic("inl_consume", partitions=1)
    expected: list[tuple[str, bytes]] = []
    containers = []
    for c in range(3):
        b = InLongMsgBuilder(version=1 + c % 2, compress=False)
        for i in range(5):
            attr = f"groupId=g&streamId=s{i % 2}&dt=1700000000000"
            body = f"container {c} record {i}".encode() if i != 4 else b"\xff\xfe binary"
            b.add(attr, body)
        containers.append(b.build(1700000000000 + c))
        m = decode(containers[-1])
        expected += list(m)
    with tubemq.Producer(cli_cluster.master_address) as producer:
        producer.send("inl_consume", b"not an inlong container")
        for data in containers:
            producer.send("inl_consume", data)
    out = tmp_path / "records.jsonl"
    # --count counts records with --format inlongmsg: the 15 of the 3 containers
    r = run_cli(["consume", "--topic", "inl_consume", "--group", "g_inl", "--master", cli_cluster.master_address,
                 "--format", "inlongmsg", "--count", "15", "--timeout", "10", "--output", str(out)], timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"not an InLong container" in r.stderr  # the plain message is reported and skipped
    recs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    got = [(rec["attr"], rec["body"].encode() if "body" in rec else base64.b64decode(rec["body_b64"]))
           for rec in recs]
    assert got == expected
    assert all(rec["attributes"] == parse_attr(rec["attr"]) for rec in recs)
    assert {rec["create_time"] for rec in recs} == {1700000000000, 1700000000001, 1700000000002}
    assert all(rec["topic"] == "inl_consume" and rec["partition"] == 0 for rec in recs)


def test_produce_format_inlongmsg(cli_cluster: Any) -> None:
    cli_cluster.create_topic("inl_produce", partitions=1)
    lines = [f"event {i} {'x' * (i % 40)}" for i in range(200)]
    r = run_cli(["produce", "--topic", "inl_produce", "--master", cli_cluster.master_address,
                 "--format", "inlongmsg", "--attrs", "groupId=g&streamId=s", "--capacity", "1000",
                 "--json-summary", "-"], input=("\n".join(lines) + "\n\n").encode(), timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    containers = summary["acknowledged"]
    assert 5 < containers < 50 and summary["failed"] == 0 and summary["skipped_empty"] == 1
    records: list[bytes] = []
    for msg in _consume_messages(cli_cluster.master_address, "inl_produce", "g_check", containers):
        assert msg.stream_id == "s"  # the InLong streamId, as DataProxy sets it
        m = msg.inlongmsg()
        assert m.version == 1 and m.attrs == ("groupId=g&streamId=s",)
        records += m.bodies("groupId=g&streamId=s")
    assert [x.decode() for x in records] == lines


def test_produce_inlongmsg_usage_errors(cli_cluster: Any) -> None:
    master = cli_cluster.master_address
    r = run_cli(["produce", "-t", "t", "-m", master, "--attrs", "a=1", "-"], input=b"x\n")
    assert r.returncode == 2 and b"--format inlongmsg" in r.stderr
    r = run_cli(["produce", "-t", "t", "-m", master, "--format", "inlongmsg", "--attrs", "nokv", "-"], input=b"x\n")
    assert r.returncode == 2 and b"attribute string" in r.stderr and b"Traceback" not in r.stderr
