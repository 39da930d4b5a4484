"""The asyncio consumer (server-side balancing): ``ConsumerCore`` ties the master session
(:mod:`.session`), the rebalance worker (:mod:`.rebalance`) over the partition table (:mod:`.partitions`),
the broker calls and heartbeats (:mod:`.brokers`), the fetch loop (:mod:`.fetch`) and seeks
(:mod:`.positions`) together, and owns confirms, lost-partition reports and a clean shutdown. The sync
and asyncio public classes are thin facades.

Request shapes follow the official Java client byte for byte where the captures show them
(captures/s2_consumer_pull.json, s3_rebalance.json, s4_filter.json): register with ``requireBound``,
``sessionTime`` and the three flow ids −2; heartbeats with ``reportSubscribeInfo`` always set and the
processed event echoed with status 2; broker register with ``qryPriorityId``; unregister without it.

Deliberate differences from the Java client, each for robustness:

* rebalance events are queued, never cleared or overwritten (Java keeps only the newest);
* after an event is processed the next master heartbeat is sent at once instead of up to 13 s later,
  so the master's disconnect-before-connect barrier (§5.4) opens quickly for the other members;
* registration with the master is retried forever (with back-off) once started;
* a failed broker heartbeat drops that broker's partitions only after 3 consecutive failures
  (Java drops them after one), because fetches keep the broker registrations alive anyway;
* rebalance and fetch workers are supervised: a task that dies unexpectedly is logged and restarted;
* a broker whose requests time out (or whose connection breaks) twice in a row is marked unhealthy
  (WARNING log, ``consumer.broker_unhealthy`` metric, ``on_error`` callback): its connection is closed
  and its partitions are released locally for the master to assign again, as Java does after a failed
  broker heartbeat; they are registered and fetched again once the broker answers;
* ``close()`` is bounded by ``close_timeout_ms`` however many requests are outstanding;
* a partition dropped without a revoke (broker death, 411/412/415) is reported to the application
  (``on_partitions_lost``, else ``on_partitions_revoked``) *before* the master hears of it, so the
  master cannot give it to another member while this one's hooks still count it as held;
* ``confirm()`` answers True only for a commit the broker acknowledged (never for an unknown outcome).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .._tasks import wait_for
from ..client.identity import consumer_id
from ..codec import Partition
from ..config import ConsumerConfig
from ..errors import BadRequestError, ClientClosedError, ConfigError, TubeMQConnectionError, TubeMQError
from ..metrics import Metrics
from ..net.health import SessionHealth
from ..protocol.constants import ErrorCode, EventType
from ..types import Batch
from .broker_watch import BrokerWatch
from .brokers import BrokerClient, BrokerHealth, BrokerHeartbeats
from .engine import ConsumerEngine
from .fetch import DeliveryBuffer, Fetcher
from .flowctrl import FlowControl
from .links import Links
from .partitions import PartitionSlot, PartitionState, PartitionTable
from .positions import PartitionRef, owned_slot, partition_key, partition_keys, reposition
from .rebalance import EventQueue, RebalanceWorker, RegisterOutcome, ReportQueue
from .session import ConsumerSession
from .workers import FetchWorkers

log = logging.getLogger("tubemq.consumer.core")

__all__ = ["AsyncHook", "ConsumerCore", "Hook"]

Hook = Callable[[list[Partition]], Any]


async def _call_hook(fn: Hook, partitions: list[Partition]) -> None:
    res = fn(partitions)
    if inspect.isawaitable(res):
        await res


class ConsumerCore:
    """One server-balanced consumer on the running event loop. Use ``start()`` then ``poll()``."""

    kind = "Pull"

    def __init__(
        self,
        config: ConsumerConfig,
        *,
        on_partitions_assigned: Hook | None = None,
        on_partitions_revoked: Hook | None = None,
        kind: str | None = None,
        on_error: Callable[[TubeMQError], Any] | None = None,
        on_partitions_lost: Hook | None = None,
    ) -> None:
        if not config.topics:
            raise ConfigError("topics", "a consumer needs at least one topic")
        self.config = config
        self.metrics = Metrics()
        self.client_id = consumer_id(config.group, kind or self.kind, config.local_address)
        self.table = PartitionTable(self.client_id, config.group, dict(config.topics))
        self.events = EventQueue()
        self.reports = ReportQueue()
        self.flow = FlowControl(msg_not_found_wait_ms=config.msg_not_found_wait_ms,
                                filter_wait_ms=config.filter_wait_ms)
        self.session = ConsumerSession(self, self.client_id, self.metrics)
        #: called (on the loop thread) with the error when a broker turns unhealthy
        self.on_error = on_error
        self.last_error: TubeMQError | None = None
        self.broker_health = BrokerHealth(self._broker_unhealthy)
        self.links = Links()
        self.brokers = BrokerClient(self.session, config, self.flow, self.broker_health, self.links)
        self.buffer = DeliveryBuffer(config.prefetch_batches)
        self.on_partitions_assigned = on_partitions_assigned
        self.on_partitions_revoked = on_partitions_revoked
        self.on_partitions_lost = on_partitions_lost
        #: partitions dropped without a revoke whose lost hook has not returned yet (key -> subscribeInfo):
        #: still reported to the master as ours, so it cannot give them to another member before the
        #: application heard they are gone (no two members hold a partition in the hooks' view)
        self._lost_infos: dict[str, str] = {}
        self._lost_batch: list[PartitionSlot] = []
        self.table.on_drop = self._dropped
        self.fetcher = Fetcher(
            self.table, client_id=self.client_id, group=config.group, flow=self.flow,
            rpc_timeout_ms=config.rpc_timeout_ms, verify_checksum=config.verify_checksum,
            client_filter=config.client_filter, metrics=self.metrics, on_result=self.broker_health.record,
        )
        #: the decisions of every fetch route (the loop's workers, a blocking iterator's own fetches)
        self.engine = ConsumerEngine(config, self.client_id, self.table, self.buffer, self.fetcher, self.links,
                                     self.brokers)
        #: the event loop's driver of the engine
        self.workers = FetchWorkers(self.engine, self._connection, concurrency=config.fetch_concurrency,
                                    rpc_timeout_ms=config.rpc_timeout_ms)
        self.worker = RebalanceWorker(
            self.table, self, self.events, self.reports,
            first_read_status=config.first_read_status,
            confirm_wait=config.rebalance_confirm_wait_ms / 1000.0,
            register_rounds=config.register_rounds,
            register_retry_wait=config.register_retry_wait_ms / 1000.0,
            hook_timeout=config.hook_timeout_ms / 1000.0,
            on_assigned=self._assigned_hook,
            on_revoked=self._revoked_hook,
            on_report_ready=self.session.trigger_heartbeat,
        )
        self.watch = BrokerWatch(self.table, self.session, self.brokers, self.worker, lambda: self.closing)
        self.orphans = self.watch.orphans  # registrations let go of without the broker hearing it
        self.started = False
        self.closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._discards: set[asyncio.Task[None]] = set()
        #: called on the loop thread as the close begins (a blocking iterator's sockets are shut down)
        self.close_hooks: list[Callable[[], None]] = []
        self.broker_heartbeats = BrokerHeartbeats(self.table, self.brokers, self.session,
                                                  config.heartbeat_period_ms / 1000.0)
        self._register_metrics()

    @property
    def closing(self) -> bool:
        """Set as the close begins (or by a facade closing early): nothing more is delivered."""
        return self.engine.closing

    @closing.setter
    def closing(self, value: bool) -> None:
        self.engine.closing = value

    @property
    def batches(self) -> int:
        """Batches handed to the application."""
        return self.engine.batches

    @property
    def confirms(self) -> int:
        return self.engine.confirms

    def _register_metrics(self) -> None:
        """Counters are plain ints read at snapshot time (docs/guide/metrics.md lists them)."""
        m, worker = self.metrics, self.worker
        m.register_counter("consumer.batches", lambda: self.batches)
        m.register_counter("consumer.confirms", lambda: self.confirms)
        m.register_counter("consumer.rebalances", lambda: worker.processed)
        for kind in EventType:
            name = kind.name.lower()
            m.register_counter(f"consumer.rebalance.{name}",
                               lambda name=name: worker.processed_by_type.get(name, 0))  # type: ignore[misc]
        m.register_counter("consumer.partitions_assigned", lambda: worker.partitions_assigned)
        m.register_counter("consumer.partitions_revoked", lambda: worker.partitions_revoked)
        m.register_counter("consumer.registrations_released", lambda: self.orphans.released)
        for name in ("partitions_lost", "confirm_timeouts", "commit_failures", "close_timeouts"):
            m.inc(f"consumer.{name}", 0)  # present from the start (counted on failure paths)
        m.set_gauge("consumer.partitions", lambda: len(self.table.registered()))
        m.set_gauge("consumer.buffered_batches", lambda: len(self.buffer))
        m.set_gauge("consumer.pending_events", lambda: len(self.events))
        m.register_counter("consumer.broker_unhealthy", lambda: self.broker_health.marked)
        m.set_gauge("consumer.unhealthy_brokers", lambda: len(self.broker_health.unhealthy))
        self.health = SessionHealth(m, self.session, self._broker_addresses, self._broker_extra)

    def _broker_addresses(self) -> dict[str, int]:
        """address -> broker id: brokers holding our registered partitions, plus failing ones."""
        out = {s.partition.address: s.partition.broker_id for s in self.table.registered()}
        known = {b.address: b.broker_id for b in self.session.brokers.values()}
        for address in (list(self.broker_heartbeats.total_failures) + list(self.fetcher.errors_by_broker)
                        + list(self.broker_health.unhealthy)):
            if address not in out:
                out[address] = known.get(address, -1)
        return out

    def _broker_extra(self, address: str, broker_id: int) -> dict[str, Any]:
        hb = self.broker_heartbeats
        return {
            "partitions": sum(1 for s in self.table.registered() if s.partition.address == address),
            "heartbeat_failures": hb.total_failures.get(address, 0),
            "consecutive_heartbeat_failures": hb._failures.get(address, 0),
            "fetch_errors": self.fetcher.errors_by_broker.get(address, 0),
            "healthy": address not in self.broker_health.unhealthy,
            "unhealthy_reason": self.broker_health.unhealthy.get(address, (0.0, ""))[1],
        }

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.closing:
            raise ClientClosedError("consumer is closed")
        if self.started:
            return
        self.started = True
        await self.session.start(register_attempts=5)
        self.health.remember_pool()
        self.watch.start()
        loop = asyncio.get_running_loop()
        self._tasks["rebalance"] = loop.create_task(self.worker.run(), name="tubemq-rebalance")
        self._tasks["broker-heartbeat"] = loop.create_task(self._broker_heartbeat_loop(),
                                                           name="tubemq-broker-heartbeat")
        self._tasks["housekeeping"] = loop.create_task(self._housekeeping(), name="tubemq-consumer-housekeeping")
        self._tasks["orphans"] = loop.create_task(self.orphans.run(lambda: self.closing), name="tubemq-orphans")
        self.workers.start()
        log.info("consumer %s started: group %s, topics %s", self.client_id, self.config.group,
                 sorted(self.config.topics))

    async def close(self) -> None:
        """Unregister every partition, close the master session, stop every task. Idempotent."""
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        """Graceful within ``close_timeout_ms``, then whatever is still outstanding is abandoned."""
        self.closing = True
        self.table.pause()
        for hook in list(self.close_hooks):
            try:
                hook()
            except Exception:
                log.exception("consumer %s: a close hook failed", self.client_id)
        budget = self.config.close_timeout_ms / 1000.0
        deadline = time.monotonic() + budget
        try:
            # most of the budget for the brokers, the rest for telling the master
            await wait_for(self._release_all(deadline - budget * 0.3), max(0.0, budget * 0.7))
        except asyncio.TimeoutError:
            left = [s.key for s in self.table.slots() if s.state is not PartitionState.RELEASED]
            log.warning("consumer %s: partitions not released within %.1f s (%d left: the broker(s) did not "
                        "answer); abandoning outstanding requests", self.client_id, budget * 0.7, len(left))
            self.metrics.inc("consumer.close_timeouts")
        except Exception:
            log.exception("consumer %s: releasing partitions failed", self.client_id)
        self.table.close()
        self.buffer.close()
        await self.workers.stop()
        for t in list(self._tasks.values()):
            t.cancel()
        for t in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        with contextlib.suppress(TubeMQError):
            self.watch.stop()
        # 3. tell the master (no heartbeat is sent after this)
        await self.session.close(timeout=max(0.05, deadline - time.monotonic()))
        self.closed = True
        log.info("consumer %s closed", self.client_id)

    async def _release_all(self, deadline: float) -> None:
        cfg = self.config
        # 1. let a running rebalance finish (bounded), then stop the worker
        rebalance = self._tasks.get("rebalance")  # stays listed: cancelled below or by _close
        if rebalance is not None:
            wait_until = min(deadline, time.monotonic() + cfg.shutdown_wait_ms / 1000.0)
            while self.worker.busy and time.monotonic() < wait_until:
                await asyncio.sleep(0.01)
            rebalance.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await rebalance
        housekeeping = self._tasks.get("housekeeping")
        if housekeeping is not None:
            housekeeping.cancel()
        # 2. release every partition: in-flight fetches answer and are abandoned; batches handed out
        #    but not confirmed are rolled back (the application stopped consuming)
        slots = [s for s in self.table.slots() if s.state is not PartitionState.RELEASED]
        for slot in slots:
            if slot.state is PartitionState.IN_FLIGHT:
                self.table.begin_release(slot)
                if slot.state is PartitionState.IN_FLIGHT:
                    self.table.confirm(slot, slot.booking, False)  # -> RELEASING, rolled back
        self.buffer.close()
        # only fetch answers are waited for, and not past the deadline
        self.worker.confirm_wait = max(0.0, min(cfg.rpc_timeout_ms / 1000.0, deadline - time.monotonic()))
        await self.worker.release(slots, "consumer closed")

    # ------------------------------------------------------------------ another driver fetching
    def fetch_elsewhere(self, abort: Callable[[], None]) -> bool:
        """A driver outside the loop (a blocking iterator's own round trips) takes over the fetching:
        the fetch workers wait; ``abort`` is called as the close begins (its blocked reads return).
        False when another driver already fetches, or the consumer closes."""
        if self.workers.suspended or self.closing:
            return False
        self.workers.suspend()
        self.close_hooks.append(abort)
        return True

    def fetch_here(self, abort: Callable[[], None]) -> None:
        """The driver of :meth:`fetch_elsewhere` stopped: the fetch workers fetch again."""
        if abort in self.close_hooks:
            self.close_hooks.remove(abort)
        if not self.closing:
            self.workers.resume()

    # ------------------------------------------------------------------ application API
    async def poll(self, timeout: float | None = None) -> Batch | None:
        """The next batch, or None when nothing arrived within ``timeout`` seconds."""
        if self.closing:
            raise ClientClosedError("consumer is closed")
        batch = await self.buffer.take(timeout, self.engine.deliverable)
        if batch is not None:
            if self.closing:
                return None
            self.deliver(batch)
        return batch

    def deliver(self, batch: Batch) -> None:
        """``batch`` is handed to the application; see :meth:`ConsumerEngine.deliver`."""
        self.engine.deliver(batch)

    async def confirm(self, batch: Batch, consumed: bool = True, *, local: bool | None = None) -> bool:
        """Finish ``batch``: consumed=True commits it, False rolls it back for re-delivery.

        True means the broker acknowledged the commit (or, with ``confirm_in_local`` / ``local``, that
        the confirm was taken locally: the commit rides on the partition's next fetch). False means the
        batch is stale (partition revoked or lost, confirm timeout passed) or the commit's outcome is
        unknown (broker gone, no answer in time): its messages may be delivered again.
        """
        if not isinstance(batch, Batch):
            raise TypeError(f"confirm() takes a Batch, got {type(batch).__name__}")
        slot = batch._slot
        if slot is None or batch.confirmed:
            return False
        if slot.state is not PartitionState.IN_FLIGHT or slot.booking != batch._booking:
            return False
        use_local = self.config.confirm_in_local if local is None else local
        if not use_local and not self.closing:
            try:
                ok, code, msg, curr, mx = await self.brokers.commit(batch.partition, consumed)
            except TubeMQError as exc:
                # unknown outcome: never True. Confirmed locally all the same, so
                # that the partition moves on: the next fetch (lastPackConsumed) commits it if the
                # broker still holds the partition; else the batch is delivered again
                self.metrics.inc("consumer.commit_failures")
                log.info("partition %s: commit failed (%s); outcome unknown, the next fetch carries it",
                         batch.partition.key, exc)
                self.confirm_local(batch, consumed)
                return False
            else:
                if ok:
                    batch.next_offset = curr
                    if curr >= 0:
                        slot.curr_offset = curr
                    if mx >= 0:
                        slot.max_offset = mx
                else:
                    self.metrics.inc("consumer.commit_failures")
                    log.info("partition %s: commit answered [%d] %s", batch.partition.key, code, msg)
                    if code in (ErrorCode.UNAUTHORIZED, ErrorCode.HB_NO_NODE, ErrorCode.DUPLICATE_PARTITION):
                        self.table.drop(slot, f"commit [{code}] {msg}")
                        return False
        return self.confirm_local(batch, consumed)

    def confirm_local(self, batch: Batch, consumed: bool = True) -> bool:
        """The local half of :meth:`confirm` (the commit rides on the partition's next fetch)."""
        return self.engine.confirm_local(batch, consumed)

    def unpoll(self, batch: Batch) -> None:
        """A polled batch the application never saw goes back; see :meth:`ConsumerEngine.unpoll`."""
        self.engine.unpoll(batch)

    def pause(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> None:
        """Stop fetching: the whole consumer, or only ``partitions``. A batch of a paused partition
        fetched before the pause is not handed out: it is rolled back and fetched again after
        :meth:`resume` (the whole-consumer pause lets fetched batches be polled). A paused partition
        stays paused, also across a reassignment, until resumed."""
        if partitions is None:
            self.table.pause()
        else:
            self.table.pause_keys(partition_keys(partitions))

    def resume(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> None:
        """Undo :meth:`pause`: ``resume()`` the whole-consumer pause, ``resume(partitions)`` those."""
        if self.closing:
            return
        if partitions is None:
            self.table.resume()
        else:
            self.table.resume_keys(partition_keys(partitions))

    @property
    def paused(self) -> bool:
        return self.table.paused

    def paused_partitions(self) -> frozenset[str]:
        """Keys of the partitions paused one by one (not the whole-consumer pause)."""
        return self.table.paused_keys

    # ------------------------------------------------------------------ positions
    async def seek(self, partition: PartitionRef, offset: int) -> int:
        """Move the group's offset of an assigned partition to ``offset`` (clamped by the broker
        into [min, max]); returns the offset now stored. See :mod:`.positions`."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise BadRequestError(ErrorCode.BAD_REQUEST, f"seek offset must be an int >= 0, got {offset!r}")
        return await self._seek_one(partition_key(partition), offset, False)

    async def seek_to_beginning(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> dict[str, int]:
        """Move each partition (default: every assigned one) to its min offset; key -> offset stored."""
        return await self._seek_many(partitions, 0, False)

    async def seek_to_end(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> dict[str, int]:
        """Move each partition (default: every assigned one) to its max offset; key -> offset stored."""
        return await self._seek_many(partitions, None, True)

    async def _seek_many(self, partitions: Iterable[PartitionRef] | PartitionRef | None, offset: int | None,
                         to_end: bool) -> dict[str, int]:
        keys = [s.key for s in self.table.registered()] if partitions is None else partition_keys(partitions)
        for key in keys:
            owned_slot(self.table, key)  # all assigned, or nothing moves
        done = await asyncio.gather(*(self._seek_one(k, offset, to_end) for k in keys))
        return dict(zip(keys, done, strict=True))

    async def _seek_one(self, key: str, offset: int | None, to_end: bool) -> int:
        if self.closing:
            raise ClientClosedError("consumer is closed")
        slot = owned_slot(self.table, key)
        return await reposition(self.table, self.brokers, slot, offset=offset, to_end=to_end,
                                timeout=self.config.rpc_timeout_ms / 1000.0 * 2)

    def assignment(self) -> list[Partition]:
        """Partitions currently registered by this consumer."""
        return self.table.owned_partitions()

    # ------------------------------------------------------------------ BrokerOps for the worker
    async def register(self, slot: PartitionSlot, read_status: int) -> RegisterOutcome:
        self.orphans.taken_back(slot.key)  # the broker replaces a registration of the same consumer id
        return await self.brokers.register(slot, read_status, self._bound_offset(slot))

    def _bound_offset(self, slot: PartitionSlot) -> int | None:
        """Bound consumption: the partition's required offset as ``currOffset``, like the Java client
        only for the first connect event, and only if the group was not allocated. Java reads the
        flag when it registers, so a member whose reset event arrives together with the news that
        another member already acknowledged its own (notAllocated false) loses its offsets; here the
        flag is taken from before the answer that brought the event."""
        offsets = self.config.bound_offsets
        if offsets is None:
            return None
        done = self.worker.processed_by_type
        if done.get("connect", 0) or done.get("only_connect", 0):
            return None
        unallocated = self.session.bound_first_event
        if not (self.session.not_allocated if unallocated is None else unallocated):
            return None
        return offsets.get(slot.key)  # type: ignore[no-any-return]

    async def unregister(self, slot: PartitionSlot, read_status: int) -> None:
        await self.brokers.unregister(slot, read_status)

    async def _connection(self, address: str) -> Any:
        return await self.session.pool.get(address)

    # ------------------------------------------------------------------ lost partitions
    def subscribe_infos(self) -> list[str]:
        """What the session reports as ours: the registered partitions, plus the lost ones whose
        ``on_partitions_lost`` hook is still running."""
        infos = self.table.subscribe_infos()
        if self._lost_infos:
            infos.extend(i for k, i in self._lost_infos.items() if k not in self.table)
        return infos

    def _dropped(self, slot: PartitionSlot) -> None:
        """The table dropped a registered partition without a revoke (broker death or unhealthy,
        411/412/415 from a fetch, a heartbeat or a commit): report it, in one hook call per loop turn."""
        self.metrics.inc("consumer.partitions_lost")
        if self.closing:
            return
        if not self._lost_batch:
            asyncio.get_running_loop().call_soon(self._flush_lost)
        self._lost_batch.append(slot)
        self._lost_infos[slot.key] = slot.subscribe_info

    def _flush_lost(self) -> None:
        slots, self._lost_batch = self._lost_batch, []
        task = asyncio.get_running_loop().create_task(self._report_lost(slots))
        self._discards.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._discards.discard)

    async def _report_lost(self, slots: list[PartitionSlot]) -> None:
        """``on_partitions_lost`` (``on_partitions_revoked`` when none was given, as Kafka does), then
        tell the master: only now does the report leave those partitions out."""
        hook = self.on_partitions_lost or self.on_partitions_revoked
        try:
            if hook is not None and not self.closing:
                await wait_for(_call_hook(hook, [s.partition for s in slots]),
                                       self.config.hook_timeout_ms / 1000.0)
        except asyncio.TimeoutError:
            log.error("on_partitions_lost did not return within %.1f s; reporting the loss anyway",
                      self.config.hook_timeout_ms / 1000.0)
        except Exception:
            log.exception("on_partitions_lost raised; reporting the loss anyway")
        finally:
            for slot in slots:
                if self._lost_infos.get(slot.key) == slot.subscribe_info:
                    del self._lost_infos[slot.key]
            if not self.closing:
                self.table.changed = True
                self.session.hurry()  # tell the master now, then ask for the new assignment every second

    def _broker_unhealthy(self, address: str, reason: str) -> None:
        """Java, after a failed broker heartbeat: release that broker's partitions locally (no RPC: it
        does not answer) so the master, told by the next heartbeat, assigns them again; fetch them
        once it answers. Also close its connection: a stalled stream can never deliver again."""
        if self.closing:
            return
        slots = [s for s in self.table.registered() if s.partition.address == address]
        err = TubeMQConnectionError(f"broker {address} unhealthy: {reason}; "
                                    f"{len(slots)} partition(s) released for reassignment")
        self.last_error = err
        log.warning("%s", err)
        for slot in slots:  # the broker did not hear it: its registration is released once it answers
            self.orphans.add(slot)
            self.table.drop(slot, f"broker {address} unhealthy")  # reported through _dropped
        self.watch.discard_connection(address)
        if self.on_error is not None:
            try:
                self.on_error(err)
            except Exception:  # a broken callback must not break the consumer
                log.exception("consumer %s: on_error callback failed", self.client_id)

    async def _assigned_hook(self, partitions: list[Partition]) -> None:
        if self.on_partitions_assigned is not None and not self.closing:
            await _call_hook(self.on_partitions_assigned, partitions)

    async def _revoked_hook(self, partitions: list[Partition]) -> None:
        if self.on_partitions_revoked is not None and not self.closing:
            await _call_hook(self.on_partitions_revoked, partitions)

    # ------------------------------------------------------------------ background tasks
    async def _broker_heartbeat_loop(self) -> None:
        await self.broker_heartbeats.run(lambda: self.closing)

    async def _housekeeping(self) -> None:
        """Confirm timeouts and supervision of the background tasks (never stop consuming silently)."""
        timeout = self.config.confirm_timeout_ms / 1000.0
        while not self.closing:
            await asyncio.sleep(min(0.5, timeout / 4))
            now = time.monotonic()
            for slot in self.table.slots():
                b = slot.batch
                if slot.state is PartitionState.IN_FLIGHT and b is not None and b.delivered and not b.held \
                        and now - b.fetched_at > timeout:
                    log.warning("partition %s: batch not confirmed within %.1f s; rolling it back",
                                slot.key, timeout)
                    self.table.confirm(slot, slot.booking, False)
                    self.metrics.inc("consumer.confirm_timeouts")
            if self.closing:
                return
            t = self._tasks.get("rebalance")
            if t is not None and t.done():
                log.error("rebalance worker stopped unexpectedly (%r); restarting it", _task_error(t))
                self._tasks["rebalance"] = asyncio.get_running_loop().create_task(self.worker.run())
            t = self._tasks.get("broker-heartbeat")
            if t is not None and t.done():
                log.error("broker heartbeat stopped unexpectedly (%r); restarting it", _task_error(t))
                self._tasks["broker-heartbeat"] = asyncio.get_running_loop().create_task(
                    self._broker_heartbeat_loop())
            if self.workers.stopped_unexpectedly():
                log.error("a fetch worker stopped unexpectedly; restarting the fetch workers")
                await self.workers.stop()
                self.workers.start()


def _task_error(task: asyncio.Task[Any]) -> BaseException | None:
    if task.cancelled():
        return None
    return task.exception()


AsyncHook = Callable[[list[Partition]], Awaitable[None]]
