"""``tubemq.aio.Producer``: the producer, the one implementation behind both APIs.

Runs on the caller's event loop. ``await producer.send(...)`` returns a :class:`SendResult`; many
concurrent ``send`` calls are pipelined on one connection per broker. ``max_pending`` bounds the
messages in flight (:class:`~tubemq.producer.core.SendBuffer`; further senders wait).

``tubemq.Producer`` runs this class on the shared loop thread; its hot paths (``send``,
``send_async`` from other threads) enter through :meth:`Producer.submit_threadsafe` and
:meth:`Producer.send_blocking` without a coroutine per message: the job goes through the core's
inbox (a blocking send writes its frame itself when nothing is queued ahead of it) and the caller
waits on a future or a bare lock the loop thread completes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from _thread import allocate_lock as _allocate_lock
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..config import ProducerConfig
from ..errors import ClientClosedError, TubeMQError, TubeMQTimeoutError
from ..net.loop import close_when_forgotten, with_operation
from .core import ProducerCore, SendBuffer, SendCallback, SendResult, check_callback, run_callback
from .future import SendFuture

_AsyncioFuture = asyncio.Future
#: the loop running in this thread or None, without raising (a C call: cheap on the hot path)
_running_loop = asyncio._get_running_loop


class Producer:
    """``async with tubemq.aio.Producer("h:8715") as p: await p.send("topic", b"data")``.

    ``send`` waits for the broker's answer; ``send_async`` returns the answer's future at once (the
    reverse of aiokafka's ``send``/``send_and_wait``; ``send_and_wait`` is an alias of ``send``).
    """

    def __init__(self, master: str | Iterable[str] | None = None, *, config: ProducerConfig | None = None,
                 **options: Any) -> None:
        if config is None:
            config = ProducerConfig.from_options(master, options)  # type: ignore[arg-type]
        elif master is not None or options:
            config = dataclasses.replace(config, **dict(options, **({"master": master} if master is not None else {})))
        self.config = config
        self._core = ProducerCore(config)
        self.client_id: str = self._core.client_id
        self._buffer = SendBuffer(config.max_pending, config.max_block_ms / 1000.0)
        self._start_lock: asyncio.Lock | None = None
        self._closed = False
        self._release_loop: Callable[[], None] | None = None  # a sync facade's loop-thread reference
        self._finalizer: Any = None
        self._max_wait = self._default_wait()

    @property
    def closed(self) -> bool:
        return self._closed

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, send-latency percentiles, master and per-broker
        health (keys listed in README.md, "Metrics and logging"). Call it from the producer's loop."""
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
                except TubeMQError as exc:
                    raise with_operation(exc, f"producer start (register with master {','.join(self.config.masters)})")  # noqa: B904 - cause set
                self._buffer.loop = self._core.loop
                self._finalizer = close_when_forgotten(self, self._core.close, self._release_loop)
        return self

    async def publish(self, topics: str | Iterable[str]) -> set[str]:
        """Declare topics (optional: sends publish unseen topics themselves); returns those usable."""
        await self._ensure_started()
        return await self._core.publish(topics if isinstance(topics, str) else list(topics))

    async def send(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                   stream_id: str | None = None, msg_time: Any = None, key: Any = None) -> SendResult:
        """Send one message and wait for the broker's answer."""
        fut = await self.send_async(topic, data, attributes=attributes, stream_id=stream_id, msg_time=msg_time,
                                    key=key)
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
        core = self._core
        if self._closed or not core.started:
            await self._ensure_started()
        job = core.make_job(topic, data, attributes, stream_id, msg_time, key, self._done)
        if callback is not None:
            job.cb = check_callback(callback)
        buf = self._buffer
        n = buf.take()
        if buf.over(n):
            await buf.wait_async(n)
        fut: asyncio.Future[SendResult] = core.loop.create_future()
        job.fut = fut
        core.accept(job)
        return fut

    # ------------------------------------------------------------------ entry points for other threads

    def submit_threadsafe(self, topic: str, data: bytes, attributes: Mapping[str, Any] | None,
                          stream_id: str | None, msg_time: Any, key: Any, callback: SendCallback | None,
                          waiter: Any, direct: bool = False) -> bool:
        """``send_async``/``send`` of the blocking API (any thread but the loop's, unless from a
        callback): take a buffer slot, waiting for one if needed, and queue the job on the core's
        inbox; ``waiter`` (a :class:`SendFuture` or :class:`Waiter`) is completed on the loop thread.
        ``direct``: write it from this thread if possible (:meth:`ProducerCore.send_direct`); returns
        whether it was (False: it went to the inbox)."""
        if self._closed:
            raise ClientClosedError("producer is closed")
        core = self._core
        job = core.make_job(topic, data, attributes, stream_id, msg_time, key, self._done)
        job.fut = waiter
        if callback is not None:
            job.cb = check_callback(callback)
        buf = self._buffer
        n = buf.take()
        if buf.over(n):
            buf.wait(n, core.loop is _running_loop())
        if self._closed:
            core.loop.call_soon_threadsafe(buf.release)
            raise ClientClosedError("producer is closed")
        if direct and core.send_direct(job):
            return True
        core.submit_threadsafe(job)
        return False

    def send_threadsafe(self, topic: str, data: bytes, attributes: Mapping[str, Any] | None = None,
                        stream_id: str | None = None, msg_time: Any = None, key: Any = None,
                        callback: SendCallback | None = None) -> SendFuture[SendResult]:
        """``tubemq.Producer.send_async``: queue from another thread; a ``concurrent.futures.Future``."""
        fut: SendFuture[SendResult] = SendFuture()
        fut._kick = self._core.kick
        self.submit_threadsafe(topic, data, attributes, stream_id, msg_time, key, callback, fut)
        return fut

    def send_blocking(self, topic: str, data: bytes, attributes: Mapping[str, Any] | None = None,
                      stream_id: str | None = None, msg_time: Any = None, key: Any = None,
                      timeout: float | None = None) -> SendResult:
        """``tubemq.Producer.send``: send from another thread and block for the answer.

        This thread writes the frame itself when nothing is queued ahead of it
        (:meth:`ProducerCore.send_direct`: no loop wake-up), else queues it like ``send_async``. It
        then blocks on a bare lock that the loop thread releases with the answer (:class:`Waiter`),
        not on a Future's Condition: measured cheaper per send.
        """
        core = self._core
        if core.loop is _running_loop():
            raise TubeMQError("Producer.send() would block the client's own event-loop thread (called from "
                              "a callback?): use send_async() there")
        waiter = Waiter()
        if not self.submit_threadsafe(topic, data, attributes, stream_id, msg_time, key, None, waiter, True):
            core.kick()  # the job may sit in the inbox behind other threads' sends: make sure it moves
        wait = self._max_wait if timeout is None else timeout
        if not waiter.lock.acquire(True, min(max(wait, 0.0), threading.TIMEOUT_MAX)):
            raise TubeMQTimeoutError(f"no answer for the message to topic {topic!r} within {wait:g} s "
                                     "(it may still be sent)")
        if waiter.exc is not None:
            raise waiter.exc
        return waiter.result  # type: ignore[return-value]

    def _default_wait(self) -> float:
        """How long a blocking send waits at most: every attempt's timeout and backoff, plus a connect."""
        c = self.config
        return (c.rpc_timeout_ms * (c.retries + 2) + c.retry_backoff_ms * c.retries + c.connect_timeout_ms) / 1000.0

    # ------------------------------------------------------------------ completion (loop thread)

    def _done(self, job: Any, result: SendResult | None, exc: BaseException | None) -> None:
        """Completion of any job: free its buffer slot, call its callback, resolve its future."""
        self._buffer.release()
        if job.cb is not None:
            run_callback(job, result, exc)
        fut = job.fut
        if fut is None:  # refused before it was queued
            return
        if type(fut) is not _AsyncioFuture:
            fut._complete(result, exc)  # SendFuture / Waiter of the blocking API
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
        self._buffer.close()
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


class Waiter:
    """What a blocking ``send()`` waits on: a lock taken at creation and released by the loop thread
    when the message completes. One C-level lock instead of a Future's Condition (an RLock, a
    waiter lock and the notify bookkeeping in Python) on each side of the hand-off."""

    __slots__ = ("exc", "lock", "result")

    def __init__(self) -> None:
        self.lock = _allocate_lock()
        self.lock.acquire()
        self.result: SendResult | None = None
        self.exc: BaseException | None = None

    def _complete(self, result: SendResult | None, exc: BaseException | None) -> None:
        """Loop thread, exactly once (the core's ``_finish`` guarantees it)."""
        self.result = result
        self.exc = exc
        self.lock.release()


__all__ = ["Producer", "SendResult"]
