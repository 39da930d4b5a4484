"""Several brokers in one process: ids, ports, store directories, and the metadata clients see
(topicInfo, brokerInfos, subscribeInfo, admin topicInfo) listing every broker of a topic."""

from __future__ import annotations

import errno
import time
from collections import Counter
from pathlib import Path

import tubemq
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

from .helpers import admin_call


def test_three_brokers_in_one_process(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path, brokers=3, broker_id=4, **FAST_TIMERS) as cluster:
        addrs = cluster.broker_addresses
        assert len(addrs) == 3 and len(set(addrs)) == 3
        cluster.create_topic("wide", partitions=2)
        cluster.create_topic("narrow", partitions=2, broker_ids=[5])
        for bid in (4, 5, 6):
            assert (tmp_path / f"broker-{bid}" / "store" / "wide").is_dir()
        assert (tmp_path / "broker-5" / "store" / "narrow").is_dir()
        assert not (tmp_path / "broker-4" / "store" / "narrow").exists()
        # the producer's view: topicInfo lists each broker of the topic
        master = cluster.server.master
        infos = cluster._call(master.topic_infos, ["wide", "narrow"])
        assert infos == ["narrow#5:2:1#", "wide#4:2:1,5:2:1,6:2:1#"]
        assert [b.split(":")[0] for b in cluster._call(master.broker_infos, False)] == ["4", "5", "6"]
        # the admin view
        rec = {t["topicName"]: t for t in admin_call(cluster.admin_url, "admin_query_topic_info")["data"]}
        assert [i["brokerId"] for i in rec["wide"]["topicInfo"]] == [4, 5, 6]
        assert rec["wide"]["totalCfgNumPart"] == 6 and rec["narrow"]["infoCount"] == 1
        with tubemq.Producer(cluster.master_address) as producer:
            results = [producer.send("wide", b"%d" % i) for i in range(120)]
            narrow = {producer.send("narrow", b"n").broker_id for _ in range(10)}
        spread = Counter((r.broker_id, r.partition_id) for r in results)
        print(f"\nsends per (broker, partition): {dict(sorted(spread.items()))}")
        assert len(spread) == 6 and min(spread.values()) >= 10
        assert narrow == {5}
        # a consumer group: subscribeInfo strings of every broker, all partitions assigned
        with tubemq.Consumer(cluster.master_address, group="g", topics=["wide"], consume_from="earliest",
                             iter_timeout_ms=5000) as consumer:
            got: Counter[int] = Counter()
            for msg in consumer:
                got[msg.partition.broker_id] += 1
                if sum(got.values()) == 120:
                    break
            detail = cluster._call(master.group_detail, "g")
        # every message sent is consumed once (compared per broker with where the sends were stored)
        assert got == Counter(r.broker_id for r in results) and set(got) == {4, 5, 6}
        brokers = {p["brokerAddr"].split(":")[0] for p in detail["data"][0]["parInfo"]}
        assert brokers == {"4", "5", "6"}


def test_broker_down_in_process_moves_partitions(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path, brokers=2, **FAST_TIMERS) as cluster:
        cluster.create_topic("tt", partitions=1)
        with tubemq.Producer(cluster.master_address, heartbeat_period_ms=300) as producer:
            assert {producer.send("tt", b"x").broker_id for _ in range(6)} == {1, 2}
            cluster.stop_broker(2)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the next heartbeat drops broker 2's partition
                try:
                    if {producer.send("tt", b"z").broker_id for _ in range(6)} == {1}:
                        break
                except tubemq.TubeMQError:
                    pass
                time.sleep(0.05)
            else:
                raise AssertionError("sends did not move to broker 1")
            cluster.start_broker(2)
            deadline = time.monotonic() + 10
            while {producer.send("tt", b"w").broker_id for _ in range(6)} != {1, 2}:
                assert time.monotonic() < deadline, "broker 2 not used again after its restart"
                time.sleep(0.1)


def _two_free_ports_below_the_ephemeral_range() -> int:
    """A base port with base and base + 1 free, below Linux's ephemeral range (32768+), so that no
    outgoing connection of another test can take either between this check and the bind."""
    import random
    import socket

    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", base))
                b.bind(("127.0.0.1", base + 1))
        except OSError:
            continue
        return base
    raise AssertionError("no two consecutive free ports in 20000..32000")


def test_broker_ports_count_up(tmp_path: Path) -> None:
    for attempt in range(5):
        base = _two_free_ports_below_the_ephemeral_range()
        try:
            with EmbeddedCluster(tmp_path / str(attempt), brokers=2, broker_port=base) as cluster:
                ports = [int(a.rsplit(":", 1)[1]) for a in cluster.broker_addresses]
        except OSError as exc:  # another process bound one of them after the check: pick again
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        assert ports == [base, base + 1]
        return
    raise AssertionError("five port pairs were taken between the check and the bind")


def test_bad_cluster_options_name_the_field(tmp_path: Path) -> None:
    import pytest

    from tubemq.errors import ConfigError

    for kwargs, field in [
        ({"brokers": 0}, "brokers"),
        ({"role": "router"}, "role"),
        ({"role": "broker"}, "master_admin_url"),
        ({"broker_heartbeat_timeout_ms": 0}, "broker_heartbeat_timeout_ms"),
        ({"first_balance_delay_ms": "soon"}, "first_balance_delay_ms"),
    ]:
        with pytest.raises(ConfigError) as info:
            EmbeddedCluster(tmp_path, **kwargs)
        assert info.value.field == field, (kwargs, info.value)
    with EmbeddedCluster(tmp_path, brokers=2) as cluster:
        with pytest.raises(ConfigError, match="no broker"):
            cluster.create_topic("lost", broker_ids=[7])


def test_group_offsets_cover_every_broker(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path, brokers=2, **FAST_TIMERS) as cluster:
        cluster.create_topic("off", partitions=1)
        with tubemq.Producer(cluster.master_address) as producer:
            for i in range(4):
                producer.send("off", b"%d" % i)
        with tubemq.Consumer(cluster.master_address, group="og", topics=["off"], consume_from="earliest",
                             iter_timeout_ms=5000) as consumer:
            n = 0
            for _ in consumer:
                n += 1
                if n == 4:
                    break
        rows = cluster.group_offsets("og")
    assert sorted((r["broker_id"], r["partition_id"]) for r in rows) == [(1, 0), (2, 0)]
    assert all(r["max_offset"] == 56 for r in rows)
