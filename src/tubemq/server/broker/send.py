"""The broker's send handler (method 13) and what makes an acknowledgement honest.

A send is answered only after its data reached the store at the configured flush level: with
``flush="interval"``/``"never"`` the answers of one read are written after the RPC batch-end hook
wrote the read's appends to the OS, and the hook replaces the acknowledgements of sends whose write
failed (``Broker.flush_pending``); with ``"always"`` a send waits for the group fsync that covers it. A write or
fsync that fails (a full disk) turns the answer into the real broker's 419 with the cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from typing import Any

from ... import codec
from ..._tasks import wait_for
from ...protocol import broker_pb
from ...protocol import constants as C
from ...protocol.constants import ErrorCode as E
from ..rpc import RpcContext
from ..storage import encode_record, mem_cache_bytes
from ..storage.manager import StoreManager
from .base import _JAVA_WS, BrokerBase, _partition_missing, _refusal, _text, _topic_missing

log = logging.getLogger("tubemq.server.broker")


def _write_failed(ctx: RpcContext, exc: OSError) -> Any:
    """The real broker answers 419 when its store refuses a message (MsgFileStore.appendMsg failing
    on an IOException); the cause is added so a full disk is named, not guessed."""
    return broker_pb.SendMessageResponseB2P(
        success=False,
        errCode=E.SERVER_RECEIVE_OVERFLOW,
        errMsg=f"Put message failed from {ctx.remote_host}, server receive message overflow! (store write failed: {exc})",
    )


async def _after_sync(ctx: RpcContext, fut: asyncio.Future[OSError | None], answer: Any) -> Any:
    """flush="always": the answer once the fsync covering the message succeeded, else the error."""
    error = await fut
    return answer if error is None else _write_failed(ctx, error)


class SendHandlers(BrokerBase):
    """Method 13 and the fsync loop of the flush policies."""

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
                return _write_failed(ctx, refusal)
        now = int(time.time() * 1000)
        mid = self._next_message_id(now)
        try:
            offset = store.append(pid, encode_record(mid, crc, data, req.flag), key_code, now, n)
        except OSError as exc:  # a segment roll could not write or create its files
            return _write_failed(ctx, exc)
        self.stores.mark_dirty(store)
        answer = broker_pb.SendMessageResponseB2P(
            success=True, errCode=E.SUCCESS, errMsg=str(mid), requireAuth=False, messageId=mid, appendTime=now, appendOffset=offset
        )
        if self.config.flush == "always":
            fut: asyncio.Future[OSError | None] = asyncio.get_running_loop().create_future()
            self._sync_waiters.append((store, offset, store.batch, fut))
            self.request_sync()
            return _after_sync(ctx, fut, answer)
        self._acks.append((store.batch, ctx))  # answered with the error if the batch-end write fails
        return answer

    async def _sync_loop(self) -> None:
        """fsync by policy: group commit for "always", a timer for "interval", nothing for "never".

        Each pass is woken by a send (always) or the timer; it never re-arms itself, so waiters whose
        data cannot be made durable are failed rather than spun on (issue 22 item 2)."""
        assert self._sync_wakeup is not None
        policy = self.config.flush
        interval = self.config.flush_interval_ms / 1000.0
        loop = asyncio.get_running_loop()
        while self._running:
            if policy == "always":
                await self._sync_wakeup.wait()
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await wait_for(self._sync_wakeup.wait(), interval)
            self._sync_wakeup.clear()
            if policy == "never":
                continue
            try:
                plan = self.stores.sync_plan()
                if plan:
                    self.stores.apply_synced(await loop.run_in_executor(None, StoreManager.run_sync, plan))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker fsync pass failed")
            self._release_sync_waiters()

    def _release_sync_waiters(self) -> None:
        """Answer the waiters whose fsync is done or whose data cannot be made durable."""
        keep = []
        for store, offset, batch, fut in self._sync_waiters:
            if fut.done():
                continue
            if store.closed:
                fut.set_exception(ConnectionError("store closed"))
            elif batch.error is not None:
                fut.set_result(batch.error)
            elif batch.written and store.synced_offset > offset:
                fut.set_result(None)
            elif batch.written and store.sync_error is not None and offset < store.sync_error[0]:
                fut.set_result(store.sync_error[1])
            else:
                keep.append((store, offset, batch, fut))  # written after this pass planned: next pass
        self._sync_waiters = keep

    def request_sync(self) -> None:
        if self._sync_wakeup is not None:
            self._sync_wakeup.set()
