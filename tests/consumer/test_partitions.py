"""Unit tests (no network) of what the partition table adds for per-partition pause and lost-partition
reports, and of partition references."""

from __future__ import annotations

import asyncio

import pytest

from tubemq.codec import Partition
from tubemq.consumer.partitions import PartitionSlot, PartitionState, PartitionTable
from tubemq.consumer.positions import partition_key, partition_keys, reposition
from tubemq.consumer.rebalance import RegisterOutcome
from tubemq.errors import BadRequestError, ServerError
from tubemq.types import Batch

CID = "g_127.0.0.1-1-2-3-Pull-py-0.1.0"


def part(pid: int, topic: str = "t") -> Partition:
    return Partition(1, "127.0.0.1", 8123, topic, pid)


def owned(table: PartitionTable, pid: int) -> PartitionSlot:
    slot = table.add(part(pid))
    table.start_register(slot)
    table.registered_ok(slot, 0, 280)
    return slot


def test_paused_partitions_are_not_handed_out_until_resumed() -> None:
    async def main() -> None:
        table = PartitionTable(CID, "g")
        table.pause_keys(["1:t:0"])  # before the partition exists
        s0, s1 = owned(table, 0), owned(table, 1)
        assert table.acquire_nowait() is s1
        assert table.acquire_nowait() is None  # partition 0 is parked, not lost
        assert table.paused_keys == frozenset({"1:t:0"})
        table.resume_keys(["1:t:0"])
        assert table.acquire_nowait() is s0
        # a batch confirmed while paused: parked again, back once resumed
        table.pause_keys(["1:t:0"])
        table.fetch_done(s0, s0.booking, consumed=True)
        assert table.acquire_nowait() is None
        table.resume_keys(["1:t:0", "1:t:9"])  # unknown keys are fine
        assert table.acquire_nowait() is s0
        # the whole-table pause is separate and wins
        table.fetch_done(s0, s0.booking, consumed=True)
        table.pause()
        assert table.acquire_nowait() is None
        table.resume()
        assert table.acquire_nowait() is s0

    asyncio.run(main())


def test_a_parked_slot_that_was_dropped_does_not_come_back() -> None:
    async def main() -> None:
        table = PartitionTable(CID, "g")
        table.pause_keys(["1:t:0"])
        s0 = owned(table, 0)
        assert table.acquire_nowait() is None
        table.drop(s0, "gone")
        fresh = owned(table, 0)  # assigned again: still paused (the pause follows the key)
        table.resume_keys(["1:t:0"])
        assert table.acquire_nowait() is fresh
        assert s0.state is PartitionState.RELEASED

    asyncio.run(main())


def test_on_drop_reports_registered_slots_dropped_without_a_revoke() -> None:
    async def main() -> None:
        table = PartitionTable(CID, "g")
        dropped: list[str] = []
        table.on_drop = lambda slot: dropped.append(slot.key)
        s0, s1, s2 = owned(table, 0), owned(table, 1), owned(table, 2)
        pending = table.add(part(3))
        table.start_register(pending)
        table.drop(s0, "broker died")  # registered, no revoke: lost
        table.begin_release(s1)
        table.drop(s1, "during the revoke")  # already reported as revoked
        table.drop(pending, "registration refused")  # never held
        table.drop(s0, "again")  # already released: nothing
        assert dropped == ["1:t:0"]
        assert s2.registered

    asyncio.run(main())


def test_partition_references() -> None:
    p = part(4, "orders")
    assert partition_key(p) == partition_key("1:orders:4") == partition_key(str(p)) == "1:orders:4"
    assert partition_keys(p) == ["1:orders:4"]
    assert partition_keys(["1:orders:4", p, "1:orders:5"]) == ["1:orders:4", "1:orders:5"]
    with pytest.raises(BadRequestError, match="not a partition"):
        partition_key("orders")
    with pytest.raises(TypeError):
        partition_key(4)  # type: ignore[arg-type]


class FakeBrokers:
    """``BrokerClient.register`` as a seek uses it: records the calls, answers what it is told."""

    def __init__(self, outcome: RegisterOutcome) -> None:
        self.outcome = outcome
        self.calls: list[tuple[str, int, int | None, str]] = []

    async def register(self, slot: PartitionSlot, read_status: int, offset: int | None = None) -> RegisterOutcome:
        self.calls.append((slot.key, read_status, offset, slot.state.name))
        return self.outcome


def test_a_seek_waits_for_the_running_fetch_and_drops_its_batch() -> None:
    async def main() -> None:
        table = PartitionTable(CID, "g")
        slot = owned(table, 0)
        assert table.acquire_nowait() is slot  # a fetch worker took it: FETCHING
        booking = slot.booking
        brokers = FakeBrokers(RegisterOutcome(True, 200, "OK!", 56, 280))
        batch = Batch(slot.partition, ["m1", "m2"], 0, 280, slot=slot, booking=booking)  # type: ignore[list-item]

        async def answer() -> None:
            await asyncio.sleep(0.05)
            assert table.fetch_done(slot, booking, batch=batch)  # buffered, not handed out yet

        task = asyncio.create_task(answer())
        moved = await reposition(table, brokers, slot, offset=56, to_end=False, timeout=5.0)  # type: ignore[arg-type]
        await task
        assert moved == 56 and slot.curr_offset == 56
        assert brokers.calls == [("1:t:0", 0, 56, "FETCHING")]  # the seek owned the partition meanwhile
        assert batch.messages == [] and not table.is_current(slot, booking)  # never handed out
        assert slot.state is PartitionState.OWNED and not slot.last_consumed
        assert table.acquire_nowait() is slot  # fetched again at once, from the new position

        # to the end: readStatus 2, no offset; a refusal leaves the partition fetchable and says why
        table.fetch_done(slot, slot.booking, consumed=False)
        brokers.outcome = RegisterOutcome(True, 200, "OK!", 280, 280)
        assert await reposition(table, brokers, slot, offset=None, to_end=True, timeout=5.0) == 280  # type: ignore[arg-type]
        assert brokers.calls[-1] == ("1:t:0", 2, None, "FETCHING")
        brokers.outcome = RegisterOutcome(False, 500, "disk on fire")
        with pytest.raises(ServerError, match="disk on fire"):
            await reposition(table, brokers, slot, offset=0, to_end=False, timeout=5.0)  # type: ignore[arg-type]
        assert slot.state is PartitionState.OWNED and slot.registered

    asyncio.run(main())
