"""A master hands out a new topic's partitions on a broker process only once that broker loaded it.

A broker process loads a new topic at its next heartbeat to the master (server/registration.py). A
producer that registered in between used to be sent to the broker that had not loaded it yet, and half
of the failover recipe's first produce failed with "403 topicName orders not existed". Here a broker
process is played by its heartbeat calls, so each step is taken exactly when the test says.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tubemq.server import EmbeddedCluster

from .helpers import admin_call

FAST = {"broker_heartbeat_period_ms": 100, "broker_heartbeat_timeout_ms": 60000}


def _heartbeat(admin_url: str, broker_id: int, meta_version: int | str) -> int:
    """One broker heartbeat echoing ``meta_version``; returns the master's ``metaVersion`` answer."""
    query = urllib.parse.urlencode({"type": "op_modify", "method": "embedded_broker_heartbeat",
                                    "brokerId": broker_id, "brokerIp": "127.0.0.1",
                                    "brokerPort": 20000 + broker_id, "metaVersion": meta_version})
    with urllib.request.urlopen(f"{admin_url}?{query}", timeout=10) as r:
        answer: dict[str, Any] = json.loads(r.read())
    assert answer["result"], answer
    return int(answer["metaVersion"])


def _producer_brokers(c: EmbeddedCluster, topic: str) -> list[int]:
    """Broker ids in the producers' topicInfos for ``topic`` (``name#bid:parts:stores,...#size``)."""
    infos = c._call(lambda: c.server.master.topology.topic_infos([topic]))  # type: ignore[union-attr]
    return [int(item.split(":")[0]) for info in infos for item in info.split("#")[1].split(",")]


def _consumer_brokers(c: EmbeddedCluster, topic: str) -> set[int]:
    parts = c._call(lambda: c.server.master.topology.subscribable_partitions([topic]))  # type: ignore[union-attr]
    return {p.broker_id for p in parts}


def _synced(c: EmbeddedCluster) -> dict[int, bool]:
    return {b["brokerId"]: b["synced"] for b in admin_call(c.admin_url, "embedded_broker_status")["data"]}


def test_a_new_topic_is_handed_out_only_on_the_brokers_that_loaded_it(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path, role="master", **FAST) as c:
        version = {bid: _heartbeat(c.admin_url, bid, -1) for bid in (1, 2)}  # two broker processes join
        for bid in (1, 2):
            version[bid] = _heartbeat(c.admin_url, bid, version[bid])
        assert _synced(c) == {1: True, 2: True}

        c.create_topic("orders", 2)
        assert _producer_brokers(c, "orders") == []  # neither has loaded it: no partition yet
        assert _consumer_brokers(c, "orders") == set()
        assert _synced(c) == {1: False, 2: False}

        answered = _heartbeat(c.admin_url, 1, version[1])  # broker 1 is told; it has not loaded it yet
        assert _producer_brokers(c, "orders") == []
        _heartbeat(c.admin_url, 1, answered)  # broker 1 loaded the version that lists the topic
        assert _producer_brokers(c, "orders") == [1]
        assert _consumer_brokers(c, "orders") == {1}
        assert _synced(c) == {1: True, 2: False}

        answered = _heartbeat(c.admin_url, 2, version[2])
        _heartbeat(c.admin_url, 2, answered)
        assert _producer_brokers(c, "orders") == [1, 2]
        assert _consumer_brokers(c, "orders") == {1, 2}


def test_a_version_this_master_never_handed_out_counts_as_none(tmp_path: Path) -> None:
    """A broker's first heartbeat to a restarted master echoes the old master process's version."""
    with EmbeddedCluster(tmp_path, role="master", **FAST) as c:
        c.create_topic("orders", 1)
        answered = _heartbeat(c.admin_url, 1, 999)  # as high as any version here: still not this master's
        assert _synced(c) == {1: False}
        assert _producer_brokers(c, "orders") == []
        _heartbeat(c.admin_url, 1, answered)
        assert _synced(c) == {1: True}
        assert _producer_brokers(c, "orders") == [1]
