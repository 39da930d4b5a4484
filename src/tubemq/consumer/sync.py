"""``tubemq.Consumer``: the blocking facade over :class:`~tubemq.consumer.core.ConsumerCore`.

The core runs on the shared event-loop thread (:class:`~tubemq.net.loop.LoopThread`); every method
here hands a coroutine to it and waits. Rebalance hooks given as plain functions run on a worker
thread (so they may call this consumer's blocking methods); push-mode listeners run on one dispatcher
thread per consumer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..codec import Message, Partition
from ..errors import ClientClosedError, TubeMQTimeoutError
from ..net.loop import LoopThread
from .config import ConsumerConfig
from .core import ConsumerCore, Hook
from .fetch import Batch

log = logging.getLogger("tubemq.consumer")

__all__ = ["Consumer"]


def thread_hook(fn: Hook | None) -> Hook | None:
    """Run a synchronous hook on a worker thread (an async one stays on the loop)."""
    if fn is None or asyncio.iscoroutinefunction(fn):
        return fn

    async def run(partitions: list[Partition]) -> None:
        await asyncio.to_thread(fn, partitions)

    return run


class Consumer:
    """A server-balanced TubeMQ consumer (docs/PROTOCOL.md §5.2).

    ``Consumer("host:8715", group="g", topics=["t"] or {"t": {"stream-1"}}, consume_from="earliest")``;
    any :class:`~tubemq.consumer.config.ConsumerConfig` field may be passed as a keyword, or
    ``config=ConsumerConfig(...)``. Three ways to consume:

    * ``for msg in consumer`` — each batch is confirmed (committed) once all its messages were
      iterated; breaking out of the loop leaves the current batch unconfirmed (re-delivered later);
    * ``batch = consumer.poll(timeout)`` + ``consumer.confirm(batch, consumed=True)``;
    * ``consumer.subscribe(listener)`` — push mode on a dispatcher thread, with ``pause()`` /
      ``resume()``.
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
        cfg = ConsumerConfig.build(master, group, topics, consume_from=consume_from, config=config, **options)
        self.config = cfg
        self._closing = False
        self._closed = False
        self._lock = threading.Lock()
        self._iter_batch: Batch | None = None
        self._iter_msgs: Iterator[Message] | None = None
        self._dispatcher: threading.Thread | None = None
        self._paused = threading.Event()
        self._loop = LoopThread.shared()
        try:
            self._core: ConsumerCore = self._loop.run(self._make_core(
                thread_hook(on_partitions_assigned), thread_hook(on_partitions_revoked)))
            self._loop.run(self._core.start())
        except BaseException:
            self._loop.stop()
            raise

    async def _make_core(self, assigned: Hook | None, revoked: Hook | None) -> ConsumerCore:
        return ConsumerCore(self.config, on_partitions_assigned=assigned, on_partitions_revoked=revoked)

    # ------------------------------------------------------------------ info
    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def closed(self) -> bool:
        return self._closed

    def assignment(self) -> list[Partition]:
        """Partitions currently registered by this consumer."""
        return list(self._core.assignment())

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, fetch-latency percentiles, master and per-broker
        health (keys listed in README.md, "Metrics and logging"). Taken on the client's loop thread,
        where the figures live, so it is consistent; works after ``close()`` too."""
        try:
            return self._loop.call(self._core.metrics.snapshot, timeout=5.0)
        except TubeMQTimeoutError:  # the loop is blocked (e.g. by a slow stats_callback): best effort
            return self._core.metrics.snapshot()

    def _check_open(self) -> None:
        if self._closing:
            raise ClientClosedError("consumer is closed")

    # ------------------------------------------------------------------ pull
    def poll(self, timeout: float | None = 1.0) -> Batch | None:
        """The next batch of messages, or None when none arrived within ``timeout`` seconds."""
        self._check_open()
        try:
            return self._loop.run(self._core.poll(timeout))
        except ClientClosedError:
            if self._closing:
                return None
            raise

    def confirm(self, batch: Batch, consumed: bool = True) -> bool:
        """Commit (``consumed=True``) or roll back ``batch``; False if the partition moved meanwhile."""
        if self._closing:
            return False
        return self._loop.run(self._core.confirm(batch, consumed))

    def __iter__(self) -> Iterator[Message]:
        return self

    def __next__(self) -> Message:
        deadline = None
        if self.config.iter_timeout_ms > 0:
            deadline = time.monotonic() + self.config.iter_timeout_ms / 1000.0
        while True:
            if self._iter_msgs is not None:
                msg = next(self._iter_msgs, None)
                if msg is not None:
                    return msg
                batch, self._iter_batch, self._iter_msgs = self._iter_batch, None, None
                if batch is not None and not self._closing:
                    self._loop.run(self._core.confirm(batch, True, local=True))
            if self._closing:
                raise StopIteration
            wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                raise StopIteration
            batch = self.poll(wait)
            if batch is not None:
                self._iter_batch, self._iter_msgs = batch, iter(batch.messages)
                if deadline is not None:
                    deadline = time.monotonic() + self.config.iter_timeout_ms / 1000.0

    # ------------------------------------------------------------------ push
    def subscribe(
        self,
        listener: Callable[[Any], Any],
        *,
        batch: bool = False,
        rollback_on_error: bool = False,
    ) -> None:
        """Push mode: call ``listener(message)`` (or ``listener(batch)`` with ``batch=True``) for
        everything fetched, on a dispatcher thread. After the listener returns the batch is confirmed;
        if it raises, the error is logged and the batch is confirmed anyway (Java default) unless
        ``rollback_on_error`` asks for re-delivery."""
        self._check_open()
        with self._lock:
            if self._dispatcher is not None:
                raise RuntimeError("a listener is already subscribed")
            self._dispatcher = threading.Thread(
                target=self._dispatch, args=(listener, batch, rollback_on_error),
                name=f"tubemq-consumer-{self.config.group}", daemon=True,
            )
            self._dispatcher.start()

    def _dispatch(self, listener: Callable[[Any], Any], per_batch: bool, rollback_on_error: bool) -> None:
        while not self._closing:
            if self._paused.is_set():
                time.sleep(0.05)
                continue
            try:
                b = self._loop.run(self._core.poll(0.2))
            except ClientClosedError:
                return
            except Exception:
                log.exception("push consumer: poll failed")
                time.sleep(0.2)
                continue
            if b is None:
                continue
            ok = True
            try:
                if per_batch:
                    listener(b)
                else:
                    for m in b.messages:
                        if self._closing:
                            ok = False
                            break
                        listener(m)
            except Exception:
                log.exception("push consumer listener raised on %r", b)
                ok = not rollback_on_error
            if self._closing:
                return  # close rolls back whatever was not confirmed
            try:
                self._loop.run(self._core.confirm(b, ok, local=True))
            except ClientClosedError:
                return

    def pause(self) -> None:
        """Stop fetching and stop calling the listener until :meth:`resume`."""
        self._paused.set()
        self._loop.call_soon(self._core.pause)

    def resume(self) -> None:
        self._paused.clear()
        self._loop.call_soon(self._core.resume)

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    # ------------------------------------------------------------------ close
    def close(self, timeout: float | None = None) -> None:
        """Unregister all partitions, close the master session, stop every thread. Idempotent.

        Safe from any thread, including from inside a listener or a rebalance hook; once it returns
        no listener or hook is called any more.
        """
        with self._lock:
            if self._closing:
                first = False
            else:
                self._closing = True
                first = True
        if not first:
            return
        wait = timeout if timeout is not None else self.config.shutdown_wait_ms / 1000.0 + 5.0
        d = self._dispatcher
        if d is not None and d is not threading.current_thread():
            d.join(wait)
            if d.is_alive():
                log.warning("push listener still running after %.1f s; closing anyway", wait)
        try:
            if self._loop.in_loop_thread:
                raise RuntimeError("close() called from the event-loop thread; use the async consumer")
            fut = self._loop.submit(self._core.close())
            fut.result(wait + self.config.rpc_timeout_ms / 1000.0 * 2)
        except Exception:
            log.exception("consumer %s: close did not finish cleanly", self._core.client_id)
        finally:
            self._closed = True
            self._loop.stop()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closing else "open"
        return f"<tubemq.Consumer {self.config.group} {sorted(self.config.topics)} {state}>"
