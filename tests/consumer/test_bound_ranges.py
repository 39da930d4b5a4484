"""BoundConsumer.read_range at the edges of a range in a shared store (sibling partitions' entries).

Partitions of one store share the index offsets: the tail of a range may hold only siblings'
entries. The broker answers reads over them with 200 and no messages and commits past them (or
404 at its max offset); the read must see that the range is finished and return at once -- not wait
its ``timeout`` -- with exactly the range's messages and the group's position left at ``end``.
Every read below runs with a ``timeout`` far longer than the test's own bound, so waiting for it
fails the test instead of slowing it down.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import tubemq
from tubemq import BoundConsumer
from tubemq._bridge import Portal

from ._produce import send_raw
from .conftest import FAST_CLIENT

#: read_range's own timeout in these tests: never reached when the range end is detected
NEVER = 3600.0
#: bound on each read in the test (generous for a slow 2-core machine, far below NEVER)
BOUND = 60.0


def bound(cluster: Any, group: str, topics: Any) -> BoundConsumer:
    return BoundConsumer(cluster.master_address, group, topics, **{**FAST_CLIENT, "consume_from": "earliest"})


def shared_store_with_sibling_tail(cluster: Any, topic: str) -> dict[int, list[tuple[bytes, int]]]:
    """Partition 0: 10 messages, then 300 of partitions 1/2, one more of partition 0, 50 of partition 2.

    Returns {partition id: [(body, index offset)]}."""
    cluster.create_topic(topic, partitions=3)  # one store: one index for the three partitions
    items = [(0, b"a%02d" % i, None, None) for i in range(10)]
    items += [(1 + i % 2, b"s%03d" % i, None, None) for i in range(300)]
    items += [(0, b"z", None, None)]
    items += [(2, b"q%02d" % i, None, None) for i in range(50)]
    out: dict[int, list[tuple[bytes, int]]] = {}
    for (pid, body, _a, _t), r in zip(items, send_raw(cluster.broker_address, topic, items), strict=True):
        out.setdefault(pid, []).append((body, r.append_offset))
    return out


def bounded(fn: Any) -> Any:
    """Run ``fn`` in a thread; fail the test if it does not finish within BOUND seconds."""
    result: list[Any] = []
    error: list[BaseException] = []

    def main() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            error.append(exc)

    t = threading.Thread(target=main, daemon=True)
    t.start()
    t.join(BOUND)
    if t.is_alive():
        pytest.fail(f"read_range did not return within {BOUND} s (waited for its timeout?)")
    if error:
        raise error[0]
    return result[0]


def test_sibling_tail_ends_the_range_and_leaves_the_position_at_end(cluster: Any) -> None:
    data = shared_store_with_sibling_tail(cluster, "sib")
    p0 = data[0]
    first_sibling = p0[9][1] + 28
    last = p0[10][1]  # the 11th message of partition 0, after 300 siblings' entries
    # range ends among the siblings' entries: every one from right after p0's 10th message to the 11th
    ends = list(range(first_sibling, last + 1, 28 * 7)) + [last, last + 28]
    with bound(cluster, "g_sib", ["sib"]) as bc:
        p = [x for x in bc.partitions() if x.partition_id == 0][0]
        for end in ends:
            want = [b for b, o in p0 if o < end]
            got = bounded(lambda e=end: [m.data for m in bc.read_range(p, 0, e, timeout=NEVER)])
            assert got == want, f"range [0, {end})"
            assert bc.offsets(p).current == end, f"position after [0, {end})"
        # a range made of siblings' entries only: empty, and the position is at its end
        mid = first_sibling + 28 * 100
        assert bounded(lambda: list(bc.read_range(p, first_sibling, mid, timeout=NEVER))) == []
        assert bc.offsets(p).current == mid
        # end None = the max offset at the start: the tail after p0's last message is all partition 2
        tail = bounded(lambda: [m.data for m in bc.read_range(p, first_sibling, None, timeout=NEVER)])
        assert tail == [b"z"]
        pos = bc.offsets(p)
        assert pos.current == pos.max
        # partition 1 has nothing after its last message: the rest of the store is siblings' only
        p1 = [x for x in bc.partitions() if x.partition_id == 1][0]
        ones = [b for b, _ in data[1]]
        after = data[1][-1][1] + 28
        for end in (None, pos.max, after, after + 28 * 30):
            got = bounded(lambda e=end: [m.data for m in bc.read_range(p1, 0, e, timeout=NEVER)])
            assert got == ones, f"partition 1 [0, {end})"
            assert bc.offsets(p1).current == (pos.max if end is None else end)
        assert bounded(lambda: list(bc.read_range(p1, after, pos.max, timeout=NEVER))) == []


def test_sibling_tail_async(cluster: Any) -> None:
    data = shared_store_with_sibling_tail(cluster, "sib_a")
    p0 = data[0]
    end = p0[9][1] + 28 * 150  # in the middle of the siblings' entries

    async def main() -> tuple[list[bytes], list[bytes], int, list[bytes]]:
        async with tubemq.aio.BoundConsumer(cluster.master_address, "g_sib_a", ["sib_a"],
                                            consume_from="earliest", **FAST_CLIENT) as bc:
            parts = {x.partition_id: x for x in await bc.partitions()}
            p = parts[0]
            head = [m.data async for m in bc.read_range(p, 0, end, timeout=NEVER)]
            position = (await bc.offsets(p)).current
            rest = [m.data async for m in bc.read_range(p, end, timeout=NEVER)]
            ones = [m.data async for m in bc.read_range(parts[1], 0, timeout=NEVER)]  # siblings-only tail
            return head, rest, position, ones

    head, rest, position, ones = asyncio.run(asyncio.wait_for(main(), BOUND))
    assert head == [b for b, _ in p0[:10]]
    assert position == end
    assert rest == [b"z"]
    assert ones == [b for b, _ in data[1]]


def test_sync_read_range_crosses_threads_once_per_batch(cluster: Any, monkeypatch: Any) -> None:
    cluster.create_topic("xthr", partitions=1)
    items = [(0, b"m%04d" % i, None, None) for i in range(400)]
    send_raw(cluster.broker_address, "xthr", items)
    with bound(cluster, "g_xthr", ["xthr"]) as bc:
        p = bc.partitions()[0]
        calls = 0
        real_run = Portal.run

        def counting_run(portal: Any, coro: Any, timeout: float | None = None) -> Any:
            nonlocal calls
            calls += 1
            return real_run(portal, coro, timeout)

        monkeypatch.setattr(Portal, "run", counting_run)
        got = [m.data for m in bc.read_range(p, 0)]
        assert got == [b for _, b, _a, _t in items]
        # one hand-over per fetched batch (the broker's reads halve: 200, 100, 50, ... entries)
        assert calls <= 20, f"{calls} calls into the loop thread for {len(got)} messages"
        batches = list(bc.read_range_batches(p, 0, None, max_messages=250))
        assert all(batches) and [m.data for b in batches for m in b] == got[:250]
        # abandoning a read mid-batch releases the partition's lock: the next read works
        it = bc.read_range(p, 0)
        assert next(it).data == got[0]
        it.close()
        assert [m.data for m in bc.read_range(p, 0, None, max_messages=3)] == got[:3]


def test_any_bounds_are_exact_and_batches_carry_exact_offsets(cluster: Any) -> None:
    """Bounds inside an index entry (not multiples of 28) select the messages stored in [start, end):
    interleaved partitions (one store), every start and end from 0 to past the data."""
    cluster.create_topic("odd", partitions=2)  # one store: the two partitions' entries interleave
    items = [(i % 2, b"o%02d" % i, None, None) for i in range(12)]
    stored = [(pid, body, r.append_offset)
              for (pid, body, _a, _t), r in zip(items, send_raw(cluster.broker_address, "odd", items), strict=True)]
    p0_items = [(b, o) for pid, b, o in stored if pid == 0]
    with bound(cluster, "g_odd", ["odd"]) as bc:
        p = [x for x in bc.partitions() if x.partition_id == 0][0]
        for start, end in ((84, 169), (1, 57), (29, 28 * 12 - 1), (0, 5), (85, 85), (57, 28 * 11 + 1)):
            want = [b for b, o in p0_items if start <= o < end]
            got = bounded(lambda s=start, e=end: [m.data for m in bc.read_range(p, s, e, timeout=NEVER)])
            assert got == want, f"range [{start}, {end})"
            assert bc.offsets(p).current == -(-end // 28) * 28, f"position after [{start}, {end})"
        # the batches: no per-message offsets; each batch's start and next offsets are exact
        batches = bounded(lambda: list(bc.read_range_batches(p, 0, 28 * 12, timeout=NEVER)))
        assert [m.data for b in batches for m in b] == [b for b, _ in p0_items]
        assert all(m.offset is None for b in batches for m in b)
        assert batches[0].start_offset == 0 and batches[-1].next_offset == 28 * 12
        for b in batches:
            firsts = [o for body, o in p0_items if body == b[0].data]
            assert b.start_offset <= firsts[0] < b.next_offset
        # seek "after this batch": the next read starts exactly there
        last = batches[0]
        rest = bounded(lambda: [m.data for m in bc.read_range(p, last.next_offset, 28 * 12, timeout=NEVER)])
        assert rest == [b for b, o in p0_items if o >= last.next_offset]


def test_offset_for_time_from_the_messages_msg_time(cluster: Any) -> None:
    """A real broker has no time lookup: the search over the store with bound reads finds the first
    offset of a minute from the producers' msgTime, in a shared store (interleaved partitions)."""
    cluster.create_topic("tsearch", partitions=2)
    minutes = ["202601011200"] * 7 + ["202601011201"] * 9 + ["202601011203"] * 6
    with tubemq.Producer(cluster.master_address) as prod:
        results = [(m, prod.send("tsearch", b"t%02d" % i, msg_time=m)) for i, m in enumerate(minutes)]
    stored = [(r.partition.partition_id, m, r.append_offset) for m, r in results]
    import datetime as dt

    def ms(text: str) -> int:
        return int(dt.datetime.strptime(text, "%Y%m%d%H%M").timestamp() * 1000)

    with bound(cluster, "g_ts", ["tsearch"]) as bc:
        for part in bc.partitions("tsearch"):
            mine = [(m, o) for pid, m, o in stored if pid == part.partition_id]
            if not mine:
                continue
            for when in ("202601011200", "202601011201", "202601011202", "202601011203"):
                want = [o for m, o in mine if m >= when]
                got = bounded(lambda p=part, w=when: bc.offset_for_time(p, ms(w) + 30_000))
                read = bounded(lambda p=part, g=got: list(bc.read_range(p, g, None, timeout=NEVER)))
                assert [m.msg_time >= when for m in read] == [True] * len(read), when
                assert len(read) == len(want), (when, got, want)
            past = bounded(lambda p=part: bc.offset_for_time(p, ms("203001010000")))
            assert past <= bc.offsets(part).max  # after the partition's last message: nothing to read there
            assert bounded(lambda p=part, g=past: list(bc.read_range(p, g, None, timeout=NEVER))) == []
