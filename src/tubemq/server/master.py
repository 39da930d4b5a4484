"""The embedded master: producer/consumer sessions, server-side balancing, client-balance meta.

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
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from tubemq.codec import Partition, parse_subscribe_info
from tubemq.protocol import master_pb
from tubemq.protocol.constants import (
    ARRAY_SEP,
    ATTR_SEP,
    DEFAULT_BROKER_PORT,
    DEFAULT_BROKER_TLS_PORT,
    EXC_STANDBY,
    META_MAX_BOOKED_TOPIC_COUNT,
    META_MAX_CLIENT_HOSTNAME_LENGTH,
    META_MAX_CLIENT_ID_LENGTH,
    META_MAX_GROUPNAME_LENGTH,
    META_VALUE_UNDEFINED,
    OFFSET_HISTORY_TOPIC,
    SEGMENT_SEP,
    ErrorCode,
)

from .auth import AuthResult, MasterAuthenticator, VisitTokenManager
from .balancer import ServerBalancer
from .config import ServerConfig
from .meta import MetaStore, TopicConf
from .rpc import Handler, RpcContext, RpcException

log = logging.getLogger("tubemq.server.master")

#: Client-balance: topic meta is pushed in V2 heartbeats when the client's copy is older (§5.5).
MAX_META_FORCE_UPDATE_MS = 180000
#: Admin JSON constants seen in captures (``rebInfo``): default broker/client rate.
DEF_BROKER_CLIENT_RATE = 1000

CONSUME_UNBOUND = "unbound"
CONSUME_BOUND = "bound"
CONSUME_CLIENT_REB = "client-rebalance"

OK_MSG = "OK!"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def java_set(items: Iterable[str]) -> str:
    """``java.util.Set.toString()`` of strings (sorted here for determinism)."""
    return "[" + ", ".join(sorted(items)) + "]"


def java_conditions(conds: dict[str, frozenset[str]]) -> str:
    """``Map<String, TreeSet<String>>.toString()``, e.g. ``{cap_err=[typeA]}``."""
    return "{" + ", ".join(f"{t}={java_set(v)}" for t, v in sorted(conds.items())) + "}"


class _BadParam(Exception):
    """A failed parameter check: errCode + errMsg for the response (never leaves this module)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check_string(name: str, value: str, max_len: int) -> str:
    """PBParameterUtils.validStringParameter: trim, blank => 400, too long => 400 (capture texts)."""
    text = value.strip()
    if not text:
        raise _BadParam(ErrorCode.BAD_REQUEST, f"Request miss necessary {name} data!")
    if len(text) > max_len:
        raise _BadParam(
            ErrorCode.BAD_REQUEST, f"{name}'s length over max value, allowed max length is {max_len}"
        )
    return text


def _check_producer_topics(topics: Iterable[str]) -> set[str]:
    result: set[str] = set()
    for t in topics:
        t = t.strip()
        if not t:
            continue
        if t == OFFSET_HISTORY_TOPIC:
            raise _BadParam(
                ErrorCode.BAD_REQUEST,
                f"System Topic {OFFSET_HISTORY_TOPIC} does not allow client produce data!",
            )
        result.add(t)
    if len(result) > META_MAX_BOOKED_TOPIC_COUNT:
        raise _BadParam(
            ErrorCode.BAD_REQUEST,
            f"Booked topic's count over max value, allowed max count is {META_MAX_BOOKED_TOPIC_COUNT}",
        )
    return result


def _parse_conditions(items: Iterable[str]) -> dict[str, frozenset[str]]:
    """``topic#f1,f2`` items (DataConverterUtil.convertTopicConditions)."""
    conds: dict[str, set[str]] = {}
    for item in items:
        seg = item.split(SEGMENT_SEP)
        topic = seg[0].strip()
        if not topic:
            continue
        bucket = conds.setdefault(topic, set())
        if len(seg) > 1:
            bucket.update(f.strip() for f in seg[1].split(ARRAY_SEP) if f.strip())
    return {t: frozenset(v) for t, v in conds.items()}


@dataclass
class ProducerInfo:
    producer_id: str
    host: str
    topics: set[str]
    over_tls: bool
    last_seen: float


@dataclass
class ConsumerInfo:
    consumer_id: str
    group: str
    host: str
    remote_host: str
    over_tls: bool
    consume_type: str
    topics: frozenset[str]
    conditions: dict[str, frozenset[str]]
    session_key: str = ""
    source_count: int = META_VALUE_UNDEFINED
    node_id: int = META_VALUE_UNDEFINED
    select_big: bool = True
    lst_assigned_time: int = META_VALUE_UNDEFINED
    topic_meta_info_id: int = META_VALUE_UNDEFINED
    csm_from_max_ctrl_id: int = META_VALUE_UNDEFINED


@dataclass
class GroupInfo:
    name: str
    consume_type: str
    topics: frozenset[str]
    conditions: dict[str, frozenset[str]]
    consumers: dict[str, ConsumerInfo] = field(default_factory=dict)
    not_allocated: bool = True
    session_key: str = ""
    source_count: int = META_VALUE_UNDEFINED
    select_big: bool = True
    balanced: bool = False
    cur_client_rate: int = META_VALUE_UNDEFINED
    topic_meta_id: int = META_VALUE_UNDEFINED
    topic_meta: dict[str, str] = field(default_factory=dict)


class Master:
    """Master service: ``handlers()`` for the rpc layer, ``start()/stop()`` for its timers."""

    def __init__(self, config: ServerConfig, meta: MetaStore, broker: Any = None) -> None:
        self.config = config
        self.meta = meta
        self.broker = broker
        self._standby = bool(config.standby)
        self.auth = MasterAuthenticator(config.auth_enabled, config.auth_users)
        self.tokens = VisitTokenManager(config.visit_token_period_ms)
        self.balancer = ServerBalancer()
        self.producers: dict[str, ProducerInfo] = {}
        self.groups: dict[str, GroupInfo] = {}
        #: consumer heartbeat records keyed ``consumerId@group`` (HeartbeatManager), value = last seen.
        self._consumer_hb: dict[str, float] = {}
        self._offline_brokers: set[int] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_meta_id = 0

    # ---- public state

    @property
    def standby(self) -> bool:
        """True while this master answers every client call with StandbyException (§7.2)."""
        return self._standby

    @standby.setter
    def standby(self, value: bool) -> None:
        self._standby = bool(value)
        log.info("master is now %s", "standby" if self._standby else "active")

    def set_broker_online(self, broker_id: int, online: bool) -> None:
        """Mark a broker (un)available: offline brokers publish and serve no partitions."""
        if online:
            self._offline_brokers.discard(broker_id)
        else:
            self._offline_brokers.add(broker_id)

    def handlers(self) -> dict[int, Handler]:
        return {
            1: self.producer_register,
            2: self.producer_heartbeat,
            3: self.producer_close,
            4: self.consumer_register,
            5: self.consumer_heartbeat,
            6: self.consumer_close,
            20: self.consumer_register_v2,
            21: self.consumer_heartbeat_v2,
            22: self.consumer_get_part_meta,
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
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

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
            )
            / 4000,
        )
        while True:
            await asyncio.sleep(tick)
            try:
                self.expire(time.monotonic())
                if self.tokens.rotate_if_due():
                    log.debug("visit token rotated to %d", self.tokens.current)
            except Exception:
                log.exception("master housekeeping failed")

    def expire(self, now: float) -> None:
        """Drop producers and consumers whose heartbeats stopped (30 s by default, §5.1/§5.4)."""
        p_limit = self.config.producer_heartbeat_timeout_ms / 1000
        for pid, info in list(self.producers.items()):
            if now - info.last_seen > p_limit:
                log.info("[Producer Timeout] %s", pid)
                del self.producers[pid]
        c_limit = self.config.consumer_heartbeat_timeout_ms / 1000
        for key, seen in list(self._consumer_hb.items()):
            if now - seen > c_limit:
                log.info("[Consumer Timeout] %s", key)
                cid, _, group = key.partition("@")
                self._release_consumer(cid, group)

    def balance_round(self) -> int:
        """Run one balance round now (also done every ``balance_period_ms``); returns its rebalanceId."""
        server_groups: dict[str, tuple[list[str], list[Partition]]] = {}
        for g in self.groups.values():
            if g.consume_type == CONSUME_CLIENT_REB:
                self._fresh_topic_meta(g)
                continue
            members = list(g.consumers)
            server_groups[g.name] = (members, self._subscribable_partitions(g.topics))
        rid = self.balancer.run_round(server_groups)
        broker_count = max(1, len(self.meta.brokers))
        for name, (members, _parts) in server_groups.items():
            g = self.groups[name]
            if members and not g.balanced:
                g.balanced = True
                g.cur_client_rate = broker_count // len(members)
        return rid

    # ---- helpers: brokers, topics

    def _broker_online(self, broker_id: int) -> bool:
        return broker_id in self.meta.brokers and broker_id not in self._offline_brokers

    def broker_infos(self, tls: bool) -> list[str]:
        """All configured brokers, ``id:host:port`` or ``id:host: `` for the default port (§4.1)."""
        out = []
        for bid in sorted(self.meta.brokers):
            b = self.meta.brokers[bid]
            if tls:
                port = b.tls_port if b.tls_port is not None else DEFAULT_BROKER_TLS_PORT
                default = DEFAULT_BROKER_TLS_PORT
            else:
                port, default = b.port, DEFAULT_BROKER_PORT
            out.append(f"{bid}:{b.host}:{' ' if port == default else port}")
        return out

    def _broker_port(self, broker_id: int, tls: bool) -> tuple[str, int]:
        b = self.meta.brokers[broker_id]
        if tls:
            return b.host, b.tls_port if b.tls_port is not None else DEFAULT_BROKER_TLS_PORT
        return b.host, b.port

    def _topic_brokers(self, conf: TopicConf) -> list[int]:
        """Brokers a topic is deployed on: every broker of this one-store-per-broker cluster."""
        return sorted(self.meta.brokers)

    def topic_infos(self, topics: Iterable[str]) -> list[str]:
        """Producer topicInfos for the published topics that have publishable partitions (§4.2)."""
        default = self.config.default_max_msg_size
        out = []
        for name in sorted(set(topics)):
            conf = self.meta.get(name)
            if conf is None or conf.closed or not conf.accept_publish:
                continue
            items = [
                f"{bid}{ATTR_SEP}{conf.num_partitions}{ATTR_SEP}{conf.num_stores}"
                for bid in self._topic_brokers(conf)
                if self._broker_online(bid)
            ]
            if not items:
                continue
            size = conf.effective_max_msg_size(default)
            # capture s1/s6b: the size segment is empty for default-size topics
            size_text = "" if size == default else str(size)
            out.append(f"{name}{SEGMENT_SEP}{ARRAY_SEP.join(items)}{SEGMENT_SEP}{size_text}")
        return out

    def _subscribable_partitions(self, topics: Iterable[str]) -> list[Partition]:
        parts: list[Partition] = []
        for name in sorted(topics):
            conf = self.meta.get(name)
            if conf is None or conf.closed or not conf.accept_subscribe:
                continue
            for bid in self._topic_brokers(conf):
                if not self._broker_online(bid):
                    continue
                host, port = self._broker_port(bid, False)
                parts.extend(Partition(bid, host, port, name, pid) for pid in conf.partition_ids())
        return parts

    def _topic_meta(self, topics: Iterable[str]) -> dict[str, str]:
        """Client-balance ``topic#bid:stores:parts:status`` per topic (§4.2, capture s5)."""
        result = {}
        for name in sorted(topics):
            conf = self.meta.get(name)
            if conf is None:
                continue
            items = []
            for bid in self._topic_brokers(conf):
                status = int(self._broker_online(bid) and conf.accept_subscribe and not conf.closed)
                items.append(f"{bid}:{conf.num_stores}:{conf.num_partitions}:{status}")
            if items:
                result[name] = f"{name}{SEGMENT_SEP}{ARRAY_SEP.join(items)}"
        return result

    def _fresh_topic_meta(self, g: GroupInfo) -> None:
        new = self._topic_meta(g.topics)
        if new and new != g.topic_meta:
            g.topic_meta = new
            now = _now_ms()
            self._last_meta_id = now if now > self._last_meta_id else self._last_meta_id + 1
            g.topic_meta_id = self._last_meta_id

    def _deployed(self, name: str) -> bool:
        return self.meta.get(name) is not None

    def _partition_from_key(self, broker_id: int, topic: str, partition_id: int) -> Partition | None:
        if broker_id not in self.meta.brokers:
            return None
        host, port = self._broker_port(broker_id, False)
        return Partition(broker_id, host, port, topic, partition_id)

    def _parse_part_sub_info(self, items: Iterable[str]) -> list[Partition]:
        """V2 ``partSubInfo`` ``topic#brokerId:partitionId,...`` -> partitions (unknown brokers skipped)."""
        parts = []
        for item in items:
            seg = item.split(SEGMENT_SEP)
            if len(seg) < 2 or not seg[0].strip():
                continue
            for kv in seg[1].split(ARRAY_SEP):
                bits = kv.split(ATTR_SEP)
                if len(bits) != 2:
                    continue
                try:
                    bid, pid = int(bits[0]), int(bits[1])
                except ValueError:
                    continue
                p = self._partition_from_key(bid, seg[0].strip(), pid)
                if p is not None:
                    parts.append(p)
        return parts

    # ---- helpers: common answer parts

    def _check_standby(self, client_id: str, ctx: RpcContext) -> None:
        if self._standby:
            raise RpcException(
                EXC_STANDBY,
                f"{self.config.host}:{ctx.local_port} is not master now. the connecting client id is {client_id}",
            )

    def _authorized_info(self, auth: AuthResult) -> master_pb.MasterAuthorizedInfo:
        info = master_pb.MasterAuthorizedInfo(visitAuthorizedToken=self.tokens.current)
        token = auth.authorized_token
        if self.auth.enabled and not token:
            token = self.auth.issue_token(auth.user_name)
        if token:
            info.authAuthorizedToken = token
        return info

    def _approved_config(self, request: Message) -> master_pb.ApprovedClientConfig:
        # Java getters never return null: an absent appdConfig reads as configId 0
        in_id = request.appdConfig.configId if request.HasField("appdConfig") else 0
        out = master_pb.ApprovedClientConfig(configId=self.meta.config_id)
        if in_id != self.meta.config_id:
            out.maxMsgSize = self.config.default_max_msg_size
        return out

    @staticmethod
    def _set_flow_fields(resp: Message) -> None:
        resp.defFlowCheckId = META_VALUE_UNDEFINED
        resp.defFlowControlInfo = " "
        resp.groupFlowCheckId = META_VALUE_UNDEFINED
        resp.groupFlowControlInfo = " "
        resp.ssdStoreId = META_VALUE_UNDEFINED
        resp.qryPriorityId = META_VALUE_UNDEFINED

    def _sub_info(self, consumer: ConsumerInfo, p: Partition) -> str:
        host, port = p.host, p.port
        if p.broker_id in self.meta.brokers:
            host, port = self._broker_port(p.broker_id, consumer.over_tls)
        return (
            f"{consumer.consumer_id}@{consumer.group}#{p.broker_id}:{host}:{port}#{p.topic}:{p.partition_id}"
        )

    # ---- producer (methods 1-3)

    def _producer_params(self, req: Any, *, allow_token: bool) -> tuple[Any, str, str, set[str]]:
        """Checks 1-4 of §7.2 shared by producer register and heartbeat, in the real master's order."""
        auth = self._auth(req, allow_token=allow_token)
        pid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
        host = _check_string("hostName", req.hostName, META_MAX_CLIENT_HOSTNAME_LENGTH)
        return auth, pid, host, _check_producer_topics(req.topicList)

    def producer_register(self, req: master_pb.RegisterRequestP2M, ctx: RpcContext) -> Message:
        resp = master_pb.RegisterResponseM2P(success=False, brokerCheckSum=-1)
        try:
            auth, pid, host, topics = self._producer_params(req, allow_token=False)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        self._check_standby(pid, ctx)
        self.producers[pid] = ProducerInfo(pid, host, topics, ctx.tls, time.monotonic())
        log.info("[Producer Register] %s, isOverTLS=%s", pid, ctx.tls)
        resp.brokerCheckSum = self.meta.broker_checksum
        resp.brokerInfos.extend(self.broker_infos(ctx.tls))
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.appdConfig.CopyFrom(self._approved_config(req))
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def producer_heartbeat(self, req: master_pb.HeartRequestP2M, ctx: RpcContext) -> Message:
        resp = master_pb.HeartResponseM2P(success=False, brokerCheckSum=-1)
        try:
            auth, pid, host, topics = self._producer_params(req, allow_token=True)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        self._check_standby(pid, ctx)
        info = self.producers.get(pid)
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
            resp.brokerInfos.extend(self.broker_infos(ctx.tls))
        resp.topicInfos.extend(self.topic_infos(topics))
        resp.appdConfig.CopyFrom(self._approved_config(req))
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def producer_close(self, req: master_pb.CloseRequestP2M, ctx: RpcContext) -> Message:
        resp = master_pb.CloseResponseM2P(success=False)
        try:
            self._auth(req, allow_token=False)
            pid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        self._check_standby(pid, ctx)
        if self.producers.pop(pid, None) is not None:
            log.info("[Producer Closed] %s, isOverTLS=%s", pid, ctx.tls)
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def _auth(self, req: Message, *, allow_token: bool) -> AuthResult:
        cert = req.authInfo if req.HasField("authInfo") else master_pb.MasterCertificateInfo()
        result = self.auth.check(cert, allow_token=allow_token)
        if not result.ok:
            raise _BadParam(result.err_code, result.message)
        return result

    # ---- consumer, server balance (methods 4-6)

    def _check_consumer_topics(self, topic_list: Iterable[str]) -> frozenset[str]:
        items = list(topic_list)
        if not items:
            raise _BadParam(ErrorCode.BAD_REQUEST, "Request miss necessary subscribed topicList data!")
        topics = {t.strip() for t in items if t.strip()}
        if not topics:
            raise _BadParam(ErrorCode.BAD_REQUEST, "Request subscribed topicList data must not Blank!")
        if len(topics) > META_MAX_BOOKED_TOPIC_COUNT:
            raise _BadParam(
                ErrorCode.BAD_REQUEST,
                f"Subscribed topicList size over max value, allowed max count is {META_MAX_BOOKED_TOPIC_COUNT}",
            )
        missing = [t for t in topics if not self._deployed(t)]
        if missing:
            # capture s6b: the set is printed inside its own brackets: "[[x]]"
            raise _BadParam(
                ErrorCode.TOPIC_NOT_DEPLOYED, f"Requested topic [{java_set(missing)}] not deployed!"
            )
        return frozenset(topics)

    @staticmethod
    def _check_required_partitions(topics: frozenset[str], text: str) -> None:
        """Bound consumption ``requiredPartition`` syntax (PBParameterUtils.checkConsumerOffsetSetInfo)."""
        if not text.strip():
            return
        for item in text.strip().split(ARRAY_SEP):
            kv = item.split("=")
            fmt = f"[Parameter error] unformatted Partition-Offset value : {item} must be aa:bbb:ccc=val1,ddd:eee:ff=val2"
            if len(kv) == 1:
                raise _BadParam(ErrorCode.BAD_REQUEST, fmt)
            key = kv[0].strip().split(ATTR_SEP)
            if len(key) != 3:
                raise _BadParam(ErrorCode.BAD_REQUEST, fmt)
            if key[1].strip() not in topics:
                raise _BadParam(
                    ErrorCode.BAD_REQUEST,
                    f"[Parameter error] wrong offset reset for unsubscribed topic: reset item is {item}, "
                    f"request topicList are {java_set(topics)}",
                )
            try:
                int(kv[1].strip())
            except ValueError:
                raise _BadParam(
                    ErrorCode.BAD_REQUEST, f"[Parameter error] required long type value of {item}' Offset!"
                ) from None

    @staticmethod
    def _check_filter_topics(
        consumer_id: str, topics: frozenset[str], conds: dict[str, frozenset[str]]
    ) -> None:
        stray = [t for t in conds if t not in topics]
        if stray:
            raise _BadParam(ErrorCode.BAD_REQUEST, f"Filter's Topic not subscribed :{java_set(stray)}")

    def _add_consumer(self, info: ConsumerInfo) -> GroupInfo:
        """ConsumerInfoHolder.addConsumer: the first member fixes the group; later ones must match."""
        g = self.groups.get(info.group)
        if g is None or not g.consumers:
            g = GroupInfo(info.group, info.consume_type, info.topics, dict(info.conditions))
            if info.consume_type == CONSUME_BOUND:
                g.session_key, g.source_count, g.select_big = (
                    info.session_key,
                    info.source_count,
                    info.select_big,
                )
            elif info.consume_type == CONSUME_CLIENT_REB:
                g.source_count = info.source_count
            self.groups[info.group] = g
            g.consumers[info.consumer_id] = info
            return g
        self._valid_consumer(g, info)
        g.consumers[info.consumer_id] = info  # a re-register of a member updates it
        return g

    @staticmethod
    def _valid_consumer(g: GroupInfo, c: ConsumerInfo) -> None:
        """ConsumeGroupInfo.validConsumerInfo texts (424-430)."""
        head = f"[Inconsistency subscribe] {c.consumer_id}"
        if c.consume_type != g.consume_type:
            raise _BadParam(
                ErrorCode.CLIENT_INCONSISTENT_CONSUMETYPE,
                f"{head} using {c.consume_type} subscribe is inconsistency with other consumers using "
                f"{g.consume_type} subscribe in the group",
            )
        if g.topics and g.topics != c.topics:
            raise _BadParam(
                ErrorCode.CLIENT_INCONSISTENT_TOPICSET,
                f"{head} subscribed topics {java_set(c.topics)} is inconsistency with other consumers in the "
                f"group, existedTopics: {java_set(g.topics)}",
            )
        if not g.conditions:
            if c.conditions:
                raise _BadParam(
                    ErrorCode.CLIENT_INCONSISTENT_FILTERSET,
                    f"{head} subscribe with filter condition {java_conditions(c.conditions)} is inconsistency "
                    "with other consumers in the group: topic without conditions",
                )
        elif not c.conditions:
            raise _BadParam(
                ErrorCode.CLIENT_INCONSISTENT_FILTERSET,
                f"{head} subscribe without filter condition  is inconsistency with other consumers in the "
                f"group, existed topic conditions is {java_conditions(g.conditions)}",
            )
        elif g.conditions != c.conditions:
            raise _BadParam(
                ErrorCode.CLIENT_INCONSISTENT_FILTERSET,
                f"{head} subscribe with filter condition {java_conditions(c.conditions)} is inconsistency with "
                f"other consumers in the group, existed topic conditions is {java_conditions(g.conditions)}",
            )
        if g.consume_type == CONSUME_BOUND:
            if g.session_key != c.session_key:
                raise _BadParam(
                    ErrorCode.CLIENT_INCONSISTENT_SESSIONKEY,
                    f"{head}'s sessionKey is inconsistency with other consumers in the group, required is "
                    f"{g.session_key}, request is {c.session_key}",
                )
            if g.select_big != c.select_big:
                raise _BadParam(
                    ErrorCode.CLIENT_INCONSISTENT_SELECTBIG,
                    f"{head}'s isSelectBig is inconsistency with other consumers in the group, required is "
                    f"{str(g.select_big).lower()}, request is {str(c.select_big).lower()}",
                )
            if g.source_count != c.source_count:
                raise _BadParam(
                    ErrorCode.CLIENT_INCONSISTENT_SOURCECOUNT,
                    f"{head}'s sourceCount is inconsistency with other consumers in the group, required is "
                    f"{g.source_count}, request is {c.source_count}",
                )
        elif g.consume_type == CONSUME_CLIENT_REB and g.source_count > 0:
            if g.source_count != c.source_count:
                raise _BadParam(
                    ErrorCode.CLIENT_INCONSISTENT_SOURCECOUNT,
                    f"{head}'s sourceCount is inconsistency with other consumers in the group, required is "
                    f"{g.source_count}, request is {c.source_count}",
                )
            for other in g.consumers.values():
                if other.node_id == c.node_id and other.consumer_id != c.consumer_id:
                    raise _BadParam(
                        ErrorCode.CLIENT_DUPLICATE_INDEXID,
                        f"{head}'s nodeId value({c.node_id}) is occupied by {other.consumer_id}'s nodeId "
                        f"value({other.node_id}) in the group!",
                    )

    def _parse_sub_infos(self, items: Iterable[str]) -> list[Partition]:
        """Reported subscribeInfo strings -> partitions; a malformed one fails the call like Java."""
        return [parse_subscribe_info(s).partition for s in items]

    def consumer_register(self, req: master_pb.RegisterRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.RegisterResponseM2C(success=False)
        try:
            auth = self._auth(req, allow_token=False)
            cid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
            host = _check_string("hostName", req.hostName, META_MAX_CLIENT_HOSTNAME_LENGTH)
            group = _check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)
            topics = self._check_consumer_topics(req.topicList)
            conds = _parse_conditions(req.topicCondition)
            bound = req.HasField("requireBound") and req.requireBound
            if bound:
                self._check_required_partitions(topics, req.requiredPartition)
                if not req.sessionKey.strip():
                    raise _BadParam(ErrorCode.BAD_REQUEST, "[Parameter error] blank value of sessionKey!")
                if not req.HasField("totalCount") or req.totalCount <= 0:
                    raise _BadParam(
                        ErrorCode.BAD_REQUEST, "[Parameter error] totalSourceCount must over zero!"
                    )
            reported = self._parse_sub_infos(req.subscribeInfo)
            self._check_standby(cid, ctx)
            self._check_filter_topics(cid, topics, conds)
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
            )
            g = self._add_consumer(info)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        if reported or (req.HasField("notAllocated") and not req.notAllocated):
            g.not_allocated = False
        if reported:
            self.balancer.set_record(cid, reported)
        self._consumer_hb[f"{cid}@{group}"] = time.monotonic()
        log.info("[Consumer Register] %s, isOverTLS=%s", cid, ctx.tls)
        if req.HasField("defFlowCheckId") or req.HasField("groupFlowCheckId"):
            self._set_flow_fields(resp)
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.notAllocated = g.not_allocated
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def _heartbeat_lookup(self, cid: str, group: str) -> GroupInfo:
        g = self.groups.get(group)
        if g is None:
            raise _BadParam(ErrorCode.HB_NO_NODE, f"Not found groupName {group} in holder!")
        return g

    def _touch_consumer(self, cid: str, group: str) -> None:
        key = f"{cid}@{group}"
        if key not in self._consumer_hb:
            raise _BadParam(
                ErrorCode.HB_NO_NODE,
                f"Update consumer node exception:Invalid node id:{key}, you have to append node first!",
            )
        self._consumer_hb[key] = time.monotonic()

    def consumer_heartbeat(self, req: master_pb.HeartRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.HeartResponseM2C(success=False)
        try:
            auth = self._auth(req, allow_token=True)
            cid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
            group = _check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)
            self._check_standby(cid, ctx)
            g = self._heartbeat_lookup(cid, group)
            self._touch_consumer(cid, group)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
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
        if req.HasField("defFlowCheckId") or req.HasField("groupFlowCheckId"):
            self._set_flow_fields(resp)
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.notAllocated = g.not_allocated
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def consumer_close(self, req: master_pb.CloseRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.CloseResponseM2C(success=False)
        try:
            self._auth(req, allow_token=True)
            cid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
            group = _check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        self._check_standby(cid, ctx)
        log.info("[Consumer Closed]%s@%s, isOverTLS=%s", cid, group, ctx.tls)
        self._release_consumer(cid, group)
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def _release_consumer(self, cid: str, group: str) -> None:
        """Close or timeout: forget the member, its record and events; drop an empty group."""
        self._consumer_hb.pop(f"{cid}@{group}", None)
        g = self.groups.get(group)
        if g is not None:
            g.consumers.pop(cid, None)
            if not g.consumers:
                del self.groups[group]
        self.balancer.remove_consumer(cid)

    # ---- consumer, client balance (methods 20-22)

    def consumer_register_v2(self, req: master_pb.RegisterRequestC2MV2, ctx: RpcContext) -> Message:
        resp = master_pb.RegisterResponseM2CV2()
        try:
            auth = self._auth(req, allow_token=False)
            cid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
            host = _check_string("hostName", req.hostName, META_MAX_CLIENT_HOSTNAME_LENGTH)
            group = _check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)
            topics = self._check_consumer_topics(req.topicList)
            conds = _parse_conditions(req.topicCondition)
            if req.sourceCount > 0 and not 0 <= req.nodeId <= req.sourceCount - 1:
                raise _BadParam(
                    ErrorCode.BAD_REQUEST, "Request nodeId value must be between in [0, sourceCount-1]!"
                )
            self._check_standby(cid, ctx)
            self._check_filter_topics(cid, topics, conds)
            sub = req.subRepInfo
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
                lst_assigned_time=sub.lstAssignedTime
                if sub.HasField("lstAssignedTime")
                else META_VALUE_UNDEFINED,
                topic_meta_info_id=sub.topicMetaInfoId
                if req.HasField("subRepInfo")
                else META_VALUE_UNDEFINED,
            )
            self._add_consumer(info)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        self._consumer_hb[f"{cid}@{group}"] = time.monotonic()
        self.balancer.set_record(cid, self._parse_part_sub_info(sub.partSubInfo) if sub.reportSubInfo else [])
        log.info("[Consumer Register] %s, isOverTLS=%s (client-balance)", cid, ctx.tls)
        checksum = self.meta.broker_checksum
        resp.brokerConfigId = checksum
        client_id = sub.brokerConfigId if req.HasField("subRepInfo") else META_VALUE_UNDEFINED
        if client_id != checksum:
            resp.brokerConfigList.extend(self.broker_infos(ctx.tls))
        resp.opsTaskInfo.SetInParent()  # capture s5: always present, empty without flow control
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.errCode, resp.errMsg = ErrorCode.SUCCESS, OK_MSG
        return resp

    def _v2_lookup(self, cid: str, group: str) -> tuple[GroupInfo, ConsumerInfo]:
        g = self._heartbeat_lookup(cid, group)
        consumer = g.consumers.get(cid)
        if consumer is None:
            raise _BadParam(ErrorCode.HB_NO_NODE, f"Not found client {cid} in group({group})")
        return g, consumer

    def consumer_heartbeat_v2(self, req: master_pb.HeartRequestC2MV2, ctx: RpcContext) -> Message:
        resp = master_pb.HeartResponseM2CV2()
        try:
            auth = self._auth(req, allow_token=True)
            cid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
            group = _check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)
            self._check_standby(cid, ctx)
            g, consumer = self._v2_lookup(cid, group)
            self._touch_consumer(cid, group)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        sub = req.subRepInfo
        has_sub = req.HasField("subRepInfo")
        consumer.lst_assigned_time = (
            sub.lstAssignedTime if sub.HasField("lstAssignedTime") else META_VALUE_UNDEFINED
        )
        consumer.topic_meta_info_id = sub.topicMetaInfoId if has_sub else META_VALUE_UNDEFINED
        if sub.reportSubInfo:
            self.balancer.set_record(cid, self._parse_part_sub_info(sub.partSubInfo))
        checksum = self.meta.broker_checksum
        resp.brokerConfigId = checksum
        if (sub.brokerConfigId if has_sub else META_VALUE_UNDEFINED) != checksum:
            resp.brokerConfigList.extend(self.broker_infos(ctx.tls))
        if (
            consumer.lst_assigned_time >= 0
            and self.balancer.record(cid)
            and _now_ms() - consumer.lst_assigned_time > MAX_META_FORCE_UPDATE_MS
        ):
            if g.topic_meta_id == META_VALUE_UNDEFINED:
                self._fresh_topic_meta(g)
            resp.topicMetaInfoId = g.topic_meta_id
            if g.topic_meta_id != consumer.topic_meta_info_id:
                resp.topicMetaInfoList.extend(g.topic_meta.values())
        resp.opsTaskInfo.SetInParent()
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.errCode, resp.errMsg = ErrorCode.SUCCESS, OK_MSG
        return resp

    def consumer_get_part_meta(self, req: master_pb.GetPartMetaRequestC2M, ctx: RpcContext) -> Message:
        resp = master_pb.GetPartMetaResponseM2C()
        try:
            self._auth(req, allow_token=True)
            cid = _check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
            group = _check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)
            self._check_standby(cid, ctx)
            g, _consumer = self._v2_lookup(cid, group)
            self._touch_consumer(cid, group)
        except _BadParam as exc:
            resp.errCode, resp.errMsg = exc.code, exc.message
            return resp
        if g.topic_meta_id == META_VALUE_UNDEFINED:
            self._fresh_topic_meta(g)
        resp.topicMetaInfoId = g.topic_meta_id
        if g.topic_meta_id != req.topicMetaInfoId:
            resp.topicMetaInfoList.extend(g.topic_meta.values())
        checksum = self.meta.broker_checksum
        resp.brokerConfigId = checksum
        if req.brokerConfigId != checksum:
            resp.brokerConfigList.extend(self.broker_infos(ctx.tls))
        resp.errCode, resp.errMsg = ErrorCode.SUCCESS, OK_MSG
        return resp

    # ---- admin views

    def group_names(self) -> list[str]:
        return sorted(self.groups)

    def group_detail(self, group: str) -> dict[str, Any]:
        """``admin_query_consume_group_detail`` JSON for one group (captures s2/s3/s5 ``admin_api``)."""
        g = self.groups.get(group)
        out: dict[str, Any] = {"result": True, "errCode": 0, "errMsg": "OK"}
        if g is None:
            out.update(count=0, topicSet=[], consumeGroup=group)
            out["re-rebalance"] = {}
            out.update(
                isBandConsume=CONSUME_UNBOUND, rebInfo={"isRebalanced": False}, filterConds={}, data=[]
            )
            return out
        out.update(count=len(g.consumers), topicSet=sorted(g.topics), consumeGroup=group)
        out["re-rebalance"] = {}
        out["isBandConsume"] = g.consume_type
        if g.consume_type == CONSUME_CLIENT_REB:
            out["topicMetaId"] = g.topic_meta_id
            out["metaDetails"] = list(g.topic_meta.values())
            out["rebInfo"] = {"isRebalanced": False}
        elif g.balanced:
            out["rebInfo"] = {
                "isRebalanced": True,
                "checkPasted": True,
                "defBClientRate": DEF_BROKER_CLIENT_RATE,
                "confBClientRate": META_VALUE_UNDEFINED,
                "curBClientRate": g.cur_client_rate,
            }
        else:
            out["rebInfo"] = {"isRebalanced": False}
        out["filterConds"] = {t: sorted(v) for t, v in sorted(g.conditions.items())}
        data = []
        for c in g.consumers.values():
            item: dict[str, Any] = {
                "consumerId": c.consumer_id,
                "receivedFrom": c.remote_host,
                "isOverTLS": c.over_tls,
            }
            if g.consume_type == CONSUME_CLIENT_REB:
                item["sourceCount"] = c.source_count
                item["nodeId"] = c.node_id
            parts = self.balancer.record(c.consumer_id)
            item["parCount"] = len(parts)
            item["parInfo"] = [
                {
                    "partId": p.partition_id,
                    "brokerAddr": f"{p.broker_id}:{p.host}:{p.port}",
                    "topicName": p.topic,
                }
                for p in parts
            ]
            data.append(item)
        out["data"] = data
        return out
