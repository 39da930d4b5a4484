"""``tubemq.Producer``: the blocking/threaded facade over :class:`ProducerCore` (DESIGN.md).

The core runs on the process-wide event-loop thread. ``send_async`` returns a
``concurrent.futures.Future`` at once (blocking only while ``max_pending`` messages are outstanding:
the bounded buffer); ``send`` waits for the broker's answer. All methods are thread-safe: many
threads may send through one producer.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import threading
import time
import weakref
from _thread import allocate_lock as _allocate_lock
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import ProducerConfig
from ..errors import ClientClosedError, TubeMQError, TubeMQTimeoutError
from ..net.loop import LoopThread
from .core import ProducerCore, SendCallback, SendResult, check_callback, run_callback
from .future import SendFuture

#: How long ``metrics()`` waits for the loop thread before reading without it (seconds).
_SNAPSHOT_WAIT = 5.0


class Producer:
    """Publish messages to TubeMQ.

    ``Producer("h1:8715,h2:8715", rpc_timeout_ms=5000)`` or ``Producer(config=ProducerConfig(...))``
    or ``Producer("tubemq://h1:8715?retries=3")``. Registers with the master on construction (raises
    if no master accepts it after 5 attempts, like Java's ``start()``).
    """

    def __init__(self, master: str | Iterable[str] | None = None, *, config: ProducerConfig | None = None,
                 **options: Any) -> None:
        if config is None:
            config = ProducerConfig.from_options(master, options)  # type: ignore[arg-type]
        elif master is not None or options:
            extra = dict(options, **({"master": master} if master is not None else {}))
            config = dataclasses.replace(config, **extra)
        self.config = config
        self._closed = False
        self._close_lock = threading.Lock()
        # bounded buffer without a semaphore on the hot path: callers number their messages, the loop
        # thread counts completions; a caller only blocks (on _space) when the difference is too big
        self._submitted = itertools.count(1)
        self._released = 0  # written by the loop thread only
        self._space = threading.Condition()
        self._space_waiters = 0
        self._max_pending = config.max_pending
        self._block_s = config.max_block_ms / 1000.0
        self._lt = LoopThread.shared()
        self._core = ProducerCore(config)
        self._kick = self._core.kick
        try:
            self._lt.run(self._core.start())
        except BaseException:
            self._closed = True
            try:
                self._lt.run(self._core.close(0))
            finally:
                self._lt.stop()
            raise
        # a producer dropped without close() (or still open at exit) deregisters instead of leaving
        # a heartbeat running on the shared loop thread
        self._finalizer = weakref.finalize(self, _finalize, self._lt, self._core)

    # ------------------------------------------------------------------ info

    @property
    def client_id(self) -> str:
        return self._core.client_id

    @property
    def closed(self) -> bool:
        return self._closed

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, send-latency percentiles, master and per-broker
        health (keys listed in README.md, "Metrics and logging"). Taken on the client's loop thread,
        where the figures live, so it is consistent; works after ``close()`` too."""
        try:
            return self._lt.call(self._core.metrics.snapshot, timeout=_SNAPSHOT_WAIT)
        except TubeMQTimeoutError:  # the loop is blocked (e.g. by a slow stats_callback): best effort
            return self._core.metrics.snapshot()

    def partitions(self, topic: str) -> list[Any]:
        """The partitions currently known for a published topic."""
        return list(self._core.session.partitions.get(topic, ()))

    # ------------------------------------------------------------------ sending

    def publish(self, topics: str | Iterable[str]) -> set[str]:
        """Declare topics (optional: ``send`` publishes unseen topics itself); returns those usable."""
        self._check_open()
        return self._lt.run(self._core.publish(topics if isinstance(topics, str) else list(topics)))

    def send_async(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                   stream_id: str | None = None, msg_time: Any = None, key: Any = None,
                   callback: SendCallback | None = None) -> concurrent.futures.Future[SendResult]:
        """Queue a message; the future resolves to a :class:`SendResult` or fails with a TubeMQError.

        ``callback(result, exc)`` (optional) is called exactly once when the message completes:
        ``(SendResult, None)`` or ``(None, exception)``. It runs on the client's event-loop thread
        before the future resolves, so keep it short and never block in it (``send()`` is refused
        there); an exception it raises is logged (``tubemq.producer``) and ignored. Much cheaper than
        ``future.add_done_callback``, which makes every future build its lock and wake the loop. A
        callback may call ``send_async`` again; with the buffer full that raises TubeMQTimeoutError at
        once instead of waiting on the thread that must free the space.
        """
        if self._closed:
            raise ClientClosedError("producer is closed")
        fut: SendFuture[SendResult] = SendFuture()
        fut._kick = self._kick
        job = self._core.make_job(topic, data, attributes, stream_id, msg_time, key, self._done)
        job.fut = fut
        if callback is not None:
            job.cb = check_callback(callback)
        self._submit(job)
        return fut

    def _submit(self, job: Any) -> None:
        """Take a buffer slot (waiting for one if ``max_pending`` are outstanding) and hand the job over."""
        n = next(self._submitted)
        if n - self._released > self._max_pending:
            self._wait_for_space(n)
        if self._closed:
            self._lt.call_soon(self._release_one)
            raise ClientClosedError("producer is closed")
        self._core.submit_threadsafe(job)

    def _done(self, job: Any, result: SendResult | None, exc: BaseException | None) -> None:
        """Completion of any job (loop thread): free its buffer slot, call its callback, resolve its future."""
        self._released += 1
        if self._space_waiters:
            with self._space:
                self._space.notify_all()
        if job.cb is not None:
            run_callback(job, result, exc)
        job.fut._complete(result, exc)

    def _release_one(self) -> None:
        self._released += 1

    def _wait_for_space(self, n: int) -> None:
        if self._lt.in_loop_thread:
            # a callback sending more: only the loop thread can free space, so waiting would stall it
            self._lt.call_soon(self._release_one)
            raise TubeMQTimeoutError(
                f"send buffer full ({self._max_pending} messages outstanding) and send_async() was called on "
                "the client's event-loop thread (from a callback), where it cannot wait"
            )
        deadline = time.monotonic() + self._block_s
        with self._space:
            self._space_waiters += 1
            try:
                while n - self._released > self._max_pending:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._closed:
                        self._lt.call_soon(self._release_one)  # give the number back
                        if self._closed:
                            raise ClientClosedError("producer is closed")
                        raise TubeMQTimeoutError(
                            f"send buffer full: {self._max_pending} messages outstanding for {self._block_s:g} s"
                        )
                    self._space.wait(min(left, 0.1))
            finally:
                self._space_waiters -= 1

    def send(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
             stream_id: str | None = None, msg_time: Any = None, key: Any = None,
             timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer; raises the failure as a typed TubeMQError."""
        if self._lt.in_loop_thread:
            raise TubeMQError("Producer.send() would block the client's own event-loop thread (called from "
                              "a callback?): use send_async() there")
        if self._closed:
            raise ClientClosedError("producer is closed")
        # the same job path as send_async, but the caller blocks on a bare lock that the loop thread
        # releases on completion (_Waiter), not on a Future's Condition: measured cheaper per send
        waiter = _Waiter()
        job = self._core.make_job(topic, data, attributes, stream_id, msg_time, key, self._done)
        job.fut = waiter
        self._submit(job)
        self._kick()  # the job may sit in the inbox behind other threads' sends: make sure it moves
        wait = self._default_wait() if timeout is None else timeout
        if not waiter.lock.acquire(True, min(max(wait, 0.0), threading.TIMEOUT_MAX)):
            raise TubeMQTimeoutError("no answer for the message in time (it may still be sent)")
        if waiter.exc is not None:
            raise waiter.exc
        return waiter.result  # type: ignore[return-value]

    def _default_wait(self) -> float:
        c = self.config
        return (c.rpc_timeout_ms * (c.retries + 2) + c.retry_backoff_ms * c.retries + c.connect_timeout_ms) / 1000.0

    def flush(self, timeout: float | None = 10.0) -> int:
        """Wait until every queued message is answered; returns the number still pending."""
        if self._closed:
            return 0
        return self._lt.run(self._core.flush(timeout))

    # ------------------------------------------------------------------ closing

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``, default the RPC timeout), fail the rest, deregister. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._finalizer.detach()
        try:
            self._lt.run(self._core.close(timeout))
        finally:
            self._lt.stop()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("producer is closed")

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<tubemq.Producer {self.client_id} {'closed' if self._closed else 'open'}>"


class _Waiter:
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


def _finalize(lt: LoopThread, core: ProducerCore) -> None:
    """Close a producer its owner forgot (garbage collection or interpreter exit); never raises."""
    try:
        if not lt.stopped and not core.closed:
            lt.run(core.close(1.0), timeout=5.0)
    except BaseException:  # noqa: BLE001 - finalizers must not raise
        pass
    finally:
        try:
            lt.stop()
        except BaseException:  # noqa: BLE001
            pass


__all__ = ["Producer", "SendResult"]
