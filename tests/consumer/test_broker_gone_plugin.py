"""``on_partitions_lost`` when the broker goes away, through the pytest plugin (``tubemq_cluster``).

The member holds both partitions' batches unconfirmed, so no fetch is in flight when the broker stops:
only the broker closing its connection tells the member. ``stop_broker()`` closes the listener and its
connections (FIN) like a SIGKILLed broker's kernel does; the member must report the loss through the
lost hook at once, not wait for the master's revoke (which comes with a heartbeat answer, here at
most 30 s later, and would report it through ``on_partitions_revoked``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from _support import wait_for

import tubemq


@pytest.mark.tubemq_cluster(topics={"gone": 2})
def test_stop_broker_reports_partitions_lost(tubemq_cluster: Any, tubemq_master: str) -> None:
    with tubemq.Producer(tubemq_master) as p:
        for i in range(200):
            p.send("gone", b"g%d" % i)
    lock = threading.Lock()
    lost: list[str] = []
    revoked: list[str] = []

    def hook(into: list[str]) -> Any:
        def record(parts: list[Any]) -> None:
            with lock:
                into.extend(x.key for x in parts)
        return record

    with tubemq.Consumer(tubemq_master, group="g_gone", topics=["gone"], consume_from="earliest",
                         heartbeat_period_ms=30000, on_partitions_lost=hook(lost),
                         on_partitions_revoked=hook(revoked)) as c:
        held: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while len(held) < 2 and time.monotonic() < deadline:
            batch = c.poll(0.5)
            if batch is not None:
                held[batch.partition.key] = batch  # kept unconfirmed: no fetch of that partition runs
        assert sorted(held) == ["1:gone:0", "1:gone:1"]
        t0 = time.monotonic()
        tubemq_cluster.stop_broker()
        wait_for(lambda: len(lost) == 2, 15, "on_partitions_lost for both partitions")
        print(f"on_partitions_lost {time.monotonic() - t0:.2f} s after stop_broker(): {lost}")
        assert sorted(lost) == ["1:gone:0", "1:gone:1"]
        assert revoked == []
        assert c.metrics()["counters"]["consumer.partitions_lost"] == 2
        assert all(c.confirm(b) is False for b in held.values())  # stale: nothing claims a commit
