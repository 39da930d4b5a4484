"""Batches for a blocking ``for msg in consumer`` loop, handed from the loop thread to the iterating one.

Part of the bridge (all thread crossing of the blocking API lives in :mod:`tubemq._bridge`); used by
:class:`tubemq.Consumer`'s iterator where it cannot fetch on its own thread
(:class:`~tubemq._bridge.consumer.DirectFeed`): with TLS, or for a second iterator running at once.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ClientClosedError

if TYPE_CHECKING:
    from ..consumer import aio
    from ..consumer.fetch import Batch

#: batches a :class:`BatchFeed` keeps polled ahead of the iterating thread
FEED_AHEAD = 1


class BatchFeed:
    """Batches for one blocking ``for msg in consumer`` loop, handed over between threads without a
    round trip per batch.

    Why: ``Portal.run`` per batch (confirm the finished batch, poll the next) costs a Task, two
    thread switches and a wake-up of the waiting thread per batch, a large part of the iterator's
    CPU on a loaded machine. Here a task on the loop keeps ``FEED_AHEAD`` batch polled ahead in
    a deque (polled = delivered, exactly as ``poll()`` would return it); the iterating thread takes
    it under a lock and posts the confirm of the batch it finished with ``call_soon_threadsafe``
    (fire and forget: a local confirm has no outcome the iterator reports). When the loop stops, a
    batch still queued ahead goes back to the head of the delivery buffer, never shown. While queued
    it is ``held``: the confirm timeout ignores it (as it ignores batches in the buffer), and a revoke
    waits for its confirm like for any polled batch (up to ``rebalance_confirm_wait_ms``).
    """

    def __init__(self, lt: Any, consumer: aio.Consumer) -> None:
        self._aio = consumer
        self._loop: asyncio.AbstractEventLoop = lt.loop
        self._ready: collections.deque[Batch] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._ended = False
        self._error: BaseException | None = None
        self._room: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        lt.call(self._start)

    # ---- loop thread
    def _start(self) -> None:
        self._room = asyncio.Event()
        self._task = self._loop.create_task(self._run(), name="tubemq-iter-feed")

    async def _run(self) -> None:
        core = self._aio.core
        room = self._room
        assert room is not None
        try:
            while not core.closing:
                if len(self._ready) >= FEED_AHEAD:
                    room.clear()
                    await room.wait()
                    continue
                batch = await self._aio.poll(1.0)
                if batch is None:
                    continue
                batch.held = True
                with self._cond:
                    self._ready.append(batch)
                    self._cond.notify()
        except ClientClosedError:
            pass
        except Exception as exc:  # handed to the iterating thread
            self._error = exc
        finally:
            with self._cond:
                self._ended = True
                self._cond.notify_all()

    def _advance(self, done: Batch | None) -> None:
        """Loop thread: confirm the batch the iterator finished; make room for the next one."""
        core = self._aio.core
        if done is not None and not core.closing:
            core.confirm_local(done, True)
        if self._room is not None:
            self._room.set()

    def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        with self._cond:
            left = list(self._ready)
            self._ready.clear()
            self._ended = True
        for batch in reversed(left):
            self._aio.core.unpoll(batch)

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is gone (consumer closed): nothing left to tell it
            pass

    # ---- iterating thread
    def next_batch(self, done: Batch | None, timeout: float | None) -> Batch | None:
        """Confirm ``done`` (if any) and return the next batch; None after ``timeout`` seconds (None:
        wait forever) without one, or once the consumer closed."""
        core = self._aio.core
        if core.closing:
            return None  # close rolls back whatever is queued
        with self._cond:
            batch = self._ready.popleft() if self._ready else None
        if batch is not None:
            batch.held = False
            self._post(self._advance, done)
            return batch
        self._post(self._advance, done)  # the confirm may be what the next batch waits for
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._ready:
                if self._ended or core.closing:
                    break
                wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
                if wait <= 0:
                    break
                self._cond.wait(wait)
            batch = self._ready.popleft() if self._ready and not core.closing else None
        if batch is not None:
            batch.held = False
            self._post(self._advance, None)
        elif self._error is not None:
            raise self._error
        return batch

    def stop(self) -> None:
        self._post(self._stop)


__all__ = ["FEED_AHEAD", "BatchFeed"]
