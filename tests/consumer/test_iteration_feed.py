"""Iteration fed ahead of the application (``BatchFeed``, async generator) and the delivery buffer.

The broker here answers each getMessage with at most ~600 bytes (a few messages), so every test runs
through many batches per partition: a batch queued ahead of the iterator, a ``break`` while one is
queued, a rebalance while one is queued, a close while the iterator waits.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tubemq
from tubemq._bridge.consumer import DirectFeed
from tubemq.consumer.fetch import Batch, DeliveryBuffer
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

from ._produce import produce
from .conftest import FAST_CLIENT, wait_for

BODIES = [b"feed-%04d-" % i + b"x" * 80 for i in range(400)]


@pytest.fixture
def small_batches(tmp_path: Any) -> Iterator[EmbeddedCluster]:
    """A cluster whose broker returns a few messages per fetch."""
    with EmbeddedCluster(data_dir=tmp_path / "tubemq-data", transfer_size=600, **FAST_TIMERS) as c:
        yield c


@pytest.fixture
def batch_feed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The iterator's loop-fed route (:class:`BatchFeed`, used with TLS): a batch polled ahead."""
    monkeypatch.setattr(DirectFeed, "start", lambda self: False)


def open_consumer(cluster: Any, group: str, topic: str, **kw: Any) -> tubemq.Consumer:
    opts = {**FAST_CLIENT, "consume_from": "earliest", "iter_timeout_ms": 1500, **kw}
    return tubemq.Consumer(cluster.master_address, group=group, topics=[topic], **opts)


def delivered_unconfirmed(c: tubemq.Consumer) -> int:
    """Batches handed out (delivered) and not confirmed yet, counted on the loop thread."""
    table = c._core.table
    return int(c._portal.call(lambda: sum(1 for s in table.slots() if s.batch is not None and s.batch.delivered)))


def test_break_and_resume_loses_and_repeats_nothing(small_batches: EmbeddedCluster) -> None:
    cluster = small_batches
    cluster.create_topic("brk", partitions=3)
    produce(cluster, "brk", BODIES, partitions=3)
    got: list[bytes] = []
    with open_consumer(cluster, "g_brk", "brk") as c:
        for _round in range(200):
            n = 0
            for msg in c:
                got.append(msg.data)
                n += 1
                if n == 7:
                    break
            else:
                break  # iteration ended by itself (iter_timeout): everything read
            # only the batch being iterated is out; the one queued ahead went back, not delivered
            wait_for(lambda: delivered_unconfirmed(c) <= 1, timeout=5, what="feed put back")
        assert delivered_unconfirmed(c) == 0  # the iteration that ended confirmed its last batch
        assert c.metrics()["counters"].get("consumer.confirm_timeouts", 0) == 0
    assert sorted(got) == BODIES  # each message exactly once
    with open_consumer(cluster, "g_brk", "brk", iter_timeout_ms=800) as c:
        assert [m.data for m in c] == []  # all confirmed


def test_next_and_for_share_the_batch(small_batches: EmbeddedCluster) -> None:
    cluster = small_batches
    cluster.create_topic("mix", partitions=2)
    produce(cluster, "mix", BODIES[:60], partitions=2)
    got: list[bytes] = []
    with open_consumer(cluster, "g_mix", "mix") as c:
        got.append(next(c).data)  # the round-trip path
        for msg in c:  # the fed path continues the same batch
            got.append(msg.data)
            if len(got) == 30:
                break
        got.append(next(c).data)
        got.extend(m.data for m in c)
    assert sorted(got) == sorted(BODIES[:60])


def test_poll_after_break_gets_the_batch_queued_ahead(small_batches: EmbeddedCluster, batch_feed: None) -> None:
    cluster = small_batches
    cluster.create_topic("pb", partitions=2)
    produce(cluster, "pb", BODIES[:80], partitions=2)
    with open_consumer(cluster, "g_pb", "pb") as c:
        first: list[bytes] = []
        it = iter(c)
        first.append(next(it).data)
        wait_for(lambda: delivered_unconfirmed(c) == 2, timeout=5, what="a batch queued ahead")
        it.close()  # what a break does
        rest = list(c._aio.iteration.messages or [])  # the batch being iterated stays with the iterator
        first.extend(m.data for m in rest)
        wait_for(lambda: delivered_unconfirmed(c) == 1, timeout=5, what="queued batch put back")
        assert c.confirm(c._aio.iteration.batch)
        got = list(first)
        deadline = time.monotonic() + 15
        while len(got) < 80 and time.monotonic() < deadline:
            batch = c.poll(0.5)
            if batch is not None:
                got.extend(m.data for m in batch)
                assert c.confirm(batch)
    assert sorted(got) == sorted(BODIES[:80])


def test_rebalance_while_fed_is_exactly_once(small_batches: EmbeddedCluster) -> None:
    cluster = small_batches
    cluster.create_topic("reb", partitions=4)
    produce(cluster, "reb", BODIES, partitions=4)
    seen: dict[str, list[bytes]] = {"a": [], "b": []}
    total = threading.Semaphore(0)
    stop = threading.Event()
    errors: list[BaseException] = []
    # a revoke waits this long for a delivered batch's confirm: no rollback by timeout in this test
    opts = {"rebalance_confirm_wait_ms": 15000, "iter_timeout_ms": 0}

    def member(name: str, delay: float) -> None:
        try:
            time.sleep(delay)
            with open_consumer(cluster, "g_reb", "reb", **opts) as c:
                for msg in c:
                    seen[name].append(msg.data)
                    total.release()
                    if name == "a":
                        time.sleep(0.005)  # slow enough that b joins while a iterates
                    if stop.is_set():
                        break
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=member, args=("a", 0.0)), threading.Thread(target=member, args=("b", 0.3))]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60
        for _ in range(len(BODIES)):
            assert total.acquire(timeout=max(0.1, deadline - time.monotonic())), \
                f"a {len(seen['a'])} + b {len(seen['b'])} of {len(BODIES)} messages"
        time.sleep(0.5)  # a duplicate would arrive now
    finally:
        stop.set()
        produce(cluster, "reb", [b"wake-%d" % i for i in range(8)], partitions=4)  # unblock both loops
        for t in threads:
            t.join(30)
    assert not errors
    got = [d for d in seen["a"] + seen["b"] if d.startswith(b"feed-")]
    assert seen["a"] and seen["b"]
    assert sorted(got) == BODIES


def test_close_from_another_thread_ends_a_waiting_iteration(small_batches: EmbeddedCluster) -> None:
    cluster = small_batches
    cluster.create_topic("cls", partitions=2)
    produce(cluster, "cls", BODIES[:10], partitions=2)
    c = open_consumer(cluster, "g_cls", "cls", iter_timeout_ms=0)
    got: list[bytes] = []
    done = threading.Event()

    def loop() -> None:
        for msg in c:
            got.append(msg.data)
        done.set()

    t = threading.Thread(target=loop)
    t.start()
    wait_for(lambda: len(got) == 10, what="backlog")
    c.close()
    assert done.wait(10), "iteration did not end on close"
    t.join(5)
    assert sorted(got) == sorted(BODIES[:10])


def test_close_with_a_batch_queued_ends_the_loop_and_shows_it_to_nobody(small_batches: EmbeddedCluster,
                                                                       batch_feed: None) -> None:
    cluster = small_batches
    cluster.create_topic("clq", partitions=2)
    produce(cluster, "clq", BODIES[:80], partitions=2)
    c = open_consumer(cluster, "g_clq", "clq", iter_timeout_ms=0)
    it = iter(c)
    first = next(it)
    current = c._aio.iteration.batch
    wait_for(lambda: delivered_unconfirmed(c) == 2, timeout=5, what="a batch queued ahead")
    c.close()
    rest = list(it)  # the rest of the current batch, then the end: the queued batch is not shown
    assert [first.data] + [m.data for m in rest] == [m.data for m in current]
    with open_consumer(cluster, "g_clq", "clq") as again:  # nothing was confirmed: all of it again
        got = [m.data for m in again]
    assert sorted(got) == sorted(BODIES[:80])


def test_async_for_break_and_resume(small_batches: EmbeddedCluster) -> None:
    cluster = small_batches
    cluster.create_topic("abrk", partitions=3)
    produce(cluster, "abrk", BODIES[:200], partitions=3)

    async def main() -> list[bytes]:
        got: list[bytes] = []
        async with tubemq.aio.Consumer(cluster.master_address, group="g_abrk", topics=["abrk"],
                                       consume_from="earliest", iter_timeout_ms=1500, **FAST_CLIENT) as c:
            for _round in range(100):
                n = 0
                async for msg in c:
                    got.append(msg.data)
                    n += 1
                    if n == 9:
                        break
                else:
                    break
            assert len(got) == 200
            assert await c.poll(0.3) is None  # nothing left over, nothing delivered twice
        return got

    got = asyncio.run(asyncio.wait_for(main(), 60))
    assert sorted(got) == BODIES[:200]


# ---------------------------------------------------------------------------------------------------
# DeliveryBuffer


def _batch(i: int) -> Batch:
    return Batch(tubemq.codec.Partition(1, "127.0.0.1", 8123, "t", i), [], 0, 0)


def test_buffer_take_waits_times_out_and_is_woken() -> None:
    async def main() -> None:
        buf = DeliveryBuffer(2)
        t0 = time.monotonic()
        assert await buf.take(0.05, lambda b: True) is None
        assert time.monotonic() - t0 >= 0.04
        assert not buf._waiters  # a timed-out wait leaves nothing behind
        b1 = _batch(1)
        await buf.reserve()
        asyncio.get_running_loop().call_later(0.02, buf.push, b1)
        assert await buf.take(5, lambda b: True) is b1
        # a cancelled take leaves nothing behind either
        task = asyncio.ensure_future(buf.take(None, lambda b: True))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not buf._waiters
        # stale batches are skipped and their space returned
        await buf.reserve()
        await buf.reserve()
        stale, good = _batch(2), _batch(3)
        buf.push(stale)
        buf.push(good)
        assert await buf.take(0, lambda b: b is good) is good
        assert buf._credits == 2
        # close wakes a waiting take with None
        waiting = asyncio.ensure_future(buf.take(None, lambda b: True))
        await asyncio.sleep(0.01)
        buf.close()
        assert await asyncio.wait_for(waiting, 1) is None

    asyncio.run(main())


def test_buffer_put_back_goes_first_and_takes_space() -> None:
    async def main() -> None:
        buf = DeliveryBuffer(2)
        a, b = _batch(1), _batch(2)
        await buf.reserve()
        buf.push(a)
        taken = buf.take_nowait(lambda x: True)
        assert taken is a and buf._credits == 2
        await buf.reserve()
        buf.push(b)
        buf.put_back(a)
        assert buf._credits == 0 and len(buf) == 2
        assert buf.take_nowait(lambda x: True) is a
        assert buf.take_nowait(lambda x: True) is b
        assert buf._credits == 2

    asyncio.run(main())
