"""``tubemq.aio.Producer``: the asyncio producer (same options as ``tubemq.Producer``).

Runs on the caller's event loop. ``await producer.send(...)`` returns a :class:`SendResult`; many
concurrent ``send`` calls are pipelined on one connection per broker. ``max_pending`` bounds the
messages in flight (further senders wait).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import ProducerConfig
from ..errors import ClientClosedError, TubeMQTimeoutError
from .core import ProducerCore, SendCallback, SendResult, check_callback, run_callback


class Producer:
    """``async with tubemq.aio.Producer("h:8715") as p: await p.send("topic", b"data")``."""

    def __init__(self, master: str | Iterable[str] | None = None, *, config: ProducerConfig | None = None,
                 **options: Any) -> None:
        if config is None:
            config = ProducerConfig.from_options(master, options)  # type: ignore[arg-type]
        elif master is not None or options:
            config = dataclasses.replace(config, **dict(options, **({"master": master} if master is not None else {})))
        self.config = config
        self._core = ProducerCore(config)
        self._pending = 0
        self._max_pending = config.max_pending
        self._space_waiters: list[asyncio.Future[None]] = []
        self._start_lock: asyncio.Lock | None = None
        self._closed = False

    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def closed(self) -> bool:
        return self._closed

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, send-latency percentiles, master and per-broker
        health (keys listed in README.md, "Metrics and logging"). Call it from the producer's loop."""
        return self._core.metrics.snapshot()

    def partitions(self, topic: str) -> list[Any]:
        return list(self._core.session.partitions.get(topic, ()))

    async def start(self) -> Producer:
        """Register with the master (called by ``async with`` and, lazily, by the first send)."""
        if self._closed:
            raise ClientClosedError("producer is closed")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self._core.started:
                await self._core.start()
        return self

    async def publish(self, topics: str | Iterable[str]) -> set[str]:
        await self._ensure_started()
        return await self._core.publish(topics if isinstance(topics, str) else list(topics))

    async def send(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                   stream_id: str | None = None, msg_time: Any = None, key: Any = None) -> SendResult:
        """Send one message and wait for the broker's answer."""
        fut = await self.send_async(topic, data, attributes=attributes, stream_id=stream_id, msg_time=msg_time,
                                    key=key)
        return await fut

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
        if self._pending >= self._max_pending:
            await self._wait_for_space()
        fut: asyncio.Future[SendResult] = core.loop.create_future()
        job.fut = fut
        self._pending += 1
        core.accept(job)
        return fut

    async def _wait_for_space(self) -> None:
        """Bounded buffer: wait (up to max_block_ms) until fewer than max_pending are outstanding."""
        loop = self._core.loop
        deadline = loop.time() + self.config.max_block_ms / 1000.0
        while self._pending >= self._max_pending:
            if self._closed:
                raise ClientClosedError("producer is closed")
            left = deadline - loop.time()
            if left <= 0:
                raise TubeMQTimeoutError(f"send buffer full: {self._max_pending} messages outstanding")
            waiter: asyncio.Future[None] = loop.create_future()
            self._space_waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except asyncio.TimeoutError:
                pass
            finally:
                if waiter in self._space_waiters:
                    self._space_waiters.remove(waiter)
        if self._closed:
            raise ClientClosedError("producer is closed")

    def _done(self, job: Any, result: SendResult | None, exc: BaseException | None) -> None:
        self._pending -= 1
        if self._space_waiters:
            w = self._space_waiters.pop(0)
            if not w.done():
                w.set_result(None)
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

    async def flush(self, timeout: float | None = 10.0) -> int:
        if not self._core.started or self._closed:
            return 0
        return await self._core.flush(timeout)

    async def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        for w in self._space_waiters:
            if not w.done():
                w.set_result(None)
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
