"""The producer's dispatcher: the asyncio engine behind ``tubemq.Producer`` and ``tubemq.aio.Producer`` (§5.1).

Runs on the producer's event loop. Every send becomes a :class:`~tubemq.producer.message.Job`; jobs
are dispatched in arrival order: when the topic's partitions are known and the chosen broker's
connection is open with room in its window, the job is encoded straight into a frame
(``codec.encode_send_request``, no protobuf objects) and queued on the connection in the same loop
iteration (no task, no coroutine per message). Anything that needs waiting (first publish of a topic,
a connect, a full window) moves the job and all later ones to a backlog drained by one task, which
keeps the order.

Other threads never touch this object's loop state: the blocking API (:mod:`tubemq._bridge`) hands
jobs over with :meth:`ProducerCore.accept_batch` on the loop thread, and its own round trips on
caller threads use only the thread-safe parts here (:meth:`route_now`, :meth:`build_frame`,
:meth:`judge`, :meth:`begin_external` / :meth:`end_external`; the router and the quality tracker
lock themselves).

Failure rules (§6.2): a broker's explicit refusal with a retryable code (419, 500, 503) is resent up
to ``retries`` times after ``retry_backoff_ms`` (the message was not stored, so no duplicate); a
connect failure before anything was written is retried, on another broker or, when none is left, on
the same one once its connect back-off ends, until the message's own timeout (a restarting broker is
waited for); a timeout, a lost connection or any other error is reported to the caller, since the
message may or may not be stored: never silently dropped, never silently duplicated.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import codec
from .._tasks import wait_for
from ..client.identity import local_ip, producer_id
from ..config import ProducerConfig
from ..errors import (
    ClientClosedError,
    DecodeError,
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
from ..protocol.constants import ErrorCode
from ..types import SendResult
from .message import Job, with_context
from .quality import BrokerQuality
from .router import Router
from .session import ProducerSession
from .stats import register_metrics

log = logging.getLogger("tubemq.producer.core")

#: Broker answers after which the message was certainly not stored and may be resent (§6.2).
RETRYABLE_CODES = frozenset({ErrorCode.SERVER_RECEIVE_OVERFLOW, ErrorCode.INTERNAL_SERVER_ERROR,
                             ErrorCode.SERVICE_UNAVAILABLE})

#: Send latency is recorded for one acknowledged message in 8 (enough for percentiles, cheaper).
_LATENCY_SAMPLE_MASK = 7
#: What :meth:`ProducerCore.judge` returns for a refusal that is to be resent.
RETRY = object()

_encode_send = codec.encode_send_request
#: a send answer straight to the SendResult (one compiled call; None: not stored, judge() says why)
_send_result = codec.decode_send_result
_decode_response = codec.decode_response
_decode_send = codec.decode_send_response


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
        self._batch = False  # True while accept_batch queues frames it writes itself at the end
        self._backlog: collections.deque[Job] = collections.deque()
        self._backlog_task: asyncio.Task[None] | None = None
        self._inflight: set[Job] = set()
        self._outstanding = 0  # jobs accepted on the loop thread and not finished (loop thread only)
        #: called on the loop thread after each answer (the bridge drains its inbox there)
        self.after_answer: Callable[[], None] | None = None
        # round trips done on callers' threads (tubemq._bridge): counted under _ext_lock, which also
        # orders them with close(); close() calls every _ext_abort hook once it stops waiting for them
        self._ext_lock = threading.Lock()
        self._ext = 0
        self._ext_sent = 0
        self._ext_bytes = 0
        self._ext_acked = 0
        self._ext_failed = 0
        self._ext_retried = 0
        self._external_ok = False  # set at start: callers' threads may route (no TLS, no user partitioner)
        self.ext_abort: list[Callable[[], None]] = []
        #: per-broker figures of the callers' own connections, and messages queued for this loop by
        #: other threads (both set by the bridge), for metrics
        self.external_io: Callable[[str], dict[str, int]] = lambda address: {}
        self.queued_elsewhere: Callable[[], int] = lambda: 0
        #: (sent, bytes, acknowledged) of the bridge's compiled blocking sends (tubemq._bridge._plain),
        #: which count themselves
        self.plain_figures: Callable[[], tuple[int, int, int]] = lambda: (0, 0, 0)
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._bg: set[asyncio.Task[Any]] = set()
        # hot-path counters: plain ints bumped on the loop thread, read by metrics snapshots
        self.sent = 0  # messages written to a broker (first attempt)
        self.retried = 0  # resends written after a retryable refusal
        self.bytes_sent = 0  # body + attribute bytes of the messages sent (first attempts)
        self.acknowledged = 0
        self.failed = 0
        self._latency = self.metrics.histogram("producer.send_latency")
        self._build = self.build_frame  # bound once: no per-message method objects
        self._answer = self._on_answer
        self.health = register_metrics(self)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Register with the master (Java: 5 attempts, then the error is raised)."""
        self._loop = asyncio.get_running_loop()
        self.session.on_metadata.append(self._preconnect)
        await self.session.start(register_attempts=5)
        self.health.remember_pool()
        self.started = True
        self._external_ok = not self.config.tls and not callable(self.router.partitioner)

    @property
    def outstanding(self) -> int:
        """Messages accepted and not yet finished (the loop's and the callers' round trips)."""
        with self._ext_lock:
            return self._outstanding + self._ext

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
        """Wait until every accepted message is answered (or ``timeout``); returns how many are left.

        Round trips on callers' threads end without the loop's knowledge, so the wait re-checks the
        count every few milliseconds as well as on every loop-side completion.
        """
        loop = self.loop
        deadline = None if timeout is None else loop.time() + timeout
        while self.outstanding:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                break
            fut: asyncio.Future[None] = loop.create_future()
            self._idle_waiters.append(fut)
            try:
                await wait_for(asyncio.shield(fut), 0.02 if left is None else min(left, 0.02))
            except asyncio.TimeoutError:
                pass
            finally:
                if fut in self._idle_waiters:
                    self._idle_waiters.remove(fut)
        return self.outstanding

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), fail what is left, close the master session and connections.

        Every accepted message ends up either acknowledged or failed: nothing is left hanging. Round
        trips still running on callers' threads are aborted through ``ext_abort`` (their callers get
        ClientClosedError).
        """
        if self.closed:
            return
        with self._ext_lock:  # a caller's round trip either counted itself (waited for below) or sees this
            self.closed = True
        wait = self.timeout_ms / 1000.0 if timeout is None else timeout
        if self.outstanding:
            await self.flush(wait)
        for abort in self.ext_abort:
            try:
                abort()
            except Exception:
                log.exception("aborting the blocking sends failed")
        if self._backlog_task is not None:
            self._backlog_task.cancel()
            try:
                await self._backlog_task
            except (asyncio.CancelledError, Exception):
                pass
        closed_exc = ClientClosedError("producer closed before the message was sent")
        while self._backlog:
            self._finish(self._backlog.popleft(), None, closed_exc)
        for job in list(self._inflight):
            self._finish(job, None, ClientClosedError("producer closed before the broker answered; "
                                                      "the message may or may not be stored"))
        for t in list(self._bg):
            t.cancel()
        await self.session.close()

    # ------------------------------------------------------------------ submission (loop thread)

    def accept_batch(self, jobs: Iterable[Job]) -> None:
        """Take jobs handed over from other threads, in order (loop thread): frames for the ones that
        can go at once are queued and written together at the end (one syscall per connection)."""
        if self.closed or self._backlog_task is not None:
            for job in jobs:
                self.accept(job)
            return
        fast = self._dispatch_fast
        now = time.monotonic()
        self._batch = True
        try:
            it = iter(jobs)
            for job in it:
                self._outstanding += 1
                job.t0 = now
                if not fast(job):
                    self._to_backlog(job)
                    for rest in it:  # keep the order: everything after it waits behind it
                        self.accept(rest)
                    break
        finally:
            self._batch = False
            pool = self.session._pool
            if pool is not None:
                pool.flush_all()  # write this batch now, not one loop iteration later

    def accept(self, job: Job) -> None:
        """Take a job on the loop thread: fast dispatch or the ordered backlog."""
        if self.closed:
            self._outstanding += 1  # _finish takes it back
            self._finish(job, None, ClientClosedError("producer is closed"))
            return
        self._outstanding += 1
        job.t0 = time.monotonic()
        if self._backlog_task is not None or not self._dispatch_fast(job):
            self._to_backlog(job)

    def _to_backlog(self, job: Job) -> None:
        self._backlog.append(job)
        if self._backlog_task is None:
            self._backlog_task = self.loop.create_task(self._run_backlog())

    # ------------------------------------------------------------------ dispatch

    def _dispatch_fast(self, job: Job) -> bool:
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
            part = self.router.choose(topic, parts, job.key, quality.shielded() if quality._until else ())
        except Exception as exc:  # a bad key or a user partitioner's error belongs to this message only
            self._finish(job, None, exc)
            return True
        pool = session._pool
        conn = None if pool is None else pool.connected(part.address)
        if conn is None or not conn.has_capacity:
            return False
        self._start(job, part, conn)
        return True

    def _too_large(self, job: Job) -> None:
        limit = self.session.max_size(job.topic)
        self._finish(job, None, MessageTooLargeError(
            ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH,
            f"message of {job.size} bytes (body + attributes) is over the max size {limit} of topic {job.topic!r}",
        ))

    async def _route_slow(self, job: Job) -> tuple[codec.Partition, Connection] | None:
        session = self.session
        topic = job.topic
        if topic not in session.topics:
            await session.publish([topic])
        parts = session.partitions.get(topic)
        deadline = job.t0 + self.timeout_ms / 1000.0
        while not parts:
            # published, but without a partition right now (a cluster restarting, a broker not yet
            # registered again): ask the master again (rate-limited), within the message's timeout
            problem = ""
            try:
                await session.refresh()
            except TubeMQError as exc:
                problem = f" (master: {exc})"
            parts = session.partitions.get(topic)
            left = deadline - time.monotonic()
            if not parts and (left <= 0 or self.closed):
                raise TopicNotPublishedError(
                    ErrorCode.PARAMETER_MSG_TOPIC_NO_PARTITION,
                    f"topic {topic!r} has no partition accepting messages right now{problem}",
                )
            if not parts:
                await asyncio.sleep(min(left, 0.1))
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
                # nothing was written: trying again (another broker, or this one later) cannot duplicate it
                self.quality.failure(part.broker_id)
                tries += 1
                if job.key is None and tries < len(brokers):
                    log.info("broker %s unreachable (%s), trying another", part.address, exc)
                    continue
                # every candidate refused the connect (a broker restarting?): wait for its back-off to
                # end and try again, within the message's own timeout, rather than fail at once
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise
                pause = min(left, max(0.01, session.pool.backoff_left(part.address)))
                log.debug("broker %s unreachable (%s); retrying in %.2f s", part.address, exc, pause)
                await asyncio.sleep(pause)
                parts = session.partitions.get(topic) or parts

    async def _wait_room(self, job: Job, part: codec.Partition, conn: Connection) -> None:
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

    def _start(self, job: Job, part: codec.Partition, conn: Connection) -> None:
        job.part = part
        try:
            if self._batch:  # accept_batch writes the batch itself
                conn.start_call_cb(self._build, job, self.timeout_ms, self._answer, flush=False)
            elif job.now:  # awaited alone: write it now (saves the loop a round before the write)
                conn.start_call_cb(self._build, job, self.timeout_ms, self._answer, write=True)
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

    def build_frame(self, serial: int, job: Job) -> bytes:
        """The whole send frame for ``job`` (codec hot path; tokens as of now; any thread)."""
        session = self.session
        return _encode_send(serial, self.client_id, job.topic, job.part.partition_id, job.payload,  # type: ignore[union-attr]
                            job.flag, self.sent_addr, session.visit_token, msg_type=job.msg_type,
                            msg_time=job.msg_time, auth_token=session.auth_token or None,
                            timeout_ms=self.timeout_ms)

    def stored(self, job: Job, part: codec.Partition, payload: bytes) -> SendResult | None:
        """The SendResult when ``payload`` says the message was stored, else None (then :meth:`judge`
        tells what it says); any thread."""
        try:
            result: SendResult | None = _send_result(payload, SendResult, job.topic, part, job.key)
        except DecodeError:
            return None
        if result is not None and self.quality._failures:
            self.quality.success(part.broker_id)
        return result

    def judge(self, job: Job, part: codec.Partition, payload: bytes | None,
              exc: BaseException | None) -> SendResult | BaseException | object:
        """The outcome of one attempt (any thread): a SendResult, the error to report, or ``RETRY`` for a
        retryable refusal with attempts left (the caller resends it after ``retry_backoff_ms``).
        Updates the broker quality figures on the way."""
        quality = self.quality
        if exc is not None:
            quality.failure(part.broker_id)
            if isinstance(exc, (TubeMQTimeoutError, TubeMQConnectionError)):
                self.metrics.inc("producer.unknown_outcome")
            return with_context(exc, job, part)
        try:
            envelope = _decode_response(payload)
            if envelope.status:
                raise remote_error(envelope.exception_name, envelope.message, envelope.status)
            rsp = _decode_send(envelope.body)
        except (RemoteError, DecodeError) as e:
            quality.failure(part.broker_id)
            return with_context(e, job, part)
        if rsp.success:
            if quality._failures:
                quality.success(part.broker_id)
            return SendResult(job.topic, part, rsp.message_id, rsp.append_time, rsp.append_offset, job.key)
        code = rsp.err_code
        quality.refused(part.broker_id)
        if code == ErrorCode.SERVICE_UNAVAILABLE:
            quality.unavailable(part.broker_id)
        if code in RETRYABLE_CODES and job.attempt < self.config.retries and not self.closed:
            job.attempt += 1
            log.debug("broker %s refused a message with %d; resending (attempt %d)", part.address, code,
                      job.attempt + 1)
            return RETRY
        return with_context(error_for_code(code, rsp.err_msg), job, part)

    def _on_answer(self, job: Job, payload: bytes | None, exc: BaseException | None) -> None:
        self._inflight.discard(job)
        if self.after_answer is not None:
            self.after_answer()
        if job.finished:
            return
        part = job.part
        if exc is None:  # the common case first: stored
            result = self.stored(job, part, payload)  # type: ignore[arg-type]
            if result is not None:
                self._finish(job, result, None)
                return
        outcome = self.judge(job, part, payload, exc)  # type: ignore[arg-type]
        if outcome is RETRY:
            self.loop.call_later(self.config.retry_backoff_ms / 1000.0, self._requeue, job)
        elif isinstance(outcome, SendResult):
            self._finish(job, outcome, None)
        else:
            self._finish(job, None, outcome)  # type: ignore[arg-type]

    def _requeue(self, job: Job) -> None:
        if job.finished:
            return
        if self.closed:
            self._finish(job, None, ClientClosedError("producer closed before the retry was sent"))
            return
        self._backlog.append(job)
        if self._backlog_task is None:
            self._backlog_task = self.loop.create_task(self._run_backlog())

    def _finish(self, job: Job, result: SendResult | None, exc: BaseException | None) -> None:
        if job.finished:
            return
        job.finished = True
        self._outstanding -= 1
        if result is not None:
            n = self.acknowledged = self.acknowledged + 1
            if not n & _LATENCY_SAMPLE_MASK and job.t0:
                self._latency.observe(time.monotonic() - job.t0)
        else:
            self.failed += 1
        try:
            job.done(job, result, exc)  # type: ignore[misc]
        except Exception:
            log.exception("send completion callback failed")
        if self._idle_waiters and self._outstanding == 0:
            waiters, self._idle_waiters = self._idle_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    # ------------------------------------------------------------------ round trips on callers' threads

    def route_now(self, job: Job) -> codec.Partition | None:
        """The partition for a round trip on the caller's thread, or None when the job must go through
        the loop instead (see :meth:`route_plain`)."""
        return self.route_plain(job.topic, job.size, job.key)

    def route_plain(self, topic: str, size: int, key: Any) -> codec.Partition | None:
        """:meth:`route_now` without a job (any thread): None when the message must go through the
        loop: not started or closed, topic not published or without partitions, too large (the loop
        reports it), shielded brokers or a user partitioner (loop business), TLS."""
        if self.closed or not self._external_ok:
            return None
        session = self.session
        parts = session.partitions.get(topic)
        if not parts or topic not in session.topics or self.quality._until:
            return None
        if size > session.topic_max_sizes.get(topic, session.max_msg_size):
            return None
        try:
            return self.router.choose(topic, parts, key)
        except Exception:  # noqa: BLE001 - the loop path reports it to the caller
            return None

    def begin_external(self) -> bool:
        """Count a send starting on a caller's thread; False once the producer is closed."""
        with self._ext_lock:
            if self.closed:
                return False
            self._ext += 1
        return True

    def end_external(self, size: int, result: SendResult | None, t0: float, failed: bool, written: int,
                     first_attempt: int) -> None:
        """A send on a caller's thread ended: acknowledged (``result``), failed for good (``failed``),
        or neither (handed over to the loop, which counts it from then on); ``written`` attempts of it
        went out from that thread, starting with attempt number ``first_attempt``; ``size``: the
        message's body + attribute bytes."""
        sample = False
        with self._ext_lock:
            self._ext -= 1
            if written:
                if first_attempt == 0:
                    self._ext_sent += 1
                    self._ext_bytes += size
                    self._ext_retried += written - 1
                else:
                    self._ext_retried += written
            if result is not None:
                n = self._ext_acked = self._ext_acked + 1
                sample = not n & _LATENCY_SAMPLE_MASK
            elif failed:
                self._ext_failed += 1
        if sample:
            self._latency.observe(time.monotonic() - t0)

    @property
    def external_acknowledged(self) -> int:
        """Messages acknowledged through round trips on callers' threads."""
        return self._ext_acked + self.plain_figures()[2]

    def external_figures(self) -> tuple[int, int, int]:
        """(sent, bytes, acknowledged) of the round trips on callers' threads, both routes."""
        sent, size, acked = self.plain_figures()
        return self._ext_sent + sent, self._ext_bytes + size, self._ext_acked + acked

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


__all__ = ["RETRY", "RETRYABLE_CODES", "ProducerCore"]
