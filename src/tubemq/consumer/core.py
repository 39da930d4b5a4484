"""The asyncio consumer (server-side balancing): master session, rebalance worker, broker heartbeats,
fetch loop, confirms and a clean shutdown. The sync and asyncio public classes are thin facades.

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
* ``close()`` is bounded by ``close_timeout_ms`` however many requests are outstanding.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..client import auth
from ..client.identity import consumer_id
from ..client.session import RUNTIME_VERSION, MasterSessionBase
from ..codec import Partition, parse_partition
from ..errors import (
    ClientClosedError,
    DecodeError,
    NotRegisteredError,
    ProtocolError,
    TubeMQConnectionError,
    TubeMQError,
    TubeMQTimeoutError,
)
from ..metrics import Metrics
from ..net.health import SessionHealth
from ..protocol import broker_pb, master_pb
from ..protocol.constants import (
    MAX_SUBSCRIBE_REPORT_INTERVAL_TIMES,
    MSG_OPTYPE_REGISTER,
    MSG_OPTYPE_UNREGISTER,
    ErrorCode,
    EventType,
    Method,
    ServiceType,
)
from .config import ConsumerConfig
from .fetch import Batch, DeliveryBuffer, Fetcher
from .flowctrl import FlowControl
from .rebalance import (
    EventQueue,
    EventQueueFullError,
    PartitionSlot,
    PartitionState,
    PartitionTable,
    RebalanceEvent,
    RebalanceWorker,
    RegisterOutcome,
    ReportQueue,
)

log = logging.getLogger("tubemq.consumer.core")

__all__ = ["BrokerClient", "BrokerHealth", "BrokerHeartbeats", "ConsumerCore", "ConsumerSession", "Hook"]

Hook = Callable[[list[Partition]], Any]

#: refusals that end a server-balanced consumer's start-up registration at once: the Java consumer
#: (BaseMessageConsumer.startMasterAndBrokerThreads) singles out these two, the C++ consumer stops on them;
#: every other code is retried (README "Refused registration")
FATAL_REGISTER_CODES: frozenset[int] = frozenset({ErrorCode.CONSUME_GROUP_FORBIDDEN, ErrorCode.CONSUME_CONTENT_FORBIDDEN})
#: codes that no amount of retrying fixes without a configuration change (§6.2): background
#: re-registration stops asking every second at these
CONFIG_REGISTER_CODES: frozenset[int] = frozenset({
    *FATAL_REGISTER_CODES, ErrorCode.TOPIC_NOT_DEPLOYED,
    *range(ErrorCode.CLIENT_INCONSISTENT_CONSUMETYPE, ErrorCode.CLIENT_DUPLICATE_INDEXID + 1),
})
BROKER_HB_FAILURES_BEFORE_DROP = 3
#: consecutive failed requests to one broker (no answer in time, connection lost or unusable) after
#: which it is marked unhealthy; a broker that answers, even with an error code, is alive
BROKER_UNHEALTHY_AFTER = 2


class BrokerHealth:
    """Per-broker request outcomes -> healthy / unhealthy; ``on_unhealthy(address, reason)`` once per
    transition. Fed by fetches and by every broker RPC of :class:`BrokerClient`."""

    def __init__(self, on_unhealthy: Callable[[str, str], None]) -> None:
        self.on_unhealthy = on_unhealthy
        self._failures: dict[str, int] = {}
        #: address -> (monotonic time it was marked, reason) for brokers unhealthy right now
        self.unhealthy: dict[str, tuple[float, str]] = {}
        self.marked = 0  # times a broker was marked unhealthy (metrics)

    def ok(self, address: str) -> None:
        self._failures.pop(address, None)
        if self.unhealthy.pop(address, None) is not None:
            log.warning("broker %s answers again: healthy", address)

    def failed(self, address: str, exc: BaseException) -> None:
        if not isinstance(exc, (TubeMQTimeoutError, TubeMQConnectionError, ProtocolError, OSError)):
            return  # an answer (remote exception, error code): the broker is alive
        n = self._failures.get(address, 0) + 1
        self._failures[address] = n
        if n >= BROKER_UNHEALTHY_AFTER and address not in self.unhealthy:
            reason = f"{n} requests in a row failed, the last with: {exc}"
            self.unhealthy[address] = (time.monotonic(), reason)
            self.marked += 1
            self.on_unhealthy(address, reason)

    def record(self, address: str, exc: BaseException | None) -> None:
        """One request outcome: ``exc`` None for an answer."""
        if exc is None:
            self.ok(address)
        else:
            self.failed(address, exc)


class BrokerClient:
    """Consumer RPCs to brokers (register / unregister / heartbeat / commit), shared by both consumers."""

    def __init__(self, session: MasterSessionBase, config: ConsumerConfig, flow: FlowControl,
                 health: BrokerHealth | None = None) -> None:
        self.session = session
        self.config = config
        self.flow = flow
        self.health = health

    def auth_info(self, *, force: bool = False) -> broker_pb.AuthorizedInfo:
        """visit token, plus (auth configured) the ``user ts nonce signature`` token on every
        register/unregister/heartbeat. Java adds it only after a requireAuth (unregister: always), but
        a broker with consume authentication refuses a blank token with 415 (§8.3) and a refused
        register leaves no partition to heartbeat, so the requireAuth would never come."""
        info = broker_pb.AuthorizedInfo(visitAuthorizedToken=self.session.visit_token)
        cfg = self.config
        if cfg.auth_enabled:
            assert cfg.auth_user is not None and cfg.auth_password is not None
            info.authAuthorizedToken = auth.broker_auth_token(cfg.auth_user, cfg.auth_password)
        return info

    async def call(self, address: str, method: int, body: bytes) -> bytes:
        try:
            conn = await self.session.pool.get(address)
            data: bytes = await conn.call(ServiceType.BROKER_READ, method, body,
                                          timeout_ms=self.config.rpc_timeout_ms)
        except TubeMQError as exc:
            if self.health is not None:
                self.health.failed(address, exc)
            raise
        if self.health is not None:
            self.health.ok(address)
        return data

    async def register(self, slot: PartitionSlot, read_status: int, offset: int | None = None) -> RegisterOutcome:
        p = slot.partition
        req = broker_pb.RegisterRequestC2B(
            opType=MSG_OPTYPE_REGISTER, clientId=self.session.client_id, groupName=self.config.group,
            topicName=p.topic, partitionId=p.partition_id, readStatus=read_status,
            qryPriorityId=self.flow.qry_priority_id,
        )
        if slot.filters:
            req.filterCondStr.extend(sorted(slot.filters))
        if offset is not None and offset >= 0:
            req.currOffset = offset
        req.authInfo.CopyFrom(self.auth_info())
        data = await self.call(p.address, Method.BROKER_CONSUMER_REGISTER, req.SerializeToString())
        rsp = _parse(broker_pb.RegisterResponseB2C, data, p)
        return RegisterOutcome(rsp.success, rsp.errCode, rsp.errMsg, rsp.currOffset,
                               rsp.maxOffset if rsp.HasField("maxOffset") else -1)

    async def unregister(self, slot: PartitionSlot, read_status: int) -> None:
        p = slot.partition
        req = broker_pb.RegisterRequestC2B(
            opType=MSG_OPTYPE_UNREGISTER, clientId=self.session.client_id, groupName=self.config.group,
            topicName=p.topic, partitionId=p.partition_id, readStatus=read_status,
        )
        req.authInfo.CopyFrom(self.auth_info(force=True))
        data = await self.call(p.address, Method.BROKER_CONSUMER_REGISTER, req.SerializeToString())
        rsp = _parse(broker_pb.RegisterResponseB2C, data, p)
        if not rsp.success:
            log.info("partition %s: unregister answered [%d] %s", p.key, rsp.errCode, rsp.errMsg)
        else:
            log.debug("partition %s unregistered (readStatus %d)", p.key, read_status)

    async def commit(self, partition: Partition, consumed: bool) -> tuple[bool, int, str, int, int]:
        """CommitOffsetRequestC2B -> (success, code, message, currOffset, maxOffset)."""
        req = broker_pb.CommitOffsetRequestC2B(
            clientId=self.session.client_id, topicName=partition.topic, partitionId=partition.partition_id,
            groupName=self.config.group, lastPackConsumed=consumed,
        )
        data = await self.call(partition.address, Method.BROKER_CONSUMER_COMMIT, req.SerializeToString())
        rsp = _parse(broker_pb.CommitOffsetResponseB2C, data, partition)
        return (rsp.success, rsp.errCode, rsp.errMsg, rsp.currOffset,
                rsp.maxOffset if rsp.HasField("maxOffset") else -1)

    async def heartbeat(self, address: str, partitions: list[Partition]) -> Any:
        req = broker_pb.HeartBeatRequestC2B(
            clientId=self.session.client_id, groupName=self.config.group, readStatus=0,
            partitionInfo=[str(p) for p in partitions], qryPriorityId=self.flow.qry_priority_id,
        )
        req.authInfo.CopyFrom(self.auth_info())
        data = await self.call(address, Method.BROKER_CONSUMER_HEARTBEAT, req.SerializeToString())
        return _parse(broker_pb.HeartBeatResponseB2C, data, None)


def _parse(cls: Any, data: bytes, partition: Partition | None) -> Any:
    try:
        return cls.FromString(data)
    except Exception as exc:  # protobuf DecodeError / missing required fields
        where = f" for partition {partition}" if partition is not None else ""
        raise DecodeError(f"bad {cls.__name__}{where}: {exc}") from exc


class BrokerHeartbeats:
    """Periodic HeartBeatRequestC2B per broker holding our partitions (§5.2.5), both consumer kinds."""

    def __init__(self, table: PartitionTable, brokers: BrokerClient, session: MasterSessionBase,
                 period: float, on_lost: Callable[[PartitionSlot], None]) -> None:
        self.table = table
        self.brokers = brokers
        self.session = session
        self.period = period
        self.on_lost = on_lost
        self._failures: dict[str, int] = {}  # consecutive failures per broker address
        self.total_failures: dict[str, int] = {}  # for metrics: failures since start

    async def run(self, closing: Callable[[], bool]) -> None:
        while not closing():
            await asyncio.sleep(self.period)
            if closing():
                return
            await self.beat_all()

    async def beat_all(self) -> None:
        by_broker: dict[str, list[PartitionSlot]] = {}
        for slot in self.table.registered():
            by_broker.setdefault(slot.partition.address, []).append(slot)
        if by_broker:
            await asyncio.gather(*(self.beat(a, s) for a, s in by_broker.items()))

    async def beat(self, address: str, slots: list[PartitionSlot]) -> None:
        try:
            rsp = await self.brokers.heartbeat(address, [s.partition for s in slots])
        except TubeMQError as exc:
            n = self._failures.get(address, 0) + 1
            self._failures[address] = n
            self.total_failures[address] = self.total_failures.get(address, 0) + 1
            log.warning("broker %s heartbeat failed (%d in a row): %s", address, n, exc)
            if n >= BROKER_HB_FAILURES_BEFORE_DROP:
                self._failures[address] = 0
                for slot in slots:
                    self.table.drop(slot, f"broker {address} unreachable")
                self.on_lost(slots[0])
            return
        self._failures[address] = 0
        if self.table.closed:
            return
        if rsp.HasField("requireAuth"):
            self.session.require_auth = self.session.require_auth or rsp.requireAuth
        if not rsp.success:
            log.warning("broker %s heartbeat answered [%d] %s", address, rsp.errCode, rsp.errMsg)
            if rsp.errCode == ErrorCode.CERTIFICATE_FAILURE:
                for slot in slots:
                    self.table.drop(slot, "broker authentication failure")
                self.on_lost(slots[0])
            return
        lost = False
        for item in rsp.failureInfo:
            code_s, _, pstr = item.partition(":")
            try:
                p = parse_partition(pstr)
            except DecodeError:
                log.warning("broker %s: unparsable failureInfo %r", address, item)
                continue
            failed = self.table.get(p.key)
            if failed is not None and failed.registered and failed.state is not PartitionState.RELEASING:
                self.table.drop(failed, f"broker heartbeat failure {code_s}")
                lost = True
        if lost:
            self.on_lost(slots[0])


class ConsumerSessionBase(MasterSessionBase):
    """What the server-balanced and the client-balanced consumer sessions share: their core, its
    consumer config, the register failures that end the consumer, a heartbeat counter."""

    fatal_register_codes = FATAL_REGISTER_CODES
    config_register_codes = CONFIG_REGISTER_CODES

    def __init__(self, core: Any, client_id: str, metrics: Metrics) -> None:
        super().__init__(core.config, client_id, metrics=metrics)
        self.core = core
        self.cfg: ConsumerConfig = core.config
        self._hb_count = 0


class ConsumerSession(ConsumerSessionBase):
    """Register / heartbeat / close of a server-balanced consumer (RegisterRequestC2M etc., §3.4)."""

    role = "consumer"
    core: ConsumerCore
    #: Java's consumer asks again at once after a refusal (no sleep on that path; it sleeps only after
    #: an RPC exception), so a refused consumer fails within a few round trips
    wait_after_refusal = False

    def __init__(self, core: ConsumerCore, client_id: str, metrics: Metrics) -> None:
        super().__init__(core, client_id, metrics)
        self.session_time = int(time.time() * 1000)
        self.not_allocated = True
        #: bound consumption: whether the group was still unallocated when the first connect event
        #: arrived (None = none yet); see ConsumerCore._bound_offset
        self.bound_first_event: bool | None = None

    async def _register_once(self) -> None:
        core, cfg = self.core, self.cfg
        req = master_pb.RegisterRequestC2M(
            clientId=self.client_id, groupName=cfg.group, hostName=self.host_name,
            topicList=sorted(cfg.topics), subscribeInfo=core.table.subscribe_infos(),
            topicCondition=cfg.topic_conditions(), requireBound=False, sessionTime=self.session_time,
            groupFlowCheckId=core.flow.group_id, defFlowCheckId=core.flow.def_id,
            qryPriorityId=core.flow.qry_priority_id, jdkVersion=RUNTIME_VERSION,
        )
        if cfg.bound:  # Java createMasterRegisterRequest: these five only with requireBound
            req.requireBound = True
            req.sessionKey, req.selectBig, req.totalCount = cfg.session_key, cfg.select_big, cfg.source_count
            req.requiredPartition = cfg.required_partition()
            req.notAllocated = self.not_allocated
        self.add_cert(req, force=True)
        rsp = await self.call_master(Method.MASTER_CONSUMER_REGISTER, req, master_pb.RegisterResponseM2C)
        self.check(rsp)
        self._apply(rsp)
        core.table.changed = False  # the register carried our subscription

    async def _heartbeat_once(self) -> None:
        core, cfg = self.core, self.cfg
        report = core.reports.take()
        self._hb_count += 1
        do_report = (report is not None or core.table.changed
                     or self._hb_count % MAX_SUBSCRIBE_REPORT_INTERVAL_TIMES == 0)
        req = master_pb.HeartRequestC2M(
            clientId=self.client_id, groupName=cfg.group, reportSubscribeInfo=do_report,
            defFlowCheckId=core.flow.def_id, groupFlowCheckId=core.flow.group_id,
            qryPriorityId=core.flow.qry_priority_id,
        )
        if do_report:
            req.subscribeInfo.extend(core.table.subscribe_infos())
            core.table.changed = False
        if report is not None:
            report.fill_proto(req.event)
        self.add_cert(req, force=False)
        try:
            rsp = await self.call_master(Method.MASTER_CONSUMER_HEARTBEAT, req, master_pb.HeartResponseM2C)
            self.check(rsp)
        except BaseException:
            if report is not None:
                core.reports.put_back(report)
            if do_report:
                core.table.changed = True
            raise
        was_not_allocated = self.not_allocated
        self._apply(rsp)
        if rsp.HasField("requireAuth"):
            self.require_auth = rsp.requireAuth
        if rsp.HasField("event") and rsp.event.rebalanceId > 0:
            ev = RebalanceEvent.from_proto(rsp.event)
            log.info("consumer %s: received %s", self.client_id, ev.describe())
            if self.bound_first_event is None and ev.op_type in (EventType.CONNECT, EventType.ONLY_CONNECT):
                self.bound_first_event = was_not_allocated
            try:
                core.events.put(ev)
            except EventQueueFullError as exc:
                log.error("%s; re-registering to re-synchronise with the master", exc)
                raise NotRegisteredError(ErrorCode.HB_NO_NODE, str(exc)) from exc
        if len(core.reports):
            self.trigger_heartbeat()

    async def _close_once(self) -> None:
        req = master_pb.CloseRequestC2M(clientId=self.client_id, groupName=self.cfg.group)
        self.add_cert(req, force=True)
        rsp = await self.call_master(Method.MASTER_CONSUMER_CLOSE, req, master_pb.CloseResponseM2C)
        if not rsp.success:
            log.info("consumer close answered [%d] %s", rsp.errCode, rsp.errMsg)

    def _apply(self, rsp: Any) -> None:
        self.core.flow.update(rsp)
        if rsp.HasField("notAllocated"):
            self.not_allocated = rsp.notAllocated
        self.apply_authorized_info(rsp)

    def on_reregister(self) -> None:
        # Reports belong to the master session that forgot us; the new registration carries our
        # current partitions (subscribeInfo), which is what those reports would have told it.
        dropped = 0
        while self.core.reports.take() is not None:
            dropped += 1
        if dropped:
            log.info("consumer %s: %d event report(s) superseded by re-registration", self.client_id, dropped)

    async def _sleep(self, seconds: float, wakeable: bool = False) -> None:
        if wakeable:
            if len(self.core.reports):
                seconds = 0.0  # a processed event waits for its report: do not sleep on it
            seconds = min(seconds, max(self.cfg.heartbeat_period_ms, self.cfg.heartbeat_fail_wait_ms) / 1000.0)
        await super()._sleep(seconds, wakeable)


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
    ) -> None:
        if not config.topics:
            raise TubeMQError("a consumer needs at least one topic")
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
        self.brokers = BrokerClient(self.session, config, self.flow, self.broker_health)
        self.buffer = DeliveryBuffer(config.prefetch_batches)
        self.on_partitions_assigned = on_partitions_assigned
        self.on_partitions_revoked = on_partitions_revoked
        self.fetcher = Fetcher(
            self.table, self.buffer, self._connection, client_id=self.client_id, group=config.group,
            flow=self.flow, concurrency=config.fetch_concurrency, rpc_timeout_ms=config.rpc_timeout_ms,
            verify_checksum=config.verify_checksum, client_filter=config.client_filter,
            on_lost=self._on_lost, metrics=self.metrics, on_result=self.broker_health.record,
        )
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
        self.started = False
        self.closing = False
        self.closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._discards: set[asyncio.Task[None]] = set()
        self.broker_heartbeats = BrokerHeartbeats(self.table, self.brokers, self.session,
                                                  config.heartbeat_period_ms / 1000.0, self._on_lost)
        self.batches = 0  # batches handed to the application (poll)
        self.confirms = 0
        self._register_metrics()

    def _register_metrics(self) -> None:
        """Counters are plain ints read at snapshot time (README.md, "Metrics and logging", lists them)."""
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
        loop = asyncio.get_running_loop()
        self._tasks["rebalance"] = loop.create_task(self.worker.run(), name="tubemq-rebalance")
        self._tasks["broker-heartbeat"] = loop.create_task(self._broker_heartbeat_loop(),
                                                           name="tubemq-broker-heartbeat")
        self._tasks["housekeeping"] = loop.create_task(self._housekeeping(), name="tubemq-consumer-housekeeping")
        self.fetcher.start()
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
        budget = self.config.close_timeout_ms / 1000.0
        deadline = time.monotonic() + budget
        try:
            # most of the budget for the brokers, the rest for telling the master
            await asyncio.wait_for(self._release_all(deadline - budget * 0.3), max(0.0, budget * 0.7))
        except asyncio.TimeoutError:
            left = [s.key for s in self.table.slots() if s.state is not PartitionState.RELEASED]
            log.warning("consumer %s: partitions not released within %.1f s (%d left: the broker(s) did not "
                        "answer); abandoning outstanding requests", self.client_id, budget * 0.7, len(left))
            self.metrics.inc("consumer.close_timeouts")
        except Exception:
            log.exception("consumer %s: releasing partitions failed", self.client_id)
        self.table.close()
        self.buffer.close()
        await self.fetcher.stop()
        for t in list(self._tasks.values()):
            t.cancel()
        for t in list(self._tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
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

    # ------------------------------------------------------------------ application API
    async def poll(self, timeout: float | None = None) -> Batch | None:
        """The next batch, or None when nothing arrived within ``timeout`` seconds."""
        if self.closing:
            raise ClientClosedError("consumer is closed")
        batch = await self.buffer.take(timeout, self._is_current)
        if batch is not None:
            if self.closing:
                return None
            batch.delivered = True
            self.batches += 1
            if self.config.deserialize is not None:
                self._deserialize(batch)
        return batch

    def _deserialize(self, batch: Batch) -> None:
        """``value_deserializer`` on a batch being handed out; on failure it is rolled back and the
        SerializationError raised to the caller of poll / the iterator."""
        from ..serializers import deserialize_messages

        try:
            deserialize_messages(batch.messages, self.config.deserialize)  # type: ignore[arg-type]
        except Exception:
            self.confirm_local(batch, False)
            raise

    def _is_current(self, batch: Batch) -> bool:
        slot = batch._slot
        return slot is not None and self.table.is_current(slot, batch._booking)

    async def confirm(self, batch: Batch, consumed: bool = True, *, local: bool | None = None) -> bool:
        """Finish ``batch``: consumed=True commits it, False rolls it back for re-delivery.

        Returns False when the batch is stale (partition revoked or confirm timeout passed); its
        messages will then be delivered again (to this or another member).
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
                # unknown outcome: leave it to the next fetch (lastPackConsumed) to commit or roll back
                self.metrics.inc("consumer.commit_failures")
                log.info("partition %s: commit failed (%s); the next fetch carries the confirm",
                         batch.partition.key, exc)
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
                        self._on_lost(slot)
                        return False
        return self.confirm_local(batch, consumed)

    def confirm_local(self, batch: Batch, consumed: bool = True) -> bool:
        """The local half of :meth:`confirm` (the commit rides on the partition's next fetch), callable
        from plain code on the loop thread: what iteration uses at the end of each batch."""
        slot = batch._slot
        if slot is None or batch.confirmed:
            return False
        ok = self.table.confirm(slot, batch._booking, consumed, batch.release_delay)
        batch.confirmed = ok
        if ok:
            self.confirms += 1
        return ok

    def unpoll(self, batch: Batch) -> None:
        """``batch`` came from :meth:`poll` but the application never saw it (an iterator that stopped
        with it queued ahead): back to the head of the buffer, not delivered, as if never polled."""
        if batch.confirmed or self.closing:
            return  # close rolls it back
        if not self._is_current(batch):
            self.confirm_local(batch, False)  # a revoke waits for it: roll it back now
            return
        batch.delivered = batch.held = False
        self.batches -= 1
        self.buffer.put_back(batch)

    def pause(self) -> None:
        """Stop fetching (batches already fetched can still be polled)."""
        self.table.pause()

    def resume(self) -> None:
        if not self.closing:
            self.table.resume()

    @property
    def paused(self) -> bool:
        return self.table.paused

    def assignment(self) -> list[Partition]:
        """Partitions currently registered by this consumer."""
        return self.table.owned_partitions()

    # ------------------------------------------------------------------ BrokerOps for the worker
    async def register(self, slot: PartitionSlot, read_status: int) -> RegisterOutcome:
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

    def _on_lost(self, slot: PartitionSlot) -> None:
        self.metrics.inc("consumer.partitions_lost")
        self.session.trigger_heartbeat()  # tell the master soon (reportSubscribeInfo)

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
        for slot in slots:
            self.table.drop(slot, f"broker {address} unhealthy")
        if slots:
            self.metrics.inc("consumer.partitions_lost", len(slots) - 1)
            self._on_lost(slots[0])
        task = asyncio.get_running_loop().create_task(self.session.pool.discard(address))
        self._discards.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._discards.discard)
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
            if any(t.done() for t in self.fetcher._tasks):
                log.error("a fetch worker stopped unexpectedly; restarting the fetch workers")
                await self.fetcher.stop()
                self.fetcher.start()


def _task_error(task: asyncio.Task[Any]) -> BaseException | None:
    if task.cancelled():
        return None
    return task.exception()


AsyncHook = Callable[[list[Partition]], Awaitable[None]]
