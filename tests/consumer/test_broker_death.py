"""A broker process SIGKILLed under a consumer group (separate `tubemq serve` processes on 127.0.0.1).

* ``confirm()`` of a batch whose commit cannot reach the dead broker is not True (issue 22 item 4), and
  the batch is indeed delivered again once the broker is back (the False was honest).
* Every partition a member loses with the broker is reported (``on_partitions_lost``, or
  ``on_partitions_revoked`` for a member without it), and at no moment do two members hold one
  partition in the hooks' view, also while the broker comes back (issue 22 item 5).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tubemq
import tubemq.aio

from ._produce import produce
from .conftest import FAST_CLIENT

if not hasattr(signal, "SIGKILL"):
    pytest.skip("needs SIGKILL to kill a broker process (not on this platform)", allow_module_level=True)

from cluster.procs import ProcCluster  # noqa: E402 - the separate-process cluster of tests/cluster

OPTS: dict[str, Any] = {**FAST_CLIENT, "consume_from": "earliest"}


def wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def first_batch(consumer: tubemq.Consumer, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = consumer.poll(0.5)
        if batch is not None:
            return batch
    pytest.fail(f"no batch within {timeout} s")


def test_confirm_after_the_broker_died_is_not_true(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=1) as c:
        c.create_topic("ck", 1)
        bodies = [b"ck-%03d" % i for i in range(50)]
        with tubemq.Producer(c.master_address) as producer:
            for b in bodies:
                producer.send("ck", b)
        with tubemq.Consumer(c.master_address, group="g_ck", topics=["ck"], **OPTS) as consumer:
            batch = first_batch(consumer)
            t_kill = c.kill_broker(1)
            t0 = time.monotonic()
            answer = consumer.confirm(batch)
            print(f"confirm answered {answer!r} {time.monotonic() - t0:.2f} s after the request, "
                  f"{time.monotonic() - t_kill:.2f} s after the SIGKILL")
            assert answer is False
            assert consumer._core.metrics.snapshot()["counters"]["consumer.commit_failures"] >= 1 \
                or not consumer._core.table.registered()  # the commit failed, or the partition was already lost
            c.start_broker(1)
            c.wait_brokers(lambda b: b["online"], 1, timeout=60)
            # the commit did not happen: the same messages come again
            again: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(again) < len(batch) and time.monotonic() < deadline:
                b2 = consumer.poll(0.5)
                if b2 is not None:
                    again.extend(bytes(m.data) for m in b2)
                    assert consumer.confirm(b2) is True
            assert again[:len(batch)] == [bytes(m.data) for m in batch]


def test_confirm_after_the_broker_died_is_not_true_asyncio(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=1) as c:
        c.create_topic("ca", 1)
        with tubemq.Producer(c.master_address) as producer:
            for i in range(20):
                producer.send("ca", b"ca-%d" % i)

        async def main() -> None:
            async with tubemq.aio.Consumer(c.master_address, group="g_ca", topics=["ca"], **OPTS) as consumer:
                batch = None
                while batch is None:
                    batch = await consumer.poll(0.5)
                await asyncio.to_thread(c.kill_broker, 1)
                assert await consumer.confirm(batch) is False

        asyncio.run(asyncio.wait_for(main(), 90))


class Tracker:
    """Partition ownership as the hooks tell it, checked at every call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[str, str] = {}
        self.violations: list[str] = []
        self.lost: dict[str, list[str]] = {}
        self.revoked: dict[str, list[str]] = {}

    def hooks(self, me: str, *, lost_hook: bool) -> dict[str, Any]:
        def assigned(parts: list[Any]) -> None:
            with self.lock:
                for p in parts:
                    other = self.owner.get(p.key)
                    if other not in (None, me):
                        self.violations.append(f"{me} assigned {p.key} while {other} holds it")
                    self.owner[p.key] = me

        def gone(kind: str) -> Any:
            def hook(parts: list[Any]) -> None:
                with self.lock:
                    getattr(self, kind).setdefault(me, []).extend(p.key for p in parts)
                    for p in parts:
                        if self.owner.get(p.key) != me:
                            self.violations.append(f"{me} {kind} {p.key} held by {self.owner.get(p.key)}")
                        else:
                            del self.owner[p.key]
            return hook

        out = {"on_partitions_assigned": assigned, "on_partitions_revoked": gone("revoked")}
        if lost_hook:
            out["on_partitions_lost"] = gone("lost")
        return out

    def held(self) -> dict[str, str]:
        with self.lock:
            return dict(self.owner)


def consume_forever(consumer: tubemq.Consumer, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            batch = consumer.poll(0.2)
        except tubemq.errors.ClientClosedError:
            return
        if batch is not None:
            consumer.confirm(batch)


def test_partitions_lost_with_their_broker_are_reported(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=2) as c:
        # one partition of each topic on each broker: the master assigns in (topic, broker, partition)
        # order, so each member ends up with one partition on each broker, whoever registered first
        topics = ["la", "lb"]
        for name in topics:
            c.create_topic(name, 1)
        keys = {f"{b}:{name}:0" for b in (1, 2) for name in topics}
        on_b2 = {k for k in keys if k.startswith("2:")}
        with tubemq.Producer(c.master_address) as producer:
            for i in range(200):
                producer.send(topics[i % 2], b"lh-%d" % i)
        t = Tracker()
        stop = threading.Event()
        a = tubemq.Consumer(c.master_address, group="g_lh", topics=topics, **OPTS, **t.hooks("A", lost_hook=True))
        b = tubemq.Consumer(c.master_address, group="g_lh", topics=topics, **OPTS, **t.hooks("B", lost_hook=False))
        threads = [threading.Thread(target=consume_forever, args=(x, stop), daemon=True) for x in (a, b)]
        for th in threads:
            th.start()
        try:
            wait(lambda: set(t.held()) == keys and len(set(t.held().values())) == 2, 60,
                 "all 4 partitions held, by both members")
            with t.lock:
                before = dict(t.owner)
                seen = {m: len(v) for m, v in t.revoked.items()}
            print("held before the kill:", before)
            t_kill = c.kill_broker(2)
            wait(lambda: not on_b2 & set(t.held()), 60, "broker 2's partitions reported gone")
            print(f"broker 2's partitions reported gone {time.monotonic() - t_kill:.2f} s after the SIGKILL")
            with t.lock:
                revoked_since = {m: v[seen.get(m, 0):] for m, v in t.revoked.items()}
                lost = {m: list(v) for m, v in t.lost.items()}
            # each member reported its own: A through on_partitions_lost, B (no lost hook) through revoked
            assert {before[k] for k in on_b2} == {"A", "B"}, before  # both members lose one
            assert {k for k in on_b2 if before[k] == "A"} <= set(lost.get("A", [])), (before, lost)
            assert {k for k in on_b2 if before[k] == "B"} <= set(revoked_since.get("B", [])), (before, revoked_since)
            assert not on_b2 & set(revoked_since.get("A", [])), revoked_since  # A has a lost hook: not twice
            c.start_broker(2)
            c.wait_brokers(lambda s: s["online"], 2, timeout=60)
            wait(lambda: set(t.held()) == keys, 90, "all 4 partitions held again after the broker came back")
            print("held after the restart:", t.held())
            assert t.violations == []
        finally:
            stop.set()
            a.close()
            b.close()
            for th in threads:
                th.join(10)
        assert t.violations == []


def test_the_master_hears_of_a_loss_only_after_the_lost_hook(cluster: Any) -> None:
    """The broker forgets the registration behind the consumer's back (a real unregister of its
    partition at the broker): the next fetch answers 411 and the partition is lost. While the
    ``on_partitions_lost`` hook runs the consumer still reports the partition as its own, so the master
    cannot hand it out again; once the hook returns it is reported gone and assigned again."""
    cluster.create_topic("lo", partitions=1)
    produce(cluster, "lo", [b"lo-1"])

    async def main() -> None:
        release = asyncio.Event()
        lost: list[list[str]] = []
        assigned: list[list[str]] = []

        async def on_lost(parts: list[Any]) -> None:
            lost.append([p.key for p in parts])
            await release.wait()

        async def on_assigned(parts: list[Any]) -> None:
            assigned.append([p.key for p in parts])

        async with tubemq.aio.Consumer(cluster.master_address, group="g_lo", topics=["lo"], **OPTS,
                                       on_partitions_lost=on_lost, on_partitions_assigned=on_assigned) as c:
            batch = None
            while batch is None:
                batch = await c.poll(0.5)
            key = batch.partition.key
            core = c._core
            slot = core.table.get(key)
            assert slot is not None and await c.confirm(batch) is True
            await core.brokers.unregister(slot, 1)  # the broker no longer holds it for us
            produce(cluster, "lo", [b"lo-2"])  # the next fetch answers 411
            deadline = time.monotonic() + 20
            while not lost and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert lost == [[key]] and assigned == [[key]]
            assert key not in core.table and slot.subscribe_info in core.subscribe_infos()
            assert c.metrics()["counters"]["consumer.partitions_lost"] == 1
            await asyncio.sleep(1.5)  # several heartbeats and balance rounds: still ours for the master
            assert assigned == [[key]]
            release.set()
            deadline = time.monotonic() + 20
            while len(assigned) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert assigned == [[key], [key]]  # reported gone, then assigned again
            got = None
            while got is None and time.monotonic() < deadline:
                got = await c.poll(0.5)
            assert got is not None and [bytes(m.data) for m in got] == [b"lo-2"]

    asyncio.run(asyncio.wait_for(main(), 90))
