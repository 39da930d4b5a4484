"""``tubemq.aio.Producer``: the asyncio producer (same options as ``tubemq.Producer``).

Runs on the caller's event loop. ``await producer.send(...)`` returns a :class:`SendResult`; many
concurrent ``send`` calls are pipelined on one connection per broker. ``max_pending`` bounds the
messages in flight (further senders wait).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import ProducerConfig
from ..errors import ClientClosedError, TubeMQTimeoutError
from .core import ProducerCore, SendResult


class Producer:
    """``async with tubemq.aio.Producer("h:8715") as p: await p.send("topic", b"data")``."""

    def __init__(self, master: str | Iterable[str] | None = None, *, config: ProducerConfig | None = None,
                 **options: Any) -> None:
        if config is None:
            config = ProducerConfig.from_options(master, options)  # type: ignore[arg-type]
        self.config = config
        self._core = ProducerCore(config)
        self._sem: asyncio.Semaphore | None = None
        self._start_lock: asyncio.Lock | None = None
        self._closed = False

    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def closed(self) -> bool:
        return self._closed

    def metrics(self) -> dict[str, Any]:
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
                self._sem = asyncio.Semaphore(self.config.max_pending)
        return self

    async def publish(self, topics: str | Iterable[str]) -> set[str]:
        await self._ensure_started()
        return await self._core.publish(topics if isinstance(topics, str) else list(topics))

    async def send(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                   stream_id: str | None = None, msg_time: Any = None, key: Any = None) -> SendResult:
        """Send one message and wait for the broker's answer."""
        await self._ensure_started()
        core = self._core
        fut: asyncio.Future[SendResult] = core.loop.create_future()
        sem = self._sem
        assert sem is not None
        job = core.make_job(topic, data, attributes, stream_id, msg_time, key, self._done)
        job.fut = fut
        if sem.locked():
            try:
                await asyncio.wait_for(sem.acquire(), self.config.max_block_ms / 1000.0)
            except asyncio.TimeoutError:
                raise TubeMQTimeoutError(
                    f"send buffer full: {self.config.max_pending} messages outstanding"
                ) from None
        else:
            await sem.acquire()
        if self._closed:
            sem.release()
            raise ClientClosedError("producer is closed")
        core.accept(job)
        return await fut

    def _done(self, job: Any, result: SendResult | None, exc: BaseException | None) -> None:
        self._sem.release()  # type: ignore[union-attr]
        fut = job.fut
        if fut.done():  # the awaiting task was cancelled
            return
        if exc is None:
            fut.set_result(result)
        else:
            fut.set_exception(exc)

    async def flush(self, timeout: float | None = 10.0) -> int:
        if not self._core.started or self._closed:
            return 0
        return await self._core.flush(timeout)

    async def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
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
