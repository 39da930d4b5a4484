"""Two master processes, the first active, the second a standby watching it (``--peer-master``);
the active one is SIGKILLed. The standby takes over after ``takeover_after_ms`` (2 s; the real masters
elect through BDB-JE) and the clients, configured with both addresses, move to it within two
heartbeat periods of it becoming active. Printed: takeover time, client move times."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from _support import needs_sigkill

import tubemq

from .helpers import admin_call
from .procs import ProcCluster

HB_MS = 1000
#: generous limit for the clients' move (expected: two heartbeat periods; CI is a loaded 2-core machine)
MOVE_LIMIT_S = 15.0


def _standby(c: ProcCluster, master: int) -> bool:
    return bool(admin_call(c.admin_urls[master], "embedded_broker_status")["masterStandby"])


def _group_members(c: ProcCluster, master: int) -> int:
    d = admin_call(c.admin_urls[master], "admin_query_consume_group_detail", consumeGroup="ha")
    return int(d.get("count", 0))


def _wait(pred: Any, timeout: float, what: str) -> float:
    while not pred():
        if time.monotonic() > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
    return time.monotonic()


@needs_sigkill
def test_standby_master_takes_over(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=2, masters=2) as c:
        c.create_topic("ha", 1)
        c.wait_brokers(lambda b: b["synced"], 2, master=1)
        assert not _standby(c, 0) and _standby(c, 1)
        with tubemq.Producer(c.master_address, heartbeat_period_ms=HB_MS) as producer, tubemq.Consumer(
            c.master_address, group="ha", topics=["ha"], consume_from="earliest", heartbeat_period_ms=HB_MS
        ) as consumer:
            producer.send("ha", b"before")
            batch = None
            deadline = time.monotonic() + 20
            while batch is None and time.monotonic() < deadline:
                batch = consumer.poll(timeout=0.5)
            assert batch is not None and [bytes(m.data) for m in batch] == [b"before"]
            consumer.confirm(batch)
            assert _group_members(c, 0) == 1
            t_kill = time.monotonic()
            c.kill(c.masters[0])
            t_active = _wait(lambda: not _standby(c, 1), t_kill + 20, "the standby to take over")
            t_consumer = _wait(lambda: _group_members(c, 1) == 1, t_active + 20, "the consumer on master 2")
            t_producer = _wait(
                lambda: producer.metrics()["master"]["address"] == c.master_address.split(",")[1]
                and producer.metrics()["master"]["registered"],
                t_active + 20,
                "the producer on master 2",
            )
            producer.send("ha", b"after")
            got = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                b = consumer.poll(timeout=0.5)
                if b is not None:
                    got = [bytes(m.data) for m in b]
                    consumer.confirm(b)
        print(
            f"\nstandby active {t_active - t_kill:.2f} s after the kill; consumer registered there"
            f" {t_consumer - t_active:.2f} s later, producer {t_producer - t_active:.2f} s later"
            f" (heartbeat period {HB_MS / 1000:.1f} s)"
        )
        assert got == [b"after"]
        # expected: within two heartbeat periods (printed above); asserted: they move, with a generous limit
        assert t_consumer - t_active <= MOVE_LIMIT_S
        assert t_producer - t_active <= MOVE_LIMIT_S
