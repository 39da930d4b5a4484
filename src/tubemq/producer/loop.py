"""The producer's event-loop driver: the engine's sends moved by asyncio (§5.1).

Runs on the producer's event loop. Every send is a :class:`~tubemq.producer.message.Job` the engine
(:class:`~tubemq.producer.engine.ProducerEngine`) admitted; jobs start in arrival order: when the
engine routes one and the chosen broker's connection is open with room in its window, its frame
(``engine.frame``) is queued on the connection in the same loop iteration (no task, no coroutine per
message). Anything that needs waiting (first publish of a topic, a connect, a full window) moves the
job and all later ones to a backlog drained by one task, which keeps the order. Every wait is cut at
the job's deadline.

The blocking API's threads hand jobs over with :meth:`LoopDriver.accept_batch` (called on the loop
thread); what to do with an answer, a retry or an outcome is the engine's call, never this driver's.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterable
from typing import Any

from .. import codec
from .._tasks import wait_for
from ..client.identity import local_ip, producer_id
from ..config import ProducerConfig
from ..errors import (
    ClientClosedError,
    TopicNotPublishedError,
    TubeMQConnectionError,
    TubeMQError,
    TubeMQTimeoutError,
)
from ..metrics import Metrics
from ..net.connection import Connection
from ..protocol.constants import ErrorCode
from ..types import SendResult
from .engine import RETRY, ProducerEngine
from .message import Job
from .session import ProducerSession

log = logging.getLogger("tubemq.producer.loop")

_monotonic = time.monotonic


#: how far past a job's deadline the wait for its partition or connection is cut at the latest (s)
_BACKSTOP = 0.2


class LoopDriver:
    """The producer on its event loop: master session, connections, and the engine's sends on them."""

    def __init__(self, config: ProducerConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        host = config.local_address or local_ip()
        self.session = ProducerSession(config, producer_id(host), metrics=self.metrics)
        self.engine = engine = ProducerEngine(config, self.session, self.metrics)
        self.client_id = engine.client_id
        self.started = False
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._batch = False  # True while accept_batch queues frames it writes itself at the end
        self._batch_counts = [0, 0, 0]  # the batch's attempts written: sent, their bytes, resends
        self._backlog: collections.deque[Job] = collections.deque()
        self._backlog_task: asyncio.Task[None] | None = None
        self._inflight: set[Job] = set()
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._bg: set[asyncio.Task[Any]] = set()
        self._frame = engine.frame  # bound once: no per-message method objects
        self._engine_settle = engine.settle
        self._written = engine.written_batch
        self._answer = self._on_answer
        engine.set_loop_figures(lambda: len(self._inflight), lambda: len(self._backlog))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Register with the master (Java: 5 attempts, then the error is raised)."""
        self._loop = asyncio.get_running_loop()
        self.session.on_metadata.append(self._preconnect)
        await self.session.start(register_attempts=5)
        self.session.pool.answer_probes.append(self.engine.side_answered)
        self.engine.health.remember_pool()
        self.started = True

    @property
    def closed(self) -> bool:
        return self.engine.closed

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    async def publish(self, topics: str | Iterable[str]) -> set[str]:
        if self.engine.closed:
            raise ClientClosedError("producer is closed")
        if isinstance(topics, str):
            topics = [topics]
        result = await self.session.publish(list(topics))
        self._preconnect()
        return result

    async def flush(self, timeout: float | None = None) -> int:
        """Wait until every admitted message is settled (or ``timeout``); returns how many are left.

        Sends on callers' threads settle without the loop's knowledge, so the wait re-checks the
        count every few milliseconds as well as on every loop-side completion.
        """
        engine = self.engine
        loop = self.loop
        deadline = None if timeout is None else loop.time() + timeout
        while engine.outstanding:
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
        return engine.outstanding

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), fail what is left, close the master session and connections.

        Every admitted message ends up either acknowledged or failed: nothing is left hanging.
        """
        if self._closing:
            return
        self._closing = True
        engine = self.engine
        engine.close()
        if engine.outstanding and self._loop is not None:
            await self.flush(engine.timeout if timeout is None else timeout)
        if self._backlog_task is not None:
            self._backlog_task.cancel()
            try:
                await self._backlog_task
            except (asyncio.CancelledError, Exception):
                pass
        closed_exc = ClientClosedError("producer closed before the message was sent")
        while self._backlog:
            self._settle(self._backlog.popleft(), None, closed_exc)
        for job in list(self._inflight):
            self._settle(job, None, ClientClosedError("producer closed before the broker answered; "
                                                      "the message may or may not be stored"))
        for t in list(self._bg):
            t.cancel()
        pool = self.session._pool
        if pool is not None and self.engine.side_answered in pool.answer_probes:
            pool.answer_probes.remove(self.engine.side_answered)
        await self.session.close()

    # ------------------------------------------------------------------ submission (loop thread)

    def accept_batch(self, jobs: Iterable[Job]) -> None:
        """Take admitted jobs handed over from other threads, in order (loop thread): frames for the
        ones that can go at once are queued and written together at the end (one syscall per
        connection)."""
        if self.engine.closed or self._backlog_task is not None:
            for job in jobs:
                self.accept(job)
            return
        fast = self._dispatch_fast
        self._batch = True
        self._batch_counts = [0, 0, 0]
        try:
            it = iter(jobs)
            for job in it:
                if not fast(job):
                    self._to_backlog(job)
                    for rest in it:  # keep the order: everything after it waits behind it
                        self.accept(rest)
                    break
        finally:
            self._batch = False
            sent, size, resent = self._batch_counts
            if sent or resent:
                self._written(sent, size, resent)
            pool = self.session._pool
            if pool is not None:
                pool.flush_all()  # write this batch now, not one loop iteration later

    def accept(self, job: Job) -> None:
        """Take an admitted job on the loop thread: started now, or queued in the ordered backlog."""
        if self.engine.closed:
            self._settle(job, None, ClientClosedError("producer is closed"))
            return
        if self._backlog_task is not None or not self._dispatch_fast(job):
            self._to_backlog(job)

    def _to_backlog(self, job: Job) -> None:
        self._backlog.append(job)
        if self._backlog_task is None:
            self._backlog_task = self.loop.create_task(self._run_backlog())

    # ------------------------------------------------------------------ the send sequence

    def _dispatch_fast(self, job: Job) -> bool:
        """Route and start ``job`` now if nothing needs waiting; False sends it to the backlog."""
        try:
            part = self.engine.route(job)
        except Exception as exc:  # too large, a bad key, a partitioner's error: this message only
            self._settle(job, None, exc)
            return True
        if part is None:
            return False
        pool = self.session._pool
        conn = None if pool is None else pool.connected(part.address)
        if conn is None or not conn.has_capacity:
            return False
        self._start(job, part, conn)
        return True

    async def _run_backlog(self) -> None:
        backlog = self._backlog
        engine = self.engine
        try:
            while backlog:
                job = backlog[0]
                if job.finished:
                    backlog.popleft()
                    continue
                if self._dispatch_fast(job):  # no waiting needed: no coroutine for this job
                    backlog.popleft()
                    continue
                left = engine.left(job)
                try:
                    if left <= 0:
                        raise engine.expired(job, "waiting for a partition list, a connection or window room")
                    try:
                        # the steps inside watch the deadline themselves; this bounds a master or
                        # connect that hangs
                        part, conn = await wait_for(self._route_slow(job), left + _BACKSTOP)
                    except TubeMQError:
                        raise
                    except asyncio.TimeoutError:
                        raise engine.expired(job, "waiting for a partition list, a connection or window room") from None
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # TubeMQError, or anything a user partitioner raises
                    backlog.popleft()
                    self._settle(job, None, exc)
                    continue
                backlog.popleft()
                if not job.finished:
                    if conn.closed:
                        backlog.appendleft(job)
                        continue
                    self._start(job, part, conn)
        finally:
            self._backlog_task = None

    async def _route_slow(self, job: Job) -> tuple[codec.Partition, Connection]:
        """Wait for what ``job`` needs to start: its topic published, a partition, a connection with
        room (the caller bounds it by the job's deadline)."""
        session = self.session
        engine = self.engine
        topic = job.topic
        if topic not in session.topics:
            await session.publish([topic])
        part = engine.route(job)
        while part is None:
            # published, but without a partition right now (a cluster restarting, a broker not yet
            # registered again): ask the master again (rate-limited), within the message's timeout
            problem = ""
            try:
                await session.refresh()
            except TubeMQError as exc:
                problem = f" (master: {exc})"
            part = engine.route(job)
            if part is None:
                left = engine.left(job)
                if left <= 0 or engine.closed:
                    raise TopicNotPublishedError(
                        ErrorCode.PARAMETER_MSG_TOPIC_NO_PARTITION,
                        f"topic {topic!r} has no partition accepting messages right now{problem}",
                    )
                await asyncio.sleep(min(left, 0.1))
        brokers = {p.broker_id for p in session.partitions.get(topic, ())}
        tries = 0
        while True:
            try:
                conn = await session.pool.get(part.address)
                if not conn.has_capacity:
                    await self._wait_room(job, part, conn)
                return part, conn
            except TubeMQConnectionError as exc:
                # nothing was written: trying again (another broker, or this one later) cannot duplicate it
                engine.quality.failure(part.broker_id)
                tries += 1
                if job.key is None and tries < len(brokers):
                    log.info("broker %s unreachable (%s), trying another", part.address, exc)
                    part = engine.route(job) or part
                    continue
                # every candidate refused the connect (a broker restarting?): wait for its back-off to
                # end and try again, within the message's own timeout, rather than fail at once
                left = engine.left(job)
                if left <= 0 or engine.closed:
                    raise
                pause = min(left, max(0.01, session.pool.backoff_left(part.address)))
                log.debug("broker %s unreachable (%s); retrying in %.2f s", part.address, exc, pause)
                await asyncio.sleep(pause)
                part = engine.route(job) or part

    async def _wait_room(self, job: Job, part: codec.Partition, conn: Connection) -> None:
        """Wait for room on ``conn`` within the message's timeout. A connection that read nothing
        for a whole timeout while full belongs to a peer that stopped reading (a stalled broker
        keeps the socket open): drop it so the next message reconnects instead of queueing behind."""
        engine = self.engine
        try:
            await conn.wait_capacity(engine.left(job))
        except TubeMQTimeoutError:
            engine.quality.failure(part.broker_id)
            if conn.read_idle >= engine.timeout and not conn.closed:
                log.warning("broker %s read nothing for %.1f s with its write buffer full; reconnecting",
                            conn.address, conn.read_idle)
                await self.session.pool.discard(conn.address)
            raise

    def _start(self, job: Job, part: codec.Partition, conn: Connection) -> None:
        engine = self.engine
        left = job.deadline - _monotonic()
        if left <= 0:
            self._settle(job, None, engine.expired(job, "waiting to be written"))
            return
        job.part = part
        timeout_ms = int(left * 1000.0) + 1  # what is left of its deadline, in whole ms (at least 1)
        try:
            if self._batch:  # accept_batch writes the batch itself
                conn.start_call_cb(self._frame, job, timeout_ms, self._answer, flush=False)
            elif job.now:  # awaited alone: write it now (saves the loop a round before the write)
                conn.start_call_cb(self._frame, job, timeout_ms, self._answer, write=True)
            else:
                conn.start_call_cb(self._frame, job, timeout_ms, self._answer)
        except TubeMQError as exc:
            self._settle(job, None, exc)
            return
        self._inflight.add(job)
        if self._batch:  # counted with the rest of the batch (accept_batch)
            counts = self._batch_counts
            if job.attempt:
                counts[2] += 1
            else:
                counts[0] += 1
                counts[1] += job.size
        elif job.attempt:
            self._written(0, 0, 1)
        else:
            self._written(1, job.size, 0)

    def _on_answer(self, job: Job, payload: bytes | None, exc: BaseException | None) -> None:
        self._inflight.discard(job)
        if job.finished:
            return
        engine = self.engine
        part: codec.Partition = job.part  # type: ignore[assignment]
        if exc is None:  # the common case first: stored
            result = engine.stored(job, part, payload)  # type: ignore[arg-type]
            if result is not None:
                self._engine_settle(job, result, None)
                if self._idle_waiters and not engine.outstanding:
                    self._wake_idle()
                return
        outcome = engine.judge(job, part, payload, exc)
        if outcome is RETRY:
            self.loop.call_later(engine.backoff, self._requeue, job)
        elif type(outcome) is SendResult:
            self._settle(job, outcome, None)
        else:
            self._settle(job, None, outcome)  # type: ignore[arg-type]

    def _requeue(self, job: Job) -> None:
        if job.finished:
            return
        problem = self.engine.retry_error(job)
        if problem is not None:
            self._settle(job, None, problem)
            return
        self._to_backlog(job)

    def _settle(self, job: Job, result: SendResult | None, exc: BaseException | None) -> None:
        self._engine_settle(job, result, exc)
        if self._idle_waiters and not self.engine.outstanding:
            self._wake_idle()

    def _wake_idle(self) -> None:
        """Nothing is outstanding any more: a flush waiting for that returns now."""
        waiters, self._idle_waiters = self._idle_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # ------------------------------------------------------------------ pre-connect

    def _preconnect(self) -> None:
        """Open connections to every broker serving a published topic (Java pre-connects too)."""
        if self.engine.closed or self.session._pool is None:
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


__all__ = ["LoopDriver"]
