"""The embedded master's RPC handlers: producer/consumer sessions, server-side balancing, client-balance meta.

Laid out like nsqd: the handlers live here, the group/session state and its rules in ``master/groups.py``,
the cluster's shape (brokers, deployments, brokerInfos/topicInfos) in ``master/topology.py``, the balancing
logic in ``master/balancer.py``, the admin JSON views in ``master/views.py``.

Handlers answer like the real ``TMaster`` (captures s1, s2, s3, s5, s6b win over docs/PROTOCOL.md):

* validation order and texts of §7.1/§7.2; the StandbyException is raised after the parameter checks
  of each call (for consumer register after the topic checks, as ``TMaster.consumerRegisterC2M`` does:
  the spec's list puts it earlier, the upstream code and the brief put it after the parameter checks);
* brokerInfos in the blank-port form for default ports, always in register answers, in heartbeat
  answers only when the client's checksum differs (§4.1, §4.11);
* topicInfos ``topic#bid:parts:stores#size`` where ``size`` is written only for topics whose max
  message size differs from the cluster default (captures s1/s6b, README item 1; the spec's vector
  writes it always);
* ``appdConfig`` always present on success with the master's configId (-2), ``maxMsgSize`` only when
  the request's configId differs (README item 4);
* consumer answers carry the flow-control fields (-2 / ``" "``) only when the request had field 14 or
  15 (register) / 6 or 7 (heartbeat); V2 answers always carry an (empty) ``opsTaskInfo``;
* rebalance events carry no status; subscribeInfo strings use explicit ports (s2/s3).

Every handler is synchronous (the rpc layer answers without creating a task); timers run in
``start()``'s tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf.message import Message

from tubemq.codec import Partition
from tubemq.protocol import master_pb
from tubemq.protocol.constants import (
    META_MAX_CLIENT_ID_LENGTH,
    META_VALUE_UNDEFINED,
    ErrorCode,
    Method,
)

from ..._tasks import cancel_and_wait
from ..rpc import Handler, RpcContext
from . import views as master_views
from .base import MAX_META_FORCE_UPDATE_MS, OK_MSG, MasterBase, _now_ms, _rejected, _reported_sub_ids
from .groups import (
    CONSUME_BOUND,
    CONSUME_CLIENT_REB,
    CONSUME_UNBOUND,
    BadParam,
    ConsumerInfo,
    GroupInfo,
    ProducerInfo,
    check_filter_topics,
    check_required_partitions,
    check_string,
    parse_conditions,
)

log = logging.getLogger("tubemq.server.master")


class Master(MasterBase):
    """Master service: ``handlers()`` for the rpc layer, ``start()/stop()`` for its timers."""

    def handlers(self) -> dict[int, Handler]:
        return {
            Method.MASTER_PRODUCER_REGISTER: self.producer_register,
            Method.MASTER_PRODUCER_HEARTBEAT: self.producer_heartbeat,
            Method.MASTER_PRODUCER_CLOSE: self.producer_close,
            Method.MASTER_CONSUMER_REGISTER: self.consumer_register,
            Method.MASTER_CONSUMER_HEARTBEAT: self.consumer_heartbeat,
            Method.MASTER_CONSUMER_CLOSE: self.consumer_close,
            Method.MASTER_CONSUMER_REGISTER_V2: self.consumer_register_v2,
            Method.MASTER_CONSUMER_HEARTBEAT_V2: self.consumer_heartbeat_v2,
            Method.MASTER_CONSUMER_GET_PART_META: self.consumer_get_part_meta,
        }

    async def start(self) -> None:
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(self._balance_loop(), name="tubemq-master-balance"),
            asyncio.create_task(self._housekeeping_loop(), name="tubemq-master-expiry"),
        ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        self.auth.close()

    # ---- timers

    async def _balance_loop(self) -> None:
        period = self.config.balance_period_ms / 1000
        while True:
            await asyncio.sleep(period)
            try:
                self.balance_round()
            except Exception:  # a bug in one round must not stop balancing for good
                log.exception("balance round failed")

    async def _housekeeping_loop(self) -> None:
        tick = max(
            0.05,
            min(
                self.config.consumer_heartbeat_timeout_ms,
                self.config.producer_heartbeat_timeout_ms,
                self.config.visit_token_period_ms,
                self.config.broker_heartbeat_timeout_ms,
            )
            / 4000,
        )
        while True:
            await asyncio.sleep(tick)
            try:
                self.expire(time.monotonic())
                if self.tokens.rotate_if_due():
                    log.debug("visit token rotated")  # the token itself is a secret
            except Exception:
                log.exception("master housekeeping failed")

    def expire(self, now: float) -> None:
        """Drop producers and consumers whose heartbeats stopped (30 s by default, §5.1/§5.4)."""
        for pid in self.state.expired_producers(now, self.config.producer_heartbeat_timeout_ms / 1000):
            log.info("[Producer Timeout] %s", pid)
            del self.state.producers[pid]
        for cid, group in self.state.expired_consumers(now, self.config.consumer_heartbeat_timeout_ms / 1000):
            log.info("[Consumer Timeout] %s@%s", cid, group)
            self._release_consumer(cid, group)
        self.topology.expire_brokers(now, self.config.broker_heartbeat_timeout_ms / 1000)

    def balance_round(self, only: Iterable[str] | None = None) -> int:
        """Run one balance round now (also done every ``balance_period_ms``); returns its rebalanceId.

        ``only`` limits the round to some groups (a new group's first balance); it still takes the
        next rebalanceId of the master-wide counter, as every real round does."""
        server_groups: dict[str, tuple[list[str], list[Partition]]] = {}
        chosen = self.state.groups.values() if only is None else [
            self.state.groups[n] for n in only if n in self.state.groups
        ]
        for g in chosen:
            if g.consume_type == CONSUME_CLIENT_REB:
                self._fresh_topic_meta(g)
                continue
            members = list(g.consumers)
            server_groups[g.name] = (members, self.topology.subscribable_partitions(g.topics))
        rid = self.balancer.run_round(server_groups, partial=only is not None, reset=self._bound_reset)
        broker_count = max(1, len(self.meta.brokers))
        for name, (members, _parts) in server_groups.items():
            g = self.state.groups[name]
            if members and not g.balanced:
                g.balanced = True
                g.cur_client_rate = broker_count // len(members)
        return rid

    def _bound_reset(self, group: str, parts: Sequence[Partition]) -> dict[str, list[Partition]] | None:
        """A bound group's offset-reset allocation (TMaster.processResetbalance with
        DefaultLoadBalancer.resetBalanceCluster): once all ``sourceCount`` members are registered,
        each partition named in a ``requiredPartition`` goes to the member whose offset won it; the
        members then register those partitions at the brokers with their ``currOffset``. Until the
        group is allocated the normal balance keeps out (an empty plan = hold); after it, the normal
        balance hands out the partitions nobody named. None = balance normally."""
        g = self.state.groups.get(group)
        if g is None or g.consume_type != CONSUME_BOUND or not g.bound_unready:
            return None
        plan: dict[str, list[Partition]] = {}
        if g.full_size:
            avail = {p.key: p for p in parts}
            for key, owner in sorted(g.bound_owner.items()):
                if key in avail:
                    plan.setdefault(owner, []).append(avail[key])
            g.allocated_times += 1
            log.info("[Bound Alloc] group %s: required partitions %s", group,
                     {cid: [p.key for p in ps] for cid, ps in plan.items()})
        else:
            g.check_cycle += 1
            if g.check_cycle % 15 == 1:
                log.info("[Bound Alloc] Not allocate partition :group(%s)'s consumer getCachedSize(%d) "
                         "low than required source count:%d", group, len(g.consumers), g.source_count)
        if plan or g.bound_unready:
            return plan
        return None

    def _first_balance(self, group: str) -> None:
        """A new group's first balance: at once (default), after a delay, or at the next periodic round
        like the real master (``first_balance_delay_ms`` < 0). The events still reach the consumer on
        its heartbeat answers, as the real master delivers them (captures s2/s3): the client sends its
        first heartbeat right after registering, so "at once" means within about a second."""
        delay = self.config.first_balance_delay_ms
        if delay < 0:
            return
        if delay == 0:
            self.balance_round(only=[group])
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # handlers called directly (no loop): the periodic round will do it
            return
        loop.call_later(delay / 1000, self._delayed_first_balance, group)

    def _delayed_first_balance(self, group: str) -> None:
        g = self.state.groups.get(group)
        if g is None or g.balanced or not self._tasks:  # gone, already balanced, or master stopped
            return
        try:
            self.balance_round(only=[group])
        except Exception:  # a timer callback must not die silently
            log.exception("first balance of group %s failed", group)

    # ---- client-balance topic meta

    def producer_register(self, req: master_pb.RegisterRequestP2M, ctx: RpcContext) -> Message:
        resp = master_pb.RegisterResponseM2P(success=False, brokerCheckSum=-1)
        try:
            auth, pid, host, topics = self._producer_params(req, allow_token=False)
        except BadParam as exc:
            return _rejected(resp, exc)
        self._check_standby(pid, ctx)
        self.state.producers[pid] = ProducerInfo(pid, host, topics, ctx.tls, time.monotonic())
        log.info("[Producer Register] %s, isOverTLS=%s", pid, ctx.tls)
        resp.brokerCheckSum = self.meta.broker_checksum
        resp.brokerInfos.extend(self.topology.broker_infos(ctx.tls))
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.appdConfig.CopyFrom(self._approved_config(req))
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def producer_heartbeat(self, req: master_pb.HeartRequestP2M, ctx: RpcContext) -> Message:
        resp = master_pb.HeartResponseM2P(success=False, brokerCheckSum=-1)
        try:
            auth, pid, host, topics = self._producer_params(req, allow_token=True)
        except BadParam as exc:
            return _rejected(resp, exc)
        self._check_standby(pid, ctx)
        info = self.state.producers.get(pid)
        if info is None:
            resp.errCode = ErrorCode.HB_NO_NODE
            resp.errMsg = f"Invalid node id:{pid}, you have to append node first!"
            return resp
        info.last_seen = time.monotonic()
        info.topics, info.host, info.over_tls = topics, host, ctx.tls
        checksum = self.meta.broker_checksum
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.brokerCheckSum = checksum
        if req.brokerCheckSum != checksum:
            resp.brokerInfos.extend(self.topology.broker_infos(ctx.tls))
        resp.topicInfos.extend(self.topology.topic_infos(topics))
        resp.appdConfig.CopyFrom(self._approved_config(req))
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def producer_close(self, req: master_pb.CloseRequestP2M, ctx: RpcContext) -> Message:
        resp = master_pb.CloseResponseM2P(success=False)
        try:
            self._auth(req, allow_token=False)
            pid = check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
        except BadParam as exc:
            return _rejected(resp, exc)
        self._check_standby(pid, ctx)
        if self.state.producers.pop(pid, None) is not None:
            log.info("[Producer Closed] %s, isOverTLS=%s", pid, ctx.tls)
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def consumer_register(self, req: master_pb.RegisterRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.RegisterResponseM2C(success=False)
        try:
            auth = self._auth(req, allow_token=False)
            cid, host, group = self._register_params(req)
            topics = self._check_consumer_topics(req.topicList)
            conds = parse_conditions(req.topicCondition)
            bound = req.HasField("requireBound") and req.requireBound
            required: dict[str, int] = {}
            if bound:
                required = check_required_partitions(topics, req.requiredPartition)
                if not req.sessionKey.strip():
                    raise BadParam(ErrorCode.BAD_REQUEST, "[Parameter error] blank value of sessionKey!")
                if not req.HasField("totalCount") or req.totalCount <= 0:
                    raise BadParam(
                        ErrorCode.BAD_REQUEST, "[Parameter error] totalSourceCount must over zero!"
                    )
            reported = self._parse_sub_infos(req.subscribeInfo)
            self._check_standby(cid, ctx)
            check_filter_topics(cid, topics, conds)
            info = ConsumerInfo(
                cid,
                group,
                host,
                ctx.remote_host,
                ctx.tls,
                CONSUME_BOUND if bound else CONSUME_UNBOUND,
                topics,
                conds,
                session_key=req.sessionKey.strip() if bound else "",
                source_count=req.totalCount if req.HasField("totalCount") else -1,
                select_big=not req.HasField("selectBig") or req.selectBig,
                required_partitions=required,
                session_time=req.sessionTime if req.HasField("sessionTime") else _now_ms(),
            )
            g, new_group = self.state.add_consumer(info)
        except BadParam as exc:
            return _rejected(resp, exc)
        if reported or (req.HasField("notAllocated") and not req.notAllocated):
            g.not_allocated = False
        if reported:
            self.balancer.set_record(cid, reported)
        self.state.seen(cid, group)
        log.info("[Consumer Register] %s, isOverTLS=%s", cid, ctx.tls)
        if new_group:
            self._first_balance(group)
        return self._finish_consumer_reply(resp, req, auth, g)

    def consumer_heartbeat(self, req: master_pb.HeartRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.HeartResponseM2C(success=False)
        try:
            auth = self._auth(req, allow_token=True)
            cid, group = self._consumer_ids(req)
            self._check_standby(cid, ctx)
            g = self.state.lookup_group(group)
            self.state.touch_consumer(cid, group)
        except BadParam as exc:
            return _rejected(resp, exc)
        members = list(g.consumers)
        rebalance_id = req.event.rebalanceId if req.HasField("event") else META_VALUE_UNDEFINED
        reported = req.reportSubscribeInfo
        if reported:
            self.balancer.set_record(cid, self._parse_sub_infos(req.subscribeInfo))
        if rebalance_id > 0:
            g.not_allocated = False
            acked = self.balancer.ack_event(members, cid)
            log.info("[Event Processed] rebalanceId=%d, clientId=%s", rebalance_id, cid)
            if acked is not None and not reported:
                # the Java client always reports with the event; keep the record right for others
                self.balancer.apply_event(cid, acked)
        consumer = g.consumers.get(cid)
        event = self.balancer.next_event(members, cid) if consumer is not None else None
        if event is not None and consumer is not None:
            resp.event.rebalanceId = event.rebalance_id
            resp.event.opType = int(event.op_type)
            resp.event.subscribeInfo.extend(self._sub_info(consumer, p) for p in event.partitions)
        return self._finish_consumer_reply(resp, req, auth, g)

    def consumer_close(self, req: master_pb.CloseRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.CloseResponseM2C(success=False)
        try:
            self._auth(req, allow_token=True)
            cid, group = self._consumer_ids(req)
        except BadParam as exc:
            return _rejected(resp, exc)
        self._check_standby(cid, ctx)
        log.info("[Consumer Closed]%s@%s, isOverTLS=%s", cid, group, ctx.tls)
        self._release_consumer(cid, group)
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    # ---- consumer, client balance (methods 20-22)

    def consumer_register_v2(self, req: master_pb.RegisterRequestC2MV2, ctx: RpcContext) -> Message:
        resp = master_pb.RegisterResponseM2CV2()
        try:
            auth = self._auth(req, allow_token=False)
            cid, host, group = self._register_params(req)
            topics = self._check_consumer_topics(req.topicList)
            conds = parse_conditions(req.topicCondition)
            if req.sourceCount > 0 and not 0 <= req.nodeId <= req.sourceCount - 1:
                raise BadParam(
                    ErrorCode.BAD_REQUEST, "Request nodeId value must be between in [0, sourceCount-1]!"
                )
            self._check_standby(cid, ctx)
            check_filter_topics(cid, topics, conds)
            sub = req.subRepInfo
            assigned_time, meta_id = _reported_sub_ids(req)
            info = ConsumerInfo(
                cid,
                group,
                host,
                ctx.remote_host,
                ctx.tls,
                CONSUME_CLIENT_REB,
                topics,
                conds,
                source_count=req.sourceCount,
                node_id=req.nodeId,
                lst_assigned_time=assigned_time,
                topic_meta_info_id=meta_id,
            )
            self.state.add_consumer(info)
        except BadParam as exc:
            return _rejected(resp, exc)
        self.state.seen(cid, group)
        self.balancer.set_record(cid, self.topology.parse_part_sub_info(sub.partSubInfo) if sub.reportSubInfo else [])
        log.info("[Consumer Register] %s, isOverTLS=%s (client-balance)", cid, ctx.tls)
        return self._finish_client_balance_reply(resp, req, auth, ctx)

    def consumer_heartbeat_v2(self, req: master_pb.HeartRequestC2MV2, ctx: RpcContext) -> Message:
        resp = master_pb.HeartResponseM2CV2()
        try:
            auth, cid, g, consumer = self._live_member(req, ctx)
        except BadParam as exc:
            return _rejected(resp, exc)
        sub = req.subRepInfo
        consumer.lst_assigned_time, consumer.topic_meta_info_id = _reported_sub_ids(req)
        if sub.reportSubInfo:
            self.balancer.set_record(cid, self.topology.parse_part_sub_info(sub.partSubInfo))
        if (
            consumer.lst_assigned_time >= 0
            and self.balancer.record(cid)
            and _now_ms() - consumer.lst_assigned_time > MAX_META_FORCE_UPDATE_MS
        ):
            self._set_topic_meta(resp, g, consumer.topic_meta_info_id)
        return self._finish_client_balance_reply(resp, req, auth, ctx)

    def consumer_get_part_meta(self, req: master_pb.GetPartMetaRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.GetPartMetaResponseM2C()
        try:
            _auth, _cid, g, _consumer = self._live_member(req, ctx)
        except BadParam as exc:
            return _rejected(resp, exc)
        self._set_topic_meta(resp, g, req.topicMetaInfoId)
        self._set_broker_configs(resp, req.brokerConfigId, ctx.tls)
        resp.errCode, resp.errMsg = ErrorCode.SUCCESS, OK_MSG
        return resp

    def _release_consumer(self, cid: str, group: str) -> None:
        """Close or timeout: forget the member, its record and events; drop an empty group."""
        self.state.release_consumer(cid, group)
        self.balancer.remove_consumer(cid)

    # ---- admin views (master_views.py)

    @property
    def groups(self) -> dict[str, GroupInfo]:
        return self.state.groups

    @property
    def producers(self) -> dict[str, ProducerInfo]:
        return self.state.producers

    def group_names(self) -> list[str]:
        return master_views.group_names(self.state)

    def group_detail(self, group: str) -> dict[str, Any]:
        """``admin_query_consume_group_detail`` JSON for one group (captures s2/s3/s5 ``admin_api``)."""
        return master_views.group_detail(self.state, self.balancer, group)
