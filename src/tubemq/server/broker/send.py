"""The broker's send handler (method 13).

A send is answered only after its data reached the store at the configured flush level
(``durability.SendDurability``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from typing import Any

from ... import codec
from ...protocol import broker_pb
from ...protocol import constants as C
from ...protocol.constants import ErrorCode as E
from ..rpc import RpcContext
from ..storage import encode_record, mem_cache_bytes
from .base import _JAVA_WS, BrokerBase, _partition_missing, _refusal, _text, _topic_missing
from .durability import write_failed

log = logging.getLogger("tubemq.server.broker")


async def _after_sync(ctx: RpcContext, fut: asyncio.Future[OSError | None], answer: Any) -> Any:
    """flush="always": the answer once the fsync covering the message succeeded, else the error."""
    error = await fut
    return answer if error is None else write_failed(ctx, error)


class SendHandlers(BrokerBase):
    """Method 13."""

    def send_message(self, req: Any, ctx: RpcContext) -> Any:
        fail = _refusal(broker_pb.SendMessageResponseB2P)
        (_, name), refused = self._opening(
            req, ctx, self.write_available, "Write StoreService temporary unavailable!", True, "clientId", "topicName"
        )
        if refused:
            return fail(*refused)
        if name == C.OFFSET_HISTORY_TOPIC:
            return fail(E.FORBIDDEN, f"topicName {name} does not allow producers to send data!")
        pid = req.partitionId
        target = self._send_targets.get((name, pid))
        if target is None:
            topic = self.catalog.topic(name)
            if topic is None:
                return fail(E.FORBIDDEN, _topic_missing(name))
            if topic.closed:
                return fail(E.FORBIDDEN, f"topicName {name} has been closed")
            if not topic.accept_publish:  # admin_modify_topic_info acceptPublish=false (cache cleared on change)
                return fail(E.FORBIDDEN, f"topicName {name} does not accept publish!")
            store = self.catalog.store_for(topic, pid)
            if store is None:
                return fail(E.FORBIDDEN, _partition_missing(name, pid))
            max_size = topic.effective_max_msg_size(self.config.default_max_msg_size)
            limit = max_size + C.META_MAX_MESSAGE_HEADER_SIZE
            store.set_cache_limits(mem_cache_bytes(max_size))
            target = (topic, store, limit)
            if len(self._send_targets) < 100000:
                self._send_targets[(name, pid)] = target
        topic, store, limit = target
        if store.closed:  # dropped under us (topic deleted): look it up again next time
            self._send_targets.pop((name, pid), None)
            return self.send_message(req, ctx)
        msg_type = _text(req.msgType).strip(_JAVA_WS) if req.HasField("msgType") else ""
        key_code = codec.java_hash(msg_type) if msg_type else -1
        data = req.data
        n = len(data)
        if n == 0:
            return fail(E.BAD_REQUEST, "data length is zero!")
        if n > limit:
            return fail(E.BAD_REQUEST, f"data length over max length, allowed max length is {limit}, data length is {n}")
        if self.faults.armed("send") and self.faults.take("send", _text(req.clientId), f"{name}:{pid}") is not None:
            return fail(E.SERVER_RECEIVE_OVERFLOW, f"Put message failed from {ctx.remote_host}, server receive message overflow!")
        crc = zlib.crc32(data) & 0x7FFFFFFF
        if req.checkSum != -1 and req.checkSum != crc:
            return fail(E.FORBIDDEN, f"Checksum msg data failure: {req.checkSum} of {name} not equal to the data's checksum of {crc}")
        if store.write_error is not None:
            refusal = store.refusal()
            if refusal is not None:  # the disk failed a moment ago: refuse at once, do not append
                return write_failed(ctx, refusal)
        now = int(time.time() * 1000)
        mid = self._next_message_id(now)
        try:
            offset = store.append(pid, encode_record(mid, crc, data, req.flag), key_code, now, n)
        except OSError as exc:  # a segment roll could not write or create its files
            return write_failed(ctx, exc)
        self.stores.mark_dirty(store)
        answer = broker_pb.SendMessageResponseB2P(
            success=True, errCode=E.SUCCESS, errMsg=str(mid), requireAuth=False, messageId=mid, appendTime=now, appendOffset=offset
        )
        if self.config.flush == "always":
            return _after_sync(ctx, self.durability.wait_sync(store, offset, store.batch), answer)
        self.durability.acknowledged(store.batch, ctx)  # answered with the error if the batch-end write fails
        return answer
