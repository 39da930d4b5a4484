"""``BoundCore``: the bound-consumption engine behind ``tubemq.aio.BoundConsumer`` and ``tubemq.BoundConsumer``.

Client-side balance and bound offsets on asyncio, the one implementation (the two public classes only
forward to it). See :mod:`tubemq.consumer.bound.session` for the protocol (V2 methods 20-22, offsets
as index offsets).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from ...client.identity import consumer_id
from ...codec import Message, Partition, parse_partition, parse_topic_meta_info
from ...config import ConsumerConfig
from ...errors import (
    BadRequestError,
    ClientClosedError,
    DecodeError,
    NotFoundError,
    NotRegisteredError,
    TubeMQConnectionError,
    TubeMQError,
    TubeMQTimeoutError,
    error_for_code,
)
from ...metrics import Metrics
from ...net.health import SessionHealth
from ...net.loop import with_operation
from ...protocol import master_pb
from ...protocol.constants import INDEX_ENTRY_SIZE, META_VALUE_UNDEFINED, ErrorCode, Method
from ...serializers import deserialize_messages
from ...types import Batch
from ..brokers import BrokerClient, BrokerHeartbeats
from ..engine import ConsumerEngine
from ..fetch import DeliveryBuffer, Fetcher
from ..flowctrl import FlowControl
from ..links import Links
from ..partitions import PartitionSlot, PartitionState, PartitionTable
from ..workers import round_trip
from .session import (
    DEFAULT_FETCH_TIMEOUT,
    MAX_EMPTY_READS,
    BoundSession,
    PartitionPosition,
    PartitionRef,
    check_v2,
)

log = logging.getLogger("tubemq.consumer.bound")

__all__ = ["BoundCore"]

#: pause between attempts to attach a partition again while its broker cannot be reached
_REATTACH_WAIT = 0.3

def _entry_boundary(offset: int) -> int:
    """The first index entry boundary at or after ``offset`` (entries are 28 bytes, from 0)."""
    return -(-offset // INDEX_ENTRY_SIZE) * INDEX_ENTRY_SIZE


class BoundCore:
    """The bound consumer's state and logic on the running loop (see the module docstring)."""

    def __init__(self, config: ConsumerConfig, *, source_count: int = 0, node_id: int = 0) -> None:
        self.config = config
        if not config.topics:
            raise BadRequestError(ErrorCode.BAD_REQUEST, "a bound consumer needs at least one topic")
        self.source_count = source_count
        self.node_id = node_id
        self.stats = Metrics()  # the registry; metrics() returns its snapshot
        self.client_id = consumer_id(self.config.group, "Balance", self.config.local_address)
        self.table = PartitionTable(self.client_id, self.config.group, dict(self.config.topics))
        self.flow = FlowControl(msg_not_found_wait_ms=self.config.msg_not_found_wait_ms,
                                filter_wait_ms=self.config.filter_wait_ms)
        self.session = BoundSession(self, self.client_id, self.stats)
        links = Links()
        self.brokers = BrokerClient(self.session, self.config, self.flow, links=links)
        self.fetcher = Fetcher(
            self.table, client_id=self.client_id, group=self.config.group, flow=self.flow,
            rpc_timeout_ms=self.config.rpc_timeout_ms, verify_checksum=self.config.verify_checksum,
            client_filter=self.config.client_filter, metrics=self.stats,
        )
        #: the fetch decisions, shared with the server-balanced consumer (its buffer is unused: a
        #: bound read hands each batch straight to its caller)
        self.engine = ConsumerEngine(config, self.client_id, self.table, DeliveryBuffer(1), self.fetcher, links,
                                     self.brokers)
        self.heartbeats = BrokerHeartbeats(self.table, self.brokers, self.session,
                                           self.config.heartbeat_period_ms / 1000.0, self._on_lost)
        self.meta_id: int = META_VALUE_UNDEFINED
        self.meta_applied_at: int = 0
        self._meta: dict[str, tuple[Partition, bool]] = {}
        self._meta_items: list[str] = []
        self._locks: dict[str, asyncio.Lock] = {}
        #: bound offsets of attached partitions the broker no longer holds for us (dropped after its
        #: heartbeat failed or answered 411, a getMessage answered 411/412/415, its connection was
        #: closed): the next fetch attaches them again there, not at what the broker may have kept
        self._resume: dict[str, int] = {}
        #: attached partitions whose broker closed our connection: the broker may have restarted
        #: (registrations gone) or only the connection broke (kept); either way the next fetch
        #: registers them again, a register from the holding consumer id taking the partition over
        self._relink: set[str] = set()
        self.table.on_drop = self._dropped
        self._hb_task: asyncio.Task[None] | None = None
        self.started = False
        self.closing = False
        self.stats.set_gauge("consumer.partitions", lambda: len(self.table.registered()))
        self.health = SessionHealth(self.stats, self.session, self._broker_addresses)

    def _broker_addresses(self) -> dict[str, int]:
        """address -> broker id of the brokers holding attached partitions (for metrics)."""
        return {s.partition.address: s.partition.broker_id for s in self.table.registered()}

    def metrics(self) -> dict[str, Any]:
        """Counters, fetch latency, master and per-broker health (docs/guide/metrics.md).
        Call it from the consumer's loop."""
        return self.stats.snapshot()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> BoundCore:
        if self.closing:
            raise ClientClosedError("bound consumer is closed")
        if not self.started:
            self.started = True
            try:
                await self.session.start(register_attempts=5)
            except TubeMQError as exc:
                what = f"bound consumer start (register with master {','.join(self.config.masters)})"
                raise with_operation(exc, what)  # noqa: B904 - the cause is set
            self.health.remember_pool()
            self.session.pool.disconnect_listeners.append(self._disconnected)
            self._hb_task = asyncio.get_running_loop().create_task(self.heartbeats.run(lambda: self.closing))
        return self

    async def close(self) -> None:
        """Unregister every attached partition (committing confirmed batches), then close to the master."""
        if self.closing:
            return
        self.closing = True
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._hb_task
        if self.started:
            listeners = self.session.pool.disconnect_listeners
            if self._disconnected in listeners:
                listeners.remove(self._disconnected)
            await asyncio.gather(*(self._release(s, None) for s in self.table.registered()),
                                 return_exceptions=True)
            self.table.close()
            await self.session.close()

    def attached(self) -> list[Partition]:
        """The partitions currently attached (registered at their brokers)."""
        return self.table.owned_partitions()

    def _on_lost(self, slot: PartitionSlot) -> None:
        self.session.trigger_heartbeat()

    def _dropped(self, slot: PartitionSlot) -> None:
        """An attached partition was dropped without a detach: remember where it stands."""
        if not self.closing and slot.curr_offset >= 0:
            self._resume[slot.key] = slot.curr_offset

    def _disconnected(self, address: str, reason: str) -> None:
        """A broker closed our connection (pool listener): its partitions are registered again before
        their next fetch. Not dropped here: an unconfirmed batch may still be committed on a new
        connection if the broker kept the registration."""
        if self.closing:
            return
        keys = [s.key for s in self.table.registered() if s.partition.address == address]
        if keys:
            log.info("broker %s closed the connection (%s); attaching %s again before the next fetch",
                     address, reason, ", ".join(keys))
            self._relink.update(keys)

    async def _connection(self, address: str) -> Any:
        return await self.session.pool.get(address)

    def _check(self) -> None:
        if self.closing:
            raise ClientClosedError("bound consumer is closed")
        if not self.started:
            raise ClientClosedError("bound consumer not started (use start() or async with)")

    # ------------------------------------------------------------------ topic meta
    def apply_meta(self, meta_id: int, items: list[str]) -> None:
        self._meta_items = list(items)
        self.resolve_meta()
        self.meta_id = meta_id
        self.meta_applied_at = int(time.time() * 1000)

    def resolve_meta(self) -> None:
        """(Re-)expand the topic meta with the current broker map. Needed after a broker-list change
        too: with our topicMetaInfoId unchanged the master omits the meta list (§3.5), but a broker
        may have moved to another address (captures/s5 shape; tests/fidelity)."""
        meta: dict[str, tuple[Partition, bool]] = {}
        for p, ok in parse_topic_meta_info(self._meta_items, self.session.brokers,
                                           max_partitions=self.config.max_partitions,
                                           max_total_partitions=self.config.max_total_partitions):
            meta[p.key] = (p, ok)
        self._meta = meta

    def part_sub_info(self) -> list[str]:
        """``topic#brokerId:partitionId,...`` per topic of the attached partitions (V2 report)."""
        by_topic: dict[str, list[str]] = {}
        for slot in self.table.registered():
            p = slot.partition
            by_topic.setdefault(p.topic, []).append(f"{p.broker_id}:{p.partition_id}")
        return [f"{t}#{','.join(v)}" for t, v in sorted(by_topic.items())]

    async def refresh_meta(self) -> None:
        """GetPartMetaRequestC2M (method 22): the subscribable partitions of the group's topics.

        A 411 (the master does not know the group, e.g. a new active master after a fail-over)
        registers again and asks once more, like a heartbeat would, instead of failing the caller.
        """
        self._check()
        try:
            await self._get_part_meta()
        except NotRegisteredError as exc:
            log.info("bound consumer %s: %s; registering again", self.client_id, exc)
            self.session.registered = False
            self.session.on_reregister()
            await self.session.register(max_attempts=3)
            await self._get_part_meta()

    async def _get_part_meta(self) -> None:
        req = master_pb.GetPartMetaRequestC2M(
            clientId=self.client_id, groupName=self.config.group,
            brokerConfigId=self.session.broker_checksum if self.session.brokers else META_VALUE_UNDEFINED,
            topicMetaInfoId=self.meta_id,
        )
        self.session.add_cert(req, force=False)
        rsp = await self.session.call_master(Method.MASTER_CONSUMER_GET_PART_META, req,
                                             master_pb.GetPartMetaResponseM2C)
        check_v2(rsp)
        if rsp.HasField("brokerConfigId") and self.session.apply_brokers(rsp.brokerConfigId, rsp.brokerConfigList):
            self.resolve_meta()
        if rsp.HasField("topicMetaInfoId") and (len(rsp.topicMetaInfoList) or rsp.topicMetaInfoId != self.meta_id):
            self.apply_meta(rsp.topicMetaInfoId, list(rsp.topicMetaInfoList))

    async def partitions(self, topic: str | None = None) -> list[Partition]:
        """Subscribable partitions of the group's topics (or of ``topic``), sorted."""
        await self.refresh_meta()
        parts = [p for p, ok in self._meta.values() if ok and (topic is None or p.topic == topic)]
        return sorted(parts, key=lambda p: (p.topic, p.broker_id, p.partition_id))

    def _resolve(self, ref: PartitionRef) -> Partition:
        if isinstance(ref, tuple):  # codec.Partition is a NamedTuple (either codec implementation)
            return ref
        if not isinstance(ref, str):
            raise TypeError(f"expected a Partition or a partition key/string, got {type(ref).__name__}")
        if "#" in ref:
            try:
                return parse_partition(ref)
            except DecodeError as exc:
                raise BadRequestError(ErrorCode.BAD_REQUEST, str(exc)) from exc
        slot = self.table.get(ref)
        if slot is not None:
            return slot.partition
        found = self._meta.get(ref)
        if found is None:
            raise NotFoundError(ErrorCode.NOT_FOUND, f"unknown partition {ref!r} (call partitions() first)")
        return found[0]

    def _lock(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    # ------------------------------------------------------------------ attach / detach
    async def attach(self, partition: PartitionRef, offset: int | None = None) -> PartitionPosition:
        """Register the partition at its broker; with ``offset`` the group's position is set there
        (clamped into [min, max] by the broker; use offsets the broker gave out). Attaching an attached
        partition again with an offset rolls back an unconfirmed batch and moves the position."""
        self._check()
        p = self._resolve(partition)
        if offset is not None and offset < 0:
            raise BadRequestError(ErrorCode.BAD_REQUEST, f"offset must be >= 0, got {offset}")
        async with self._lock(p.key):
            return await self._attach(p, offset)

    async def _attach(self, p: Partition, offset: int | None) -> PartitionPosition:
        slot = self.table.get(p.key)
        if slot is not None and slot.registered:
            if offset is None:
                return PartitionPosition(p, slot.curr_offset, slot.max_offset)
            await self._release(slot, False)
        slot = self.table.add(p)
        self.table.start_register(slot)
        read_status = self.config.first_read_status if self.table.first_registration(p.key) else 0
        try:
            out = await self.brokers.register(slot, read_status, offset)
        except BaseException:
            self.table.drop(slot, "register failed")
            raise
        if not out.success:
            self.table.drop(slot, f"register [{out.code}] {out.message}")
            raise error_for_code(out.code, f"attach {p.key}: {out.message}")
        self.table.registered_ok(slot, out.curr_offset, out.max_offset)
        self._resume.pop(p.key, None)
        self._relink.discard(p.key)
        self.session.trigger_heartbeat()  # report the new partition set (partSubInfo)
        return PartitionPosition(p, out.curr_offset, out.max_offset)

    async def _release(self, slot: PartitionSlot, commit: bool | None) -> None:
        """Unregister ``slot``; commit=None uses the last confirm (Java: readStatus from lastPackConsumed)."""
        if slot.state is PartitionState.IN_FLIGHT:
            self.table.confirm(slot, slot.booking, bool(commit))
        self.table.begin_release(slot)
        await self.table.wait_settled(slot, self.config.rpc_timeout_ms / 1000.0)
        consumed = slot.last_consumed if commit is None else commit
        if slot.state is PartitionState.RELEASING:
            try:
                await self.brokers.unregister(slot, 0 if consumed else 1)
            except TubeMQError as exc:
                log.info("partition %s: unregister failed (%s); the broker expires it", slot.key, exc)
            self.table.finish_release(slot, "detached")
        elif slot.state is not PartitionState.RELEASED:
            self.table.drop(slot, "detached")
        self.session.trigger_heartbeat()

    async def detach(self, partition: PartitionRef, commit: bool = False) -> None:
        """Unregister the partition (opType 32). ``commit=True`` commits an unconfirmed batch, else it
        is rolled back; confirmed batches are committed either way."""
        self._check()
        p = self._resolve(partition)
        async with self._lock(p.key):
            self._resume.pop(p.key, None)
            self._relink.discard(p.key)
            slot = self.table.get(p.key)
            if slot is None or not slot.registered:
                return
            if slot.state is PartitionState.IN_FLIGHT:
                self.table.confirm(slot, slot.booking, commit)
            await self._release(slot, None)

    # ------------------------------------------------------------------ fetch / confirm
    async def offsets(self, partition: PartitionRef) -> PartitionPosition:
        """Committed and max offset of the partition, without moving it (attaches if needed)."""
        self._check()
        p = self._resolve(partition)
        async with self._lock(p.key):
            slot = self.table.get(p.key)
            if slot is None or not slot.registered or (p.key in self._relink and slot.state is PartitionState.OWNED):
                # (a batch held unconfirmed keeps its registration: it may still be committed)
                slot = await self._bound_slot(p, time.monotonic())
                return PartitionPosition(p, slot.curr_offset, slot.max_offset)
            if slot.state is PartitionState.OWNED:
                ok, code, msg = await self._sync_position(slot)
                if not ok:
                    raise error_for_code(code, f"offsets of {p.key}: {msg}")
            return PartitionPosition(p, slot.curr_offset, slot.max_offset)

    async def _sync_position(self, slot: PartitionSlot) -> tuple[bool, int, str]:
        """Learn the broker's committed offset of an OWNED slot (empty reads commit on their own, so the
        client cannot know it otherwise): a commit with nothing handed out only applies the pending
        confirm -- a rolled-back batch stays rolled back, no unconfirmed data is committed."""
        ok, code, msg, curr, mx = await self.brokers.commit(slot.partition, slot.last_consumed)
        if ok:
            slot.curr_offset = curr
            if mx >= 0:
                slot.max_offset = mx
        return ok, code, msg

    async def fetch(self, partition: PartitionRef, timeout: float = DEFAULT_FETCH_TIMEOUT) -> Batch | None:
        """One batch from the partition's current position, or None if no data came within
        ``timeout`` seconds. An unconfirmed previous batch of this partition is rolled back first
        (the fetch then returns the same messages again)."""
        self._check()
        p = self._resolve(partition)
        async with self._lock(p.key):
            return await self._fetch(p, timeout)

    async def _bound_slot(self, p: Partition, deadline: float) -> PartitionSlot:
        """The registered slot of ``p``, attached (again) first if the broker no longer holds it or
        closed our connection: at its bound offset when it was attached before. A broker that cannot
        be reached is tried again until ``deadline`` (monotonic), then its connection error (typed)
        is raised; other refusals (410 held by another member, 415...) are raised at once."""
        slot = self.table.get(p.key)
        if slot is not None and slot.registered:
            if p.key not in self._relink:
                return slot
            self._relink.discard(p.key)
            self.table.drop(slot, "its broker closed the connection")  # _dropped keeps its offset
        while True:
            try:
                await self._attach(p, self._resume.get(p.key))
            except (TubeMQConnectionError, TubeMQTimeoutError) as exc:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                log.info("partition %s: broker %s unreachable (%s); attaching again", p.key, p.address, exc)
                await asyncio.sleep(min(_REATTACH_WAIT, remaining))
                continue
            slot = self.table.get(p.key)
            assert slot is not None
            return slot

    async def _fetch(self, p: Partition, timeout: float, stop: int | None = None) -> Batch | None:
        """One batch (waiting up to ``timeout`` for data); with ``stop``, None as soon as the
        partition's position reached ``stop`` (empty reads move it over siblings' entries).

        A partition its broker lost (restart, expiry, closed connection) is attached again at its
        bound offset and read on within ``timeout``; a broker that stays unreachable for all of
        ``timeout`` raises its connection error (``TubeMQConnectionError`` / ``TubeMQTimeoutError``)."""
        deadline = time.monotonic() + max(0.0, timeout)
        empty_reads = 0
        while True:
            slot = await self._bound_slot(p, deadline)
            if slot.state is PartitionState.IN_FLIGHT:
                self.table.confirm(slot, slot.booking, False)
            if slot.state is not PartitionState.OWNED or not self.table.acquire_slot(slot):
                raise ClientClosedError(f"partition {p.key} is no longer attached ({slot.state.name})")
            batch = await round_trip(self.engine, self.engine.lease_slot(slot), self._connection,
                                     self.config.rpc_timeout_ms)
            if batch is not None:
                batch.delivered = True
                if self.config.deserialize is not None:  # value_deserializer (tubemq.serializers)
                    try:
                        deserialize_messages(batch.messages, self.config.deserialize)
                    except Exception:
                        self.table.confirm(slot, slot.booking, False)  # rolled back: fetched again next time
                        raise
                return batch
            remaining = deadline - time.monotonic()
            if not slot.registered:
                # the broker answered that it does not hold the partition for us (411/412/415)
                if remaining <= 0:
                    raise error_for_code(slot.last_code, f"partition {p.key} lost: {slot.last_message}")
                log.info("partition %s lost (%s); attaching it again at offset %d", p.key, slot.last_message,
                         self._resume.get(p.key, -1))
                continue
            if stop is not None and slot.state is PartitionState.OWNED \
                    and slot.last_code in (ErrorCode.SUCCESS, ErrorCode.NOT_FOUND):
                ok, _code, _msg = await self._sync_position(slot)
                if ok and slot.curr_offset >= stop:
                    return None
            if slot.last_code == ErrorCode.SUCCESS and empty_reads < MAX_EMPTY_READS:
                empty_reads += 1  # only other partitions' index entries: the offset moved, read on
                continue
            if slot.last_code not in (ErrorCode.SUCCESS, ErrorCode.NOT_FOUND):
                log.info("partition %s: fetch answered [%d] %s", p.key, slot.last_code, slot.last_message)
            if remaining <= 0:
                if slot.last_code == ErrorCode.UNSPECIFIED_ABNORMAL:
                    # the getMessage itself failed (no connection, no answer): not "no data"
                    raise TubeMQConnectionError(f"fetch {p.key}: broker {p.address}: {slot.last_message}")
                return None
            wait = self.flow.empty_delay(slot.empty_fetches) if slot.last_code == ErrorCode.NOT_FOUND else 0.0
            if slot.last_code not in (ErrorCode.SUCCESS, ErrorCode.NOT_FOUND):
                wait = _REATTACH_WAIT
            await asyncio.sleep(min(wait, remaining))

    async def confirm(self, batch: Batch, consumed: bool = True) -> bool:
        """Commit (or roll back) ``batch`` at the broker: True once the broker acknowledged it, like
        ``Consumer.confirm``; the committed offset is then ``batch.next_offset``. Refusals, a stale batch
        and an unknown outcome (no answer) raise typed errors."""
        self._check()
        slot = batch._slot
        if slot is None or not self.table.is_current(slot, batch._booking):
            raise BadRequestError(ErrorCode.BAD_REQUEST, f"{batch!r} is no longer current (re-fetched or detached)")
        async with self._lock(batch.partition.key):
            await self._confirm(slot, batch, consumed)
        return True

    async def _confirm(self, slot: PartitionSlot, batch: Batch, consumed: bool) -> int:
        ok, code, msg, curr, mx = await self.brokers.commit(batch.partition, consumed)
        if not ok:
            if code in (ErrorCode.UNAUTHORIZED, ErrorCode.HB_NO_NODE, ErrorCode.DUPLICATE_PARTITION):
                self.table.drop(slot, f"commit [{code}] {msg}")
            raise error_for_code(code, f"confirm on {batch.partition.key}: {msg}")
        self.table.confirm(slot, batch._booking, consumed)
        batch.confirmed = True
        batch.next_offset = curr
        slot.curr_offset = curr
        if mx >= 0:
            slot.max_offset = mx
        return curr

    # ------------------------------------------------------------------ bounded ranges
    async def read_range(self, partition: PartitionRef, start: int, end: int | None = None, *,
                         max_messages: int | None = None, timeout: float = 10.0) -> AsyncIterator[Message]:
        """The messages stored in the partition at index offsets [start, end), in order.

        ``end`` None = the partition's max offset when the read starts. Any bounds: both are taken up
        to the next index entry boundary (28 bytes), which selects the same messages (every entry
        starts on one) and never asks a broker to read from inside an entry. Deterministic: the same
        ``start``/``end`` over the same data give the same messages. The read ends as soon as the
        partition's position reaches ``end``, also when the rest of the range holds only sibling
        partitions' index entries (the broker answers those reads without messages and commits past
        them). It stops early after ``max_messages``, or when no data arrives for ``timeout`` seconds
        (a range beyond the data). After a complete read the group's committed offset is ``end``.
        """
        async with contextlib.aclosing(self.read_range_batches(
                partition, start, end, max_messages=max_messages, timeout=timeout)) as batches:
            async for messages in batches:
                for m in messages:
                    yield m

    async def read_range_batches(self, partition: PartitionRef, start: int, end: int | None = None, *,
                                 max_messages: int | None = None,
                                 timeout: float = 10.0) -> AsyncGenerator[Batch, None]:
        """:meth:`read_range` one fetch at a time: non-empty batches of messages, in order.

        For callers that hand messages to another thread (the sync facade, the Spark read task):
        one hand-over per fetched batch instead of one per message. Each :class:`~tubemq.Batch` has
        the exact ``start_offset`` of its fetch and ``next_offset``, where the group's position stands
        after it (every message of the partition stored before it has been yielded); -1 after a cut
        by ``max_messages``. Already confirmed: ``confirm`` on it is not needed.
        """
        self._check()
        p = self._resolve(partition)
        if start < 0 or (end is not None and end < start):
            raise BadRequestError(ErrorCode.BAD_REQUEST, f"bad range [{start}, {end})")
        start = _entry_boundary(start)
        end = None if end is None else _entry_boundary(end)
        async with self._lock(p.key):
            pos = await self._attach(p, start)
            stop = pos.max if end is None else end
            offset = pos.current
            sent = 0
            while offset < stop and (max_messages is None or sent < max_messages):
                batch = await self._fetch(p, timeout, stop)
                if batch is None:
                    # the position reached ``stop`` (reads over siblings' entries committed past it)
                    # or no data came for ``timeout`` seconds; either way the slot knows where it is
                    slot = self.table.get(p.key)
                    if slot is not None and slot.curr_offset > offset:
                        offset = slot.curr_offset
                    break
                slot = batch._slot
                assert slot is not None
                if batch.start_offset >= stop:
                    self.table.confirm(slot, batch._booking, False)
                    offset = batch.start_offset
                    break
                nxt = await self._confirm(slot, batch, True)
                messages = batch.messages
                if nxt > stop:
                    messages = await self._cut(p, messages, stop)
                chunk = Batch(p, messages, batch.start_offset, batch.max_offset)
                chunk.next_offset = min(nxt, stop)
                chunk.confirmed = True
                if max_messages is not None and len(messages) > max_messages - sent:
                    chunk.messages = messages[:max_messages - sent]
                    chunk.next_offset = -1
                if chunk.messages:
                    sent += len(chunk.messages)
                    yield chunk
                if nxt <= offset:
                    break  # no progress (cannot happen with a sane broker): avoid spinning
                offset = nxt
            slot = self.table.get(p.key)
            if end is not None and slot is not None and slot.curr_offset != end and offset >= end:
                await self._attach(p, end)  # leave the committed position exactly at ``end``

    async def _cut(self, p: Partition, messages: list[Message], stop: int) -> list[Message]:
        """Keep the messages stored before index offset ``stop``: find the first message stored at or
        after ``stop`` (a read from ``stop``) and cut there by message id."""
        ids = {m.message_id: i for i, m in enumerate(messages)}
        await self._attach(p, stop)
        deadline = time.monotonic() + self.config.rpc_timeout_ms / 1000.0
        while time.monotonic() < deadline:
            batch = await self._fetch(p, 0.0)
            if batch is None:
                # nothing stored at or after ``stop`` for this partition; the probe's empty reads may
                # have committed past ``stop``: learn where (read_range puts the position back)
                slot = self.table.get(p.key)
                if slot is not None and slot.state is PartitionState.OWNED:
                    await self._sync_position(slot)
                return messages
            slot = batch._slot
            assert slot is not None
            self.table.confirm(slot, batch._booking, False)  # the probe's batch is rolled back
            cut = ids.get(batch.messages[0].message_id)
            # the first message stored at/after ``stop`` is either in our batch (cut there) or newer
            return messages if cut is None else messages[:cut]
        raise TubeMQError(f"could not locate offset {stop} in partition {p.key}")

