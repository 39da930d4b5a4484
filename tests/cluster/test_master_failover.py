"""Two master processes, the first active, the second a standby (``--standby --peer-master``), brokers
reporting to both. The active one is SIGKILLed. The standby holds the same topics and brokers as the
active master (it copies them, server/replication.py). It takes over once the active master's port has
been unreachable for ``takeover_after_ms`` (2 s), and clients given both addresses follow. Nothing
acknowledged is lost, and a consumer group resumes where it committed (the brokers keep the offsets).
A restarted old master joins as the new standby. The limits are generous; the figures are printed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from _support import needs_sigkill, wait_for

import tubemq

from .helpers import admin_call
from .procs import ProcCluster

HB_MS = 1000
LIMIT_S = 60.0


def _status(c: ProcCluster, master: int) -> dict[str, Any]:
    return admin_call(c.admin_urls[master], "embedded_broker_status")


def _standby(c: ProcCluster, master: int) -> bool:
    return bool(_status(c, master)["masterStandby"])


def _topics(c: ProcCluster, master: int) -> dict[str, list[int]]:
    data = admin_call(c.admin_urls[master], "admin_query_topic_info")["data"]
    return {t["topicName"]: sorted(r["brokerId"] for r in t["topicInfo"]) for t in data}


def _group_members(c: ProcCluster, master: int, group: str) -> int:
    d = admin_call(c.admin_urls[master], "admin_query_consume_group_detail", consumeGroup=group)
    return int(d.get("count", 0))


def _wait(pred: Any, timeout: float, what: str) -> float:
    """wait_for, then the time it was met (the takeover test prints the order things happened in)."""
    wait_for(pred, timeout, what)
    return time.monotonic()


def _consume(consumer: tubemq.Consumer, want: int | set[bytes], limit_s: float = LIMIT_S) -> list[bytes]:
    """Poll and confirm until ``want`` messages (a count, or these very messages) arrived, or the limit."""
    got: list[bytes] = []
    deadline = time.monotonic() + limit_s

    def done() -> bool:
        return len(got) >= want if isinstance(want, int) else set(got) >= want

    while not done() and time.monotonic() < deadline:
        batch = consumer.poll(timeout=0.5)
        if batch is not None:
            got += [bytes(m.data) for m in batch]
            assert consumer.confirm(batch)
    return got


@needs_sigkill
def test_standby_master_takes_over(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=2, masters=2) as c:
        c.create_topic("ha", 1)  # once, on the active master
        _wait(lambda: _topics(c, 1) == {"ha": [1, 2]}, LIMIT_S, "the standby to copy the topic")
        c.wait_brokers(lambda b: b["online"] and b["synced"], 2, master=1)  # the brokers report to it too
        assert not _standby(c, 0) and _standby(c, 1)
        with tubemq.Producer(c.master_address, heartbeat_period_ms=HB_MS) as producer, tubemq.Consumer(
            c.master_address, group="ha", topics=["ha"], consume_from="earliest", heartbeat_period_ms=HB_MS
        ) as consumer:
            producer.send("ha", b"before")
            assert _consume(consumer, 1) == [b"before"]
            assert _group_members(c, 0, "ha") == 1
            t_kill = time.monotonic()
            c.kill(c.masters[0])
            t_active = _wait(lambda: not _standby(c, 1), LIMIT_S, "the standby to take over")
            t_consumer = _wait(lambda: _group_members(c, 1, "ha") == 1, LIMIT_S, "the consumer on master 2")
            t_producer = _wait(
                lambda: producer.metrics()["master"]["address"] == c.master_address.split(",")[1]
                and producer.metrics()["master"]["registered"],
                LIMIT_S,
                "the producer on master 2",
            )
            assert _topics(c, 1) == {"ha": [1, 2]}
            assert _status(c, 1)["masterTerm"] == 1
            producer.send("ha", b"after")
            got = _consume(consumer, 1)
        print(
            f"\nstandby active {t_active - t_kill:.2f} s after the kill; consumer registered there"
            f" {t_consumer - t_active:.2f} s later, producer {t_producer - t_active:.2f} s later"
            f" (heartbeat period {HB_MS / 1000:.1f} s)"
        )
        assert got == [b"after"]


@needs_sigkill
def test_nothing_acknowledged_lost_and_the_group_resumes_at_its_offset(tmp_path: Path) -> None:
    """A producer sends throughout the kill; the group confirms 300 messages before it and a new member
    of the same group, on the new active master, reads exactly what follows them."""
    with ProcCluster(tmp_path, brokers=2, masters=2) as c:
        c.create_topic("keep", 2)
        _wait(lambda: "keep" in _topics(c, 1), LIMIT_S, "the standby to copy the topic")
        acked: list[bytes] = []
        failed: list[BaseException] = []
        stop = threading.Event()
        with tubemq.Producer(c.master_address, heartbeat_period_ms=HB_MS) as producer:
            for i in range(300):
                producer.send("keep", b"%06d" % i)
                acked.append(b"%06d" % i)
            with tubemq.Consumer(
                c.master_address, group="g", topics=["keep"], consume_from="earliest", heartbeat_period_ms=HB_MS
            ) as consumer:
                first = _consume(consumer, 300)
            assert sorted(first) == acked  # confirmed: the brokers hold the group's offsets

            def produce() -> None:
                i = 300
                while not stop.is_set():
                    data = b"%06d" % i
                    i += 1
                    try:
                        producer.send("keep", data)
                        acked.append(data)
                    except tubemq.errors.TubeMQError as exc:  # in flight at the kill, or no master yet
                        failed.append(exc)
                        time.sleep(0.05)

            sender = threading.Thread(target=produce)
            sender.start()
            try:
                _wait(lambda: len(acked) >= 400, LIMIT_S, "sends before the kill")
                t_kill = time.monotonic()
                c.kill(c.masters[0])
                _wait(lambda: not _standby(c, 1), LIMIT_S, "the standby to take over")
                n_at_takeover = len(acked)
                _wait(lambda: len(acked) >= n_at_takeover + 200, LIMIT_S, "sends through the new master")
                t_resumed = time.monotonic()
            finally:
                stop.set()
                sender.join(LIMIT_S)
        with tubemq.Consumer(
            c.master_address, group="g", topics=["keep"], consume_from="earliest", heartbeat_period_ms=HB_MS
        ) as consumer:
            rest = _consume(consumer, set(acked[300:]))  # from the committed offsets: first is not read again
        print(
            f"\n{len(acked)} acknowledged ({len(failed)} sends failed, typed), sends resumed"
            f" {t_resumed - t_kill:.2f} s after the kill; second member read {len(rest)}"
        )
        assert all(isinstance(e, tubemq.errors.TubeMQError) for e in failed)
        assert set(rest) >= set(acked[300:]), "acknowledged messages were lost"
        assert not set(rest) & set(first), "the group did not resume at its committed offset"


@needs_sigkill
def test_a_restarted_old_master_joins_as_standby(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=1, masters=2) as c:
        c.create_topic("one", 1)
        _wait(lambda: "one" in _topics(c, 1), LIMIT_S, "the standby to copy the topic")
        c.kill(c.masters[0])
        _wait(lambda: not _standby(c, 1), LIMIT_S, "the standby to take over")
        r = admin_call(c.admin_urls[1], "admin_add_new_topic_record", type="op_modify", topicName="two",
                       numPartitions=1, brokerId="1")
        assert r["result"], r
        # master 1 comes back pointing at master 2: it sees an active peer and joins as its standby
        first = c.masters[0]
        peer = f"127.0.0.1:{c.master_ports[1]}"
        old_args = first.args_for
        first.args_for = lambda ports: [*old_args(ports), "--peer-master", peer, "--peer-admin-url", c.admin_urls[1]]
        c._start(first)
        assert _standby(c, 0) and not _standby(c, 1)
        _wait(lambda: set(_topics(c, 0)) == {"one", "two"}, LIMIT_S, "the old master to copy the new topic")
        assert _status(c, 0)["masterTerm"] == 1
        refused = admin_call(c.admin_urls[0], "admin_add_new_topic_record", type="op_modify", topicName="three",
                             numPartitions=1, brokerId="1")
        assert not refused["result"] and refused["errCode"] == 302, refused
        assert c.admin_urls[1] in refused["errMsg"]
        assert "three" not in _topics(c, 1)
