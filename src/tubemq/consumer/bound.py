"""Client-side balance and bound consumption: ``BoundConsumer`` (sync) and its asyncio twin.

The application (e.g. the Spark source) decides which partitions to read and from which offsets:
the master only keeps the group membership (V2 methods 20-22, docs/PROTOCOL.md §3.5, §5.5); partitions
are registered at the brokers directly (opType 31 with ``currOffset`` as bootstrap offset, §5.2.6).
The request shapes follow the Java ClientBalanceConsumer (captures/s5_client_balance.json): client id
with ``-Balance-``; V2 register with ``subRepInfo{brokerConfigId −2, topicMetaInfoId −2,
reportSubInfo false}``; V2 heartbeats reporting ``partSubInfo`` (``topic#brokerId:partitionId,…``).
Unlike the Java client, a released partition is not listed in broker heartbeats any more.

Offsets are broker index offsets (§4.10): partitions of one store share an index, so a partition's
offsets grow in steps of 28 bytes but jump over its siblings' entries. A batch's ``start_offset``
and the offset a confirm returns are exact; per-message offsets inside a batch are estimates (exact
only for a partition alone in its store). :meth:`read_range` is nevertheless exact: it cuts the last
batch at the first message stored at or after ``end`` by probing the partition at ``end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..client.identity import consumer_id
from ..client.session import RUNTIME_VERSION, MasterSessionBase
from ..codec import Message, Partition, parse_partition, parse_topic_meta_info
from ..errors import (
    BadRequestError,
    ClientClosedError,
    DecodeError,
    NotFoundError,
    NotRegisteredError,
    TubeMQError,
    error_for_code,
)
from ..metrics import Metrics
from ..net.health import SessionHealth
from ..net.loop import LoopThread
from ..protocol import master_pb
from ..protocol.constants import (
    MAX_SUBSCRIBE_REPORT_INTERVAL_TIMES,
    META_VALUE_UNDEFINED,
    ErrorCode,
    Method,
)
from .config import ConsumerConfig
from .core import FATAL_REGISTER_CODES, BrokerClient, BrokerHeartbeats
from .fetch import Batch, DeliveryBuffer, Fetcher
from .flowctrl import FlowControl
from .rebalance import PartitionSlot, PartitionState, PartitionTable

log = logging.getLogger("tubemq.consumer.bound")

__all__ = ["AsyncBoundConsumer", "BoundConsumer", "PartitionPosition"]

DEFAULT_FETCH_TIMEOUT = 1.0
#: consecutive empty successful reads (siblings' index entries only) a single fetch() walks over
MAX_EMPTY_READS = 10000


@dataclass(frozen=True)
class PartitionPosition:
    """Where a partition stands for the group: committed ``current`` offset and the ``max`` offset
    (both broker index offsets); ``min`` is not reported by the broker protocol (None)."""

    partition: Partition
    current: int
    max: int
    min: int | None = None

    @property
    def lag(self) -> int:
        """Index bytes not yet consumed (28 per message when the partition has its own store)."""
        return max(0, self.max - self.current) if self.current >= 0 and self.max >= 0 else 0


def _check_v2(rsp: Any) -> None:
    """V2 answers carry no ``success`` field: errCode 200 means success (§3.5)."""
    if rsp.errCode != ErrorCode.SUCCESS:
        raise error_for_code(rsp.errCode, rsp.errMsg)


class BoundSession(MasterSessionBase):
    """Client-balance session with the master: V2 register (20), V2 heartbeat (21), close (6)."""

    role = "bound consumer"
    fatal_register_codes = FATAL_REGISTER_CODES

    def __init__(self, core: AsyncBoundConsumer, client_id: str, metrics: Metrics) -> None:
        super().__init__(core.config, client_id, metrics=metrics)
        self.core = core
        self.cfg: ConsumerConfig = core.config
        self._hb_count = 0

    def _broker_config_id(self) -> int:
        return self.broker_checksum if self.brokers else META_VALUE_UNDEFINED

    def _sub_rep_info(self, *, report: bool) -> master_pb.ClientSubRepInfo:
        core = self.core
        info = master_pb.ClientSubRepInfo(brokerConfigId=self._broker_config_id(), topicMetaInfoId=core.meta_id)
        if core.meta_applied_at > 0:
            info.lstAssignedTime = core.meta_applied_at
        info.reportSubInfo = report
        if report:
            info.partSubInfo.extend(core.part_sub_info())
        return info

    async def _register_once(self) -> None:
        core, cfg = self.core, self.cfg
        report = bool(core.table.registered())  # re-registering: tell the master what we hold
        req = master_pb.RegisterRequestC2MV2(
            clientId=self.client_id, groupName=cfg.group, hostName=self.host_name,
            sourceCount=core.source_count, nodeId=core.node_id, topicList=sorted(cfg.topics),
            topicCondition=cfg.topic_conditions(), jdkVersion=RUNTIME_VERSION,
        )
        req.subRepInfo.CopyFrom(self._sub_rep_info(report=report))
        cert = self.cert_info(force=True)
        if cert is not None:
            req.authInfo.CopyFrom(cert)
        rsp = await self.call_master(Method.MASTER_CONSUMER_REGISTER_V2, req, master_pb.RegisterResponseM2CV2)
        _check_v2(rsp)
        self._apply(rsp)
        core.table.changed = False

    async def _heartbeat_once(self) -> None:
        core = self.core
        self._hb_count += 1
        report = core.table.changed or self._hb_count % MAX_SUBSCRIBE_REPORT_INTERVAL_TIMES == 0
        req = master_pb.HeartRequestC2MV2(clientId=self.client_id, groupName=self.cfg.group)
        req.subRepInfo.CopyFrom(self._sub_rep_info(report=report))
        if report:
            core.table.changed = False
        cert = self.cert_info(force=False)
        if cert is not None:
            req.authInfo.CopyFrom(cert)
        try:
            rsp = await self.call_master(Method.MASTER_CONSUMER_HEARTBEAT_V2, req, master_pb.HeartResponseM2CV2)
            _check_v2(rsp)
        except BaseException:
            if report:
                core.table.changed = True
            raise
        self._apply(rsp)
        if rsp.HasField("topicMetaInfoId") and len(rsp.topicMetaInfoList):
            core.apply_meta(rsp.topicMetaInfoId, list(rsp.topicMetaInfoList))

    async def _close_once(self) -> None:
        req = master_pb.CloseRequestC2M(clientId=self.client_id, groupName=self.cfg.group)
        cert = self.cert_info(force=True)
        if cert is not None:
            req.authInfo.CopyFrom(cert)
        await self.call_master(Method.MASTER_CONSUMER_CLOSE, req, master_pb.CloseResponseM2C)

    def _apply(self, rsp: Any) -> None:
        if rsp.HasField("brokerConfigId") and self.apply_brokers(rsp.brokerConfigId, rsp.brokerConfigList):
            self.core.resolve_meta()
        if rsp.HasField("opsTaskInfo"):
            self.core.flow.update(rsp.opsTaskInfo)
        self.apply_authorized_info(rsp)

    async def _sleep(self, seconds: float, wakeable: bool = False) -> None:
        if wakeable:
            seconds = min(seconds, max(self.cfg.heartbeat_period_ms, self.cfg.heartbeat_fail_wait_ms) / 1000.0)
        await super()._sleep(seconds, wakeable)


PartitionRef = Partition | str


class AsyncBoundConsumer:
    """asyncio bound consumer; the methods of :class:`BoundConsumer`, as coroutines."""

    def __init__(
        self,
        master: str | list[str] | None = None,
        group: str | None = None,
        topics: Iterable[str] | Mapping[str, Iterable[str]] = (),
        *,
        config: ConsumerConfig | None = None,
        source_count: int = 0,
        node_id: int = 0,
        **options: Any,
    ) -> None:
        self.config = ConsumerConfig.build(master, group, topics if topics else None, config=config, **options)
        if not self.config.topics:
            raise BadRequestError(ErrorCode.BAD_REQUEST, "a bound consumer needs at least one topic")
        self.source_count = source_count
        self.node_id = node_id
        self.stats = Metrics()  # the registry; metrics() returns its snapshot
        self.client_id = consumer_id(self.config.group, "Balance", self.config.local_address)
        self.table = PartitionTable(self.client_id, self.config.group, dict(self.config.topics))
        self.flow = FlowControl(msg_not_found_wait_ms=self.config.msg_not_found_wait_ms,
                                filter_wait_ms=self.config.filter_wait_ms)
        self.session = BoundSession(self, self.client_id, self.stats)
        self.brokers = BrokerClient(self.session, self.config, self.flow)
        self.fetcher = Fetcher(
            self.table, DeliveryBuffer(1), self._connection, client_id=self.client_id, group=self.config.group,
            flow=self.flow, rpc_timeout_ms=self.config.rpc_timeout_ms, verify_checksum=self.config.verify_checksum,
            client_filter=self.config.client_filter, metrics=self.stats,
        )
        self.heartbeats = BrokerHeartbeats(self.table, self.brokers, self.session,
                                           self.config.heartbeat_period_ms / 1000.0, self._on_lost)
        self.meta_id: int = META_VALUE_UNDEFINED
        self.meta_applied_at: int = 0
        self._meta: dict[str, tuple[Partition, bool]] = {}
        self._meta_items: list[str] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._hb_task: asyncio.Task[None] | None = None
        self.started = False
        self.closing = False
        self.stats.set_gauge("consumer.partitions", lambda: len(self.table.registered()))
        self.health = SessionHealth(self.stats, self.session, self._broker_addresses)

    def _broker_addresses(self) -> dict[str, int]:
        """address -> broker id of the brokers holding attached partitions (for metrics)."""
        return {s.partition.address: s.partition.broker_id for s in self.table.registered()}

    def metrics(self) -> dict[str, Any]:
        """Counters, fetch latency, master and per-broker health (README.md, "Metrics and logging").
        Call it from the consumer's loop."""
        return self.stats.snapshot()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> AsyncBoundConsumer:
        if self.closing:
            raise ClientClosedError("bound consumer is closed")
        if not self.started:
            self.started = True
            await self.session.start(register_attempts=5)
            self.health.remember_pool()
            self._hb_task = asyncio.get_running_loop().create_task(self.heartbeats.run(lambda: self.closing))
        return self

    async def __aenter__(self) -> AsyncBoundConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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
            await asyncio.gather(*(self._release(s, None) for s in self.table.registered()),
                                 return_exceptions=True)
            self.table.close()
            await self.session.close()

    def _on_lost(self, slot: PartitionSlot) -> None:
        self.session.trigger_heartbeat()

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
        for p, ok in parse_topic_meta_info(self._meta_items, self.session.brokers):
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
        cert = self.session.cert_info(force=False)
        if cert is not None:
            req.authInfo.CopyFrom(cert)
        rsp = await self.session.call_master(Method.MASTER_CONSUMER_GET_PART_META, req,
                                             master_pb.GetPartMetaResponseM2C)
        _check_v2(rsp)
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
            if slot is None or not slot.registered:
                return await self._attach(p, None)
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

    async def _fetch(self, p: Partition, timeout: float, stop: int | None = None) -> Batch | None:
        """One batch (waiting up to ``timeout`` for data); with ``stop``, None as soon as the
        partition's position reached ``stop`` (empty reads move it over siblings' entries)."""
        slot = self.table.get(p.key)
        if slot is None or not slot.registered:
            await self._attach(p, None)
            slot = self.table.get(p.key)
            assert slot is not None
        deadline = time.monotonic() + max(0.0, timeout)
        empty_reads = 0
        while True:
            if slot.state is PartitionState.IN_FLIGHT:
                self.table.confirm(slot, slot.booking, False)
            if slot.state is not PartitionState.OWNED or not self.table.acquire_slot(slot):
                raise ClientClosedError(f"partition {p.key} is no longer attached ({slot.state.name})")
            batch = await self.fetcher.fetch_once(slot, slot.booking)
            if batch is not None:
                batch.delivered = True
                return batch
            if not slot.registered:
                raise error_for_code(slot.last_code, f"partition {p.key} lost: {slot.last_message}")
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
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            wait = self.flow.empty_delay(slot.empty_fetches) if slot.last_code == ErrorCode.NOT_FOUND else 0.0
            if slot.last_code not in (ErrorCode.SUCCESS, ErrorCode.NOT_FOUND):
                wait = 0.3
            await asyncio.sleep(min(wait, remaining))

    async def confirm(self, batch: Batch, consumed: bool = True) -> int:
        """Commit (or roll back) ``batch`` at the broker; returns the partition's committed offset."""
        self._check()
        slot = batch._slot
        if slot is None or not self.table.is_current(slot, batch._booking):
            raise BadRequestError(ErrorCode.BAD_REQUEST, f"{batch!r} is no longer current (re-fetched or detached)")
        async with self._lock(batch.partition.key):
            return await self._confirm(slot, batch, consumed)

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
    async def read_range(
        self,
        partition: PartitionRef,
        start: int,
        end: int | None = None,
        *,
        max_messages: int | None = None,
        timeout: float = 10.0,
    ) -> AsyncIterator[Message]:
        """The messages stored in the partition at index offsets [start, end), in order.

        ``end`` None = the partition's max offset when the read starts. Deterministic: the same
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

    async def read_range_batches(
        self,
        partition: PartitionRef,
        start: int,
        end: int | None = None,
        *,
        max_messages: int | None = None,
        timeout: float = 10.0,
    ) -> AsyncGenerator[list[Message], None]:
        """:meth:`read_range` one fetch at a time: non-empty lists of messages, in order.

        For callers that hand messages to another thread (the sync facade, the Spark read task):
        one hand-over per fetched batch instead of one per message.
        """
        self._check()
        p = self._resolve(partition)
        if start < 0 or (end is not None and end < start):
            raise BadRequestError(ErrorCode.BAD_REQUEST, f"bad range [{start}, {end})")
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
                if max_messages is not None and len(messages) > max_messages - sent:
                    messages = messages[:max_messages - sent]
                if messages:
                    sent += len(messages)
                    yield messages
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


class BoundConsumer:
    """Client-side balance / bound consumption (blocking). The Spark source is built on this.

    ``BoundConsumer(master, group, topics)`` registers a client-balance member of ``group`` (V2);
    ``partitions()`` lists the subscribable partitions; ``attach(p, offset)`` registers one at the
    broker (optionally at ``offset``) and returns its :class:`PartitionPosition`; ``fetch(p)`` reads one
    batch, ``confirm(batch)`` commits it and returns the new offset; ``read_range(p, start, end)``
    yields exactly the messages at offsets [start, end) (``read_range_batches``: the same, one list per
    broker fetch); ``offsets(p)`` reports the position without
    moving it; ``detach(p)`` releases the partition. Partitions may be given as ``Partition`` objects,
    partition keys ``"brokerId:topic:partitionId"`` or partition strings.
    """

    def __init__(
        self,
        master: str | list[str] | None = None,
        group: str | None = None,
        topics: Iterable[str] | Mapping[str, Iterable[str]] = (),
        *,
        config: ConsumerConfig | None = None,
        source_count: int = 0,
        node_id: int = 0,
        **options: Any,
    ) -> None:
        self._loop = LoopThread.shared()
        try:
            self._core: AsyncBoundConsumer = self._loop.run(
                self._make(master, group, topics, config, source_count, node_id, options))
            self._loop.run(self._core.start())
        except BaseException:
            self._loop.stop()
            raise
        self.config = self._core.config
        self._closed = False

    @staticmethod
    async def _make(master: Any, group: Any, topics: Any, config: Any, source_count: int, node_id: int,
                    options: dict[str, Any]) -> AsyncBoundConsumer:
        return AsyncBoundConsumer(master, group, topics, config=config, source_count=source_count,
                                  node_id=node_id, **options)

    @property
    def client_id(self) -> str:
        return self._core.client_id

    def _run(self, coro: Any) -> Any:
        if self._closed:
            coro.close()
            raise ClientClosedError("bound consumer is closed")
        return self._loop.run(coro)

    def partitions(self, topic: str | None = None) -> list[Partition]:
        return self._run(self._core.partitions(topic))  # type: ignore[no-any-return]

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot taken on the client's loop thread (works after ``close()`` too)."""
        return self._loop.call(self._core.metrics, timeout=5.0)  # type: ignore[no-any-return]

    def attach(self, partition: PartitionRef, offset: int | None = None) -> PartitionPosition:
        return self._run(self._core.attach(partition, offset))  # type: ignore[no-any-return]

    def fetch(self, partition: PartitionRef, timeout: float = DEFAULT_FETCH_TIMEOUT) -> Batch | None:
        return self._run(self._core.fetch(partition, timeout))  # type: ignore[no-any-return]

    def confirm(self, batch: Batch, consumed: bool = True) -> int:
        return self._run(self._core.confirm(batch, consumed))  # type: ignore[no-any-return]

    def offsets(self, partition: PartitionRef) -> PartitionPosition:
        return self._run(self._core.offsets(partition))  # type: ignore[no-any-return]

    def detach(self, partition: PartitionRef, commit: bool = False) -> None:
        self._run(self._core.detach(partition, commit))

    def attached(self) -> list[Partition]:
        return self._core.table.owned_partitions()

    def read_range(
        self,
        partition: PartitionRef,
        start: int,
        end: int | None = None,
        *,
        max_messages: int | None = None,
        timeout: float = 10.0,
    ) -> Iterator[Message]:
        """Blocking iterator over :meth:`AsyncBoundConsumer.read_range` (see there). Messages cross
        from the client's loop thread one fetched batch at a time and are yielded from it here."""
        with contextlib.closing(self.read_range_batches(
                partition, start, end, max_messages=max_messages, timeout=timeout)) as batches:
            for messages in batches:
                yield from messages

    def read_range_batches(
        self,
        partition: PartitionRef,
        start: int,
        end: int | None = None,
        *,
        max_messages: int | None = None,
        timeout: float = 10.0,
    ) -> Generator[list[Message], None, None]:
        """Blocking iterator over :meth:`AsyncBoundConsumer.read_range_batches`: one call into the
        client's loop thread per fetched batch."""
        agen = self._core.read_range_batches(partition, start, end, max_messages=max_messages, timeout=timeout)

        async def step() -> list[Message] | None:
            try:
                return await agen.__anext__()
            except StopAsyncIteration:
                return None

        try:
            while True:
                messages: list[Message] | None = self._run(step())
                if messages is None:
                    return
                yield messages
        finally:
            if not self._closed:
                with contextlib.suppress(Exception):
                    self._loop.run(agen.aclose())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._core.close(), timeout=self.config.rpc_timeout_ms / 1000.0 * 3)
        except Exception:
            log.exception("bound consumer %s: close did not finish cleanly", self._core.client_id)
        finally:
            self._loop.stop()

    def __enter__(self) -> BoundConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

