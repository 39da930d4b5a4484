"""``OrphanRegistrations`` with a scripted broker client: what is released, when, and what is not."""

from __future__ import annotations

import asyncio
from typing import Any

from tubemq.client.session import MasterSessionBase
from tubemq.codec import Partition
from tubemq.config import ConsumerConfig
from tubemq.consumer.orphans import OrphanRegistrations
from tubemq.consumer.partitions import PartitionTable
from tubemq.errors import TubeMQConnectionError

CID = "g_test-1"


class Brokers:
    """Answers unregisters once ``up`` is set; records every attempt (partition key, readStatus)."""

    def __init__(self) -> None:
        self.up = False
        self.calls: list[tuple[str, int]] = []

    async def unregister(self, slot: Any, read_status: int) -> None:
        self.calls.append((slot.key, read_status))
        if not self.up:
            raise TubeMQConnectionError(f"{slot.partition.address}: connection refused")


def _slot(table: PartitionTable, pid: int) -> Any:
    slot = table.add(Partition(1, "127.0.0.1", 8123, "topic_o", pid))
    table._remove(slot)  # let go of locally, as a drop does
    return slot


def test_released_once_the_broker_answers_never_while_ours_again() -> None:
    async def main() -> None:
        table = PartitionTable(CID, "g")
        brokers = Brokers()
        orphans = OrphanRegistrations(table, brokers, give_up_after_s=60.0)  # type: ignore[arg-type]
        a, b = _slot(table, 0), _slot(table, 1)
        orphans.add(a)
        orphans.add(b)
        assert await orphans.release_once() is False  # broker down: both stay pending
        assert len(orphans) == 2
        table.add(b.partition)  # b is ours again (the worker registers it: the broker replaces it)
        brokers.up = True
        assert await orphans.release_once() is True
        assert ("1:topic_o:0", 1) in brokers.calls  # rolled back (readStatus 1): delivered again
        assert all(key != "1:topic_o:1" for key, _ in brokers.calls[1:])
        assert len(orphans) == 0 and orphans.released == 1

    asyncio.run(main())


def test_taken_back_and_given_up() -> None:
    async def main() -> None:
        table = PartitionTable(CID, "g")
        brokers = Brokers()
        orphans = OrphanRegistrations(table, brokers, give_up_after_s=0.0)  # type: ignore[arg-type]
        orphans.add(_slot(table, 0))
        await asyncio.sleep(0.01)
        assert await orphans.release_once() is False
        assert len(orphans) == 0 and brokers.calls == []  # the broker expired it by now: not asked
        orphans = OrphanRegistrations(table, brokers, give_up_after_s=60.0)  # type: ignore[arg-type]
        orphans.add(_slot(table, 1))
        orphans.taken_back("1:topic_o:1")
        assert len(orphans) == 0

    asyncio.run(main())


def test_the_run_loop_retries_until_answered() -> None:
    async def main() -> None:
        table = PartitionTable(CID, "g")
        brokers = Brokers()
        orphans = OrphanRegistrations(table, brokers, give_up_after_s=60.0)  # type: ignore[arg-type]
        stop = False
        task = asyncio.ensure_future(orphans.run(lambda: stop))
        orphans.add(_slot(table, 0))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if len(brokers.calls) >= 3:
                break
        assert len(brokers.calls) >= 3 and len(orphans) == 1
        brokers.up = True
        for _ in range(300):
            await asyncio.sleep(0.01)
            if not len(orphans):
                break
        assert orphans.released == 1
        stop = True
        task.cancel()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_failed_heartbeats_wait_a_capped_doubling_time() -> None:
    cfg = ConsumerConfig(master="127.0.0.1:1", group="g", topics=["t"], register_retry_wait_ms=100,
                         heartbeat_period_ms=13000)
    session = MasterSessionBase(cfg, CID)
    waits = [session.failed_heartbeat_wait(n) for n in range(1, 12)]
    assert waits[:5] == [0.1, 0.2, 0.4, 0.8, 1.6]
    assert max(waits) == 2.0 == waits[-1]  # heartbeat_fail_wait_ms: never Java's 60 s pause
