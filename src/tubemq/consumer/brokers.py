"""Consumer RPCs to brokers, shared by both consumers: :class:`BrokerClient` (register / unregister /
commit / heartbeat), :class:`BrokerHealth` (per-broker request outcomes) and :class:`BrokerHeartbeats`
(the periodic HeartBeatRequestC2B, docs/PROTOCOL.md §5.2.5).

Why apart from the consumer core: the bound (client-balance) consumer uses the same broker calls and
heartbeats without the rebalance machinery, so they sit one layer below both cores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ..client import auth
from ..client.session import MasterSessionBase
from ..codec import Partition, parse_partition
from ..config import ConsumerConfig
from ..errors import DecodeError, ProtocolError, TubeMQConnectionError, TubeMQError, TubeMQTimeoutError
from ..protocol import broker_pb
from ..protocol.constants import MSG_OPTYPE_REGISTER, MSG_OPTYPE_UNREGISTER, ErrorCode, Method, ServiceType
from .flowctrl import FlowControl
from .links import Links
from .partitions import PartitionSlot, PartitionState, PartitionTable
from .rebalance import RegisterOutcome

log = logging.getLogger("tubemq.consumer.brokers")

__all__ = ["BROKER_HB_FAILURES_BEFORE_DROP", "BROKER_UNHEALTHY_AFTER", "BrokerClient", "BrokerHealth",
           "BrokerHeartbeats"]

BROKER_HB_FAILURES_BEFORE_DROP = 3
#: consecutive failed requests to one broker (no answer in time, connection lost or unusable) after
#: which it is marked unhealthy; a broker that answers, even with an error code, is alive
BROKER_UNHEALTHY_AFTER = 2


class BrokerHealth:
    """Per-broker request outcomes -> healthy / unhealthy; ``on_unhealthy(address, reason)`` once per
    transition. Fed by fetches and by every broker RPC of :class:`BrokerClient`."""

    def __init__(self, on_unhealthy: Callable[[str, str], None],
                 on_healthy: Callable[[str], None] | None = None,
                 on_still_failing: Callable[[str], None] | None = None) -> None:
        self.on_unhealthy = on_unhealthy
        self.on_healthy = on_healthy
        #: every further BROKER_UNHEALTHY_AFTER failures of an unhealthy broker (its connection may be
        #: one that stalled after the first one was replaced: replace it again)
        self.on_still_failing = on_still_failing
        self._failures: dict[str, int] = {}
        #: address -> (monotonic time it was marked, reason) for brokers unhealthy right now
        self.unhealthy: dict[str, tuple[float, str]] = {}
        self.marked = 0  # times a broker was marked unhealthy (metrics)

    def ok(self, address: str) -> None:
        self._failures.pop(address, None)
        if self.unhealthy.pop(address, None) is not None:
            log.warning("broker %s answers again: healthy", address)
            if self.on_healthy is not None:
                self.on_healthy(address)

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
        elif n % BROKER_UNHEALTHY_AFTER == 0 and self.on_still_failing is not None:
            self.on_still_failing(address)

    def gone(self, address: str, reason: str) -> None:
        """The broker closed our connection (a dead or restarted broker: its registrations are gone):
        unhealthy at once, without waiting for requests to fail."""
        self._failures[address] = BROKER_UNHEALTHY_AFTER
        if address not in self.unhealthy:
            reason = f"connection closed by the broker ({reason})"
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
                 health: BrokerHealth | None = None, links: Links | None = None) -> None:
        self.session = session
        self.config = config
        self.flow = flow
        self.health = health
        #: told of each connection a register or heartbeat was accepted on (it may fetch as it is)
        self.links = links

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
        return (await self._call_on(address, method, body))[1]

    async def _call_on(self, address: str, method: int, body: bytes) -> tuple[Any, bytes]:
        """(the connection used, RspResponseBody.data) of one call to ``address``."""
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
        return conn, data

    def _presented(self, conn: Any, accepted: bool) -> None:
        if accepted and self.links is not None:
            self.links.presented(conn)

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
        conn, data = await self._call_on(p.address, Method.BROKER_CONSUMER_REGISTER, req.SerializeToString())
        rsp = _parse(broker_pb.RegisterResponseB2C, data, p)
        self._presented(conn, rsp.success)
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

    def heartbeat_request(self, partitions: list[Partition]) -> bytes:
        """HeartBeatRequestC2B of ``partitions`` with the consumer's tokens (also what a new fetch
        link presents first: :class:`~tubemq.consumer.engine.Links`)."""
        req = broker_pb.HeartBeatRequestC2B(
            clientId=self.session.client_id, groupName=self.config.group, readStatus=0,
            partitionInfo=[str(p) for p in partitions], qryPriorityId=self.flow.qry_priority_id,
        )
        req.authInfo.CopyFrom(self.auth_info())
        return req.SerializeToString()

    async def heartbeat(self, address: str, partitions: list[Partition]) -> Any:
        conn, data = await self._call_on(address, Method.BROKER_CONSUMER_HEARTBEAT, self.heartbeat_request(partitions))
        rsp = _parse(broker_pb.HeartBeatResponseB2C, data, None)
        self._presented(conn, rsp.success)
        return rsp


def _parse(cls: Any, data: bytes, partition: Partition | None) -> Any:
    try:
        return cls.FromString(data)
    except Exception as exc:  # protobuf DecodeError / missing required fields
        where = f" for partition {partition}" if partition is not None else ""
        raise DecodeError(f"bad {cls.__name__}{where}: {exc}") from exc


class BrokerHeartbeats:
    """Periodic HeartBeatRequestC2B per broker holding our partitions (§5.2.5), both consumer kinds."""

    def __init__(self, table: PartitionTable, brokers: BrokerClient, session: MasterSessionBase,
                 period: float, on_lost: Callable[[PartitionSlot], None] | None = None) -> None:
        """``on_lost(slot)`` after partitions were dropped (the server-balanced consumer learns of every
        drop from its partition table instead and passes None)."""
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
                self._lost(slots[0])
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
                self._lost(slots[0])
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
            self._lost(slots[0])

    def _lost(self, slot: PartitionSlot) -> None:
        if self.on_lost is not None:
            self.on_lost(slot)
