"""The asyncio producer engine behind ``tubemq.Producer`` and ``tubemq.aio.Producer`` (§5.1).

Every send becomes a small job. Jobs are dispatched in arrival order: when the topic's partitions
are known and the chosen broker's connection is open with room in its window, the job is encoded
straight into a frame (``codec.encode_send_request``, no protobuf objects) and queued on the
connection in the same loop iteration (the fast path: no task, no coroutine per message). Anything
that needs waiting (first publish of a topic, a connect, a full window) moves the job and all later
ones to a backlog drained by one task, which keeps the order.

Sync callers hand jobs over through a lock-free deque and at most one ``call_soon_threadsafe`` per
batch, so pipelined ``send_async`` from threads costs one loop wake-up per batch, not per message.
A blocking ``send`` does not wake the loop at all when it can help it (:meth:`ProducerCore.send_direct`):
its thread routes, encodes and writes the frame itself; only the answer is read on the loop thread.

Failure rules (§6.2): a broker's explicit refusal with a retryable code (419, 500, 503) is resent up
to ``retries`` times after ``retry_backoff_ms`` (the message was not stored, so no duplicate); a
connect failure before anything was written is retried on another broker; a timeout, a lost
connection or any other error is reported to the caller, since the message may or may not be
stored — never silently dropped, never silently duplicated.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as _dt
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from .. import codec
from ..client.identity import local_ip, producer_id
from ..config import ProducerConfig
from ..errors import (
    ClientClosedError,
    DecodeError,
    InvalidMessageError,
    MessageTooLargeError,
    RemoteError,
    TopicNotPublishedError,
    TubeMQConnectionError,
    TubeMQError,
    TubeMQTimeoutError,
    error_for_code,
    remote_error,
)
from ..metrics import Metrics
from ..net.connection import Connection
from ..net.health import SessionHealth
from ..protocol.constants import (
    ARRAY_SEP,
    EQ,
    MAX_MAX_MSG_SIZE,
    TOKEN_MSG_TIME,
    TOKEN_MSG_TYPE,
    ErrorCode,
)
from .quality import BrokerQuality
from .router import Router
from .session import ProducerSession

log = logging.getLogger("tubemq.producer.core")

#: Broker answers after which the message was certainly not stored and may be resent (§6.2).
RETRYABLE_CODES = frozenset({ErrorCode.SERVER_RECEIVE_OVERFLOW, ErrorCode.INTERNAL_SERVER_ERROR,
                             ErrorCode.SERVICE_UNAVAILABLE})

#: A caller wakes the loop thread itself when the inbox was last drained longer ago than this (s).
_MAX_DRAIN_DELAY = 0.002
#: Send latency is recorded for one acknowledged message in 8 (enough for percentiles, cheaper).
_LATENCY_SAMPLE_MASK = 7

_encode_send = codec.encode_send_request
_decode_response = codec.decode_response
_decode_send = codec.decode_send_response


class SendResult(NamedTuple):
    """What the broker stored: where (topic, partition) and under which id/offset/time.

    ``partition`` is a :class:`tubemq.codec.Partition` (broker_id, host, port, topic, partition_id).
    """

    topic: str
    partition: codec.Partition
    message_id: int
    append_time: int
    append_offset: int
    key: Any = None

    @property
    def partition_id(self) -> int:
        return self.partition.partition_id

    @property
    def broker_id(self) -> int:
        return self.partition.broker_id


#: ``done(job, result, exc)``: one long-lived callable per facade; the job carries its future.
Done = Callable[["_Job", "SendResult | None", "BaseException | None"], None]
#: The user's per-message ``send_async(..., callback=)``: ``callback(result, None)`` or ``(None, exc)``.
SendCallback = Callable[["SendResult | None", "BaseException | None"], Any]


def check_callback(callback: Any) -> SendCallback:
    if not callable(callback):
        raise InvalidMessageError(ErrorCode.BAD_REQUEST,
                                  f"callback must be callable(result, exc), not {type(callback).__name__}")
    return callback  # type: ignore[no-any-return]


def run_callback(job: _Job, result: SendResult | None, exc: BaseException | None) -> None:
    """Call the job's user callback; its errors are logged, never propagated into the producer."""
    try:
        job.cb(result, exc)
    except Exception:
        log.exception("send_async callback %r raised for a message to topic %r (ignored)", job.cb, job.topic)


class _Job:
    """One message on its way; ``done`` is called exactly once."""

    __slots__ = ("topic", "payload", "flag", "size", "msg_type", "msg_time", "key", "done", "fut", "cb", "attempt",
                 "t0", "finished", "part", "direct")

    def __init__(self, topic: str, payload: bytes, flag: int, size: int, msg_type: str | None,
                 msg_time: str | None, key: Any, done: Done) -> None:
        self.topic = topic
        self.payload = payload
        self.flag = flag
        self.size = size
        self.msg_type = msg_type
        self.msg_time = msg_time
        self.key = key
        self.done = done
        self.fut: Any = None
        self.cb: Any = None  # the facade's per-message ``callback(result, exc)``, if any
        self.part: codec.Partition | None = None
        self.attempt = 0
        self.t0 = 0.0
        self.finished = False
        self.direct = False  # started by send_direct (counted in the _direct_* counters)


# ---------------------------------------------------------------------------------------------------
# message preparation (caller's thread; pure functions)


def _check_attr_text(what: str, value: str) -> str:
    value = str(value)
    if ARRAY_SEP in value or EQ in value or TOKEN_MSG_TYPE in value or TOKEN_MSG_TIME in value:
        raise InvalidMessageError(
            ErrorCode.BAD_REQUEST, f"attribute {what} {value!r} must not contain ',' '=' or the reserved $msg...$ keys"
        )
    return value


def format_msg_time(msg_time: Any) -> str | None:
    """``yyyyMMddHHmm`` in local time (Java's $msgTime$) from a datetime, epoch ms or that string."""
    if msg_time is None:
        return None
    if isinstance(msg_time, _dt.datetime):
        when = msg_time.astimezone() if msg_time.tzinfo is not None else msg_time
        return when.strftime("%Y%m%d%H%M")
    if isinstance(msg_time, (int, float)) and not isinstance(msg_time, bool):
        return _dt.datetime.fromtimestamp(msg_time / 1000.0).strftime("%Y%m%d%H%M")
    if isinstance(msg_time, str):
        text = msg_time.strip()
        if not text:
            return None
        try:
            if len(text) != 12:
                raise ValueError(text)
            _dt.datetime.strptime(text, "%Y%m%d%H%M")
        except ValueError:
            raise InvalidMessageError(
                ErrorCode.BAD_REQUEST, f"msg_time {msg_time!r} must be yyyyMMddHHmm (12 digits)"
            ) from None
        return text
    raise InvalidMessageError(
        ErrorCode.BAD_REQUEST, f"msg_time must be a datetime, epoch milliseconds or 'yyyyMMddHHmm', not {type(msg_time).__name__}"
    )


def prepare_message(
    topic: Any,
    data: Any,
    attributes: Mapping[str, Any] | None = None,
    stream_id: str | None = None,
    msg_time: Any = None,
) -> tuple[str, bytes, int, int, str | None, str | None]:
    """Validate and encode: (topic, payload, flag, java_size, msg_type, msg_time) (§4.6, §4.7).

    The attribute text is built like the Java ``Message``: user items, then ``putSystemHeader``
    puts ``$msgType$``/``$msgTime$`` first; the request's msgType/msgTime fields carry the same
    values (captures/s1). ``java_size`` = body + attribute length, what Java checks against the
    topic's max message size.
    """
    if not isinstance(topic, str) or not topic.strip():
        raise InvalidMessageError(ErrorCode.PARAMETER_MSG_TOPIC_BLANK, f"topic must be a non-blank string, got {topic!r}")
    topic = topic.strip()
    # a wrong type is a programming error, not a refused message: TypeError, like any Python API
    if isinstance(data, str):
        raise TypeError("send(): argument 'data' must be bytes-like, not str (encode it, e.g. data.encode())")
    try:
        body = data if type(data) is bytes else bytes(memoryview(data))  # buffer protocol only (not int)
    except TypeError:
        raise TypeError(f"send(): argument 'data' must be bytes-like, not {type(data).__name__}") from None
    if not body:
        raise InvalidMessageError(ErrorCode.PARAMETER_MSG_BODY_EMPTY, "message body is empty")
    attr = ""
    if attributes:
        if not isinstance(attributes, Mapping):
            raise InvalidMessageError(ErrorCode.BAD_REQUEST, "attributes must be a mapping of str to str")
        items = []
        for k, v in attributes.items():
            k = _check_attr_text("key", k)
            if not k:
                raise InvalidMessageError(ErrorCode.BAD_REQUEST, "attribute keys must not be empty")
            items.append(f"{k}={_check_attr_text('value', '' if v is None else v)}")
        attr = ",".join(items)
    msg_type = None
    if stream_id is not None:
        if not isinstance(stream_id, str):
            raise InvalidMessageError(ErrorCode.BAD_REQUEST, "stream_id must be a str")
        msg_type = _check_attr_text("stream_id", stream_id).strip() or None
    mtime = format_msg_time(msg_time)
    if msg_type is not None or mtime is not None:
        attr = codec.put_system_header(attr, msg_type, mtime)
    if attr:
        payload = codec.encode_payload(body, attr)
        flag = 1
        size = len(body) + len(attr)
    else:
        payload, flag, size = body, 0, len(body)
    if size > MAX_MAX_MSG_SIZE:
        raise MessageTooLargeError(
            ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH, f"message of {size} bytes is over the 20 MiB protocol limit"
        )
    return topic, payload, flag, size, msg_type, mtime


# ---------------------------------------------------------------------------------------------------


class SendBuffer:
    """The ``max_pending`` bound of one producer, for both APIs (the bounded buffer, DESIGN.md).

    No semaphore on the hot path: every sender draws a number (any thread), the loop thread counts
    completions (``release``); a sender waits only when its number is more than ``max_pending`` ahead
    of the completions: an asyncio sender on a loop future, a thread on a condition (up to
    ``max_block_ms``), a sender on the loop thread itself (a callback) not at all, since only that
    thread can make room. A number that is not used is given back.
    """

    __slots__ = ("_cond", "_draw", "_task_waiters", "_thread_waiters", "block_s", "closed", "loop", "max_pending",
                 "released")

    def __init__(self, max_pending: int, block_s: float) -> None:
        self.max_pending = max_pending
        self.block_s = block_s
        self.loop: asyncio.AbstractEventLoop | None = None  # the producer's loop, set when it starts
        self._draw = itertools.count(1).__next__
        self.released = 0  # written by the loop thread only
        self._cond = threading.Condition()
        self._thread_waiters = 0
        self._task_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.closed = False

    def _full(self, what: str) -> TubeMQTimeoutError:
        return TubeMQTimeoutError(f"send buffer full: {self.max_pending} messages outstanding {what}")

    def take(self) -> int:
        """Draw a number; the caller waits (``wait``/``wait_async``) if it is ``over``."""
        return self._draw()

    def over(self, n: int) -> bool:
        return n - self.released > self.max_pending

    async def wait_async(self, n: int) -> None:
        """An asyncio sender waits for room (on the loop thread)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.block_s
        while self.over(n):
            left = deadline - loop.time()
            if self.closed or left <= 0:
                self.release()  # give the number back
                if self.closed:
                    raise ClientClosedError("producer is closed")
                raise self._full(f"for {self.block_s:g} s")
            waiter: asyncio.Future[None] = loop.create_future()
            self._task_waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except asyncio.TimeoutError:
                pass
            finally:
                if waiter in self._task_waiters:
                    self._task_waiters.remove(waiter)

    def wait(self, n: int, on_loop_thread: bool) -> None:
        """A thread waits for room (up to ``block_s``); on the loop thread it cannot, so it fails at once."""
        if on_loop_thread:
            self.release()
            raise self._full("and send_async() was called on the client's event-loop thread (from a callback), "
                              "where it cannot wait")
        deadline = time.monotonic() + self.block_s
        with self._cond:
            self._thread_waiters += 1
            try:
                while self.over(n):
                    left = deadline - time.monotonic()
                    if left <= 0 or self.closed:
                        assert self.loop is not None
                        self.loop.call_soon_threadsafe(self.release)  # give the number back
                        if self.closed:
                            raise ClientClosedError("producer is closed")
                        raise self._full(f"for {self.block_s:g} s")
                    self._cond.wait(min(left, 0.1))
            finally:
                self._thread_waiters -= 1

    def release(self) -> None:
        """One message completed (or a number given back); loop thread."""
        self.released += 1
        if self._thread_waiters:
            with self._cond:
                self._cond.notify_all()
        waiters = self._task_waiters
        while waiters:
            w = waiters.popleft()
            if not w.done():
                w.set_result(None)
                break

    def close(self) -> None:
        """Wake every waiter: they fail with ClientClosedError (loop thread)."""
        self.closed = True
        with self._cond:
            self._cond.notify_all()
        for w in self._task_waiters:
            if not w.done():
                w.set_result(None)


class ProducerCore:
    """Asyncio producer: session + router + quality + dispatch (see the module docstring)."""

    def __init__(self, config: ProducerConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        host = config.local_address or local_ip()
        self.session = ProducerSession(config, producer_id(host), metrics=self.metrics)
        self.client_id = self.session.client_id
        self.sent_addr = codec.ip_to_int(self.session.host_name)
        self.router = Router(config.partitioner)
        self.quality = BrokerQuality(config.broker_failure_threshold, config.broker_shield_ms, config.unavailable_ms)
        self.timeout_ms = config.rpc_timeout_ms
        self.closed = False
        self.started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: collections.deque[_Job] = collections.deque()
        self._drain_scheduled = False
        self._last_drain = 0.0
        self._batch = False  # True while _drain queues frames it writes itself at the end
        self._backlog: collections.deque[_Job] = collections.deque()
        self._backlog_task: asyncio.Task[None] | None = None
        self._inflight: set[_Job] = set()
        self._outstanding = 0  # jobs accepted on the loop thread and not finished (loop thread only)
        # send_direct (caller threads): the counters are written under _dlock (never held across I/O),
        # which also orders them with close(); the *_finished one is written by the loop thread only
        self._dlock = threading.Lock()
        self._draining = False  # True while _drain holds jobs taken from the inbox
        self._direct_ok = not callable(config.partitioner)  # a user partitioner runs on the loop thread
        self._direct_started = 0
        self._direct_finished = 0
        self._direct_sent = 0
        self._direct_bytes = 0
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._bg: set[asyncio.Task[Any]] = set()
        # hot-path counters: plain ints bumped on the loop thread, read by metrics snapshots
        self.sent = 0  # messages written to a broker (first attempt)
        self.retried = 0  # resends written after a retryable refusal
        self.bytes_sent = 0  # body + attribute bytes of the messages sent (first attempts)
        self.acknowledged = 0
        self.failed = 0
        self._latency = self.metrics.histogram("producer.send_latency")
        self._build = self._build_frame  # bound once: no per-message method objects
        self._answer = self._on_answer
        self._register_metrics()

    def _register_metrics(self) -> None:
        m = self.metrics
        m.register_counter("producer.accepted", lambda: self.acknowledged + self.failed + self.outstanding)
        m.register_counter("producer.sent", lambda: self.sent + self._direct_sent)
        m.register_counter("producer.acknowledged", lambda: self.acknowledged)
        m.register_counter("producer.failed", lambda: self.failed)
        m.register_counter("producer.retried", lambda: self.retried)
        m.register_counter("producer.bytes_sent", lambda: self.bytes_sent + self._direct_bytes)
        m.inc("producer.unknown_outcome", 0)  # present from the start (counted on the failure path)
        m.set_gauge("producer.outstanding", lambda: self.outstanding)
        m.set_gauge("producer.in_flight", lambda: len(self._inflight))
        m.set_gauge("producer.backlog", lambda: len(self._backlog) + len(self._inbox))
        self.health = SessionHealth(m, self.session, self._broker_addresses, self._broker_extra)

    def _broker_addresses(self) -> dict[str, int]:
        """address -> broker id: brokers of the published topics, plus any being shielded."""
        session = self.session
        out = {p.address: p.broker_id for t in list(session.topics) for p in session.partitions.get(t, ())}
        quality = self.quality
        for bid in set(quality.total_errors) | set(quality._until):
            b = session.brokers.get(bid)
            if b is not None:
                out.setdefault(b.address, bid)
        return out

    def _broker_extra(self, address: str, broker_id: int) -> dict[str, Any]:
        q = self.quality
        return {
            "send_errors": q.total_errors.get(broker_id, 0),
            "consecutive_failures": q._failures.get(broker_id, 0),
            "shielded": q.is_shielded(broker_id),
        }

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Register with the master (Java: 5 attempts, then the error is raised)."""
        self._loop = asyncio.get_running_loop()
        self.session.on_metadata.append(self._preconnect)
        await self.session.start(register_attempts=5)
        self.health.remember_pool()
        self.started = True

    @property
    def outstanding(self) -> int:
        """Messages accepted and not yet finished (both entry paths)."""
        return self._outstanding + self._direct_started - self._direct_finished

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    async def publish(self, topics: str | Iterable[str]) -> set[str]:
        if self.closed:
            raise ClientClosedError("producer is closed")
        if isinstance(topics, str):
            topics = [topics]
        result = await self.session.publish(list(topics))
        self._preconnect()
        return result

    async def flush(self, timeout: float | None = None) -> int:
        """Wait until every accepted message is answered (or ``timeout``); returns how many are left."""
        self._drain()
        if self.outstanding == 0:
            return 0
        fut: asyncio.Future[None] = self.loop.create_future()
        self._idle_waiters.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            if fut in self._idle_waiters:
                self._idle_waiters.remove(fut)
        return self.outstanding

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), fail what is left, close the master session and connections.

        Every accepted message ends up either acknowledged or failed: nothing is left hanging.
        """
        if self.closed:
            return
        self._drain()
        with self._dlock:  # a send_direct either counted its job (flushed / failed below) or sees this
            self.closed = True
        wait = self.timeout_ms / 1000.0 if timeout is None else timeout
        if self.outstanding:
            await self.flush(wait)
        if self._backlog_task is not None:
            self._backlog_task.cancel()
            try:
                await self._backlog_task
            except (asyncio.CancelledError, Exception):
                pass
        closed_exc = ClientClosedError("producer closed before the message was sent")
        while self._backlog:
            self._finish(self._backlog.popleft(), None, closed_exc)
        with self._dlock:  # a send_direct whose write failed meanwhile must see its job finished (or not)
            for job in list(self._inflight):
                self._finish(job, None, ClientClosedError("producer closed before the broker answered; "
                                                          "the message may or may not be stored"))
        for t in list(self._bg):
            t.cancel()
        await self.session.close()

    # ------------------------------------------------------------------ submission

    def make_job(self, topic: Any, data: Any, attributes: Mapping[str, Any] | None, stream_id: str | None,
                 msg_time: Any, key: Any, done: Done) -> _Job:
        """Validate and encode a message (any thread)."""
        t, payload, flag, size, mtype, mtime = prepare_message(topic, data, attributes, stream_id, msg_time)
        return _Job(t, payload, flag, size, mtype, mtime, key, done)

    def submit_threadsafe(self, job: _Job) -> None:
        """Hand a job to the loop from another thread.

        Waking the loop thread costs a syscall and a GIL hand-off, so it is only done when nothing
        else will wake it: while requests are in flight, the next answer drains the inbox (the
        ``_inflight`` check comes after the append, and ``_on_answer`` discards before it looks at
        the inbox, so one of the two always sees the other under the GIL). If answers stall (a hung
        broker), the loop is woken anyway once the last drain is older than ``_MAX_DRAIN_DELAY``.
        """
        self._inbox.append(job)
        if not self._drain_scheduled and (
            not self._inflight or time.monotonic() - self._last_drain > _MAX_DRAIN_DELAY
        ):
            self._drain_scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # loop closed
                self._drain_scheduled = False
                self._inbox.clear()
                self._finish(job, None, ClientClosedError("producer is closed"))

    def send_direct(self, job: _Job) -> bool:
        """Start ``job`` from the calling thread (not the loop's): route it, encode it and write it to
        the broker's socket here (:meth:`Connection.send_direct`), so a blocking send costs no loop
        wake-up; its answer completes it on the loop thread as usual. Returns False, having started
        nothing, when the job must take the inbox instead: anything queued ahead of it (it must not
        overtake this thread's earlier ``send_async``), a topic or connection not ready yet, shielded
        brokers or a user partitioner (loop-thread business), TLS, or a socket that would block.

        Also while other messages of this producer are in flight (other threads sending): the loop
        thread is awake for their answers anyway and writes whatever waits in the inbox as one batch,
        one syscall for many messages, where a write per thread would cost more CPU per message.

        The checks run in the order jobs move (inbox, ``_drain``, backlog, backlog task; the
        connection checks its own queue under its write lock): a job that left one stage is seen in
        a later one, so nothing submitted earlier by this thread can still be unwritten (a retry
        waiting out its backoff aside, as on the loop path).
        """
        if (self._inflight or self._inbox or self._draining or self._backlog or self._backlog_task is not None
                or not self._direct_ok or self.closed):
            return False
        session = self.session
        topic = job.topic
        parts = session.partitions.get(topic)
        pool = session._pool
        if (not parts or pool is None or topic not in session.topics or self.quality.any_shielded
                or job.size > session.topic_max_sizes.get(topic, session.max_msg_size)):
            return False
        try:
            part = self.router.choose(topic, parts, job.key)  # a lost round-robin step at worst
        except Exception:  # noqa: BLE001 - the loop path reports it to the caller
            return False
        conn = pool.connected(part.address)
        if conn is None:
            return False
        # _dlock is never held across I/O: only these counter updates and close() take it
        job.part = part
        job.t0 = time.monotonic()
        with self._dlock:
            if self.closed:
                return False
            # counted and in flight before the write: the answer may finish the job at once, and
            # close() fails what is in flight
            job.direct = True
            self._direct_started += 1
            self._inflight.add(job)
        try:
            started = conn.send_direct(self._build, job, self.timeout_ms, self._answer)
        except Exception:  # noqa: BLE001 - e.g. an encode error: the loop path reports it
            started = False
        with self._dlock:
            if started:
                self._direct_sent += 1
                self._direct_bytes += job.size
                return True
            if job.finished:  # close() failed it meanwhile: its waiter has the outcome
                return True
            self._inflight.discard(job)
            job.direct = False
            self._direct_started -= 1
        return False

    def kick(self) -> None:
        """Wake the loop thread if jobs wait in the inbox (any thread; e.g. before blocking on one)."""
        if self._inbox and not self._drain_scheduled:
            self._drain_scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # loop already closed: close() failed everything
                self._drain_scheduled = False

    def _drain(self) -> None:
        self._draining = True  # first: send_direct must see jobs taken from the inbox (see there)
        try:
            self._drain_inbox()
        finally:
            self._draining = False

    def _drain_inbox(self) -> None:
        self._drain_scheduled = False
        self._last_drain = time.monotonic()
        inbox = self._inbox
        if self.closed or self._backlog_task is not None:
            while inbox:
                self.accept(inbox.popleft())
            return
        fast = self._dispatch_fast
        now = self._last_drain
        # frames queued below are written by flush_all() at the end of this callback: no flush is
        # scheduled per connection (a cancelled one would still cost the loop an extra epoll round)
        self._batch = True
        try:
            while inbox:
                job = inbox.popleft()
                self._outstanding += 1
                job.t0 = now
                if not fast(job):
                    self._to_backlog(job)
                    while inbox:  # keep the order: everything after it waits behind it
                        self.accept(inbox.popleft())
                    break
        finally:
            self._batch = False
            pool = self.session._pool
            if pool is not None:
                pool.flush_all()  # write this batch now, not one loop iteration later

    def accept(self, job: _Job) -> None:
        """Take a job on the loop thread: fast dispatch or the ordered backlog."""
        if self.closed:
            self._outstanding += 1  # _finish takes it back
            self._finish(job, None, ClientClosedError("producer is closed"))
            return
        self._outstanding += 1
        job.t0 = time.monotonic()
        if self._backlog_task is not None or not self._dispatch_fast(job):
            self._to_backlog(job)

    def _to_backlog(self, job: _Job) -> None:
        self._backlog.append(job)
        if self._backlog_task is None:
            self._backlog_task = self.loop.create_task(self._run_backlog())

    # ------------------------------------------------------------------ dispatch

    def _dispatch_fast(self, job: _Job) -> bool:
        """Route and start ``job`` now if nothing needs waiting; False sends it to the backlog."""
        session = self.session
        topic = job.topic
        parts = session.partitions.get(topic)
        if not parts or topic not in session.topics:
            return False
        if job.size > session.topic_max_sizes.get(topic, session.max_msg_size):
            self._too_large(job)
            return True
        quality = self.quality
        try:
            part = self.router.choose(topic, parts, job.key, quality.shielded() if quality.any_shielded else ())
        except Exception as exc:  # a bad key or a user partitioner's error belongs to this message only
            self._finish(job, None, exc)
            return True
        conn = session.pool.connected(part.address)
        if conn is None or not conn.has_capacity:
            return False
        self._start(job, part, conn)
        return True

    def _too_large(self, job: _Job) -> None:
        limit = self.session.max_size(job.topic)
        self._finish(job, None, MessageTooLargeError(
            ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH,
            f"message of {job.size} bytes (body + attributes) is over the max size {limit} of topic {job.topic!r}",
        ))

    async def _route_slow(self, job: _Job) -> tuple[codec.Partition, Connection] | None:
        session = self.session
        topic = job.topic
        if topic not in session.topics:
            await session.publish([topic])
        parts = session.partitions.get(topic)
        if not parts:
            await session.refresh()
            parts = session.partitions.get(topic)
            if not parts:
                raise TopicNotPublishedError(
                    ErrorCode.PARAMETER_MSG_TOPIC_NO_PARTITION,
                    f"topic {topic!r} has no partition accepting messages right now",
                )
        if job.size > session.max_size(topic):
            self._too_large(job)
            return None
        brokers = {p.broker_id for p in parts}
        tries = 0
        while True:
            part = self.router.choose(topic, parts, job.key, self.quality.shielded())
            try:
                conn = await session.pool.get(part.address)
                if not conn.has_capacity:
                    await self._wait_room(job, part, conn)
                return part, conn
            except TubeMQConnectionError as exc:
                # nothing was written: trying another broker cannot duplicate the message
                self.quality.failure(part.broker_id)
                tries += 1
                if job.key is not None or tries >= max(len(brokers), 1 + self.config.retries):
                    raise
                log.info("broker %s unreachable (%s), trying another", part.address, exc)

    async def _wait_room(self, job: _Job, part: codec.Partition, conn: Connection) -> None:
        """Wait for room on ``conn`` within the message's timeout. A connection that read nothing
        for a whole timeout while full belongs to a peer that stopped reading (a stalled broker
        keeps the socket open): drop it so the next message reconnects instead of queueing behind."""
        timeout = self.timeout_ms / 1000.0
        try:
            await conn.wait_capacity(job.t0 + timeout - time.monotonic())
        except TubeMQTimeoutError:
            self.quality.failure(part.broker_id)
            if conn.read_idle >= timeout and not conn.closed:
                log.warning("broker %s read nothing for %.1f s with its write buffer full; reconnecting",
                            conn.address, conn.read_idle)
                await self.session.pool.discard(conn.address)
            raise

    async def _run_backlog(self) -> None:
        backlog = self._backlog
        try:
            while backlog:
                job = backlog[0]
                if job.finished:
                    backlog.popleft()
                    continue
                if self._dispatch_fast(job):  # no waiting needed: no coroutine for this job
                    backlog.popleft()
                    continue
                try:
                    routed = await self._route_slow(job)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # TubeMQError, or anything a user partitioner raises
                    backlog.popleft()
                    self._finish(job, None, exc)
                    continue
                backlog.popleft()
                if routed is not None and not job.finished:
                    part, conn = routed
                    if conn.closed:
                        backlog.appendleft(job)
                        continue
                    self._start(job, part, conn)
        finally:
            self._backlog_task = None

    def _start(self, job: _Job, part: codec.Partition, conn: Connection) -> None:
        job.part = part
        try:
            if self._batch:  # _drain writes the batch itself
                conn.start_call_cb(self._build, job, self.timeout_ms, self._answer, flush=False)
            else:
                conn.start_call_cb(self._build, job, self.timeout_ms, self._answer)
        except TubeMQError as exc:
            self._finish(job, None, exc)
            return
        self._inflight.add(job)
        if job.attempt:
            self.retried += 1
        else:
            self.sent += 1
            self.bytes_sent += job.size

    def _build_frame(self, serial: int, job: _Job) -> bytes:
        """The whole send frame for ``job`` (codec hot path; tokens as of now)."""
        session = self.session
        return _encode_send(serial, self.client_id, job.topic, job.part.partition_id, job.payload,  # type: ignore[union-attr]
                            job.flag, self.sent_addr, session.visit_token, msg_type=job.msg_type,
                            msg_time=job.msg_time, auth_token=session.auth_token or None,
                            timeout_ms=self.timeout_ms)

    def _on_answer(self, job: _Job, payload: bytes | None, exc: BaseException | None) -> None:
        part: codec.Partition = job.part  # type: ignore[assignment]
        self._inflight.discard(job)
        if self._inbox and not self._drain_scheduled:  # see submit_threadsafe
            self._drain_scheduled = True
            self.loop.call_soon(self._drain)
        if job.finished:
            return
        if exc is not None:
            self.quality.failure(part.broker_id)
            if isinstance(exc, (TubeMQTimeoutError, TubeMQConnectionError)):
                self.metrics.inc("producer.unknown_outcome")
            self._finish(job, None, _with_context(exc, job, part))
            return
        try:
            envelope = _decode_response(payload)
            if envelope.status:
                raise remote_error(envelope.exception_name, envelope.message, envelope.status)
            rsp = _decode_send(envelope.body)
        except (RemoteError, DecodeError) as e:
            self.quality.failure(part.broker_id)
            self._finish(job, None, _with_context(e, job, part))
            return
        if rsp.success:
            quality = self.quality
            if quality._failures:
                quality.success(part.broker_id)
            self._finish(job, SendResult(job.topic, part, rsp.message_id, rsp.append_time, rsp.append_offset,
                                         job.key), None)
            return
        code = rsp.err_code
        self.quality.refused(part.broker_id)
        if code == ErrorCode.SERVICE_UNAVAILABLE:
            self.quality.unavailable(part.broker_id)
        if code in RETRYABLE_CODES and job.attempt < self.config.retries and not self.closed:
            job.attempt += 1
            log.debug("broker %s refused a message with %d; resending (attempt %d)", part.address, code,
                      job.attempt + 1)
            self.loop.call_later(self.config.retry_backoff_ms / 1000.0, self._requeue, job)
            return
        err = error_for_code(code, rsp.err_msg)
        self._finish(job, None, _with_context(err, job, part))

    def _requeue(self, job: _Job) -> None:
        if job.finished:
            return
        if self.closed:
            self._finish(job, None, ClientClosedError("producer closed before the retry was sent"))
            return
        self._backlog.append(job)
        if self._backlog_task is None:
            self._backlog_task = self.loop.create_task(self._run_backlog())

    def _finish(self, job: _Job, result: SendResult | None, exc: BaseException | None) -> None:
        if job.finished:
            return
        job.finished = True
        if job.direct:
            self._direct_finished += 1
        else:
            self._outstanding -= 1
        if result is not None:
            n = self.acknowledged = self.acknowledged + 1
            if not n & _LATENCY_SAMPLE_MASK and job.t0:
                self._latency.record(time.monotonic() - job.t0)
        else:
            self.failed += 1
        try:
            job.done(job, result, exc)
        except Exception:
            log.exception("send completion callback failed")
        if self._idle_waiters and self.outstanding == 0:
            waiters, self._idle_waiters = self._idle_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    # ------------------------------------------------------------------ pre-connect

    def _preconnect(self) -> None:
        """Open connections to every broker serving a published topic (Java pre-connects too)."""
        if self.closed or self.session._pool is None:
            return
        pool = self.session.pool
        wanted = {p.address for t in self.session.topics for p in self.session.partitions.get(t, ())}
        for address in wanted:
            if pool.connected(address) is None and not pool.is_backing_off(address):
                task = self.loop.create_task(self._connect_quietly(address))
                self._bg.add(task)
                task.add_done_callback(self._bg.discard)

    async def _connect_quietly(self, address: str) -> None:
        try:
            await self.session.pool.get(address)
        except TubeMQError as exc:
            log.info("pre-connect to %s failed: %s", address, exc)


def _with_context(exc: BaseException, job: _Job, part: codec.Partition) -> BaseException:
    """Attach where the message was going (``exc.topic``, ``exc.partition``) for the caller.

    Connection-level errors are shared by every request of a connection: each job gets its own copy.
    """
    if isinstance(exc, (TubeMQTimeoutError, TubeMQConnectionError)):
        fresh = type(exc)(f"{exc} (topic {job.topic!r}, partition {part})")
        fresh.__cause__ = exc.__cause__
        exc = fresh
    try:
        exc.topic = job.topic  # type: ignore[attr-defined]
        exc.partition = part  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return exc


__all__ = ["RETRYABLE_CODES", "ProducerCore", "SendBuffer", "SendCallback", "SendResult", "check_callback", "format_msg_time",
           "prepare_message", "run_callback"]
