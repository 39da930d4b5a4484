"""``tubemq.aio.Producer``: the producer, the one implementation behind both APIs.

Runs on the caller's event loop. ``await producer.send(...)`` returns a :class:`SendResult`; many
concurrent ``send`` calls are pipelined on one connection per broker. ``max_pending`` bounds the
messages in flight (:class:`~tubemq.producer.buffer.SendBuffer`; further senders wait).

asyncio only: the decisions are the engine's (:class:`~tubemq.producer.engine.ProducerEngine`), the
moving of bytes the loop driver's (:class:`~tubemq.producer.loop.LoopDriver`). ``tubemq.Producer`` runs
this class on the shared loop thread; its thread crossing and its own round trips on callers' threads
are the bridge's, which drives the same engine (:attr:`engine`, :attr:`driver`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..config import ProducerConfig
from ..errors import ClientClosedError, TubeMQError, TubeMQTimeoutError
from ..net.loop import close_when_forgotten, with_operation
from ..types import SendResult
from .engine import ProducerEngine
from .loop import LoopDriver
from .message import Job, SendCallback, check_callback, make_job, run_callback

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..config import ProducerOptions


class Producer:
    """``async with tubemq.aio.Producer("h:8715") as p: await p.send("topic", b"data")``.

    ``send`` waits for the broker's answer (as the blocking ``tubemq.Producer.send`` does; aiokafka's
    ``send_and_wait``, an alias here); ``send_async`` returns the answer's future, waiting only for
    buffer room (aiokafka's ``send``); ``send_nowait`` returns it without awaiting anything.
    docs/guide/serializers.md, "Porting from aiokafka", says why ``send`` keeps waiting.
    """

    def __init__(self, master: str | Iterable[str] | None = None, *, config: ProducerConfig | None = None,
                 **options: Unpack[ProducerOptions]) -> None:
        if config is None:
            config = ProducerConfig.from_options(master, options)  # type: ignore[arg-type]
        elif master is not None or options:
            changes: dict[str, Any] = dict(options, **({"master": master} if master is not None else {}))
            config = dataclasses.replace(config, **changes)
        self.config = config
        self._core = LoopDriver(config)
        self._engine = self._core.engine
        self.client_id: str = self._core.client_id
        self._buffer = self._engine.buffer
        self._start_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the producer's loop, once started
        self._closed = False
        #: set by a blocking facade before ``start()``: a forgotten client's finalizer calls it after closing
        self.release_loop: Callable[[], None] | None = None
        self._finalizer: Any = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def engine(self) -> ProducerEngine:
        """The producer's engine, for drivers on other threads (the blocking API); not for applications."""
        return self._engine

    @property
    def driver(self) -> LoopDriver:
        """The producer's event-loop driver, for drivers on other threads; not for applications."""
        return self._core

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, send-latency percentiles, master and per-broker
        health (keys listed in docs/guide/metrics.md). Call it from the producer's loop."""
        return self._core.metrics.snapshot()

    def partitions(self, topic: str) -> list[Any]:
        """The partitions currently known for a published topic."""
        return list(self._core.session.partitions.get(topic, ()))

    async def start(self) -> Producer:
        """Register with the master (called by ``async with`` and, lazily, by the first send).

        Raises if no master accepts the producer after 5 attempts, like Java's ``start()``. Once
        started, a producer dropped without ``close()`` (or still open at exit) is closed by its
        finalizer instead of heartbeating on.
        """
        if self._closed:
            raise ClientClosedError("producer is closed")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self._core.started:
                try:
                    await self._core.start()
                    self._loop = self._core.loop
                except TubeMQError as exc:
                    raise with_operation(exc, f"producer start (register with master {','.join(self.config.masters)})")  # noqa: B904 - cause set
                self._finalizer = close_when_forgotten(self, self._core.close, self.release_loop)
        return self

    async def publish(self, topics: str | Iterable[str]) -> set[str]:
        """Declare topics (optional: sends publish unseen topics themselves); returns those usable."""
        await self._ensure_started()
        return await self._core.publish(topics if isinstance(topics, str) else list(topics))

    async def send(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                   stream_id: str | None = None, msg_time: Any = None, key: Any = None) -> SendResult:
        """Send one message and wait for the broker's answer (written at once, not batched)."""
        # _queue inlined: the one-in-flight path pays for every call (no nested coroutine here)
        core = self._core
        if self._closed or not core.started:
            await self._ensure_started()
        job = make_job(topic, data, attributes, stream_id, msg_time, key, self._done, self.config.serialize_hook)
        job.now = True
        if not self._engine.try_admit(job):  # full, or closed (then take_async raises)
            await self._buffer.take_async()
            self._engine.start_clock(job)
        fut: asyncio.Future[SendResult] = self._loop.create_future()  # type: ignore[union-attr]
        job.fut = fut
        core.accept(job)
        return await fut

    #: aiokafka's name for the same thing (``await producer.send_and_wait(topic, value)``)
    send_and_wait = send

    async def send_async(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                         stream_id: str | None = None, msg_time: Any = None, key: Any = None,
                         callback: SendCallback | None = None) -> asyncio.Future[SendResult]:
        """Queue a message and return its future at once (waits only while the buffer is full).

        The pipelining form without a task per message: ``futs = [await p.send_async(t, d) for d in
        batch]; results = await asyncio.gather(*futs)``.

        ``callback(result, exc)`` (optional) is called exactly once when the message completes, on
        this loop, before the future resolves: ``(SendResult, None)`` or ``(None, exception)``. An
        exception it raises is logged (``tubemq.producer``) and ignored. Cheaper than
        ``future.add_done_callback`` (no extra loop callback per message); nobody needs to await the
        future then.
        """
        return await self._queue(topic, data, attributes, stream_id, msg_time, key, callback, False)

    def send_nowait(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                    stream_id: str | None = None, msg_time: Any = None, key: Any = None,
                    callback: SendCallback | None = None) -> asyncio.Future[SendResult]:
        """Queue a message without awaiting anything; returns the answer's future.

        aiokafka's ``fut = await producer.send(...)`` in a plain call: for code that queues from
        synchronous callbacks on the loop. Needs a started producer (``await start()`` or ``async
        with``); a full buffer (``max_pending``) raises TubeMQTimeoutError at once instead of waiting.
        Call it on the producer's event loop.
        """
        core = self._core
        if self._closed:
            raise ClientClosedError("producer is closed")
        if not core.started:
            raise TubeMQError("send_nowait() needs a started producer: await producer.start() (or async with) first")
        job = make_job(topic, data, attributes, stream_id, msg_time, key, self._done, self.config.serialize_hook)
        if callback is not None:
            job.cb = check_callback(callback)
        if not self._buffer.try_take():
            raise TubeMQTimeoutError(f"send buffer full: {self.config.max_pending} messages outstanding "
                                     "(send_nowait does not wait; use await send_async() to wait for room)")
        self._engine.start_clock(job)
        fut: asyncio.Future[SendResult] = core.loop.create_future()
        job.fut = fut
        core.accept(job)
        return fut

    async def _queue(self, topic: str, data: bytes, attributes: Mapping[str, Any] | None, stream_id: str | None,
                     msg_time: Any, key: Any, callback: SendCallback | None, now: bool) -> asyncio.Future[SendResult]:
        core = self._core
        if self._closed or not core.started:
            await self._ensure_started()
        job = make_job(topic, data, attributes, stream_id, msg_time, key, self._done, self.config.serialize_hook)
        if callback is not None:
            job.cb = check_callback(callback)
        job.now = now
        if not self._engine.try_admit(job):  # full, or closed (then take_async raises)
            await self._buffer.take_async()
            self._engine.start_clock(job)
        fut: asyncio.Future[SendResult] = core.loop.create_future()
        job.fut = fut
        core.accept(job)
        return fut

    # ------------------------------------------------------------------ completion (loop thread)

    def _done(self, job: Job, result: SendResult | None, exc: BaseException | None) -> None:
        """Completion of a job of this API (its slot is free again): its callback, then its future."""
        if job.cb is not None:
            run_callback(job, result, exc)
        fut = job.fut
        if fut is None:  # refused before it was queued
            return
        if fut.done():  # the awaiting task was cancelled
            return
        if exc is None:
            fut.set_result(result)
        else:
            fut.set_exception(exc)
            if job.cb is not None:
                fut.exception()  # the callback got the error; nobody has to await this future

    # ------------------------------------------------------------------ flush / close

    async def flush(self, timeout: float | None = 10.0) -> int:
        """Wait until every queued message is answered; returns the number still pending."""
        if not self._core.started or self._closed:
            return 0
        return await self._core.flush(timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``, default the RPC timeout), fail the rest, deregister. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._finalizer is not None:
            self._finalizer.detach()
        await self._core.close(timeout)

    async def _ensure_started(self) -> None:
        if self._closed:
            raise ClientClosedError("producer is closed")
        if not self._core.started:
            await self.start()

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<tubemq.aio.Producer {self.client_id} {'closed' if self._closed else 'open'}>"


__all__ = ["Producer", "SendResult"]
