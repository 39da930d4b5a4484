"""The explicit per-partition state machine and the table of one consumer's partitions, shared by the
server-balanced consumer (driven by :mod:`.rebalance`) and the bound consumer (driven by the application).

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
import contextlib
import enum
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .._tasks import wait_for
from ..codec import Partition, SubscribeInfo
from ..errors import ClientClosedError, TubeMQError

log = logging.getLogger("tubemq.consumer.partitions")

__all__ = ["REGISTERED_STATES", "PartitionSlot", "PartitionState", "PartitionTable", "StateError"]


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
#: the same table keyed by the state's value, with tuples (compared by identity first)
_NEXT: dict[str, tuple[PartitionState, ...]] = {k._value_: tuple(v) for k, v in _TRANSITIONS.items()}
#: States in which the broker holds a registration for us (listed in broker heartbeats and reports).
REGISTERED_STATES = frozenset({_S.OWNED, _S.FETCHING, _S.IN_FLIGHT, _S.RELEASING})


class StateError(TubeMQError):
    """An illegal partition state transition: a bug in the consumer, never a user error."""



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
    #: a batch confirmed consumed without a commit RPC: its commit rides on the next getMessage, whose
    #: successful answer's currOffset is then the committed offset after it (its ``next_offset``)
    unresolved: Any = None
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
        old = self.state
        # by value (a str: its hash is cached) and by identity: an Enum's own __hash__ is Python code,
        # and this runs three times per fetched batch
        if new not in _NEXT[old._value_]:
            raise StateError(f"partition {self.partition}: illegal transition {old.name} -> {new.name}")
        if log.isEnabledFor(logging.DEBUG):
            log.debug("partition %s: %s -> %s", self.key, old.name, new.name)
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
        #: partition keys paused one by one (pause(partitions)); kept across reassignments until resumed
        self._paused_keys: set[str] = set()
        #: OWNED slots of paused keys that would be fetchable now: made ready again on resume
        self._parked: dict[str, PartitionSlot] = {}
        #: told of every registered slot dropped without a revoke (broker death, 411/412/415...): the
        #: server-balanced consumer reports them through on_partitions_lost
        self.on_drop: Callable[[PartitionSlot], None] | None = None
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
        self._parked.pop(slot.key, None)
        if was_registered:
            self.changed = True
            log.warning("partition %s dropped: %s", slot.key, reason)
            if self.on_drop is not None and not slot.revoke_requested:
                self.on_drop(slot)  # a revoked slot was reported by on_partitions_revoked already

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
        if slot.key in self._paused_keys:
            self._parked[slot.key] = slot  # fetchable again once resumed
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
                if slot.key in self._paused_keys:
                    self._parked[slot.key] = slot
                    continue
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

    async def wait_ready(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a partition to become fetchable (or for close)."""
        if self._closed or (self._ready and not self._paused):
            return
        self._ready_event.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(self._ready_event.wait(), timeout)

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

    def pause_keys(self, keys: Iterable[str]) -> None:
        """Stop fetching these partitions (by key) until :meth:`resume_keys`; a fetch in flight completes."""
        self._paused_keys.update(keys)

    def resume_keys(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._paused_keys.discard(key)
            slot = self._parked.pop(key, None)
            if slot is not None and self._slots.get(key) is slot:
                self._make_ready(slot, slot.booking)

    @property
    def paused_keys(self) -> frozenset[str]:
        return frozenset(self._paused_keys)

    @property
    def paused_keys_view(self) -> set[str]:
        """The paused keys themselves (no copy: the delivery path checks every batch against them)."""
        return self._paused_keys

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
            await wait_for(slot._settled.wait(), timeout)
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
