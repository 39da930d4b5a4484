"""Server-side consumer balancing (docs/PROTOCOL.md §5.4), as pure logic without sockets or clocks.

The real master (``TMaster.balance``/``processRebalance``, ``ConsumerEventManager``) works like this,
and so does this module:

* a balance *round* runs periodically; every round takes the next value of one master-wide counter as
  its ``rebalanceId`` (captures s2/s3: 10, 12, 13, 16 — whether or not a group changed);
* groups whose members still hold unfinished events are skipped (after 10 skipped rounds their events
  are dropped, ``MAX_BALANCE_DELAY_TIME``);
* the target assignment of a group is diffed against the master's *record* of what each consumer holds
  (taken from register/heartbeat reports, never from the events it sent); removals become one
  DISCONNECT event (ONLY_DISCONNECT when nothing is added), additions one CONNECT (ONLY_CONNECT);
* delivery: a consumer's head event is handed out once; while any member of the group has a
  disconnect event queued, only disconnect events are handed out (the barrier that keeps two members
  from owning a partition at the same time); a heartbeat carrying ``rebalanceId > 0`` removes the
  consumer's head event without checking which one it was.

Where the real master assigns unowned partitions randomly, this one is deterministic (sorted
partitions to sorted consumers, keeping existing ownership), as §5.4 recommends for a test server.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tubemq.codec import Partition
from tubemq.protocol.constants import EventType

log = logging.getLogger("tubemq.server.balancer")

#: Rounds a group may keep unfinished events before they are dropped (TMaster.MAX_BALANCE_DELAY_TIME).
MAX_BALANCE_DELAY_ROUNDS = 10

_DISCONNECT_TYPES = frozenset({EventType.DISCONNECT, EventType.ONLY_DISCONNECT})


def partition_sort_key(p: Partition) -> tuple[str, int, int]:
    """Stable order used for every deterministic choice: topic, broker id, partition id."""
    return (p.topic, p.broker_id, p.partition_id)


@dataclass
class ConsumerEvent:
    """One rebalance event for one consumer (``ConsumerEvent``); ``delivered`` = status PROCESSING."""

    rebalance_id: int
    op_type: EventType
    partitions: tuple[Partition, ...]
    delivered: bool = False

    @property
    def is_disconnect(self) -> bool:
        return self.op_type in _DISCONNECT_TYPES

    def subscribe_infos(self, consumer_id: str, group: str) -> list[str]:
        """subscribeInfo strings with explicit ports (§4.3, captures s2/s3)."""
        return [f"{consumer_id}@{group}#{p}" for p in self.partitions]


def assign(
    partitions: Iterable[Partition],
    consumers: Iterable[str],
    current: Mapping[str, Iterable[Partition]],
) -> dict[str, list[Partition]]:
    """Target assignment: every partition to exactly one consumer, counts ⌊P/C⌋ or ⌈P/C⌉.

    Existing ownership (``current``) is kept wherever the balanced counts allow; the consumers holding
    the most partitions get the ⌈P/C⌉ slots so that as little as possible moves. The result is a pure
    function of its inputs (sorted orders everywhere).
    """
    avail = {p.key: p for p in partitions}
    members = sorted(set(consumers))
    result: dict[str, list[Partition]] = {cid: [] for cid in members}
    if not members:
        return result
    claimed: set[str] = set()
    kept: dict[str, list[Partition]] = {}
    for cid in members:
        mine = []
        for p in sorted(current.get(cid, ()), key=partition_sort_key):
            if p.key in avail and p.key not in claimed:
                claimed.add(p.key)
                mine.append(avail[p.key])
        kept[cid] = mine
    base, extra = divmod(len(avail), len(members))
    by_holding = sorted(members, key=lambda c: (-len(kept[c]), c))
    quota = {cid: base + (1 if i < extra else 0) for i, cid in enumerate(by_holding)}
    for cid in members:
        mine = kept[cid]
        if len(mine) > quota[cid]:
            for p in mine[quota[cid] :]:
                claimed.discard(p.key)
            del mine[quota[cid] :]
        result[cid] = mine
    pool = deque(sorted((p for k, p in avail.items() if k not in claimed), key=partition_sort_key))
    for cid in members:
        while len(result[cid]) < quota[cid] and pool:
            result[cid].append(pool.popleft())
    for cid in members:
        result[cid].sort(key=partition_sort_key)
    return result


def diff_events(
    rebalance_id: int, target: Sequence[Partition], current: Iterable[Partition]
) -> list[ConsumerEvent]:
    """Events turning ``current`` into ``target`` for one consumer: disconnect first, then connect."""
    target_keys = {p.key for p in target}
    current_list = list(current)
    current_keys = {p.key for p in current_list}
    removed = tuple(sorted((p for p in current_list if p.key not in target_keys), key=partition_sort_key))
    added = tuple(p for p in target if p.key not in current_keys)
    events: list[ConsumerEvent] = []
    if removed:
        op = EventType.DISCONNECT if added else EventType.ONLY_DISCONNECT
        events.append(ConsumerEvent(rebalance_id, op, removed))
    if added:
        op = EventType.CONNECT if removed else EventType.ONLY_CONNECT
        events.append(ConsumerEvent(rebalance_id, op, added))
    return events


@dataclass
class _Queues:
    disconnect: deque[ConsumerEvent] = field(default_factory=deque)
    connect: deque[ConsumerEvent] = field(default_factory=deque)

    def __bool__(self) -> bool:
        return bool(self.disconnect or self.connect)


class ServerBalancer:
    """Master-wide server-balance state: the rebalanceId counter, records and event queues.

    Callers (the master) own group membership and pass it in; this class never looks at clocks,
    sockets or protobuf, so every rule of §5.4 can be unit-tested directly.
    """

    def __init__(self) -> None:
        self.rebalance_id = 0
        self._records: dict[str, dict[str, Partition]] = {}
        self._queues: dict[str, _Queues] = {}
        self._unfinished_rounds: dict[str, int] = {}

    # ---- records (TMaster.currentSubInfo)

    def record(self, consumer_id: str) -> list[Partition]:
        """The master's view of what ``consumer_id`` holds (from its reports)."""
        return sorted(self._records.get(consumer_id, {}).values(), key=partition_sort_key)

    def set_record(self, consumer_id: str, partitions: Iterable[Partition]) -> bool:
        """Replace the record; returns True when it changed (TMaster.checkIfConsist)."""
        new = {p.key: p for p in partitions}
        old = self._records.get(consumer_id)
        if old is not None and old.keys() == new.keys():
            return False
        self._records[consumer_id] = new
        return True

    def apply_event(self, consumer_id: str, event: ConsumerEvent) -> None:
        """Record the effect of a processed event the consumer did not report a subscription for."""
        rec = self._records.setdefault(consumer_id, {})
        for p in event.partitions:
            if event.is_disconnect:
                rec.pop(p.key, None)
            else:
                rec[p.key] = p

    def remove_consumer(self, consumer_id: str) -> None:
        """A member left (close or heartbeat timeout): drop its record and its pending events."""
        self._records.pop(consumer_id, None)
        self._queues.pop(consumer_id, None)

    # ---- events (ConsumerEventManager)

    def add_event(self, consumer_id: str, event: ConsumerEvent) -> None:
        q = self._queues.setdefault(consumer_id, _Queues())
        (q.disconnect if event.is_disconnect else q.connect).append(event)

    def pending_events(self, consumer_id: str) -> list[ConsumerEvent]:
        q = self._queues.get(consumer_id)
        return [] if q is None else [*q.disconnect, *q.connect]

    def has_events(self, consumer_id: str) -> bool:
        return bool(self._queues.get(consumer_id))

    def _group_has_disconnect(self, members: Iterable[str]) -> bool:
        for cid in members:
            q = self._queues.get(cid)
            if q is not None and q.disconnect:
                return True
        return False

    def _current_queue(self, members: Iterable[str], consumer_id: str) -> deque[ConsumerEvent] | None:
        q = self._queues.get(consumer_id)
        if q is None:
            return None
        return q.disconnect if self._group_has_disconnect(members) else q.connect

    def next_event(self, members: Iterable[str], consumer_id: str) -> ConsumerEvent | None:
        """The event to put into this heartbeat response, or None (delivered once, barrier kept)."""
        queue = self._current_queue(members, consumer_id)
        if not queue:
            return None
        head = queue[0]
        if head.delivered:
            return None
        head.delivered = True
        return head

    def ack_event(self, members: Iterable[str], consumer_id: str) -> ConsumerEvent | None:
        """A heartbeat reported ``rebalanceId > 0``: remove the head event (id not checked, like Java)."""
        queue = self._current_queue(members, consumer_id)
        if not queue:
            return None
        event = queue.popleft()
        q = self._queues.get(consumer_id)
        if q is not None and not q:
            del self._queues[consumer_id]
        return event

    # ---- rounds (TMaster.balance)

    def run_round(
        self,
        groups: Mapping[str, tuple[Sequence[str], Sequence[Partition]]],
        partial: bool = False,
        reset: Callable[[str, Sequence[Partition]], Mapping[str, Sequence[Partition]] | None] | None = None,
    ) -> int:
        """One balance round over ``{group: (members, subscribable partitions)}``; returns its id.

        ``partial``: ``groups`` is not every group of the master (a new group balanced at once), so
        the unfinished-round counters of the groups not named are kept.

        Groups whose members hold unfinished events are skipped; after ``MAX_BALANCE_DELAY_ROUNDS``
        such rounds their members' events are dropped so that a lost response cannot block a group
        forever.

        ``reset(group, partitions)`` (bound consumption, TMaster.processResetbalance) is asked for
        every group that is balanced this round: None = balance it normally; a mapping = the
        consumers' offset-reset targets instead (empty: leave the group alone this round). A reset
        target only adds and removes partitions of the topics it names.
        """
        self.rebalance_id += 1
        rid = self.rebalance_id
        unfinished: set[str] = set()
        for group, (members, _parts) in groups.items():
            with_events = [cid for cid in members if self.has_events(cid)]
            if not with_events:
                continue
            if self._unfinished_rounds.get(group, 0) >= MAX_BALANCE_DELAY_ROUNDS:
                for cid in with_events:
                    self._queues.pop(cid, None)
                log.info(
                    "group %s: unfinished events dropped after %d rounds", group, MAX_BALANCE_DELAY_ROUNDS
                )
            else:
                unfinished.add(group)
        counts = {g: self._unfinished_rounds.get(g, 0) + 1 for g in unfinished}
        if partial:
            for g in groups:
                self._unfinished_rounds.pop(g, None)
            self._unfinished_rounds.update(counts)
        else:
            self._unfinished_rounds = counts
        for group, (members, parts) in groups.items():
            if group in unfinished or not members:
                continue
            plan = reset(group, parts) if reset is not None else None
            if plan is not None:
                current = {}
                for cid, wanted in plan.items():
                    topics = {p.topic for p in wanted}
                    current[cid] = [p for p in self.record(cid) if p.topic in topics]
                target = {cid: list(wanted) for cid, wanted in plan.items()}
            else:
                target = assign(parts, members, {cid: self.record(cid) for cid in members})
                current = {cid: self.record(cid) for cid in target}
            for cid in sorted(target):
                for event in diff_events(rid, target[cid], current[cid]):
                    log.debug(
                        "round %d group %s: %s %s to %s",
                        rid,
                        group,
                        event.op_type.name,
                        [p.key for p in event.partitions],
                        cid,
                    )
                    self.add_event(cid, event)
        return rid
