"""The broker's getMessage (method 17) and commit (18) handlers.

Where a read looks (files or the memory cache) and where it stops follow the real
MessageStore.getMessages, MsgFileStore.getMessages and MsgMemStore.getMessages (``_read``):
captures s2, s3, s4, s5 and s6c are replayed with every fetch matching
(tests/server/test_capture_replay.py). Offsets follow DefaultOffsetManager (``_book``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from ...protocol import broker_pb
from ...protocol import constants as C
from ...protocol.constants import ErrorCode as E
from ..meta import TopicConf
from ..rpc import RpcContext, RpcException
from ..storage import MessageStore
from .base import (
    _OK,
    _STORE_UNAVAILABLE,
    BrokerBase,
    Key,
    _clamp,
    _int32,
    _partition_missing,
    _refusal,
)
from .registry import Registration

log = logging.getLogger("tubemq.server.broker")

_FETCH_HEAD = broker_pb.GetMessageResponseB2C(success=True, errCode=E.SUCCESS, errMsg=_OK).SerializeToString()
#: TServerConstants.CFG_DEFAULT_CONSUME_RULE: the qryPriorityId used when neither the consumer nor the
#: cluster sets one (the Java client sends -2)
_DEFAULT_QRY_PRIORITY = 300
#: BrokerConfig.indexTransCount: index entries per partition one read may load (see _read)
_INDEX_TRANS_COUNT = 1000


@dataclass(slots=True, eq=False)
class _Read:
    """Outcome of one store read: a 404 text (``status``) or what a successful answer carries."""

    chunks: list[bytes]
    count: int
    scanned: int
    data_max: int
    last_rd: int
    max_offset: int
    slow: bool
    status: str = ""

    @classmethod
    def miss(cls, status: str, data_max: int, scanned: int = 0) -> _Read:
        """A 404 of the store; its minLimitTime is the data max (the result's data offset is 0)."""
        return cls([], 0, scanned, data_max, 0, -1, False, status)


async def _after_commit_sync(group: str, fut: asyncio.Future[OSError | None], answer: Any) -> Any:
    """flush="always": the commit's answer once its journal entry is on disk, else an exception answer
    (the client then does not report the batch committed)."""
    error = await fut
    if error is not None:
        raise RpcException(C.EXC_JAVA_EXCEPTION, f"the commit of group {group!r} was not saved: {error}")
    return answer


class FetchHandlers(BrokerBase):
    """Methods 17 and 18."""

    def get_message(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.GetMessageResponseB2C

        def fail(code: int, msg: str, min_limit: int = 0) -> Any:
            return resp(
                success=False, errCode=code, errMsg=msg, currOffset=-1, minLimitTime=min_limit, escFlowCtrl=False, currDataDlt=-1
            )

        (cid, group, name), topic, refused = self._read_topic(
            req, ctx, "Read StoreService temporary unavailable!", False, "clientId", "groupName", "topicName"
        )
        if topic is None:
            return fail(*refused)
        pid = req.partitionId
        key: Key = (group, name, pid)
        reg = self.registrations.get(key)
        if reg is None:
            return fail(E.HB_NO_NODE, f"UnRegistered Consumer:{cid}, you have to register firstly!")
        if reg.consumer_id != cid:
            return fail(
                412,
                f"[Duplicated Request] Partition={group}:{name}:{pid} of Broker={self.config.broker_id} "
                f"has been consumed by {reg.consumer_id};Current consumer {cid}",
            )
        reg.last_seen = time.monotonic()
        if self.faults.armed("fetch"):
            fault = self.faults.take("fetch", cid, f"{name}:{pid}")
            if fault is not None and fault.code == E.SERVER_CONSUME_SPEED_LIMIT:
                return fail(E.SERVER_CONSUME_SPEED_LIMIT, "Consumer read speed limited!", fault.min_limit_ms)
            if fault is not None:
                return fail(E.MOVED, f"The requested offset of {name}:{pid} has been moved!", -1)
        if topic.closed:
            return fail(E.FORBIDDEN, f"topicName {name} has been closed")
        store = self.catalog.store_for(topic, pid)
        if store is None:
            return fail(E.INTERNAL_SERVER_ERROR, f"Get the store of topic {name} in partition {pid} failure!")
        committed = self._offset(key, store)
        inflight = self.registrations.inflight(key)
        manual = req.manualCommitOffset
        # DefaultOffsetManager.getOffset: lastPackConsumed commits the in-flight delta first; without it
        # the delta stays (the read below overwrites it unless it scans nothing)
        if manual:
            start = committed + inflight
        else:
            if req.lastPackConsumed and inflight:
                committed += inflight
                self.offsets.set(group, name, pid, committed)
                inflight = 0
                self.registrations.set_inflight(key, 0)
            start = committed
        hi = store.max_offset
        if start >= hi and hi > 0:
            if start > hi:  # the store shrank below the committed offset
                self.offsets.set(group, name, pid, hi)
                self.registrations.set_inflight(key, 0)
            return fail(E.NOT_FOUND, "The request offset reached maxOffset!", -1)
        lo = store.min_offset
        if start < lo:  # data expired under the consumer: continue at the oldest message
            log.info("%s: offset %d below min %d on %s:%d, moved up", group, start, lo, name, pid)
            start = committed = lo
            inflight = 0
            self.registrations.set_inflight(key, 0)
            self.offsets.set(group, name, pid, lo)
        read = self._read(store, topic, reg, pid, start)
        self._book(key, start, read.scanned, read.count == 0, manual)
        if read.status:
            return fail(E.NOT_FOUND, read.status, _int32(read.data_max))
        tail = resp(
            currOffset=start,
            minLimitTime=0,
            escFlowCtrl=False,
            currDataDlt=read.data_max - read.last_rd,
            requireSlow=read.slow,
            maxOffset=read.max_offset,
        ).SerializePartialToString()
        if not read.chunks:
            return _FETCH_HEAD + tail
        return b"".join((_FETCH_HEAD, *read.chunks, tail))

    def _read(self, store: MessageStore, topic: TopicConf, reg: Registration, pid: int, start: int) -> _Read:
        """MessageStore.getMessages of the real broker: where a read looks and where it stops.

        * ``qryPriorityId`` (the consumer's, else 300) picks the side: a filtered consumer uses
          ``id % 100``, others ``id // 100``; above 1 the memory cache may be read, at 1 or less only
          the files (so with the default filtered consumers never see the cache).
        * A file read loads at most ``fileMaxIndexReadCnt`` index entries (``1000 x partitions``
          clamped to 8000..13500, x3 for filters) of the segment holding ``start``, up to the end of
          the files, and stops after HALF of them (rounded up): MsgFileStore.getMessages loops while
          ``i < indexBuffer.remaining()`` although every pass consumes 28 bytes of the buffer. This is
          why captures s2/s5 read 7 entries as 4, 2, 1 and s6c reads 33 as 17, 8, 4, 2, 1 (s6c's
          store held 41 entries, the last 8 still in the memory cache: maxOffset 924 of 1148).
        * Both stop once the records read reach the transfer size (the crossing record included).
        * The cache side: see ``_read_cache``. No capture reads a non-empty cache (s3 shows its
          empty-store 404), so that side follows the upstream source alone.
        """
        data_max = store.data_max  # BrokerServiceServer measures it before the read (currDataDlt)
        keys = reg.filters
        qry = reg.qry_priority_id if reg.qry_priority_id > 0 else _DEFAULT_QRY_PRIORITY
        switch = qry % 100 if keys is not None else qry // 100
        file_max = store.cache_start
        if switch > 1 and start >= file_max:
            return self._read_cache(store, topic, reg, pid, start, switch == 2, data_max)
        if start >= file_max:
            # Only the files may be read and the data is still in the (logical) memory cache: the real
            # broker answers this 404 until its flush timer (memCacheFlushIntvl, 20 s) moves the cache
            # to its files (capture s4: the first filtered read 27 s after the sends). We flush the
            # cache right here instead, so the next read finds the data; deterministic, documented.
            store.flush_cache()
            return _Read.miss("current offset is exceed max file offset", data_max)
        file_cnt = _clamp(topic.num_partitions * _INDEX_TRANS_COUNT, 8000, 13500) * (3 if keys is not None else 1)
        res = self._half_read(store, reg, pid, start, min(file_max, store.segment_end(start)), file_cnt)
        scanned = res.next_offset - start
        # requireSlow: a filtered read near the end of the files (fileLowReqMaxFilterIndexReadCnt)
        slow = keys is not None and scanned > 0 and file_max - start - scanned < file_cnt * 10 * C.INDEX_ENTRY_SIZE
        max_offset = file_max if switch <= 1 else store.max_offset
        return _Read(res.chunks, res.count, scanned, data_max, reg.last_data_rd, max_offset, slow)

    def _half_read(self, store: MessageStore, reg: Registration, pid: int, start: int, end: int, cnt: int) -> Any:
        """The file read: load min(cnt, entries up to ``end``) index entries, scan half of them."""
        loaded = min(cnt, (end - start) // C.INDEX_ENTRY_SIZE)
        res = store.read(start, pid, reg.filters, self._transfer, end, (loaded + 1) // 2)
        if res.last_data_end >= 0:
            reg.last_data_rd = res.last_data_end
        return res

    def _read_cache(
        self, store: MessageStore, topic: TopicConf, reg: Registration, pid: int, start: int, backup: bool, data_max: int
    ) -> _Read:
        """A read at or after the start of the memory cache by a consumer allowed to read it.

        The real MsgMemStore.getMessages first checks that the cache holds something for the partition
        (a filtered consumer: for one of its keys, whatever the partition) at or after ``start``; if
        not it answers 404 "Can't found Message by index!" and the skipped cache entries count as read
        (bookOffset commits them at once, as nothing was returned). Otherwise it scans up to
        ``memMaxIndexReadCnt`` entries (1000 x partitions clamped to 6000..10000) WITHOUT halving, up
        to the cache's end, and stops at the transfer size like a file read. The cache being flushed
        (qryPriorityId x2) never holds offsets past the files here: our flush is instantaneous.
        """
        hi = store.max_offset
        if backup:  # qryPriorityId x2: only the cache being flushed may be read, it holds nothing new
            return _Read.miss("Can't found Message by index in cache", data_max)
        if start >= hi:  # only an empty store gets here (else "The request offset reached maxOffset!")
            return _Read.miss("Request offset reached cache maxOffset", data_max)
        if not store.cache_has(start, pid, reg.filters):
            return _Read.miss("Can't found Message by index!", data_max, hi - start)
        cnt = _clamp(topic.num_partitions * _INDEX_TRANS_COUNT, 6000, 10000)
        res = store.read(start, pid, reg.filters, self._transfer, None, cnt)
        # the cache result's data offset: after the last returned message, else the cache's end; the
        # broker keeps it as the consumer's last read data offset (ConsumerNodeInfo.setLastProcInfo)
        last_rd = res.last_msg_end if res.count else data_max
        reg.last_data_rd = last_rd
        return _Read(res.chunks, res.count, res.next_offset - start, data_max, last_rd, hi, False)

    def _book(self, key: Key, start: int, scanned: int, empty: bool, manual: bool) -> None:
        """DefaultOffsetManager.bookOffset: the index bytes a read covered become the in-flight delta
        (accumulated under manual commit); a read that returned nothing is committed at once (without
        manual commit a read starts at the committed offset, so that is ``start + scanned``)."""
        if scanned == 0:
            return
        if manual:
            self.registrations.set_inflight(key, self.registrations.inflight(key) + scanned)
        elif empty:
            self.offsets.set(*key, start + scanned)
            self.registrations.set_inflight(key, 0)
        else:
            self.registrations.set_inflight(key, scanned)

    def commit(self, req: Any, ctx: RpcContext) -> Any:
        fail = _refusal(broker_pb.CommitOffsetResponseB2C, currOffset=-1)
        (cid, group, name), topic, refused = self._read_topic(
            req, ctx, _STORE_UNAVAILABLE, False, "clientId", "groupName", "topicName"
        )
        if topic is None:
            return fail(*refused)
        pid = req.partitionId
        store = self.catalog.store_for(topic, pid)
        if store is None:
            return fail(E.FORBIDDEN, _partition_missing(name, pid))
        key: Key = (group, name, pid)
        reg = self.registrations.get(key)
        if reg is None:
            return fail(E.UNAUTHORIZED, "The partition not registered by consumers")
        if reg.consumer_id != cid:
            return fail(E.UNAUTHORIZED, f"The partition has been registered by other consumer: {reg.consumer_id}")
        committed = self._offset(key, store)
        inflight = self.registrations.inflight(key)
        consumed = req.lastPackConsumed if req.HasField("lastPackConsumed") else True
        if consumed and inflight:
            committed += inflight
        self.offsets.set(group, name, pid, committed)
        self.registrations.set_inflight(key, 0)
        fut = self.commits.accepted((group, name, pid, committed), ctx)  # journaled before the answer leaves
        answer = broker_pb.CommitOffsetResponseB2C(
            success=True, errCode=E.SUCCESS, errMsg=_OK, currOffset=committed, maxOffset=store.max_offset
        )
        if fut is not None:  # flush="always": answered once the journal's fsync covering it succeeded
            return _after_commit_sync(group, fut, answer)
        return answer
