"""``admin_modify_topic_info`` on the embedded server over real HTTP and TCP on 127.0.0.1: a topic's
partitions grow while a producer and a consumer run (the new partitions get stores and are written and
read), a shrink is refused with the real master's text, acceptPublish=false stops sends with a typed
error, and ``tubemq topic set --partitions`` drives the same call."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from _support import FAST_CLIENT

import tubemq
from tubemq.admin import AdminClient
from tubemq.cli import main
from tubemq.errors import (
    AdminError,
    AdminRecordError,
    ForbiddenError,
    NoPartitionError,
    TopicNotPublishedError,
)

_PRODUCER = {"heartbeat_period_ms": 200}


def _conf(cluster: Any, name: str) -> Any:
    (conf,) = [t for t in cluster.topics() if t.name == name]
    return conf


def _send_until_partition(p: Any, topic: str, wanted: set[int], deadline_s: float = 60.0) -> set[int]:
    """Send until every partition id in ``wanted`` stored a message (the producer learns new partitions
    at its next heartbeat); returns the partition ids written."""
    seen: set[int] = set()
    end = time.monotonic() + deadline_s
    i = 0
    while not wanted <= seen and time.monotonic() < end:
        r = p.send(topic, b"m%d" % i)
        seen.add(r.partition_id)
        i += 1
        if i % 20 == 0:
            time.sleep(0.05)
    return seen


def test_partitions_grow_while_producer_and_consumer_run(cluster: Any) -> None:
    cluster.create_topic("grow", partitions=2)
    admin = AdminClient(cluster.admin_url)
    t0 = time.monotonic()
    with tubemq.Producer(cluster.master_address, **_PRODUCER) as p, tubemq.Consumer(
        cluster.master_address, group="gg", topics=["grow"], consume_from="earliest", **FAST_CLIENT
    ) as c:
        assert _send_until_partition(p, "grow", {0, 1}) >= {0, 1}
        rows = admin.update_topic("grow", partitions=4)
        assert [(r["brokerId"], r["success"]) for r in rows] == [(1, True)]
        info = admin.describe_topic("grow")
        assert info.total_partitions == 4 and info.deployments[0].partition_ids == [0, 1, 2, 3]
        written = _send_until_partition(p, "grow", {2, 3})
        assert {2, 3} <= written, written
        read: set[int] = set()
        end = time.monotonic() + 60
        while not {0, 1, 2, 3} <= read and time.monotonic() < end:
            batch = c.poll(timeout=1.0)
            if batch is None:
                continue
            read.update(m.partition.partition_id for m in batch.messages)
            c.confirm(batch)
        assert {0, 1, 2, 3} <= read, read
    print(f"grown and read on new partitions in {time.monotonic() - t0:.2f}s")


def test_shrink_is_refused_with_the_real_text(cluster: Any) -> None:
    cluster.create_topic("shr", partitions=3)
    admin = AdminClient(cluster.admin_url)
    with pytest.raises(AdminRecordError, match=r"1:shr: \[407\] Partition number less than before, new value is 2, "
                       r"current value is 3in brokerId-topicName\(1:shr\) record!") as err:
        admin.update_topic("shr", partitions=2)
    assert err.value.code == 407 and err.value.method == "admin_modify_topic_info"
    assert admin.describe_topic("shr").total_partitions == 3
    assert admin.update_topic("shr", partitions=3)[0]["errCode"] == 403  # unchanged: the real row, no error
    with pytest.raises(AdminError, match="ghost"):
        admin.update_topic("ghost", partitions=5, broker_ids=[1])


def test_raw_answer_shape_and_refusals(cluster: Any) -> None:
    """The answer per (broker, topic) record the client parses (tests/data/admin sample), and the
    parameter errors of the call itself."""
    import urllib.parse
    import urllib.request

    cluster.create_topic("raw", partitions=1)

    def call(**params: str) -> dict[str, Any]:
        q = urllib.parse.urlencode({"type": "op_modify", "method": "admin_modify_topic_info", **params})
        with urllib.request.urlopen(f"{cluster.admin_url}?{q}", timeout=30) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
        return answer

    ok = call(topicName="raw", brokerId="1", acceptSubscribe="false")
    assert ok["result"] is True and ok["count"] == 1
    assert ok["data"] == [{"brokerId": 1, "topicName": "raw", "success": True, "errCode": 200, "errInfo": "Ok!"}]
    assert _conf(cluster, "raw").accept_subscribe is False
    other = call(topicName="raw", brokerId="7", numPartitions="2")
    assert other["data"][0]["success"] is False and other["data"][0]["brokerId"] == 7
    assert _conf(cluster, "raw").num_partitions == 1  # a refused record changes nothing
    assert call(topicName="raw")["result"] is False  # nothing to modify
    assert call(topicName="raw", numPartitions="zero")["result"] is False


def test_accept_publish_false_stops_sends(cluster: Any) -> None:
    cluster.create_topic("closed_pub", partitions=1)
    admin = AdminClient(cluster.admin_url)
    # the refusal can come as a 444 once the producer's view has no partition left: after the message's
    # time-out, which is rpc_timeout_ms (3 s, the smallest allowed, instead of the 10 s default)
    with tubemq.Producer(cluster.master_address, **_PRODUCER, rpc_timeout_ms=3000) as p:
        p.send("closed_pub", b"before")
        admin.update_topic("closed_pub", accept_publish=False)
        assert admin.describe_topic("closed_pub").accept_publish is False
        with pytest.raises((ForbiddenError, NoPartitionError, TopicNotPublishedError)) as err:
            p.send("closed_pub", b"after", timeout=30)
        print("refused with", type(err.value).__name__, err.value)
        admin.update_topic("closed_pub", accept_publish=True)
        end = time.monotonic() + 60
        while True:
            try:
                p.send("closed_pub", b"again", timeout=30)
                break
            except (ForbiddenError, NoPartitionError, TopicNotPublishedError):
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)


def test_cli_topic_set_partitions(cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = cluster.admin_url
    assert main(["topic", "create", "cli_grow", "--partitions", "2", "--admin-url", url]) == 0
    assert main(["topic", "set", "cli_grow", "--partitions", "5", "--admin-url", url]) == 0
    assert AdminClient(url).describe_topic("cli_grow").total_partitions == 5
    capsys.readouterr()
    assert main(["topic", "set", "cli_grow", "--partitions", "1", "--admin-url", url]) != 0
    assert "Partition number less than before" in capsys.readouterr().err


def test_accept_subscribe_false_takes_the_partitions_from_consumers(cluster: Any) -> None:
    """The master stops assigning a topic that does not accept subscription: the next balance revokes
    the consumer's partitions, and switching it back gives them back."""
    cluster.create_topic("closed_sub", partitions=2)
    admin = AdminClient(cluster.admin_url)

    def wait_assigned(c: Any, want: int) -> int:
        end = time.monotonic() + 60
        while len(c.assignment()) != want and time.monotonic() < end:
            batch = c.poll(timeout=0.5)
            if batch is not None:
                c.confirm(batch)
        return len(c.assignment())

    with tubemq.Consumer(cluster.master_address, group="gs", topics=["closed_sub"], **FAST_CLIENT) as c:
        assert wait_assigned(c, 2) == 2
        admin.update_topic("closed_sub", accept_subscribe=False)
        assert admin.describe_topic("closed_sub").accept_subscribe is False
        assert wait_assigned(c, 0) == 0
        admin.update_topic("closed_sub", accept_subscribe=True)
        assert wait_assigned(c, 2) == 2


def test_growth_reaches_broker_processes(tmp_path: Path) -> None:
    """Master and two brokers as separate `tubemq serve` processes: the brokers learn the grown topic
    from their registration heartbeat and store messages on the new partitions of both."""
    from cluster.procs import ProcCluster

    with ProcCluster(tmp_path, brokers=2) as procs:
        procs.create_topic("pgrow", partitions=1)
        admin = AdminClient(procs.admin_urls[0])
        rows = admin.update_topic("pgrow", partitions=3)
        assert sorted((r["brokerId"], r["success"]) for r in rows) == [(1, True), (2, True)]
        seen: set[tuple[int, int]] = set()
        want = {(b, p) for b in (1, 2) for p in (0, 1, 2)}
        end = time.monotonic() + 60
        with tubemq.Producer(procs.master_address, **_PRODUCER) as p:
            while not want <= seen and time.monotonic() < end:
                try:
                    r = p.send("pgrow", b"x", timeout=30)
                except ForbiddenError:  # a broker that has not had its next heartbeat yet
                    time.sleep(0.1)
                    continue
                seen.add((r.partition.broker_id, r.partition_id))
        assert want <= seen, (seen, procs.logs())
