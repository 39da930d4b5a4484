"""The server-balanced consumer's master session: register (with its partitions), heartbeats carrying the
rebalance event reports, close (docs/PROTOCOL.md §3.4, §5.2.2), plus the base both consumer sessions share.

The session reads and feeds its consumer through the small :class:`SessionOwner` protocols below, not
through the consumer class itself, so that imports point one way: the cores import their sessions.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from ..client.session import RUNTIME_VERSION, MasterSessionBase
from ..config import ConsumerConfig
from ..errors import NotRegisteredError
from ..metrics import Metrics
from ..protocol import master_pb
from ..protocol.constants import MAX_SUBSCRIBE_REPORT_INTERVAL_TIMES, ErrorCode, EventType, Method
from .flowctrl import FlowControl
from .partitions import PartitionTable
from .rebalance import EventQueue, EventQueueFullError, RebalanceEvent, ReportQueue

log = logging.getLogger("tubemq.consumer.session")

__all__ = ["CONFIG_REGISTER_CODES", "FATAL_REGISTER_CODES", "ConsumerSession", "ConsumerSessionBase",
           "ConsumerSessionOwner", "SessionOwner"]


class SessionOwner(Protocol):
    """What a consumer session needs of its consumer (both kinds)."""

    config: ConsumerConfig
    table: PartitionTable
    flow: FlowControl


class ConsumerSessionOwner(SessionOwner, Protocol):
    """What the server-balanced session needs besides: the event queue it fills, the reports it sends."""

    events: EventQueue
    reports: ReportQueue

    def subscribe_infos(self) -> list[str]:
        """The partitions to report as ours (subscribeInfo strings)."""
        ...

#: refusals that end a server-balanced consumer's start-up registration at once: the Java consumer
#: (BaseMessageConsumer.startMasterAndBrokerThreads) singles out these two, the C++ consumer stops on them;
#: every other code is retried (docs/guide/errors.md, "Refused registration")
FATAL_REGISTER_CODES: frozenset[int] = frozenset({ErrorCode.CONSUME_GROUP_FORBIDDEN, ErrorCode.CONSUME_CONTENT_FORBIDDEN})
#: codes that no amount of retrying fixes without a configuration change (§6.2): background
#: re-registration stops asking every second at these
CONFIG_REGISTER_CODES: frozenset[int] = frozenset({
    *FATAL_REGISTER_CODES, ErrorCode.TOPIC_NOT_DEPLOYED,
    *range(ErrorCode.CLIENT_INCONSISTENT_CONSUMETYPE, ErrorCode.CLIENT_DUPLICATE_INDEXID + 1),
})

#: After this member lost partitions or re-registered, it heartbeats every HURRY_PERIOD_S (at most the
#: period) for up to HURRY_FOR_S, until a connect event arrives: the master hands partitions out in
#: heartbeat answers only, so at the 13 s period a group whose members all lost theirs in a network
#: fault waited a whole period after the master had already rebalanced.
HURRY_PERIOD_S = 1.0
HURRY_FOR_S = 30.0


class ConsumerSessionBase(MasterSessionBase):
    """What the server-balanced and the client-balanced consumer sessions share: their core, its
    consumer config, the register failures that end the consumer, a heartbeat counter."""

    fatal_register_codes = FATAL_REGISTER_CODES
    config_register_codes = CONFIG_REGISTER_CODES
    core: SessionOwner

    def __init__(self, core: SessionOwner, client_id: str, metrics: Metrics) -> None:
        super().__init__(core.config, client_id, metrics=metrics)
        self.core = core
        self.cfg: ConsumerConfig = core.config
        self._hb_count = 0


class ConsumerSession(ConsumerSessionBase):
    """Register / heartbeat / close of a server-balanced consumer (RegisterRequestC2M etc., §3.4)."""

    role = "consumer"
    core: ConsumerSessionOwner
    #: Java's consumer asks again at once after a refusal (no sleep on that path; it sleeps only after
    #: an RPC exception), so a refused consumer fails within a few round trips
    wait_after_refusal = False

    def __init__(self, core: ConsumerSessionOwner, client_id: str, metrics: Metrics) -> None:
        super().__init__(core, client_id, metrics)
        self.session_time = int(time.time() * 1000)
        self.not_allocated = True
        #: bound consumption: whether the group was still unallocated when the first connect event
        #: arrived (None = none yet); see ConsumerCore._bound_offset
        self.bound_first_event: bool | None = None
        self._hurry_until = 0.0

    def hurry(self) -> None:
        """Partitions were lost (or the master forgot us): their next assignment comes in a heartbeat
        answer, so ask every HURRY_PERIOD_S for a while instead of once a period."""
        self._hurry_until = time.monotonic() + HURRY_FOR_S
        self.trigger_heartbeat()

    async def _register_once(self) -> None:
        core, cfg = self.core, self.cfg
        req = master_pb.RegisterRequestC2M(
            clientId=self.client_id, groupName=cfg.group, hostName=self.host_name,
            topicList=sorted(cfg.topics), subscribeInfo=core.subscribe_infos(),
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
            req.subscribeInfo.extend(core.subscribe_infos())
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
            if ev.op_type in (EventType.CONNECT, EventType.ONLY_CONNECT):
                self._hurry_until = 0.0  # the assignment came
                if self.bound_first_event is None:
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
        self.hurry()
        # Reports belong to the master session that forgot us; the new registration carries our
        # current partitions (subscribeInfo), which is what those reports would have told it.
        dropped = 0
        while self.core.reports.take() is not None:
            dropped += 1
        if dropped:
            log.info("consumer %s: %d event report(s) superseded by re-registration", self.client_id, dropped)

    async def _sleep(self, seconds: float, wakeable: bool = False) -> None:
        if wakeable:
            if len(self.core.reports) and not self._hb_failures:
                seconds = 0.0  # a processed event waits for its report: do not sleep on it (but while
                # heartbeats fail, the report waits for the next attempt like everything else)
            seconds = min(seconds, max(self.cfg.heartbeat_period_ms, self.cfg.heartbeat_fail_wait_ms) / 1000.0)
            if self._hurry_until and time.monotonic() < self._hurry_until:
                seconds = min(seconds, HURRY_PERIOD_S)
        await super()._sleep(seconds, wakeable)
