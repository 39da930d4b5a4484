"""The embedded broker: send, consumer register/unregister, heartbeat, getMessage, commit.

Answers follow the real broker (docs/PROTOCOL.md §5.3, §5.2.6, §7.3) and where they differ the captures
(s2, s3, s4, s5, s6a, s6c): error texts, validation order, which optional fields are present, the
three "no data" 404 answers, ``currOffset = -1`` on a successful unregister, partition ids checked
only by ``id % 10000`` (id 10000 on a one-store topic goes to a separate store index), checksum
verification, broker-side filters by Java ``hashCode(msgType)``. Where a read looks (files or the
memory cache) and where it stops follow the real MessageStore.getMessages, MsgFileStore.getMessages
and MsgMemStore.getMessages (``Broker._read``): captures s2, s3, s4, s5 and s6c are replayed with
every fetch matching (tests/server/test_capture_replay.py). Fresh messages stay in the memory cache
for ``cache_flush_interval_ms`` (the real memCacheFlushIntvl, 20 s) unless it fills up first.

The send and fetch handlers answer synchronously (no task per request) unless ``flush="always"``,
where a send waits for the group fsync that covers it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import codec
from ..protocol import broker_pb
from ..protocol import constants as C
from ..protocol.constants import ErrorCode as E
from .config import ServerConfig
from .meta import MetaStore, TopicConf
from .offsets import OffsetStore
from .rpc import AfterBatch, RpcContext
from .storage import MessageStore, StoreManager, WriteBatch, encode_record, mem_cache_bytes

log = logging.getLogger("tubemq.server.broker")

# Java String.trim() removes every char <= ' '.
_JAVA_WS = "".join(chr(i) for i in range(33))
_MAX_STORE_INDEX = 100  # guard against hostile ids creating thousands of store directories
_OK = "OK!"
_FETCH_HEAD = broker_pb.GetMessageResponseB2C(success=True, errCode=E.SUCCESS, errMsg=_OK).SerializeToString()
_TOKEN_INVALID = "Visit Authorized Token is invalid!"
_TOKEN_UNVERIFIED = "Visit Authorized Token is invalid! (register or heartbeat with a valid token on this connection first)"
_STORE_UNAVAILABLE = "StoreService temporary unavailable!"
#: TServerConstants.CFG_DEFAULT_CONSUME_RULE: the qryPriorityId used when neither the consumer nor the
#: cluster sets one (the Java client sends -2)
_DEFAULT_QRY_PRIORITY = 300
#: BrokerConfig.indexTransCount: index entries per partition one read may load (see Broker._read)
_INDEX_TRANS_COUNT = 1000

Key = tuple[str, str, int]  # (group, topic, partition id)


def _text(value: Any) -> str:
    """upb hands proto2 strings with invalid UTF-8 back as bytes; Java would decode them leniently."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


#: Length limits of the request strings every broker handler checks first.
_FIELD_LIMITS = {
    "clientId": C.META_MAX_CLIENT_ID_LENGTH,
    "topicName": C.META_MAX_TOPICNAME_LENGTH,
    "groupName": C.META_MAX_GROUPNAME_LENGTH,
}


def _precheck(req: Any, *names: str) -> tuple[list[str], str | None]:
    """The opening string checks of the broker handlers, in the order given (the real broker's order
    differs per handler): one trimmed value per name, and the first failure's errMsg (answered 400)."""
    values = []
    for name in names:
        value, err = _check_string(getattr(req, name), name, _FIELD_LIMITS[name])
        if err:
            return [""] * len(names), err
        values.append(value)
    return values, None


def _java_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


def _check_string(value: Any, name: str, limit: int) -> tuple[str, str | None]:
    """PBParameterUtils.getStringParameter: (trimmed value, error text or None)."""
    if type(value) is str and value and value[0] > " " and value[-1] > " " and value.isascii():
        # hot path: nothing to trim, length in UTF-16 units == len()
        return value, (None if len(value) <= limit else f"{name}'s length over max value, allowed max length is {limit}")
    s = _text(value).strip(_JAVA_WS)
    if not s:
        return s, f"Request miss necessary {name} data!"
    if _java_len(s) > limit:
        return s, f"{name}'s length over max value, allowed max length is {limit}"
    return s, None


class _Registration:
    __slots__ = ("consumer_id", "filters", "qry_priority_id", "last_seen", "last_data_rd")

    def __init__(self, consumer_id: str, filters: frozenset[int] | None, qry_priority_id: int) -> None:
        self.consumer_id = consumer_id
        self.filters = filters
        self.qry_priority_id = qry_priority_id
        self.last_seen = time.monotonic()
        self.last_data_rd = 0  # ConsumerNodeInfo.lastDataRdOffset: data offset after the last file read


class _Read:
    """Outcome of one store read: a 404 text (``status``) or what a successful answer carries."""

    __slots__ = ("chunks", "count", "scanned", "data_max", "last_rd", "max_offset", "slow", "status")

    def __init__(
        self,
        chunks: list[bytes],
        count: int,
        scanned: int,
        data_max: int,
        last_rd: int,
        max_offset: int,
        slow: bool,
        status: str = "",
    ) -> None:
        self.chunks = chunks
        self.count = count
        self.scanned = scanned
        self.data_max = data_max
        self.last_rd = last_rd
        self.max_offset = max_offset
        self.slow = slow
        self.status = status

    @classmethod
    def miss(cls, status: str, data_max: int, scanned: int = 0) -> _Read:
        """A 404 of the store; its minLimitTime is the data max (the result's data offset is 0)."""
        return cls([], 0, scanned, data_max, 0, -1, False, status)


def _topic_missing(name: str) -> str:
    """errMsg of a request naming a topic this broker does not hold (answered 403)."""
    return f"topicName {name} not existed, please check your configure"


def _partition_missing(name: str, pid: int) -> str:
    """errMsg of a request naming a partition the topic does not have on this broker (answered 403)."""
    return f"partitionId {name}-{pid} not existed, please check your configure"


def _clamp(value: int, low: int, high: int) -> int:
    """MixedUtils.mid."""
    return min(max(value, low), high)


def _int32(value: int) -> int:
    """Java's (int) cast of a long: minLimitTime is an int32 filled from a data offset."""
    return (value + 0x80000000) % 0x100000000 - 0x80000000


@dataclass
class _Fault:
    code: int
    min_limit_ms: int


@dataclass
class FaultRecord:
    """One spoiled answer (``inject_fault``) and how long the client waited before calling again."""

    kind: str
    code: int
    client: str
    where: str
    at: float
    next_call_after_s: float | None = None


def _write_failed(ctx: RpcContext, exc: OSError) -> Any:
    """The real broker answers 419 when its store refuses a message (MsgFileStore.appendMsg failing
    on an IOException); the cause is added so a full disk is named, not guessed."""
    return broker_pb.SendMessageResponseB2P(
        success=False,
        errCode=E.SERVER_RECEIVE_OVERFLOW,
        errMsg=f"Put message failed from {ctx.remote_host}, server receive message overflow! (store write failed: {exc})",
    )


class _SendAck(AfterBatch):
    """A send's answer, acknowledged only when the batch-end hook wrote its data (flush interval/never)."""

    __slots__ = ("ctx", "batch", "answer")

    def __init__(self, ctx: RpcContext, batch: WriteBatch, answer: Any) -> None:
        self.ctx = ctx
        self.batch = batch
        self.answer = answer

    def resolve(self) -> Any:
        batch = self.batch
        if batch.written:
            return self.answer
        return _write_failed(self.ctx, batch.error or OSError("the message was not written"))


async def _after_sync(ctx: RpcContext, fut: asyncio.Future[OSError | None], answer: Any) -> Any:
    """flush="always": the answer once the fsync covering the message succeeded, else the error."""
    error = await fut
    return answer if error is None else _write_failed(ctx, error)


class Broker:
    """Broker service handlers + consumer registrations and offsets (§5.3)."""

    def __init__(
        self,
        config: ServerConfig,
        meta: MetaStore,
        store_manager: StoreManager,
        visit_token_check: Callable[[int], bool] | None = None,
    ) -> None:
        self.config = config
        self.meta = meta
        self.stores = store_manager
        self.visit_token_check = visit_token_check
        #: test switches: False makes the read / write service answer 503 like a stopping broker
        self.read_available = True
        self.write_available = True
        self.offsets = OffsetStore(config.data_dir)
        self._regs: dict[Key, _Registration] = {}
        self._inflight: dict[Key, int] = {}
        self._last_mid = 0
        #: (topic name, partition id) -> (topic, store, max data length) for the send hot path
        self._send_targets: dict[tuple[str, int], tuple[TopicConf, MessageStore, int]] = {}
        self._reg_timeout = config.consumer_reg_timeout_ms / 1000.0
        self._transfer = min(config.transfer_size, 2 * C.MAX_TRANSFER_SIZE)
        self._tasks: list[asyncio.Task[None]] = []
        #: flush="always": sends waiting for the fsync that covers them (store, offset, batch, future)
        self._sync_waiters: list[tuple[MessageStore, int, WriteBatch, asyncio.Future[OSError | None]]] = []
        self._sync_wakeup: asyncio.Event | None = None
        self._running = False
        #: test hook (inject_fault): answers to spoil, per kind ("send" / "fetch"), and what followed
        self._faults: dict[str, collections.deque[_Fault]] = {"send": collections.deque(), "fetch": collections.deque()}
        self.fault_log: collections.deque[FaultRecord] = collections.deque(maxlen=1000)
        self._awaiting_followup = 0  # fault_log records whose client has not called again yet
        meta.on_change.append(self._on_meta_change)

    # ---- test hook: server answers the clients must survive (issue 15.2)

    def inject_fault(self, code: int, count: int = 1, min_limit_ms: int = 0) -> None:
        """Answer the next ``count`` sends (419) or getMessage calls (452, 301) with ``code``.

        419 ``SERVER_RECEIVE_OVERFLOW`` is what a real broker answers when its memory cache cannot take
        the message; 452 ``SERVER_CONSUME_SPEED_LIMIT`` (with ``minLimitTime`` = ``min_limit_ms``) when
        its flow control throttles a consumer; 301 ``MOVED`` when the requested index region was
        deleted. Every spoiled answer and the delay until the same client's next call of that kind
        are recorded in ``fault_log``.
        """
        if code == E.SERVER_RECEIVE_OVERFLOW:
            kind = "send"
        elif code in (E.SERVER_CONSUME_SPEED_LIMIT, E.MOVED):
            kind = "fetch"
        else:
            raise ValueError(f"inject_fault: {code} is not one of 419, 452, 301")
        if count < 1 or min_limit_ms < 0:
            raise ValueError("inject_fault: count >= 1 and min_limit_ms >= 0")
        self._faults[kind].extend(_Fault(int(code), min_limit_ms) for _ in range(count))

    def _fault(self, kind: str, client: str, where: str) -> _Fault | None:
        """The next spoiled answer of this kind, if any; notes when a faulted client comes back."""
        now = time.monotonic()
        if self._awaiting_followup:
            for rec in self.fault_log:
                if rec.kind == kind and rec.client == client and rec.next_call_after_s is None:
                    rec.next_call_after_s = now - rec.at
                    self._awaiting_followup -= 1
        queue = self._faults[kind]
        if not queue:
            return None
        fault = queue.popleft()
        if len(self.fault_log) == self.fault_log.maxlen and self.fault_log[0].next_call_after_s is None:
            self._awaiting_followup -= 1  # the oldest record falls out unanswered
        self.fault_log.append(FaultRecord(kind, fault.code, client, where, now))
        self._awaiting_followup += 1
        return fault

    # ---- wiring

    def handlers(self) -> dict[int, Callable[[Any, RpcContext], Any]]:
        return {
            int(C.Method.BROKER_PRODUCER_SEND_MESSAGE): self.send_message,
            int(C.Method.BROKER_CONSUMER_REGISTER): self.register,
            int(C.Method.BROKER_CONSUMER_HEARTBEAT): self.heartbeat,
            int(C.Method.BROKER_CONSUMER_GET_MESSAGE): self.get_message,
            int(C.Method.BROKER_CONSUMER_COMMIT): self.commit,
        }

    def flush_pending(self) -> None:
        """RPC batch-end hook: appends reach the OS before their acknowledgements are written (a send
        whose write failed is answered with the error instead: _SendAck)."""
        if self.stores.flush_pending() and self._sync_waiters:
            self._release_sync_waiters()

    async def start(self) -> None:
        self._running = True
        self._sync_wakeup = asyncio.Event()
        for topic in self._topics():
            for index in range(topic.num_stores):
                self.stores.get(topic.name, index)
        self._tasks = [
            asyncio.ensure_future(self._housekeeping_loop()),
            asyncio.ensure_future(self._sync_loop()),
        ]

    async def stop(self) -> None:
        self._running = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        for _, _, _, fut in self._sync_waiters:
            if not fut.done():
                fut.set_exception(ConnectionError("broker stopped"))
        self._sync_waiters = []
        self.offsets.save()
        self.stores.close()

    def _on_meta_change(self) -> None:
        self._send_targets.clear()
        live = {t.name for t in self._topics()}
        for topic in {k[0] for k in self.stores.stores} | set(self.stores.known_topics_on_disk()):
            if topic not in live:
                self.stores.drop_topic(topic)
                self.offsets.drop_topic(topic)
                for key in [k for k in self._regs if k[1] == topic]:
                    del self._regs[key]
                    self._inflight.pop(key, None)

    # ---- background work

    async def _housekeeping_loop(self) -> None:
        cache_age = self.config.cache_flush_interval_ms / 1000.0
        period = max(0.05, min(1.0, self._reg_timeout / 4, cache_age / 4))
        last_retention = 0.0
        while self._running:
            await asyncio.sleep(period)
            try:
                self.expire_registrations()
                # MessageStore.flushMemCacheData: the memory cache timer (not the fsync timer)
                for store in list(self.stores.stores.values()):
                    store.flush_cache_older_than(cache_age)
                self.offsets.save()
                now = time.monotonic()
                if now - last_retention >= 1.0:
                    last_retention = now
                    self.stores.apply_retention(self.config.retention_ms, self.config.retention_bytes)
            except Exception:
                log.exception("broker housekeeping failed")

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
                    await asyncio.wait_for(self._sync_wakeup.wait(), interval)
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

    def reset_sessions(self) -> None:
        """Forget registrations and in-flight reads (a broker restart); committed offsets stay."""
        self._regs.clear()
        self._inflight.clear()
        self.offsets.save()

    def expire_registrations(self) -> int:
        """Drop registrations idle longer than consumer_reg_timeout_ms, rolling back in-flight reads."""
        now = time.monotonic()
        expired = [k for k, r in self._regs.items() if now - r.last_seen > self._reg_timeout]
        for key in expired:
            reg = self._regs.pop(key)
            self._inflight.pop(key, None)
            log.info("registration of %s on %s:%s:%d expired", reg.consumer_id, *key)
        return len(expired)

    # ---- helpers

    def _offset(self, key: Key, store: MessageStore) -> int:
        o = self.offsets.get(*key)
        return store.min_offset if o is None else o

    def _store_for(self, topic: TopicConf, partition_id: int) -> MessageStore | None:
        if partition_id < 0 or partition_id % C.META_STORE_INS_BASE >= topic.num_partitions:
            return None
        index = partition_id // C.META_STORE_INS_BASE
        if index >= max(topic.num_stores, _MAX_STORE_INDEX):
            return None
        return self.stores.get(topic.name, index)

    def _topic(self, name: str) -> TopicConf | None:
        """The topic if it is deployed on this broker (a broker knows only its own deployments)."""
        topic = self.meta.get(name)
        return topic if topic is not None and topic.on_broker(self.config.broker_id) else None

    def _topics(self) -> list[TopicConf]:
        return [t for t in self.meta.topics() if t.on_broker(self.config.broker_id)]

    def _next_message_id(self, now_ms: int) -> int:
        mid = now_ms << 20
        if mid <= self._last_mid:
            mid = self._last_mid + 1
        self._last_mid = mid
        return mid

    def _token_ok(self, req: Any, ctx: RpcContext) -> bool:
        """The visit-token check; a wrong token counts towards closing the connection (RpcContext)."""
        check = self.visit_token_check
        if check is None:
            return True
        if check(req.authInfo.visitAuthorizedToken):
            ctx.token_accepted()
            return True
        ctx.token_refused()
        return False

    def _read_allowed(self, ctx: RpcContext) -> bool:
        """getMessage and commit carry no token (the real broker never checks them): with the check on,
        they are served only on a connection that already presented a valid token (register/heartbeat)."""
        return self.visit_token_check is None or ctx.token_verified

    def _opening(
        self, req: Any, ctx: RpcContext, available: bool, unavailable: str, by_token: bool, *names: str
    ) -> tuple[list[str], tuple[int, str] | None]:
        """The opening checks every data handler makes in this order: store service up, token (checked
        on this request, or one already presented on the connection), then the named strings
        (_precheck). Returns the trimmed values and, when refused, the (errCode, errMsg) to answer."""
        if not available:
            return [""] * len(names), (E.SERVICE_UNAVAILABLE, unavailable)
        if by_token:
            if self.visit_token_check is not None and not self._token_ok(req, ctx):
                return [""] * len(names), (E.CERTIFICATE_FAILURE, _TOKEN_INVALID)
        elif not self._read_allowed(ctx):
            return [""] * len(names), (E.CERTIFICATE_FAILURE, _TOKEN_UNVERIFIED)
        values, err = _precheck(req, *names)
        return values, (None if err is None else (E.BAD_REQUEST, err))

    # ---- send (13)

    def send_message(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.SendMessageResponseB2P
        (_, name), refused = self._opening(
            req, ctx, self.write_available, "Write StoreService temporary unavailable!", True, "clientId", "topicName"
        )
        if refused:
            return resp(success=False, errCode=refused[0], errMsg=refused[1])
        if name == C.OFFSET_HISTORY_TOPIC:
            return resp(
                success=False, errCode=E.FORBIDDEN, errMsg=f"topicName {name} does not allow producers to send data!"
            )
        pid = req.partitionId
        target = self._send_targets.get((name, pid))
        if target is None:
            topic = self._topic(name)
            if topic is None:
                return resp(
                    success=False, errCode=E.FORBIDDEN, errMsg=_topic_missing(name)
                )
            if topic.closed:
                return resp(success=False, errCode=E.FORBIDDEN, errMsg=f"topicName {name} has been closed")
            store = self._store_for(topic, pid)
            if store is None:
                return resp(
                    success=False,
                    errCode=E.FORBIDDEN,
                    errMsg=_partition_missing(name, pid),
                )
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
            return resp(success=False, errCode=E.BAD_REQUEST, errMsg="data length is zero!")
        if n > limit:
            return resp(
                success=False,
                errCode=E.BAD_REQUEST,
                errMsg=f"data length over max length, allowed max length is {limit}, data length is {n}",
            )
        if (self._faults["send"] or self._awaiting_followup) and self._fault(
            "send", _text(req.clientId), f"{name}:{pid}"
        ) is not None:
            return resp(
                success=False,
                errCode=E.SERVER_RECEIVE_OVERFLOW,
                errMsg=f"Put message failed from {ctx.remote_host}, server receive message overflow!",
            )
        crc = zlib.crc32(data) & 0x7FFFFFFF
        if req.checkSum != -1 and req.checkSum != crc:
            return resp(
                success=False,
                errCode=E.FORBIDDEN,
                errMsg=f"Checksum msg data failure: {req.checkSum} of {name} not equal to the data's checksum of {crc}",
            )
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
        answer = resp(
            success=True, errCode=E.SUCCESS, errMsg=str(mid), requireAuth=False, messageId=mid, appendTime=now, appendOffset=offset
        )
        if self.config.flush == "always":
            fut: asyncio.Future[OSError | None] = asyncio.get_running_loop().create_future()
            self._sync_waiters.append((store, offset, store.batch, fut))
            self.request_sync()
            return _after_sync(ctx, fut, answer)
        return _SendAck(ctx, store.batch, answer)

    # ---- consumer register / unregister (15)

    def register(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.RegisterResponseB2C
        (cid, name), refused = self._opening(
            req, ctx, self.read_available, _STORE_UNAVAILABLE, True, "clientId", "topicName"
        )
        if refused:
            return resp(success=False, errCode=refused[0], errMsg=refused[1], currOffset=-1)
        topic = self._topic(name)
        if topic is None:
            return resp(
                success=False, errCode=E.FORBIDDEN, errMsg=_topic_missing(name), currOffset=-1
            )
        (group,), err = _precheck(req, "groupName")
        if err:
            return resp(success=False, errCode=E.BAD_REQUEST, errMsg=err, currOffset=-1)
        pid = req.partitionId
        key: Key = (group, name, pid)
        part_str = f"{group}:{name}:{pid}"
        reg = self._regs.get(key)
        if req.opType == C.MSG_OPTYPE_REGISTER:
            if reg is not None and reg.consumer_id != cid:
                if time.monotonic() - reg.last_seen > self._reg_timeout:
                    # the stale owner is removed, but this attempt still fails (the next one succeeds)
                    del self._regs[key]
                    self._inflight.pop(key, None)
                return resp(
                    success=False,
                    errCode=E.PARTITION_OCCUPIED,
                    errMsg=f"[Duplicated Register] Partition {self.config.broker_id}#{part_str} "
                    f"has been registered by {reg.consumer_id}",
                    currOffset=-1,
                )
            filters = [_text(f).strip(_JAVA_WS) for f in req.filterCondStr]
            keys = frozenset(codec.java_hash(f) for f in filters if f) or None
            qry = req.qryPriorityId if req.HasField("qryPriorityId") else C.META_VALUE_UNDEFINED
            # like the real broker, the record is written before the partition is validated
            self._regs[key] = _Registration(cid, keys, qry)
            store = self._store_for(topic, pid)
            if store is None:
                return resp(
                    success=False,
                    errCode=E.INTERNAL_SERVER_ERROR,
                    errMsg=f"Register broker failure!, exception is Wrong partition value {pid},"
                    f"valid partitions in (0,{topic.num_partitions - 1})",
                    currOffset=-1,
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
            self._inflight[key] = 0
            return resp(success=True, errCode=E.SUCCESS, errMsg=_OK, currOffset=stored, maxOffset=hi)
        if req.opType == C.MSG_OPTYPE_UNREGISTER:
            if reg is None:
                return resp(
                    success=False,
                    errCode=E.HB_NO_NODE,
                    errMsg=f"UnRegistered Consumer {cid}, you have to register firstly!",
                    currOffset=-1,
                )
            if reg.consumer_id != cid:
                return resp(
                    success=False,
                    errCode=E.DUPLICATE_PARTITION,
                    errMsg=f"[Duplicated Request]Partition {part_str} has been consumed by {reg.consumer_id};"
                    f"Current consumer {cid}, broker={self.config.host}",
                    currOffset=-1,
                )
            inflight = self._inflight.pop(key, 0)
            del self._regs[key]
            if req.readStatus == 0 and inflight:
                committed = self.offsets.get(*key)
                if committed is not None:
                    self.offsets.set(group, name, pid, committed + inflight)
            # captures README item 2: a successful unregister answers currOffset -1, no maxOffset
            return resp(success=True, errCode=E.SUCCESS, errMsg=_OK, currOffset=-1)
        return resp(success=False, errCode=E.BAD_REQUEST, errMsg=f"Invalid request:{req.opType}", currOffset=-1)

    # ---- consumer heartbeat (16)

    def heartbeat(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.HeartBeatResponseB2C
        (cid, group), refused = self._opening(
            req, ctx, self.read_available, _STORE_UNAVAILABLE, True, "clientId", "groupName"
        )
        if refused:
            return resp(success=False, errCode=refused[0], errMsg=refused[1])
        failures: list[str] = []
        now = time.monotonic()
        qry = req.qryPriorityId if req.HasField("qryPriorityId") else None
        for text in req.partitionInfo:
            # a malformed string raises: the RPC layer answers InvocationTargetException like Java
            part = codec.parse_partition(_text(text))
            reg = self._regs.get((group, part.topic, part.partition_id))
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

    # ---- getMessage (17)

    def get_message(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.GetMessageResponseB2C

        def fail(code: int, msg: str, min_limit: int = 0) -> Any:
            return resp(
                success=False, errCode=code, errMsg=msg, currOffset=-1, minLimitTime=min_limit, escFlowCtrl=False, currDataDlt=-1
            )

        (cid, group, name), refused = self._opening(
            req, ctx, self.read_available, "Read StoreService temporary unavailable!", False,
            "clientId", "groupName", "topicName",
        )
        if refused:
            return fail(*refused)
        topic = self._topic(name)
        if topic is None:
            return fail(E.FORBIDDEN, _topic_missing(name))
        pid = req.partitionId
        key: Key = (group, name, pid)
        reg = self._regs.get(key)
        if reg is None:
            return fail(E.HB_NO_NODE, f"UnRegistered Consumer:{cid}, you have to register firstly!")
        if reg.consumer_id != cid:
            return fail(
                412,
                f"[Duplicated Request] Partition={group}:{name}:{pid} of Broker={self.config.broker_id} "
                f"has been consumed by {reg.consumer_id};Current consumer {cid}",
            )
        reg.last_seen = time.monotonic()
        if self._faults["fetch"] or self._awaiting_followup:
            fault = self._fault("fetch", cid, f"{name}:{pid}")
            if fault is not None and fault.code == E.SERVER_CONSUME_SPEED_LIMIT:
                return fail(E.SERVER_CONSUME_SPEED_LIMIT, "Consumer read speed limited!", fault.min_limit_ms)
            if fault is not None:
                return fail(E.MOVED, f"The requested offset of {name}:{pid} has been moved!", -1)
        if topic.closed:
            return fail(E.FORBIDDEN, f"topicName {name} has been closed")
        store = self._store_for(topic, pid)
        if store is None:
            return fail(E.INTERNAL_SERVER_ERROR, f"Get the store of topic {name} in partition {pid} failure!")
        committed = self._offset(key, store)
        inflight = self._inflight.get(key, 0)
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
                self._inflight[key] = 0
            start = committed
        hi = store.max_offset
        if start >= hi and hi > 0:
            if start > hi:  # the store shrank below the committed offset
                self.offsets.set(group, name, pid, hi)
                self._inflight[key] = 0
            return fail(E.NOT_FOUND, "The request offset reached maxOffset!", -1)
        lo = store.min_offset
        if start < lo:  # data expired under the consumer: continue at the oldest message
            log.info("%s: offset %d below min %d on %s:%d, moved up", group, start, lo, name, pid)
            start = committed = lo
            inflight = 0
            self._inflight[key] = 0
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

    def _read(self, store: MessageStore, topic: TopicConf, reg: _Registration, pid: int, start: int) -> _Read:
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

    def _half_read(self, store: MessageStore, reg: _Registration, pid: int, start: int, end: int, cnt: int) -> Any:
        """The file read: load min(cnt, entries up to ``end``) index entries, scan half of them."""
        loaded = min(cnt, (end - start) // C.INDEX_ENTRY_SIZE)
        res = store.read(start, pid, reg.filters, self._transfer, end, (loaded + 1) // 2)
        if res.last_data_end >= 0:
            reg.last_data_rd = res.last_data_end
        return res

    def _read_cache(
        self, store: MessageStore, topic: TopicConf, reg: _Registration, pid: int, start: int, backup: bool, data_max: int
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
            self._inflight[key] = self._inflight.get(key, 0) + scanned
        elif empty:
            self.offsets.set(*key, start + scanned)
            self._inflight[key] = 0
        else:
            self._inflight[key] = scanned

    # ---- commit (18)

    def commit(self, req: Any, ctx: RpcContext) -> Any:
        resp = broker_pb.CommitOffsetResponseB2C
        (cid, group, name), refused = self._opening(
            req, ctx, self.read_available, _STORE_UNAVAILABLE, False, "clientId", "groupName", "topicName"
        )
        if refused:
            return resp(success=False, errCode=refused[0], errMsg=refused[1], currOffset=-1)
        topic = self._topic(name)
        if topic is None:
            return resp(
                success=False, errCode=E.FORBIDDEN, errMsg=_topic_missing(name), currOffset=-1
            )
        pid = req.partitionId
        store = self._store_for(topic, pid)
        if store is None:
            return resp(
                success=False,
                errCode=E.FORBIDDEN,
                errMsg=_partition_missing(name, pid),
                currOffset=-1,
            )
        key: Key = (group, name, pid)
        reg = self._regs.get(key)
        if reg is None:
            return resp(success=False, errCode=E.UNAUTHORIZED, errMsg="The partition not registered by consumers", currOffset=-1)
        if reg.consumer_id != cid:
            return resp(
                success=False,
                errCode=E.UNAUTHORIZED,
                errMsg=f"The partition has been registered by other consumer: {reg.consumer_id}",
                currOffset=-1,
            )
        committed = self._offset(key, store)
        inflight = self._inflight.get(key, 0)
        consumed = req.lastPackConsumed if req.HasField("lastPackConsumed") else True
        if consumed and inflight:
            committed += inflight
        self.offsets.set(group, name, pid, committed)
        self._inflight[key] = 0
        return resp(success=True, errCode=E.SUCCESS, errMsg=_OK, currOffset=committed, maxOffset=store.max_offset)

    # ---- admin views

    def groups(self) -> list[str]:
        """Groups with a registration or a committed offset on this broker."""
        return sorted({k[0] for k in self._regs} | set(self.offsets.groups()))

    def group_detail(self, group: str) -> list[dict[str, Any]]:
        """Per topic/partition: owner, committed offset, in-flight bytes, max offset and lag."""
        keys = {(t, p) for (t, p) in self.offsets.partitions(group)} | {
            (k[1], k[2]) for k in self._regs if k[0] == group
        }
        rows = []
        for topic_name, pid in sorted(keys):
            key = (group, topic_name, pid)
            topic = self._topic(topic_name)
            store = self._store_for(topic, pid) if topic is not None else None
            max_offset = store.max_offset if store is not None else -1
            committed = self.offsets.get(*key)
            if committed is None:
                committed = store.min_offset if store is not None else -1
            reg = self._regs.get(key)
            rows.append(
                {
                    "topic": topic_name,
                    "partition_id": pid,
                    "consumer_id": reg.consumer_id if reg is not None else None,
                    "committed_offset": committed,
                    "inflight": self._inflight.get(key, 0),
                    "max_offset": max_offset,
                    "lag": max(0, max_offset - committed) if max_offset >= 0 else 0,
                }
            )
        return rows

