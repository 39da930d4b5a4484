"""The broker's consumer register/unregister (method 15) and heartbeat (16) handlers.

Registrations live in ``BrokerBase.registrations`` (``registry.Registrations``); one idle longer than ``consumer_reg_timeout_ms`` expires
and its in-flight read is rolled back.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ... import codec
from ...protocol import broker_pb
from ...protocol import constants as C
from ...protocol.constants import ErrorCode as E
from ..rpc import RpcContext
from .base import (
    _JAVA_WS,
    _OK,
    _STORE_UNAVAILABLE,
    BrokerBase,
    Key,
    _precheck,
    _refusal,
    _text,
)
from .registry import Registration

log = logging.getLogger("tubemq.server.broker")


class SessionHandlers(BrokerBase):
    """Methods 15 and 16, and the expiry of idle registrations."""

    def register(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.RegisterResponseB2C
        fail = _refusal(resp, currOffset=-1)
        (cid, name), topic, refused = self._read_topic(req, ctx, _STORE_UNAVAILABLE, True, "clientId", "topicName")
        if topic is None:
            return fail(*refused)
        (group,), err = _precheck(req, "groupName")
        if err:
            return fail(E.BAD_REQUEST, err)
        pid = req.partitionId
        key: Key = (group, name, pid)
        part_str = f"{group}:{name}:{pid}"
        reg = self.registrations.get(key)
        if req.opType == C.MSG_OPTYPE_REGISTER:
            if reg is not None and reg.consumer_id != cid:
                if self.registrations.is_stale(reg):
                    # the stale owner is removed, but this attempt still fails (the next one succeeds)
                    self.registrations.remove(key)
                return fail(
                    E.PARTITION_OCCUPIED,
                    f"[Duplicated Register] Partition {self.config.broker_id}#{part_str} "
                    f"has been registered by {reg.consumer_id}",
                )
            filters = [_text(f).strip(_JAVA_WS) for f in req.filterCondStr]
            keys = frozenset(codec.java_hash(f) for f in filters if f) or None
            qry = req.qryPriorityId if req.HasField("qryPriorityId") else C.META_VALUE_UNDEFINED
            # like the real broker, the record is written before the partition is validated
            self.registrations.put(key, Registration(cid, keys, qry))
            store = self.catalog.store_for(topic, pid)
            if store is None:
                return fail(
                    E.INTERNAL_SERVER_ERROR,
                    f"Register broker failure!, exception is Wrong partition value {pid},"
                    f"valid partitions in (0,{topic.num_partitions - 1})",
                )
            lo, hi = store.min_offset, store.max_offset
            stored = self.offsets.get(*key)
            if stored is None:
                stored = lo if req.readStatus == C.READ_STATUS_NORMAL else hi
            if req.readStatus == C.READ_STATUS_FROM_MAX_ALWAYS:
                stored = hi
            elif req.HasField("currOffset") and req.currOffset >= 0:
                stored = min(max(req.currOffset, lo), hi)
            self.offsets.set(group, name, pid, stored)
            self.registrations.set_inflight(key, 0)
            return resp(success=True, errCode=E.SUCCESS, errMsg=_OK, currOffset=stored, maxOffset=hi)
        if req.opType == C.MSG_OPTYPE_UNREGISTER:
            if reg is None:
                return fail(E.HB_NO_NODE, f"UnRegistered Consumer {cid}, you have to register firstly!")
            if reg.consumer_id != cid:
                return fail(
                    E.DUPLICATE_PARTITION,
                    f"[Duplicated Request]Partition {part_str} has been consumed by {reg.consumer_id};"
                    f"Current consumer {cid}, broker={self.config.host}",
                )
            inflight = self.registrations.remove(key)
            if req.readStatus == 0 and inflight:
                committed = self.offsets.get(*key)
                if committed is not None:
                    self.offsets.set(group, name, pid, committed + inflight)
            # captures README item 2: a successful unregister answers currOffset -1, no maxOffset
            return resp(success=True, errCode=E.SUCCESS, errMsg=_OK, currOffset=-1)
        return fail(E.BAD_REQUEST, f"Invalid request:{req.opType}")

    def heartbeat(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.HeartBeatResponseB2C
        fail = _refusal(resp)
        (cid, group), refused = self._opening(
            req, ctx, self.read_available, _STORE_UNAVAILABLE, True, "clientId", "groupName"
        )
        if refused:
            return fail(*refused)
        failures: list[str] = []
        now = time.monotonic()
        qry = req.qryPriorityId if req.HasField("qryPriorityId") else None
        for text in req.partitionInfo:
            # a malformed string raises: the RPC layer answers InvocationTargetException like Java
            part = codec.parse_partition(_text(text))
            reg = self.registrations.get((group, part.topic, part.partition_id))
            if reg is None:
                failures.append(f"{C.ErrorCode.HB_NO_NODE.value}:{part}")
            elif reg.consumer_id != cid:
                failures.append(f"{C.ErrorCode.DUPLICATE_PARTITION.value}:{part}")
            else:
                reg.last_seen = now
                if qry is not None:
                    reg.qry_priority_id = qry
        return resp(
            success=True, errCode=E.SUCCESS, errMsg=_OK, hasPartFailure=bool(failures), failureInfo=failures, requireAuth=False
        )

    def reset_sessions(self) -> None:
        """Forget registrations and in-flight reads (a broker restart); committed offsets stay."""
        self.registrations.clear()
        self.offsets.save()

    def expire_registrations(self) -> int:
        """Drop registrations idle longer than consumer_reg_timeout_ms, rolling back in-flight reads."""
        return self.registrations.expire()
