"""State and request helpers shared by the master's RPC handlers (``Master`` in ``master/__init__.py``).

Holds the master's collaborators (auth, tokens, groups, topology) and the checks and answer
fields every producer/consumer handler shares, so the handlers module reads as the RPC list.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.message import Message

from tubemq.codec import Partition, parse_subscribe_info
from tubemq.protocol import master_pb
from tubemq.protocol.constants import (
    EXC_STANDBY,
    META_MAX_BOOKED_TOPIC_COUNT,
    META_MAX_CLIENT_HOSTNAME_LENGTH,
    META_MAX_CLIENT_ID_LENGTH,
    META_MAX_GROUPNAME_LENGTH,
    META_VALUE_UNDEFINED,
    ErrorCode,
)

from ..auth import AuthResult, MasterAuthenticator, VisitTokenManager
from ..config import ServerConfig
from ..meta import BrokerEntry, MetaStore
from ..rpc import RpcContext, RpcException
from .balancer import ServerBalancer
from .groups import (
    BadParam,
    ConsumerInfo,
    GroupInfo,
    GroupRegistry,
    check_producer_topics,
    check_string,
    java_set,
)
from .topology import Topology

log = logging.getLogger("tubemq.server.master")

#: Client-balance: topic meta is pushed in V2 heartbeats when the client's copy is older (§5.5).
MAX_META_FORCE_UPDATE_MS = 180000

OK_MSG = "OK!"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _rejected(resp: Message, exc: BadParam) -> Message:
    """A request check failed: the answer carries its code and text (success stays false)."""
    resp.errCode, resp.errMsg = exc.code, exc.message
    return resp


def _reported_sub_ids(req: Any) -> tuple[int, int]:
    """(lstAssignedTime, topicMetaInfoId) a client-balance consumer reports; -2 where absent."""
    sub = req.subRepInfo
    assigned = sub.lstAssignedTime if sub.HasField("lstAssignedTime") else META_VALUE_UNDEFINED
    return assigned, sub.topicMetaInfoId if req.HasField("subRepInfo") else META_VALUE_UNDEFINED


class MasterBase:
    """The master's state and the checks/reply helpers its handlers share."""

    def __init__(self, config: ServerConfig, meta: MetaStore, broker: Any = None) -> None:
        self.config = config
        self.meta = meta
        self.broker = broker
        self._standby = bool(config.standby)
        self.auth = MasterAuthenticator(config.auth_enabled, config.auth_users,
                                        journal=config.data_dir / "auth_replay.journal")
        self.tokens = VisitTokenManager(config.visit_token_period_ms)
        self.balancer = ServerBalancer()
        self.state = GroupRegistry()
        self.topology = Topology(meta, config.default_max_msg_size)
        self._tasks: list[asyncio.Task[None]] = []
        self._last_meta_id = 0
        #: True while an active master must answer clients as a standby (a fenced pair member, fence.py)
        self.fenced: Callable[[], bool] | None = None

    # ---- public state

    @property
    def standby(self) -> bool:
        """True while this master answers every client call with StandbyException (§7.2)."""
        return self._standby

    @standby.setter
    def standby(self, value: bool) -> None:
        if bool(value) and not self._standby:
            self.reset_sessions()
        self._standby = bool(value)
        log.info("master is now %s", "standby" if self._standby else "active")

    def reset_sessions(self) -> None:
        """Forget producers, consumer groups and balance records (a master stepping down): clients
        register again wherever the active master is, and a later takeover must not balance partitions
        to members that left meanwhile."""
        self.state = GroupRegistry()
        self.balancer = ServerBalancer()

    def set_broker_online(self, broker_id: int, online: bool) -> None:
        """Mark a broker (un)available: offline brokers publish and serve no partitions."""
        self.topology.set_online(broker_id, online)

    def broker_seen(self, entry: BrokerEntry) -> None:
        self.topology.broker_seen(entry)

    def broker_online(self, broker_id: int) -> bool:
        return self.topology.online(broker_id)

    def broker_infos(self, tls: bool) -> list[str]:
        return self.topology.broker_infos(tls)

    def topic_infos(self, topics: Iterable[str]) -> list[str]:
        return self.topology.topic_infos(topics)

    def _fresh_topic_meta(self, g: GroupInfo) -> None:
        new = self.topology.topic_meta(g.topics)
        if new and new != g.topic_meta:
            g.topic_meta = new
            now = _now_ms()
            self._last_meta_id = now if now > self._last_meta_id else self._last_meta_id + 1
            g.topic_meta_id = self._last_meta_id

    # ---- helpers: common answer parts

    def _check_standby(self, client_id: str, ctx: RpcContext) -> None:
        if self._standby or (self.fenced is not None and self.fenced()):
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

    def _set_broker_configs(self, resp: Message, known_id: int, tls: bool) -> None:
        """The broker list travels only when the client's checksum is stale (§4.11)."""
        checksum = self.meta.broker_checksum
        resp.brokerConfigId = checksum
        if known_id != checksum:
            resp.brokerConfigList.extend(self.topology.broker_infos(tls))

    def _set_topic_meta(self, resp: Message, g: GroupInfo, known_id: int) -> None:
        """Client-balance topic meta: computed on first need, sent only when the client's id is stale."""
        if g.topic_meta_id == META_VALUE_UNDEFINED:
            self._fresh_topic_meta(g)
        resp.topicMetaInfoId = g.topic_meta_id
        if g.topic_meta_id != known_id:
            resp.topicMetaInfoList.extend(g.topic_meta.values())

    def _finish_client_balance_reply(self, resp: Message, req: Any, auth: AuthResult, ctx: RpcContext) -> Message:
        """Common tail of the client-balance register and heartbeat answers."""
        sub = req.subRepInfo
        self._set_broker_configs(
            resp, sub.brokerConfigId if req.HasField("subRepInfo") else META_VALUE_UNDEFINED, ctx.tls
        )
        resp.opsTaskInfo.SetInParent()  # capture s5: always present, empty without flow control
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.errCode, resp.errMsg = ErrorCode.SUCCESS, OK_MSG
        return resp

    def _finish_consumer_reply(self, resp: Message, req: Message, auth: AuthResult, g: GroupInfo) -> Message:
        """Common tail of the server-balance register and heartbeat answers."""
        if req.HasField("defFlowCheckId") or req.HasField("groupFlowCheckId"):
            self._set_flow_fields(resp)
        resp.authorizedInfo.CopyFrom(self._authorized_info(auth))
        resp.notAllocated = g.not_allocated
        resp.success, resp.errCode, resp.errMsg = True, ErrorCode.SUCCESS, OK_MSG
        return resp

    def _sub_info(self, consumer: ConsumerInfo, p: Partition) -> str:
        host, port = p.host, p.port
        if p.broker_id in self.meta.brokers:
            host, port = self.topology.broker_port(p.broker_id, consumer.over_tls)
        return (
            f"{consumer.consumer_id}@{consumer.group}#{p.broker_id}:{host}:{port}#{p.topic}:{p.partition_id}"
        )

    # ---- producer (methods 1-3)

    def _producer_params(self, req: Any, *, allow_token: bool) -> tuple[Any, str, str, set[str]]:
        """Checks 1-4 of §7.2 shared by producer register and heartbeat, in the real master's order."""
        auth = self._auth(req, allow_token=allow_token)
        pid = check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
        host = check_string("hostName", req.hostName, META_MAX_CLIENT_HOSTNAME_LENGTH)
        return auth, pid, host, check_producer_topics(req.topicList)

    def _auth(self, req: Message, *, allow_token: bool) -> AuthResult:
        cert = req.authInfo if req.HasField("authInfo") else master_pb.MasterCertificateInfo()
        result = self.auth.check(cert, allow_token=allow_token)
        if not result.ok:
            raise BadParam(result.err_code, result.message)
        return result

    def _check_consumer_topics(self, topic_list: Iterable[str]) -> frozenset[str]:
        items = list(topic_list)
        if not items:
            raise BadParam(ErrorCode.BAD_REQUEST, "Request miss necessary subscribed topicList data!")
        topics = {t.strip() for t in items if t.strip()}
        if not topics:
            raise BadParam(ErrorCode.BAD_REQUEST, "Request subscribed topicList data must not Blank!")
        if len(topics) > META_MAX_BOOKED_TOPIC_COUNT:
            raise BadParam(
                ErrorCode.BAD_REQUEST,
                f"Subscribed topicList size over max value, allowed max count is {META_MAX_BOOKED_TOPIC_COUNT}",
            )
        missing = [t for t in topics if not self.topology.deployed(t)]
        if missing:
            # capture s6b: the set is printed inside its own brackets: "[[x]]"
            raise BadParam(
                ErrorCode.TOPIC_NOT_DEPLOYED, f"Requested topic [{java_set(missing)}] not deployed!"
            )
        return frozenset(topics)

    @staticmethod
    def _consumer_ids(req: Any) -> tuple[str, str]:
        """clientId then groupName, checked in the real master's order."""
        cid = check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
        return cid, check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)

    @staticmethod
    def _register_params(req: Any) -> tuple[str, str, str]:
        """clientId, hostName, groupName of a consumer register, checked in the real master's order."""
        cid = check_string("clientId", req.clientId, META_MAX_CLIENT_ID_LENGTH)
        host = check_string("hostName", req.hostName, META_MAX_CLIENT_HOSTNAME_LENGTH)
        return cid, host, check_string("groupName", req.groupName, META_MAX_GROUPNAME_LENGTH)

    def _live_member(self, req: Any, ctx: RpcContext) -> tuple[AuthResult, str, GroupInfo, ConsumerInfo]:
        """Checks of a client-balance heartbeat or meta query; touches the member it finds."""
        auth = self._auth(req, allow_token=True)
        cid, group = self._consumer_ids(req)
        self._check_standby(cid, ctx)
        g, consumer = self.state.lookup_member(cid, group)
        self.state.touch_consumer(cid, group)
        return auth, cid, g, consumer

    def _parse_sub_infos(self, items: Iterable[str]) -> list[Partition]:
        """Reported subscribeInfo strings -> partitions; a malformed one fails the call like Java."""
        return [parse_subscribe_info(s).partition for s in items]
