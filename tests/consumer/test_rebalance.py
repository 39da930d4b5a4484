"""Unit tests of the rebalance event queue and the per-partition state machine (no network)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tubemq.codec import Partition, SubscribeInfo
from tubemq.consumer.rebalance import (
    EventQueue,
    EventQueueFullError,
    PartitionState,
    PartitionTable,
    RebalanceEvent,
    RebalanceWorker,
    RegisterOutcome,
    ReportQueue,
    StateError,
)
from tubemq.errors import ClientClosedError, TubeMQConnectionError
from tubemq.protocol import master_pb
from tubemq.protocol.constants import EventStatus, EventType

CID = "g_127.0.0.1-1-2-3-Pull-py-0.1.0"
GROUP = "g"


def part(pid: int, topic: str = "t") -> Partition:
    return Partition(1, "127.0.0.1", 8123, topic, pid)


def info(pid: int) -> str:
    return str(SubscribeInfo(CID, GROUP, part(pid)))


def event(rid: int, op: EventType, pids: list[int]) -> RebalanceEvent:
    return RebalanceEvent(rid, int(op), [info(p) for p in pids])


class FakeOps:
    """Records broker RPCs; scripted register answers per partition id."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self.script: dict[int, list[Any]] = {}

    async def register(self, slot: Any, read_status: int) -> RegisterOutcome:
        pid = slot.partition.partition_id
        self.calls.append(("register", pid, read_status))
        answers = self.script.get(pid)
        ans = answers.pop(0) if answers else RegisterOutcome(True, 200, "OK!", 0, 280)
        if isinstance(ans, Exception):
            raise ans
        return ans

    async def unregister(self, slot: Any, read_status: int) -> None:
        self.calls.append(("unregister", slot.partition.partition_id, read_status))


def make(**kw: Any) -> tuple[PartitionTable, FakeOps, EventQueue, ReportQueue, RebalanceWorker]:
    table = PartitionTable(CID, GROUP)
    ops = FakeOps()
    events, reports = EventQueue(), ReportQueue()
    kw.setdefault("first_read_status", 0)
    kw.setdefault("confirm_wait", 0.2)
    kw.setdefault("register_retry_wait", 0.01)
    worker = RebalanceWorker(table, ops, events, reports, **kw)
    return table, ops, events, reports, worker


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


class Delivered:
    """A fetched batch that was handed to the application."""

    delivered = True


async def fetching() -> tuple[PartitionTable, Any]:
    """A table whose one partition (0) is registered and taken for a fetch (state FETCHING)."""
    table = PartitionTable(CID, GROUP)
    slot = table.add(part(0))
    table.start_register(slot)
    table.registered_ok(slot, 0, 0)
    return table, await table.acquire()


async def releasing_delivered() -> tuple[PartitionTable, Any, int]:
    """:func:`fetching`, its batch handed to the application, then the partition revoked: the table, the
    slot and the batch's booking."""
    table, s = await fetching()
    table.fetch_done(s, s.booking, batch=Delivered())
    booking = s.booking
    table.begin_release(s)
    return table, s, booking


# ---- state machine


def test_illegal_transition_raises() -> None:
    async def main() -> None:
        table = PartitionTable(CID, GROUP)
        slot = table.add(part(0))
        with pytest.raises(StateError):
            slot.transition(PartitionState.FETCHING)
        table.start_register(slot)
        with pytest.raises(StateError):
            slot.transition(PartitionState.IN_FLIGHT)

    run(main())


def test_fetch_cycle_and_stale_confirm() -> None:
    async def main() -> None:
        table = PartitionTable(CID, GROUP)
        slot = table.add(part(0))
        table.start_register(slot)
        table.registered_ok(slot, 0, 280)
        assert slot.state is PartitionState.OWNED and table.changed
        got = await table.acquire()
        assert got is slot and slot.state is PartitionState.FETCHING and not slot.last_consumed
        booking = slot.booking
        assert table.fetch_done(slot, booking, batch=Delivered())
        assert slot.state is PartitionState.IN_FLIGHT
        assert not table.confirm(slot, booking - 1, True)  # stale booking
        assert table.confirm(slot, booking, True)
        assert slot.state is PartitionState.OWNED and slot.last_consumed
        assert not table.confirm(slot, booking, True)  # double confirm rejected
        again = table.acquire_nowait()
        assert again is slot and slot.booking == booking + 1

    run(main())


def test_delayed_ready_and_pause() -> None:
    async def main() -> None:
        table, s = await fetching()
        table.fetch_done(s, s.booking, consumed=False, delay=0.05)
        assert table.acquire_nowait() is None  # waiting out the 404 back-off
        got = await asyncio.wait_for(table.acquire(), 2)
        assert got is s
        table.fetch_done(s, s.booking)
        table.pause()
        assert table.acquire_nowait() is None
        table.resume()
        assert table.acquire_nowait() is s

    run(main())


def test_close_wakes_waiters() -> None:
    async def main() -> None:
        table = PartitionTable(CID, GROUP)
        waiter = asyncio.ensure_future(table.acquire())
        await asyncio.sleep(0.01)
        table.close()
        with pytest.raises(ClientClosedError):
            await asyncio.wait_for(waiter, 2)

    run(main())


def test_revoke_undelivered_batch_is_rolled_back_at_once() -> None:
    async def main() -> None:
        table, s = await fetching()
        s.last_consumed = True

        class B:
            delivered = False

        table.fetch_done(s, s.booking, batch=B())
        table.begin_release(s)
        assert s.state is PartitionState.RELEASING and not s.last_consumed
        assert await table.wait_settled(s, 0.01)

    run(main())


def test_revoke_waits_for_fetch_then_abandons() -> None:
    async def main() -> None:
        table, s = await fetching()
        booking = s.booking
        table.begin_release(s)
        assert s.state is PartitionState.FETCHING  # the fetch is not cut short
        waiter = asyncio.ensure_future(table.wait_settled(s, 5))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        assert not table.fetch_done(s, booking, batch=object())  # answer arrives: not handed out
        assert await waiter
        assert s.state is PartitionState.RELEASING and not s.last_consumed

    run(main())


def test_revoke_of_delivered_batch_waits_for_confirm() -> None:
    async def main() -> None:
        table, s, booking = await releasing_delivered()
        assert s.state is PartitionState.IN_FLIGHT
        assert not table.is_current(s, booking)  # must not be handed out again
        waiter = asyncio.ensure_future(table.wait_settled(s, 5))
        await asyncio.sleep(0.01)
        assert table.confirm(s, booking, True)
        assert await waiter
        assert s.state is PartitionState.RELEASING and s.last_consumed

    run(main())


def test_revoke_timeout_forces_rollback() -> None:
    async def main() -> None:
        table, s, booking = await releasing_delivered()
        assert not await table.wait_settled(s, 0.02)
        assert s.state is PartitionState.RELEASING and not s.last_consumed
        assert not table.confirm(s, booking, True)  # the late confirm is rejected

    run(main())


# ---- queues


def test_event_queue_never_overwrites() -> None:
    async def main() -> None:
        q = EventQueue(capacity=3)
        q.put(event(1, EventType.ONLY_DISCONNECT, [0]))
        q.put(event(2, EventType.ONLY_CONNECT, [1]))
        q.put(event(2, EventType.ONLY_CONNECT, [2]))
        with pytest.raises(EventQueueFullError):
            q.put(event(3, EventType.ONLY_CONNECT, [3]))
        got = [await q.get() for _ in range(3)]
        assert [(e.rebalance_id, e.partitions()[0].partition_id) for e in got] == [(1, 0), (2, 1), (2, 2)]
        assert q.get_nowait() is None

    run(main())


def test_report_queue_put_back_keeps_order() -> None:
    r = ReportQueue()
    a, b = event(1, EventType.ONLY_CONNECT, [0]), event(2, EventType.ONLY_CONNECT, [1])
    r.put(a)
    r.put(b)
    first = r.take()
    assert first is a
    r.put_back(first)
    assert r.take() is a and r.take() is b and r.take() is None


def test_event_proto_round_trip() -> None:
    ev = master_pb.EventProto(rebalanceId=7, opType=10, subscribeInfo=[info(0), info(1)])
    parsed = RebalanceEvent.from_proto(ev)
    assert [p.partition_id for p in parsed.partitions()] == [0, 1]
    parsed.status = EventStatus.DONE
    out = master_pb.HeartRequestC2M()
    parsed.fill_proto(out.event)
    assert out.event.rebalanceId == 7 and out.event.opType == 10 and out.event.status == 2
    assert list(out.event.subscribeInfo) == [info(0), info(1)]


def test_bad_subscribe_info_is_skipped() -> None:
    ev = RebalanceEvent(3, 10, ["garbage", info(4)])
    assert [p.partition_id for p in ev.partitions()] == [4]


# ---- worker


def test_worker_connect_disconnect_reports_in_order() -> None:
    async def main() -> None:
        assigned: list[list[int]] = []
        revoked: list[list[int]] = []

        async def on_assigned(ps: list[Partition]) -> None:
            assigned.append(sorted(p.partition_id for p in ps))

        async def on_revoked(ps: list[Partition]) -> None:
            revoked.append(sorted(p.partition_id for p in ps))

        kicks: list[int] = []
        table, ops, events, reports, worker = make(
            first_read_status=1, on_assigned=on_assigned, on_revoked=on_revoked,
            on_report_ready=lambda: kicks.append(1),
        )
        task = asyncio.ensure_future(worker.run())
        events.put(event(5, EventType.ONLY_CONNECT, [0, 1, 2]))
        events.put(event(6, EventType.ONLY_DISCONNECT, [1]))
        events.put(event(6, EventType.CONNECT, [1]))  # same partition back again
        for _ in range(200):
            if worker.processed == 3:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        assert worker.processed == 3 and len(kicks) == 3
        done = [reports.take() for _ in range(3)]
        assert [(d.rebalance_id, d.op_type, d.status) for d in done] == [
            (5, 10, 2), (6, 20, 2), (6, 1, 2)]
        assert assigned == [[0, 1, 2], [1]] and revoked == [[1]]
        # first registration readStatus from consume_from (1), re-registration of partition 1 -> 0
        regs = [c for c in ops.calls if c[0] == "register"]
        assert sorted(regs) == [("register", 0, 1), ("register", 1, 0), ("register", 1, 1), ("register", 2, 1)]
        # partition 1 was idle and never fetched: unregister with readStatus 1 (nothing consumed)
        assert ("unregister", 1, 1) in ops.calls
        assert sorted(s.partition.partition_id for s in table.registered()) == [0, 1, 2]

    run(main())


def test_worker_gives_up_on_occupied_and_retries_others() -> None:
    async def main() -> None:
        table, ops, events, reports, worker = make(register_rounds=3)
        ops.script = {
            0: [RegisterOutcome(False, 410, "occupied")],
            1: [TubeMQConnectionError("down"), RegisterOutcome(False, 500, "x"), RegisterOutcome(True, 200, "", 0, 0)],
            2: [RegisterOutcome(False, 500, "x")] * 3,
        }
        await worker.connect(event(1, EventType.ONLY_CONNECT, [0, 1, 2]).partitions())
        assert [s.partition.partition_id for s in table.registered()] == [1]
        assert table.get(part(0).key) is None and table.get(part(2).key) is None
        assert len([c for c in ops.calls if c[1] == 0]) == 1  # 410: no retry
        assert len([c for c in ops.calls if c[1] == 2]) == 3

    run(main())


def test_worker_survives_hook_failure_and_unknown_event() -> None:
    async def main() -> None:
        async def bad_hook(ps: list[Partition]) -> None:
            raise RuntimeError("user bug")

        table, ops, events, reports, worker = make(on_assigned=bad_hook)
        task = asyncio.ensure_future(worker.run())
        events.put(RebalanceEvent(9, 99, []))
        events.put(event(10, EventType.ONLY_CONNECT, [0]))
        for _ in range(200):
            if worker.processed == 2:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        assert worker.processed == 2
        assert [s.partition.partition_id for s in table.registered()] == [0]
        assert [reports.take().rebalance_id for _ in range(2)] == [9, 10]

    run(main())


def test_disconnect_commits_confirmed_batch() -> None:
    async def main() -> None:
        table, ops, events, reports, worker = make()
        await worker.connect([part(0)])
        s = await table.acquire()
        table.fetch_done(s, s.booking, batch=Delivered())
        booking = s.booking

        async def confirm_later() -> None:
            await asyncio.sleep(0.05)
            table.confirm(s, booking, True)

        asyncio.ensure_future(confirm_later())
        await worker.disconnect([part(0)])
        assert ("unregister", 0, 0) in ops.calls  # consumed -> readStatus 0 (commit)
        assert table.get(part(0).key) is None and table.changed

    run(main())
