"""Client-side balance and bound consumption: the master session and the types shared by :mod:`.core`
(``BoundCore``, the engine), :mod:`.aio` (``tubemq.aio.BoundConsumer``) and :mod:`.sync` (``tubemq.BoundConsumer``).

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

from dataclasses import dataclass
from typing import Any, Protocol

from ...client.session import RUNTIME_VERSION
from ...codec import Partition
from ...errors import error_for_code
from ...protocol import master_pb
from ...protocol.constants import MAX_SUBSCRIBE_REPORT_INTERVAL_TIMES, META_VALUE_UNDEFINED, ErrorCode, Method
from ..session import ConsumerSessionBase, SessionOwner

__all__ = ["DEFAULT_FETCH_TIMEOUT", "MAX_EMPTY_READS", "BoundSession", "BoundSessionOwner", "PartitionPosition",
           "PartitionRef", "check_v2"]

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


def check_v2(rsp: Any) -> None:
    """V2 answers carry no ``success`` field: errCode 200 means success (§3.5)."""
    if rsp.errCode != ErrorCode.SUCCESS:
        raise error_for_code(rsp.errCode, rsp.errMsg)


class BoundSessionOwner(SessionOwner, Protocol):
    """What the client-balance session needs of its consumer (``BoundCore``): the ids it reports, the
    topic meta it keeps. A protocol, so that the engine imports the session and never the reverse."""

    source_count: int
    node_id: int
    meta_id: int
    meta_applied_at: int

    def part_sub_info(self) -> list[str]: ...

    def apply_meta(self, meta_id: int, items: list[str]) -> None: ...

    def resolve_meta(self) -> None: ...


class BoundSession(ConsumerSessionBase):
    """Client-balance session with the master: V2 register (20), V2 heartbeat (21), close (6)."""

    role = "bound consumer"
    core: BoundSessionOwner
    #: Java's client-balance consumer (SimpleClientBalanceConsumer.startMasterAndBrokerThreads) retries
    #: every refusal, 450 included, 1 s apart
    fatal_register_codes: frozenset[int] = frozenset()

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
        self.add_cert(req, force=True)
        rsp = await self.call_master(Method.MASTER_CONSUMER_REGISTER_V2, req, master_pb.RegisterResponseM2CV2)
        check_v2(rsp)
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
        self.add_cert(req, force=False)
        try:
            rsp = await self.call_master(Method.MASTER_CONSUMER_HEARTBEAT_V2, req, master_pb.HeartResponseM2CV2)
            check_v2(rsp)
        except BaseException:
            if report:
                core.table.changed = True
            raise
        self._apply(rsp)
        if rsp.HasField("topicMetaInfoId") and len(rsp.topicMetaInfoList):
            core.apply_meta(rsp.topicMetaInfoId, list(rsp.topicMetaInfoList))

    async def _close_once(self) -> None:
        req = master_pb.CloseRequestC2M(clientId=self.client_id, groupName=self.cfg.group)
        self.add_cert(req, force=True)
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


