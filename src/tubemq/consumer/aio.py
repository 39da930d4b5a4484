"""``tubemq.aio.Consumer``: the asyncio twin of :class:`tubemq.Consumer`, running in the caller's loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from ..codec import Message, Partition
from ..errors import ClientClosedError
from .config import ConsumerConfig
from .core import ConsumerCore, Hook
from .fetch import Batch

log = logging.getLogger("tubemq.consumer")

__all__ = ["BoundConsumer", "Consumer"]  # noqa: F822 - BoundConsumer is lazy


class Consumer:
    """``async with tubemq.aio.Consumer(master, group=, topics=) as c: async for msg in c: ...``

    Same arguments and semantics as :class:`tubemq.Consumer`; hooks and listeners may be plain or
    ``async`` callables (plain ones run on the loop, so keep them short).
    """

    def __init__(
        self,
        master: str | list[str] | None = None,
        group: str | None = None,
        topics: Any = None,
        *,
        consume_from: str | None = None,
        config: ConsumerConfig | None = None,
        on_partitions_assigned: Hook | None = None,
        on_partitions_revoked: Hook | None = None,
        **options: Any,
    ) -> None:
        self.config = ConsumerConfig.build(master, group, topics, consume_from=consume_from, config=config,
                                           **options)
        self._core = ConsumerCore(self.config, on_partitions_assigned=on_partitions_assigned,
                                  on_partitions_revoked=on_partitions_revoked)
        self._iter_batch: Batch | None = None
        self._iter_pos = 0
        self._listener_task: asyncio.Task[None] | None = None
        self._paused = False

    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def closed(self) -> bool:
        return self._core.closing

    def assignment(self) -> list[Partition]:
        return list(self._core.assignment())

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, fetch-latency percentiles, master and per-broker
        health (keys listed in README.md, "Metrics and logging"). Call it from the consumer's loop."""
        return self._core.metrics.snapshot()

    async def start(self) -> Consumer:
        await self._core.start()
        return self

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def poll(self, timeout: float | None = 1.0) -> Batch | None:
        if not self._core.started:
            await self.start()
        try:
            return await self._core.poll(timeout)
        except ClientClosedError:
            if self._core.closing:
                return None
            raise

    async def confirm(self, batch: Batch, consumed: bool = True) -> bool:
        if self._core.closing:
            return False
        return await self._core.confirm(batch, consumed)

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Message:
        deadline = None
        if self.config.iter_timeout_ms > 0:
            deadline = time.monotonic() + self.config.iter_timeout_ms / 1000.0
        while True:
            b = self._iter_batch
            if b is not None:
                if self._iter_pos < len(b.messages):
                    self._iter_pos += 1
                    return b.messages[self._iter_pos - 1]
                self._iter_batch = None
                if not self._core.closing:
                    await self._core.confirm(b, True, local=True)
            if self._core.closing:
                raise StopAsyncIteration
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise StopAsyncIteration
            batch = await self.poll(wait if wait is not None else 1.0)
            if batch is not None:
                self._iter_batch, self._iter_pos = batch, 0
                if deadline is not None:
                    deadline = time.monotonic() + self.config.iter_timeout_ms / 1000.0

    def subscribe(self, listener: Callable[[Any], Any], *, batch: bool = False,
                  rollback_on_error: bool = False) -> None:
        """Push mode on a task of the running loop; ``listener`` may be a coroutine function."""
        if self._listener_task is not None:
            raise RuntimeError("a listener is already subscribed")
        self._listener_task = asyncio.get_running_loop().create_task(
            self._dispatch(listener, batch, rollback_on_error))

    async def _dispatch(self, listener: Callable[[Any], Any], per_batch: bool, rollback_on_error: bool) -> None:
        while not self._core.closing:
            if self._paused:
                await asyncio.sleep(0.05)
                continue
            b = await self.poll(0.2)
            if b is None:
                continue
            ok = True
            try:
                for item in ([b] if per_batch else b.messages):
                    if self._core.closing:
                        ok = False
                        break
                    res = listener(item)
                    if asyncio.iscoroutine(res):
                        await res
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("push consumer listener raised on %r", b)
                ok = not rollback_on_error
            if self._core.closing:
                return
            await self._core.confirm(b, ok, local=True)

    def pause(self) -> None:
        self._paused = True
        self._core.pause()

    def resume(self) -> None:
        self._paused = False
        self._core.resume()

    @property
    def paused(self) -> bool:
        return self._paused

    async def close(self) -> None:
        task = self._listener_task
        if task is not None and task is not asyncio.current_task():
            self._core.closing = True
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), self.config.shutdown_wait_ms / 1000.0)
            task.cancel()
        if self._core.started:
            await self._core.close()
        else:
            self._core.closing = self._core.closed = True


def __getattr__(name: str) -> Any:
    if name == "BoundConsumer":
        from .bound import AsyncBoundConsumer

        return AsyncBoundConsumer
    raise AttributeError(name)
