"""seek / seek_to_beginning / seek_to_end and per-partition pause/resume of the server-balanced consumer,
through both APIs against the embedded server (real TCP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import tubemq
import tubemq.aio
import tubemq.types
from tubemq.errors import BadRequestError

from ._produce import produce
from .conftest import FAST_CLIENT


def run(coro: Any, timeout: float = 90.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def opts(group: str, topics: list[str], **kw: Any) -> dict[str, Any]:
    return {**FAST_CLIENT, "group": group, "topics": topics, "consume_from": "earliest", **kw}


async def call(api: Any, name: str, *args: Any) -> Any:
    """``consumer.name(*args)``: on a worker thread for the blocking API, awaited for asyncio."""
    if api.name == "sync":
        return await asyncio.to_thread(getattr(api.c, name), *args)
    res = getattr(api.c, name)(*args)
    return await res if asyncio.iscoroutine(res) else res


async def next_batch(api: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = await api.poll(0.5)
        if batch is not None:
            return batch
    pytest.fail(f"no batch within {timeout} s")


async def collect(api: Any, count: int, timeout: float = 20.0) -> list[bytes]:
    """Poll and confirm until ``count`` messages came (fails after ``timeout``)."""
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"got {len(out)} of {count} messages within {timeout} s: {out}")
        batch = await api.poll(0.3)
        if batch is not None:
            out.extend(bytes(m.data) for m in batch)
            await api.confirm(batch)
    return out


def test_seek_moves_the_group_offset_and_cuts_the_pending_batch(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("sk", partitions=1)
    bodies = [b"sk-%02d" % i for i in range(30)]
    sent = produce(cluster, "sk", bodies)

    async def main() -> None:
        async with await consumer_api.open(cluster.master_address, **opts("g_sk", ["sk"])) as c:
            first = await next_batch(c)
            assert [bytes(m.data) for m in first] == bodies
            assert all(m.offset is None for m in first)  # no per-message offset: the broker's answer has none
            p = first.partition
            tenth = sent[10].append_offset  # where the broker stored it (its send answer)
            # seek while the batch is unconfirmed: it is rolled back, its confirm says so
            moved = await call(c, "seek", p, tenth)
            assert moved == tenth
            assert await c.confirm(first) is False
            assert await collect(c, 20) == bodies[10:]
            # to the beginning (offset 0 is clamped to the min), by key, as a one-element list
            assert await call(c, "seek_to_beginning", [p.key]) == {p.key: first.start_offset}
            assert await collect(c, 30) == bodies
            # to the end: nothing until something new arrives, then exactly that
            end = await call(c, "seek_to_end", None)
            assert end == {p.key: first.max_offset}
            assert await c.poll(0.5) is None
            produce(cluster, "sk", [b"new"])
            assert await collect(c, 1) == [b"new"]
            # an offset past the max is clamped to it
            assert await call(c, "seek", p.key, 10**12) == first.max_offset + 28
            # the seek is stored at the broker at once: a new member of the group starts there
            await call(c, "seek", p, tenth)
        async with await consumer_api.open(cluster.master_address, **opts("g_sk", ["sk"])) as c2:
            assert await collect(c2, 21) == bodies[10:] + [b"new"]

    run(main())


def test_seek_refuses_what_it_cannot_do(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("sr", partitions=1)
    produce(cluster, "sr", [b"x"])

    async def main() -> None:
        async with await consumer_api.open(cluster.master_address, **opts("g_sr", ["sr"])) as c:
            batch = await next_batch(c)
            with pytest.raises(BadRequestError, match="not assigned"):
                await call(c, "seek", "1:other:0", 0)
            with pytest.raises(BadRequestError, match="not assigned"):
                await call(c, "seek_to_end", [batch.partition, "1:sr:5"])
            with pytest.raises(BadRequestError, match=">= 0"):
                await call(c, "seek", batch.partition, -1)
            with pytest.raises(TypeError):
                await call(c, "seek", 3, 0)
            assert await c.confirm(batch)  # nothing moved: the batch is still current

    run(main())


def test_seek_inside_iteration_drops_the_rest_of_the_batch(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("si", partitions=1)
    bodies = [b"si-%02d" % i for i in range(10)]
    third = produce(cluster, "si", bodies)[2].append_offset  # the broker's own offset of message 3

    async def main() -> None:
        async with await consumer_api.open(cluster.master_address, **opts("g_si", ["si"], iter_timeout_ms=1500)) as c:
            if c.name == "sync":
                def loop() -> list[bytes]:
                    seen: list[bytes] = []
                    for msg in c.c:
                        seen.append(bytes(msg.data))
                        if len(seen) == 3:
                            c.c.seek(msg.partition, third)  # read this one again, then on
                    return seen

                seen = await asyncio.to_thread(loop)
            else:
                seen = []
                async for msg in c.c:
                    seen.append(bytes(msg.data))
                    if len(seen) == 3:
                        await c.c.seek(msg.partition, third)
            assert seen == bodies[:3] + bodies[2:]

    run(main())


def test_seek_to_beginning_in_the_assigned_hook(cluster: Any, consumer_api: Any) -> None:
    """Kafka's usual pattern: position the partitions as they are assigned."""
    cluster.create_topic("sh", partitions=2)
    bodies = [b"sh-%02d" % i for i in range(20)]
    produce(cluster, "sh", bodies, partitions=2)

    async def main() -> None:
        # the group consumed everything once
        async with await consumer_api.open(cluster.master_address, **opts("g_sh", ["sh"])) as c:
            assert sorted(await collect(c, 20, timeout=60)) == sorted(bodies)
        holder: list[Any] = []
        moved: list[dict[str, int]] = []
        if consumer_api.name == "sync":
            def hook(partitions: list[Any]) -> None:  # on a worker thread, maybe before open() returned
                deadline = time.monotonic() + 20
                while not holder and time.monotonic() < deadline:
                    time.sleep(0.01)
                moved.append(holder[0].c.seek_to_beginning(partitions))
        else:
            async def hook(partitions: list[Any]) -> None:  # type: ignore[misc]
                moved.append(await holder[0].c.seek_to_beginning(partitions))
        c2 = await consumer_api.open(cluster.master_address, **opts("g_sh", ["sh"]), on_partitions_assigned=hook)
        holder.append(c2)
        try:
            assert sorted(await collect(c2, 20, timeout=60)) == sorted(bodies)
            assert {k for m in moved for k in m} == {"1:sh:0", "1:sh:1"}, moved
        finally:
            await c2.close()

    run(main(), timeout=180)


def test_pause_and_resume_single_partitions(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("pp", partitions=2)
    produce(cluster, "pp", [b"p0-a", b"p1-a", b"p0-b", b"p1-b"], partitions=2)

    async def main() -> None:
        c = await consumer_api.open(cluster.master_address, **opts("g_pp", ["pp"]))
        try:
            await call(c, "pause", ["1:pp:0"])  # by key, before anything was assigned
            assert await call(c, "paused_partitions") == frozenset({"1:pp:0"})
            assert not c.paused  # the whole-consumer pause is another switch
            assert sorted(await collect(c, 2)) == [b"p1-a", b"p1-b"]
            assert await c.poll(0.8) is None  # partition 0 is not fetched
            produce(cluster, "pp", [b"p0-c", b"p1-c"], partitions=2)
            assert await collect(c, 1) == [b"p1-c"]
            await call(c, "resume", "1:pp:0")
            assert await call(c, "paused_partitions") == frozenset()
            assert sorted(await collect(c, 3)) == [b"p0-a", b"p0-b", b"p0-c"]
            # whole-consumer pause still works, and resume() leaves per-partition pauses alone
            await call(c, "pause", ["1:pp:1"])
            await c.pause()
            produce(cluster, "pp", [b"p0-d", b"p1-d"], partitions=2)
            assert await c.poll(0.8) is None
            await c.resume()
            assert await collect(c, 1) == [b"p0-d"]
            assert await c.poll(0.8) is None
            await call(c, "resume", [c.assignment()[0], c.assignment()[1]])
            assert await collect(c, 1) == [b"p1-d"]
        finally:
            await c.close()

    run(main())


def test_confirm_return_types_agree(cluster: Any) -> None:
    """Consumer.confirm and BoundConsumer.confirm both answer True for an acknowledged commit (the
    committed offset is batch.next_offset)."""
    cluster.create_topic("ct", partitions=1)
    produce(cluster, "ct", [b"a", b"b"])
    with tubemq.BoundConsumer(cluster.master_address, "g_ct", ["ct"], **FAST_CLIENT) as bc:
        p = bc.partitions()[0]
        bc.attach(p, 0)
        batch = bc.fetch(p, timeout=10)
        assert batch is not None
        assert bc.confirm(batch) is True and batch.next_offset > 0
        assert bc.offsets(p).current == batch.next_offset
    with tubemq.Consumer(cluster.master_address, **opts("g_ct2", ["ct"])) as c:
        deadline = time.monotonic() + 20
        got = None
        while got is None and time.monotonic() < deadline:
            got = c.poll(0.5)
        assert got is not None
        assert c.confirm(got) is True and got.next_offset > 0


def test_partition_state_left_the_public_exports() -> None:
    assert "PartitionState" not in tubemq.consumer.__all__
    assert not hasattr(tubemq, "PartitionState")
    assert not hasattr(tubemq.consumer, "PartitionState")
    assert tubemq.Batch is tubemq.consumer.Batch is tubemq.types.Batch
    assert tubemq.Batch.__module__ == "tubemq.types"


def test_a_batch_fetched_before_its_partition_is_paused_is_not_delivered(cluster: Any) -> None:
    """Kafka's poll returns nothing of a paused partition, even what was fetched before the pause: the
    batch is rolled back and comes again, once, after the resume."""
    cluster.create_topic("pb", partitions=2)
    produce(cluster, "pb", [b"p0-a", b"p1-a"], partitions=2)

    async def main() -> None:
        async with tubemq.aio.Consumer(cluster.master_address, **opts("g_pb", ["pb"])) as c:
            buffered = c._core.buffer._items  # both partitions' batches fetched, none polled yet
            deadline = time.monotonic() + 30
            while {b.partition.partition_id for b in buffered} != {0, 1} and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert {b.partition.partition_id for b in buffered} == {0, 1}
            c.pause(["1:pb:0"])
            first = await next_batch(c)
            assert [bytes(m.data) for m in first] == [b"p1-a"]
            assert await c.confirm(first)
            assert await c.poll(0.8) is None  # the p0 batch was rolled back, not handed out
            c.resume(["1:pb:0"])
            assert await collect(c, 1) == [b"p0-a"]
            assert await c.poll(0.8) is None  # and it came once

    run(main())
