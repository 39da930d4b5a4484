"""The bounded send buffer: at most ``max_pending`` messages of one producer outstanding (DESIGN.md).

One counter under one lock, shared by every entry (asyncio tasks, threads of the blocking API, the
blocking API's own round trips): a sender takes a slot before its message is queued and the slot is
given back when the message completes, on whatever thread that happens. The producer's message
counters are kept under the same lock, so that giving a slot back and counting the outcome is one
lock round. Senders wait for room: an
asyncio task on a future of its loop (woken there, also when the room is made on another thread), a
thread on a condition, each up to ``max_block_ms``; a sender on the producer's own loop thread (a
callback) cannot wait, since only that thread makes room, and fails at once.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time

from .._tasks import wait_for
from ..errors import ClientClosedError, TubeMQTimeoutError


class SendBuffer:
    """``max_pending`` slots; see the module docstring."""

    __slots__ = ("_cond", "acknowledged", "block_s", "bytes_sent", "closed", "direct", "failed", "lock", "loop",
                 "max_pending", "retried", "sent", "task_waiters", "thread_waiters", "used")

    def __init__(self, max_pending: int, block_s: float) -> None:
        self.max_pending = max_pending
        self.block_s = block_s
        self.loop: asyncio.AbstractEventLoop | None = None  # the producer's loop, set when it starts
        #: public with the counters below: the engine's compiled steps (:mod:`._steps`) take a slot and
        #: count an outcome under it in C, as :meth:`take_now` / :meth:`release` do
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self.used = 0
        self.thread_waiters = 0
        self.task_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.closed = False
        # the message counters (read by metrics snapshots; changed under the lock)
        self.sent = 0  # messages written to a broker (first attempt)
        self.retried = 0  # resends written after a retryable refusal
        self.bytes_sent = 0  # body + attribute bytes of the messages sent (first attempts)
        self.acknowledged = 0
        self.failed = 0
        self.direct = 0  # of the acknowledged: sent by a caller's thread itself (no event loop involved)

    def _full(self, what: str) -> TubeMQTimeoutError:
        return TubeMQTimeoutError(f"send buffer full: {self.max_pending} messages outstanding {what}")

    def try_take(self) -> bool:
        """Take a slot if one is free (any thread); never waits."""
        with self.lock:
            if self.closed:
                raise ClientClosedError("producer is closed")
            if self.used < self.max_pending:
                self.used += 1
                return True
            return False

    def take_now(self) -> bool:
        """:meth:`try_take` that never raises: False when full or closed."""
        with self.lock:
            if self.closed or self.used >= self.max_pending:
                return False
            self.used += 1
            return True

    async def take_async(self) -> None:
        """An asyncio sender takes a slot, waiting for room up to ``block_s`` (on the producer's loop)."""
        if self.try_take():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.block_s
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            with self.lock:
                if self.closed:
                    raise ClientClosedError("producer is closed")
                if self.used < self.max_pending:
                    self.used += 1
                    return
                self.task_waiters.append(waiter)
            left = deadline - loop.time()
            try:
                if left > 0:
                    await wait_for(waiter, left)
            except asyncio.TimeoutError:
                pass
            finally:
                with self.lock:
                    if waiter in self.task_waiters:
                        self.task_waiters.remove(waiter)
            if left <= 0:
                raise self._full(f"for {self.block_s:g} s")
            # woken (or out of time): check again; a wake-up lost to another taker costs a round

    def take(self, on_loop_thread: bool) -> None:
        """A thread takes a slot, waiting up to ``block_s``; on the loop thread it cannot wait."""
        if self.try_take():
            return
        if on_loop_thread:
            raise self._full("and send_async() was called on the client's event-loop thread (from a callback), "
                             "where it cannot wait")
        deadline = time.monotonic() + self.block_s
        with self._cond:
            self.thread_waiters += 1
            try:
                while True:
                    if self.closed:
                        raise ClientClosedError("producer is closed")
                    if self.used < self.max_pending:
                        self.used += 1
                        return
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._full(f"for {self.block_s:g} s")
                    self._cond.wait(left)
            finally:
                self.thread_waiters -= 1

    def written(self, sent: int, size: int, resent: int) -> None:
        """Count attempts written: ``sent`` messages (first attempts, ``size`` bytes), ``resent`` resends."""
        with self.lock:
            self.sent += sent
            self.bytes_sent += size
            self.retried += resent

    def release(self, acknowledged: bool | None = None, direct: bool = False, sent: int = 0) -> int:
        """Give a slot back (any thread) and count its message's outcome: ``acknowledged`` (True) or
        failed (False; None: not counted); ``direct``: sent by a caller's thread itself; ``sent``:
        bytes of a first attempt not counted yet (:meth:`written`). Wakes one waiting thread and one
        waiting task. Returns how many messages were acknowledged so far (0 for anything else)."""
        with self.lock:
            self.used -= 1
            if sent:
                self.sent += 1
                self.bytes_sent += sent
            if acknowledged:
                n = self.acknowledged = self.acknowledged + 1
                if direct:
                    self.direct += 1
            else:
                n = 0
                if acknowledged is not None:
                    self.failed += 1
            if self.thread_waiters:
                self._cond.notify()
            waiter = self.task_waiters.popleft() if self.task_waiters else None
        if waiter is not None:
            self.wake(waiter)
        return n

    def wake(self, waiter: asyncio.Future[None]) -> None:
        loop = waiter.get_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            _set(waiter)
            return
        try:
            loop.call_soon_threadsafe(_set, waiter)
        except RuntimeError:  # the loop is closed: nobody waits there any more
            pass

    def close(self) -> None:
        """Wake every waiter: they fail with ClientClosedError (any thread)."""
        with self.lock:
            self.closed = True
            self._cond.notify_all()
            waiters = list(self.task_waiters)
            self.task_waiters.clear()
        for w in waiters:
            self.wake(w)


def _set(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


__all__ = ["SendBuffer"]
