"""Server-side balancing: the rebalance event queue and the explicit per-partition state machine.

Why this module exists: the Go client lost rebalance events (a second event overwrote the first) and the
Java client clears its event queue after taking one. Here events are queued in arrival order and never
overwritten or dropped; every processed event is queued again as a result and reported (status DONE) on
the next master heartbeat (docs/PROTOCOL.md §5.2.2 - §5.2.4).

Every partition the consumer knows about has exactly one :class:`PartitionSlot` with an explicit
:class:`PartitionState`::

    UNASSIGNED --register--> REGISTERING --ok--> OWNED <--release/confirm-- IN_FLIGHT
         |                        |               |  \\--acquire--> FETCHING --batch--> IN_FLIGHT
         |                        |               |                   |  \\--no data/error--> OWNED
         |                        +--410/415/give up--> RELEASED       |
         +--------------------------------------------> RELEASED       |
    OWNED / FETCHING / IN_FLIGHT --revoke--> RELEASING --unregister (opType 32)--> RELEASED
    any registered state --broker says 411/412/415--> RELEASED (dropped locally, no RPC)

A revoke (DISCONNECT event or close) never cuts a fetch short: a slot that is FETCHING stays so until the
answer arrives, then its batch is abandoned (never handed out) and rolled back; a slot that is IN_FLIGHT
waits for the application's confirm up to ``confirm_wait`` seconds, then is rolled back. Only then is the
partition unregistered, with ``readStatus`` 0 (commit) when the last batch was consumed, else 1
(roll back), so a confirmed batch is never delivered again and an unconfirmed one is re-delivered to the
next owner.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..codec import Partition, SubscribeInfo, parse_subscribe_info
from ..errors import ClientClosedError, DecodeError, TubeMQError
from ..protocol.constants import ErrorCode, EventStatus, EventType

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


class PartitionState(enum.Enum):
    """Where one partition stands for this consumer (see the module docstring for the diagram)."""

    UNASSIGNED = "unassigned"  #: named by a CONNECT event, not registered at the broker yet
    REGISTERING = "registering"  #: RegisterRequestC2B opType 31 in progress (possibly retrying)
    OWNED = "owned"  #: registered; idle, fetchable now or after a back-off delay
    FETCHING = "fetching"  #: a getMessage is in flight
    IN_FLIGHT = "in_flight"  #: a fetched batch is buffered or with the application, unconfirmed
    RELEASING = "releasing"  #: being given up; no more fetches; waiting to unregister
    RELEASED = "released"  #: unregistered or dropped; terminal


_S = PartitionState
_TRANSITIONS: dict[PartitionState, frozenset[PartitionState]] = {
    _S.UNASSIGNED: frozenset({_S.REGISTERING, _S.RELEASED}),
    _S.REGISTERING: frozenset({_S.OWNED, _S.RELEASED}),
    _S.OWNED: frozenset({_S.FETCHING, _S.RELEASING, _S.RELEASED}),
    _S.FETCHING: frozenset({_S.OWNED, _S.IN_FLIGHT, _S.RELEASING, _S.RELEASED}),
    _S.IN_FLIGHT: frozenset({_S.OWNED, _S.RELEASING, _S.RELEASED}),
    _S.RELEASING: frozenset({_S.RELEASED}),
    _S.RELEASED: frozenset(),
}
#: States in which the broker holds a registration for us (listed in broker heartbeats and reports).
REGISTERED_STATES = frozenset({_S.OWNED, _S.FETCHING, _S.IN_FLIGHT, _S.RELEASING})


class StateError(TubeMQError):
    """An illegal partition state transition: a bug in the consumer, never a user error."""


class EventQueueFullError(TubeMQError):
    """More unprocessed rebalance events than the queue holds; the session must re-synchronise."""


@dataclass
class PartitionSlot:
    """The consumer's record of one partition. Mutated only on the event-loop thread."""

    partition: Partition
    subscribe_info: str
    filters: frozenset[str] = frozenset()
    state: PartitionState = PartitionState.UNASSIGNED
    #: lastPackConsumed for the next getMessage, and readStatus 0/1 for the unregister.
    last_consumed: bool = False
    #: incremented at every fetch; a confirm must carry the booking of the batch it confirms.
    booking: int = 0
    curr_offset: int = -1
    max_offset: int = -1
    revoke_requested: bool = False
    release_reason: str = ""
    empty_fetches: int = 0
    #: errCode of the last getMessage answer (599 after an RPC failure); for callers of single fetches
    last_code: int = 0
    last_message: str = ""
    #: the batch currently IN_FLIGHT (whatever object the fetch layer uses; needs ``delivered``).
    batch: Any = None
    _queued: bool = False
    _timer: asyncio.TimerHandle | None = None
    _settled: asyncio.Event | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        return self.partition.key

    @property
    def registered(self) -> bool:
        return self.state in REGISTERED_STATES

    def transition(self, new: PartitionState) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise StateError(f"partition {self.partition}: illegal transition {self.state.name} -> {new.name}")
        log.debug("partition %s: %s -> %s", self.key, self.state.name, new.name)
        self.state = new
        if new in (_S.RELEASING, _S.RELEASED) and self._settled is not None:
            self._settled.set()


class PartitionTable:
    """All partition slots of one consumer, plus the FIFO of partitions ready to be fetched.

    Fetch workers ``await acquire()`` a ready partition; the rebalance worker registers and revokes
    partitions; confirms and fetch results put partitions back (optionally after a delay).
    """

    def __init__(self, consumer_id: str, group: str, filters: dict[str, frozenset[str]] | None = None) -> None:
        self.consumer_id = consumer_id
        self.group = group
        self._filters = filters or {}
        self._slots: dict[str, PartitionSlot] = {}
        self._ready: deque[PartitionSlot] = deque()
        self._ready_event = asyncio.Event()
        self._ever_registered: set[str] = set()
        self._paused = False
        self._closed = False
        #: set when the set of registered partitions changed since the last subscribe report.
        self.changed = False

    # ---- lookup
    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    def get(self, key: str) -> PartitionSlot | None:
        return self._slots.get(key)

    def slots(self) -> list[PartitionSlot]:
        return list(self._slots.values())

    def registered(self) -> list[PartitionSlot]:
        """Slots the broker holds a registration for, in insertion order."""
        return [s for s in self._slots.values() if s.state in REGISTERED_STATES]

    def owned_partitions(self) -> list[Partition]:
        return [s.partition for s in self._slots.values() if s.state in REGISTERED_STATES]

    def subscribe_infos(self) -> list[str]:
        return [s.subscribe_info for s in self._slots.values() if s.state in REGISTERED_STATES]

    def first_registration(self, key: str) -> bool:
        """True until the partition was registered once by this consumer instance (§5.2.6 readStatus)."""
        return key not in self._ever_registered

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- lifecycle of a slot
    def add(self, partition: Partition, subscribe_info: str | None = None) -> PartitionSlot:
        """The live slot for ``partition``, created UNASSIGNED when unknown or released."""
        slot = self._slots.get(partition.key)
        if slot is not None and slot.state is not PartitionState.RELEASED:
            return slot
        info = subscribe_info or str(SubscribeInfo(self.consumer_id, self.group, partition))
        slot = PartitionSlot(partition, info, self._filters.get(partition.topic, frozenset()))
        self._slots[partition.key] = slot
        return slot

    def start_register(self, slot: PartitionSlot) -> None:
        slot.transition(PartitionState.REGISTERING)

    def registered_ok(self, slot: PartitionSlot, curr_offset: int, max_offset: int) -> None:
        """opType 31 succeeded: the partition is ours and fetchable at once."""
        slot.transition(PartitionState.OWNED)
        slot.curr_offset = curr_offset
        slot.max_offset = max_offset
        slot.last_consumed = False  # the Java client's first fetch carries lastPackConsumed=false
        self._ever_registered.add(slot.key)
        self.changed = True
        self._make_ready(slot, slot.booking)

    def _remove(self, slot: PartitionSlot) -> None:
        if self._slots.get(slot.key) is slot:
            del self._slots[slot.key]

    def drop(self, slot: PartitionSlot, reason: str) -> None:
        """The broker no longer holds this partition for us (411/412/415, failed registration)."""
        if slot.state is PartitionState.RELEASED:
            return
        was_registered = slot.registered
        self._unqueue(slot)
        slot.booking += 1  # a pending confirm for it is now stale
        slot.batch = None
        slot.release_reason = reason
        slot.transition(PartitionState.RELEASED)
        self._remove(slot)
        if was_registered:
            self.changed = True
            log.warning("partition %s dropped: %s", slot.key, reason)

    # ---- ready queue
    def _unqueue(self, slot: PartitionSlot) -> None:
        slot._queued = False
        if slot._timer is not None:
            slot._timer.cancel()
            slot._timer = None

    def _make_ready(self, slot: PartitionSlot, booking: int) -> None:
        slot._timer = None
        if self._closed or slot.state is not PartitionState.OWNED or slot.booking != booking or slot._queued:
            return
        slot._queued = True
        self._ready.append(slot)
        if not self._paused:
            self._ready_event.set()

    def _schedule(self, slot: PartitionSlot, delay: float) -> None:
        if delay <= 0:
            self._make_ready(slot, slot.booking)
            return
        loop = asyncio.get_running_loop()
        slot._timer = loop.call_later(delay, self._make_ready, slot, slot.booking)

    def _pop_ready(self) -> PartitionSlot | None:
        if self._paused:
            return None
        while self._ready:
            slot = self._ready.popleft()
            if slot._queued and slot.state is PartitionState.OWNED and self._slots.get(slot.key) is slot:
                slot._queued = False
                return slot
        return None

    def acquire_slot(self, slot: PartitionSlot) -> bool:
        """Take one specific OWNED slot for a fetch (bound consumption); False if it is not idle."""
        if slot.state is not PartitionState.OWNED or self._slots.get(slot.key) is not slot:
            return False
        self._unqueue(slot)
        slot.transition(PartitionState.FETCHING)
        slot.booking += 1
        return True

    def acquire_nowait(self) -> PartitionSlot | None:
        """Take the head of the ready FIFO (OWNED -> FETCHING), or None."""
        slot = self._pop_ready()
        if slot is not None:
            slot.transition(PartitionState.FETCHING)
            slot.booking += 1
        return slot

    async def acquire(self) -> PartitionSlot:
        """Wait for a ready partition; raises ClientClosedError once the table is closed."""
        while True:
            if self._closed:
                raise ClientClosedError("consumer closed")
            slot = self.acquire_nowait()
            if slot is not None:
                return slot
            self._ready_event.clear()
            await self._ready_event.wait()

    def pause(self) -> None:
        """Stop handing out partitions (in-flight fetches complete normally)."""
        self._paused = True
        self._ready_event.clear()

    def resume(self) -> None:
        self._paused = False
        if self._ready:
            self._ready_event.set()

    @property
    def paused(self) -> bool:
        return self._paused

    # ---- fetch results and confirms
    def fetch_done(
        self, slot: PartitionSlot, booking: int, *, batch: Any = None, consumed: bool = False, delay: float = 0.0
    ) -> bool:
        """A getMessage finished. With ``batch`` the slot becomes IN_FLIGHT; without, it is released
        with lastPackConsumed=``consumed`` and fetchable again after ``delay`` seconds.

        Returns False when the batch must not be handed out (partition revoked or dropped meanwhile).
        """
        if slot.state is not PartitionState.FETCHING or slot.booking != booking:
            return False
        if slot.revoke_requested:
            # abandon: the fetched data was never handed out, so roll it back (readStatus 1)
            slot.last_consumed = False if batch is not None else consumed
            slot.transition(PartitionState.RELEASING)
            return False
        if batch is not None:
            slot.batch = batch
            slot.transition(PartitionState.IN_FLIGHT)
            return True
        slot.last_consumed = consumed
        slot.transition(PartitionState.OWNED)
        self._schedule(slot, delay)
        return False

    def is_current(self, slot: PartitionSlot, booking: int) -> bool:
        """Whether a batch with ``booking`` may still be handed out / confirmed."""
        return slot.state is PartitionState.IN_FLIGHT and slot.booking == booking and not slot.revoke_requested

    def confirm(self, slot: PartitionSlot, booking: int, consumed: bool, delay: float = 0.0) -> bool:
        """The application finished the IN_FLIGHT batch; False when the confirm is stale."""
        if slot.state is not PartitionState.IN_FLIGHT or slot.booking != booking:
            return False
        slot.last_consumed = consumed
        slot.batch = None
        if slot.revoke_requested:
            slot.transition(PartitionState.RELEASING)
        else:
            slot.transition(PartitionState.OWNED)
            self._schedule(slot, delay)
        return True

    # ---- revoke
    def begin_release(self, slot: PartitionSlot) -> None:
        """Stop fetching ``slot``; it becomes RELEASING now or when its fetch/batch settles."""
        if slot.state in (PartitionState.RELEASING, PartitionState.RELEASED):
            return
        slot.revoke_requested = True
        self._unqueue(slot)
        if slot.state in (PartitionState.OWNED, PartitionState.UNASSIGNED, PartitionState.REGISTERING):
            if slot.state is PartitionState.OWNED:
                slot.transition(PartitionState.RELEASING)
            return
        if slot.state is PartitionState.IN_FLIGHT and not getattr(slot.batch, "delivered", True):
            # still in the local buffer: nobody saw it, roll it back right away
            slot.booking += 1
            slot.batch = None
            slot.last_consumed = False
            slot.transition(PartitionState.RELEASING)

    async def wait_settled(self, slot: PartitionSlot, timeout: float) -> bool:
        """Wait until ``slot`` is RELEASING (fetch answered, batch confirmed); force it after ``timeout``.

        Forcing rolls the unconfirmed batch back (its late confirm is rejected). Returns False if forced.
        """
        if slot.state in (PartitionState.RELEASING, PartitionState.RELEASED):
            return True
        if slot.state in (PartitionState.UNASSIGNED, PartitionState.REGISTERING):
            return True  # nothing fetched yet; the caller decides about the registration itself
        if slot._settled is None:
            slot._settled = asyncio.Event()
        try:
            await asyncio.wait_for(slot._settled.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            if slot.state in (PartitionState.FETCHING, PartitionState.IN_FLIGHT):
                log.warning(
                    "partition %s: %s not settled within %.1f s, rolling back",
                    slot.key, slot.state.name, timeout,
                )
                slot.booking += 1
                slot.batch = None
                slot.last_consumed = False
                slot.transition(PartitionState.RELEASING)
            return False

    def finish_release(self, slot: PartitionSlot, reason: str) -> None:
        slot.release_reason = reason
        if slot.state is not PartitionState.RELEASED:
            slot.transition(PartitionState.RELEASED)
        self._remove(slot)
        self.changed = True

    def close(self) -> None:
        """No more acquisitions; waiting fetch workers get ClientClosedError."""
        self._closed = True
        for slot in self._slots.values():
            self._unqueue(slot)
        self._ready.clear()
        self._ready_event.set()


# ---------------------------------------------------------------------------------------------------
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

        await asyncio.gather(*(one(s) for s in slots))

    async def _unregister_quietly(self, slot: PartitionSlot, read_status: int) -> None:
        try:
            await self.ops.unregister(slot, read_status)
        except asyncio.CancelledError:
            raise
        except TubeMQError as exc:  # errors are ignored, as in Java (§5.2.4)
            log.info("partition %s: unregister failed (%s); the broker expires it", slot.key, exc)

    async def _call_hook(self, hook: Hook, partitions: list[Partition], name: str) -> None:
        try:
            await asyncio.wait_for(hook(list(partitions)), self.hook_timeout)
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            log.error("%s did not return within %.1f s; rebalancing continues", name, self.hook_timeout)
        except Exception:
            log.exception("%s raised; rebalancing continues", name)
