"""BoundConsumer (client-side balance, bound offsets) against the embedded server over real TCP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import tubemq
from tubemq import BoundConsumer
from tubemq.consumer import PartitionPosition
from tubemq.errors import DecodeError, PartitionOccupiedError

from ._produce import send_raw
from .conftest import FAST_CLIENT


def bound(cluster: Any, group: str, topics: Any, **kw: Any) -> BoundConsumer:
    return BoundConsumer(cluster.master_address, group, topics, **{**FAST_CLIENT, "consume_from": "earliest", **kw})


def load(cluster: Any, topic: str, n: int, partitions: int) -> dict[int, list[tuple[bytes, int]]]:
    """Send n messages round-robin; {partition id: [(body, append offset)]}."""
    items = [(i % partitions, b"v%04d" % i, None, None) for i in range(n)]
    results = send_raw(cluster.broker_address, topic, items)
    out: dict[int, list[tuple[bytes, int]]] = {}
    for (pid, body, _a, _t), r in zip(items, results, strict=True):
        out.setdefault(pid, []).append((body, r.append_offset))
    return out


def test_partitions_attach_fetch_confirm_offsets(cluster: Any) -> None:
    cluster.create_topic("bnd", partitions=3)
    data = load(cluster, "bnd", 30, 3)
    with bound(cluster, "g_bnd", ["bnd"]) as bc:
        parts = bc.partitions()
        assert [p.partition_id for p in parts] == [0, 1, 2] and all(p.topic == "bnd" for p in parts)
        assert bc.partitions("other") == []
        pos = bc.attach(parts[0], 0)
        assert isinstance(pos, PartitionPosition) and pos.current == 0 and pos.max == 30 * 28
        got: list[bytes] = []
        offset = 0
        while len(got) < 10:
            batch = bc.fetch(parts[0], timeout=2.0)
            assert batch is not None
            assert batch.start_offset == offset
            got.extend(m.data for m in batch)
            assert bc.confirm(batch) is True
            offset = batch.next_offset
            assert offset > batch.start_offset
        assert got == [b for b, _ in data[0]]
        assert bc.offsets(parts[0]).current == offset  # reading the position does not move it
        assert bc.fetch(parts[0], timeout=0.1) is None  # caught up (may step over siblings' entries)
        again = bc.offsets(parts[0])
        assert offset <= again.current <= again.max == 30 * 28 and bc.offsets(parts[0]) == again
        # keys and partition strings are accepted too
        assert bc.offsets(parts[0].key) == again
        assert bc.offsets(str(parts[0])).current == again.current


def test_unconfirmed_fetch_returns_same_messages(cluster: Any) -> None:
    cluster.create_topic("bnd2", partitions=1)
    load(cluster, "bnd2", 5, 1)
    with bound(cluster, "g_bnd2", ["bnd2"]) as bc:
        p = bc.partitions()[0]
        bc.attach(p, 0)
        first = bc.fetch(p, timeout=2.0)
        assert first is not None
        second = bc.fetch(p, timeout=2.0)  # the first was not confirmed: rolled back, read again
        assert second is not None
        assert [m.message_id for m in second] == [m.message_id for m in first]
        bc.confirm(second, consumed=False)
        third = bc.fetch(p, timeout=2.0)
        assert third is not None and [m.data for m in third] == [m.data for m in first]
        with pytest.raises(tubemq.errors.BadRequestError):
            bc.confirm(first)  # stale


def test_read_range_is_exact_and_deterministic(cluster: Any) -> None:
    cluster.create_topic("rng", partitions=3)  # one store: the partitions share the index offsets
    data = load(cluster, "rng", 90, 3)
    with bound(cluster, "g_rng", ["rng"]) as bc:
        p = [x for x in bc.partitions() if x.partition_id == 1][0]
        msgs = data[1]
        whole = [m.data for m in bc.read_range(p, 0)]
        assert whole == [b for b, _ in msgs]
        cut_at = msgs[13][1]  # the exact index offset of the 14th message of partition 1
        head = [m.data for m in bc.read_range(p, 0, cut_at)]
        assert head == [b for b, _ in msgs[:13]]
        assert bc.offsets(p).current == cut_at
        tail = [m.data for m in bc.read_range(p, cut_at)]
        assert tail == [b for b, _ in msgs[13:]]
        # the same range twice gives the same messages
        again = [m.data for m in bc.read_range(p, 0, cut_at)]
        assert again == head
        mid = [m.data for m in bc.read_range(p, msgs[5][1], msgs[20][1])]
        assert mid == [b for b, _ in msgs[5:20]]
        assert [m.data for m in bc.read_range(p, 0, None, max_messages=4)] == [b for b, _ in msgs[:4]]
    with bound(cluster, "g_rng_other", ["rng"]) as bc2:  # another group, same answer
        p = [x for x in bc2.partitions() if x.partition_id == 1][0]
        assert [m.data for m in bc2.read_range(p, msgs[5][1], msgs[20][1])] == mid


def test_detach_commits_and_ownership(cluster: Any) -> None:
    cluster.create_topic("own", partitions=1)
    load(cluster, "own", 6, 1)
    with bound(cluster, "g_own", ["own"]) as a, bound(cluster, "g_own", ["own"]) as b:
        p = a.partitions()[0]
        a.attach(p, 0)
        with pytest.raises(PartitionOccupiedError):
            b.attach(p)
        batch = a.fetch(p, timeout=2.0)
        assert batch is not None
        a.confirm(batch)
        a.detach(p)
        assert a.attached() == []
        pos = b.attach(p)  # no offset: continues where the group committed
        assert pos.current == batch.next_offset
        rest = b.fetch(p, timeout=2.0)
        assert rest is None or all(m.message_id not in {x.message_id for x in batch} for m in rest)


def test_async_bound_consumer(cluster: Any) -> None:
    cluster.create_topic("abnd", partitions=2)
    data = load(cluster, "abnd", 20, 2)

    async def main() -> list[bytes]:
        async with tubemq.aio.BoundConsumer(cluster.master_address, "g_abnd", ["abnd"],
                                            consume_from="earliest", **FAST_CLIENT) as bc:
            parts = await bc.partitions()
            out: list[bytes] = []
            async for m in bc.read_range(parts[0], 0):
                out.append(m.data)
            pos = await bc.offsets(parts[0])
            assert pos.current == pos.max
            await bc.detach(parts[0])
            return out

    got = asyncio.run(asyncio.wait_for(main(), 30))
    assert got == [b for b, _ in data[0]]


@pytest.mark.parametrize("api", ["sync", "aio"])
def test_forgotten_bound_consumer_detaches_and_leaves(cluster: Any, api: str) -> None:
    """Dropped without close(): the finalizer unregisters the partition and leaves the group (it used
    to keep heartbeating and holding the partition)."""
    import gc
    import time

    cluster.create_topic("fgt", partitions=1)
    send_raw(cluster.broker_address, "fgt", [(0, b"x", None, None)])

    def members() -> int:
        return int(cluster._call(lambda: cluster.server.master.group_detail("g_fgt")["count"]))

    async def main() -> None:
        if api == "sync":
            bc: Any = await asyncio.to_thread(bound, cluster, "g_fgt", ["fgt"])
            core = bc._core
            await asyncio.to_thread(bc.attach, bc.partitions()[0], 0)
        else:
            bc = await tubemq.aio.BoundConsumer(cluster.master_address, "g_fgt", ["fgt"], **FAST_CLIENT).start()
            core = bc._core
            await bc.attach((await bc.partitions())[0], 0)
        assert members() == 1 and len(core.attached()) == 1
        del bc
        gc.collect()
        deadline = time.monotonic() + 10
        while (members() or not core.closing or core.attached()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert core.closing and core.attached() == [] and members() == 0

    asyncio.run(asyncio.wait_for(main(), 60))


def test_partition_cap_from_the_client_config(cluster: Any) -> None:
    """``max_partitions`` bounds what a master's topic meta may expand to (a typed error, nothing built)."""
    cluster.create_topic("bcap", partitions=3)
    with pytest.raises(DecodeError, match=r"'bcap': 3 partitions over the limit 2 \(max_partitions\)"):
        with bound(cluster, "g_bcap", ["bcap"], max_partitions=2) as bc:
            bc.partitions()
    with bound(cluster, "g_bcap2", ["bcap"], max_partitions=3) as bc:
        assert [p.partition_id for p in bc.partitions()] == [0, 1, 2]
