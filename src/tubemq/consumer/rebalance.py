"""Server-side balancing: the rebalance event queue, the report queue and the worker that processes events.

Why this module exists: the Go client lost rebalance events (a second event overwrote the first) and the
Java client clears its event queue after taking one. Here events are queued in arrival order and never
overwritten or dropped; every processed event is queued again as a result and reported (status DONE) on
the next master heartbeat (docs/PROTOCOL.md §5.2.2 - §5.2.4). The partitions themselves and their state
machine live in :mod:`.partitions`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._tasks import wait_for
from ..codec import Partition, parse_subscribe_info
from ..errors import DecodeError, TubeMQError
from ..protocol.constants import ErrorCode, EventStatus, EventType
from .partitions import PartitionSlot, PartitionState, PartitionTable, StateError

log = logging.getLogger("tubemq.consumer.rebalance")

__all__ = [
    "BrokerOps",
    "EventQueue",
    "EventQueueFullError",
    "PartitionSlot",
    "PartitionState",
    "PartitionTable",
    "RebalanceEvent",
    "RebalanceWorker",
    "RegisterOutcome",
    "ReportQueue",
    "StateError",
]


class EventQueueFullError(TubeMQError):
    """More unprocessed rebalance events than the queue holds; the session must re-synchronise."""


# events


@dataclass
class RebalanceEvent:
    """One rebalance event from the master, kept exactly as received so it can be echoed back."""

    rebalance_id: int
    op_type: int
    subscribe_infos: list[str]
    status: int = EventStatus.TODO
    received_at: float = field(default_factory=time.monotonic)

    @classmethod
    def from_proto(cls, ev: Any) -> RebalanceEvent:
        return cls(int(ev.rebalanceId), int(ev.opType), list(ev.subscribeInfo))

    def partitions(self) -> list[Partition]:
        """The partitions the event names; malformed strings are logged and skipped."""
        out: list[Partition] = []
        for text in self.subscribe_infos:
            try:
                out.append(parse_subscribe_info(text).partition)
            except DecodeError as exc:
                log.error("rebalance %d: skipping bad subscribeInfo %r: %s", self.rebalance_id, text, exc)
        return out

    def fill_proto(self, ev: Any) -> None:
        """Write the report form (same id/opType/subscribeInfo, status DONE) into an EventProto."""
        ev.rebalanceId = self.rebalance_id
        ev.opType = self.op_type
        ev.status = self.status
        ev.subscribeInfo.extend(self.subscribe_infos)

    def describe(self) -> str:
        try:
            name = EventType(self.op_type).name
        except ValueError:
            name = str(self.op_type)
        return f"rebalance {self.rebalance_id} {name} x{len(self.subscribe_infos)}"


class EventQueue:
    """FIFO of rebalance events awaiting processing. Never overwrites or drops an event.

    The master hands out one event per consumer at a time and the next only after the previous one
    was reported, so a handful is the real maximum; ``capacity`` only guards against a misbehaving
    server, and overflowing it raises :class:`EventQueueFullError` (the session then re-registers
    with its current partitions, which re-synchronises the master).
    """

    def __init__(self, capacity: int = 1024) -> None:
        self._items: deque[RebalanceEvent] = deque()
        self._capacity = capacity
        self._event = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, event: RebalanceEvent) -> None:
        if len(self._items) >= self._capacity:
            raise EventQueueFullError(f"{len(self._items)} rebalance events pending; refusing {event.describe()}")
        self._items.append(event)
        self._event.set()

    def get_nowait(self) -> RebalanceEvent | None:
        if not self._items:
            return None
        ev = self._items.popleft()
        if not self._items:
            self._event.clear()
        return ev

    async def get(self) -> RebalanceEvent:
        while True:
            ev = self.get_nowait()
            if ev is not None:
                return ev
            await self._event.wait()

    def pending(self) -> list[RebalanceEvent]:
        return list(self._items)


class ReportQueue:
    """Processed events waiting to be reported (one per master heartbeat, FIFO, never dropped)."""

    def __init__(self) -> None:
        self._items: deque[RebalanceEvent] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, event: RebalanceEvent) -> None:
        self._items.append(event)

    def take(self) -> RebalanceEvent | None:
        return self._items.popleft() if self._items else None

    def put_back(self, event: RebalanceEvent) -> None:
        """A heartbeat carrying ``event`` failed: report it again next time, first."""
        self._items.appendleft(event)


# ---------------------------------------------------------------------------------------------------
# the worker


@dataclass
class RegisterOutcome:
    success: bool
    code: int
    message: str = ""
    curr_offset: int = -1
    max_offset: int = -1


class BrokerOps(Protocol):
    """The broker RPCs the worker needs (implemented by the consumer core; faked in unit tests)."""

    async def register(self, slot: PartitionSlot, read_status: int) -> RegisterOutcome: ...

    async def unregister(self, slot: PartitionSlot, read_status: int) -> None: ...


Hook = Callable[[list[Partition]], Awaitable[None]]

#: register answers after which the Java client gives up on the partition for this event (§5.2.4)
_GIVE_UP_CODES = frozenset({ErrorCode.PARTITION_OCCUPIED, ErrorCode.CERTIFICATE_FAILURE})


def event_type_name(op_type: int) -> str:
    """``connect``, ``only_disconnect``... for an event's opType (``unknown`` for anything else)."""
    try:
        return EventType(op_type).name.lower()
    except ValueError:
        return EventType.UNKNOWN.name.lower()


class RebalanceWorker:
    """Processes rebalance events one at a time, in order, and queues each result for reporting."""

    def __init__(
        self,
        table: PartitionTable,
        ops: BrokerOps,
        events: EventQueue,
        reports: ReportQueue,
        *,
        first_read_status: int,
        confirm_wait: float = 3.0,
        register_rounds: int = 5,
        register_retry_wait: float = 1.0,
        hook_timeout: float = 10.0,
        on_assigned: Hook | None = None,
        on_revoked: Hook | None = None,
        on_report_ready: Callable[[], None] | None = None,
        on_unreleased: Callable[[PartitionSlot], None] | None = None,
    ) -> None:
        self.table = table
        self.ops = ops
        self.events = events
        self.reports = reports
        self.first_read_status = first_read_status
        self.confirm_wait = confirm_wait
        self.register_rounds = max(1, register_rounds)
        self.register_retry_wait = register_retry_wait
        self.hook_timeout = hook_timeout
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.on_report_ready = on_report_ready
        #: told of every partition given up whose broker may still hold our registration (the
        #: unregister failed, or the slot was dropped while it was being released): release it later
        self.on_unreleased = on_unreleased
        self.busy = False
        self.processed = 0
        # for metrics: events processed per type (lower-case EventType names), partitions gained/revoked
        self.processed_by_type: dict[str, int] = {}
        self.partitions_assigned = 0
        self.partitions_revoked = 0

    async def run(self) -> None:
        """Forever: take the next event, process it, queue the DONE report. Cancel to stop."""
        while True:
            ev = await self.events.get()
            self.busy = True
            try:
                await self.process(ev)
            except asyncio.CancelledError:
                raise
            except Exception:  # never let one bad event stop rebalancing
                log.exception("%s: processing failed; reporting it done anyway", ev.describe())
            finally:
                self.busy = False
            ev.status = EventStatus.DONE
            self.reports.put(ev)
            self.processed += 1
            kind = event_type_name(ev.op_type)
            self.processed_by_type[kind] = self.processed_by_type.get(kind, 0) + 1
            if self.on_report_ready is not None:
                self.on_report_ready()

    async def process(self, ev: RebalanceEvent) -> None:
        op = ev.op_type
        log.info("%s: processing", ev.describe())
        if op in (EventType.CONNECT, EventType.ONLY_CONNECT):
            await self.connect(ev.partitions())
        elif op in (EventType.DISCONNECT, EventType.ONLY_DISCONNECT):
            await self.disconnect(ev.partitions())
        elif op in (EventType.REPORT, EventType.REFRESH, EventType.STOP_REBALANCE):
            log.debug("%s: nothing to do", ev.describe())
        else:
            log.warning("%s: unknown opType %d ignored", ev.describe(), op)

    # ---- CONNECT
    def _read_status(self, slot: PartitionSlot) -> int:
        return self.first_read_status if self.table.first_registration(slot.key) else 0

    async def _register_one(self, slot: PartitionSlot) -> bool | None:
        """True registered, False give up, None retry."""
        try:
            out = await self.ops.register(slot, self._read_status(slot))
        except asyncio.CancelledError:
            raise
        except TubeMQError as exc:
            log.warning("partition %s: register failed (%s), will retry", slot.key, exc)
            return None
        if out.success and (slot.revoke_requested or self.table.closed):
            await self._unregister_quietly(slot, 1)  # registered just as we gave it up: hand it back
            return False
        if out.success:
            self.table.registered_ok(slot, out.curr_offset, out.max_offset)
            log.info("partition %s registered at offset %d (max %d)", slot.key, out.curr_offset, out.max_offset)
            return True
        if out.code in _GIVE_UP_CODES:
            log.warning("partition %s: register refused [%d] %s; giving up for this event",
                        slot.key, out.code, out.message)
            return False
        log.warning("partition %s: register refused [%d] %s, will retry", slot.key, out.code, out.message)
        return None

    async def connect(self, partitions: Sequence[Partition]) -> list[Partition]:
        pending: list[PartitionSlot] = []
        for p in partitions:
            slot = self.table.add(p)
            if slot.state is PartitionState.UNASSIGNED:
                self.table.start_register(slot)
                pending.append(slot)
            else:
                log.debug("partition %s already %s; skipped", p.key, slot.state.name)
        gained: list[Partition] = []
        for rnd in range(self.register_rounds):
            if not pending or self.table.closed:
                break
            results = await asyncio.gather(*(self._register_one(s) for s in pending))
            retry: list[PartitionSlot] = []
            for slot, res in zip(pending, results, strict=True):
                if res is True:
                    gained.append(slot.partition)
                elif res is False:
                    self.table.drop(slot, "registration refused")
                else:
                    retry.append(slot)
            pending = retry
            if pending and rnd + 1 < self.register_rounds:
                await asyncio.sleep(self.register_retry_wait)
        for slot in pending:
            self.table.drop(slot, f"not registered after {self.register_rounds} rounds")
        self.partitions_assigned += len(gained)
        if gained and self.on_assigned is not None and not self.table.closed:
            await self._call_hook(self.on_assigned, gained, "on_partitions_assigned")
        return gained

    # ---- DISCONNECT
    async def disconnect(self, partitions: Iterable[Partition]) -> list[Partition]:
        slots = []
        for p in partitions:
            slot = self.table.get(p.key)
            if slot is None or slot.state is PartitionState.RELEASED:
                continue
            slots.append(slot)
        if not slots:
            return []
        revoked = [s.partition for s in slots if s.registered]
        for slot in slots:
            self.table.begin_release(slot)
        self.partitions_revoked += len(revoked)
        if revoked and self.on_revoked is not None and not self.table.closed:
            await self._call_hook(self.on_revoked, revoked, "on_partitions_revoked")
        await self.release(slots, "revoked by rebalance")
        return revoked

    async def release(self, slots: Sequence[PartitionSlot], reason: str) -> None:
        """Settle (wait for fetches and confirms) and unregister ``slots`` concurrently."""

        async def one(slot: PartitionSlot) -> None:
            self.table.begin_release(slot)
            await self.table.wait_settled(slot, self.confirm_wait)
            if slot.state is PartitionState.RELEASING:
                await self._unregister_quietly(slot, 0 if slot.last_consumed else 1)
                self.table.finish_release(slot, reason)
            elif slot.state is PartitionState.REGISTERING:
                # the register answer may be lost in a cancelled call: make sure the broker forgets it
                await self._unregister_quietly(slot, 1)
                self.table.drop(slot, reason)
            elif slot.state is not PartitionState.RELEASED:
                self.table.drop(slot, reason)
            elif self.on_unreleased is not None:
                self.on_unreleased(slot)  # dropped (broker gone) while settling: never unregistered

        await asyncio.gather(*(one(s) for s in slots))

    async def _unregister_quietly(self, slot: PartitionSlot, read_status: int) -> None:
        try:
            await self.ops.unregister(slot, read_status)
        except asyncio.CancelledError:
            raise
        except TubeMQError as exc:
            # Java ignores it and the broker keeps the registration until it expires (§5.2.4), refusing
            # the partition's next owner meanwhile: released again once the broker answers
            log.info("partition %s: unregister failed (%s); released when the broker answers", slot.key, exc)
            if self.on_unreleased is not None:
                self.on_unreleased(slot)

    async def _call_hook(self, hook: Hook, partitions: list[Partition], name: str) -> None:
        try:
            await wait_for(hook(list(partitions)), self.hook_timeout)
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            log.error("%s did not return within %.1f s; rebalancing continues", name, self.hook_timeout)
        except Exception:
            log.exception("%s raised; rebalancing continues", name)
