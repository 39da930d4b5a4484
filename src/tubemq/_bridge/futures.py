"""What a thread waits on for a message the loop thread completes: ``SendFuture`` and ``Waiter``.

``SendFuture``: a ``concurrent.futures.Future`` that is cheap when nobody blocks on it.

Why: a plain ``Future`` builds a ``threading.Condition`` in ``__init__`` and takes it again in
``set_result``; at tens of thousands of pipelined sends per second that is a large share of the
per-message cost. Here the condition is created lazily, the first time anything needs it (a thread
waiting in ``result()``, ``add_done_callback``, ``concurrent.futures.wait``...). Completion with no
condition yet just stores the outcome under a module lock, which orders it against a concurrent lazy
creation. Every public method keeps the standard semantics (it *is* a ``concurrent.futures.Future``).

The future starts in the RUNNING state: once ``send_async`` returned it, the message is on its way
and ``cancel()`` returns False.
"""

from __future__ import annotations

import threading
from _thread import allocate_lock as _allocate_lock
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_create_lock = threading.Lock()


class SendFuture(Future, Generic[T]):  # type: ignore[type-arg]
    """A Future[T] with a lazily created condition; see the module docstring."""

    def __init__(self) -> None:  # noqa: D107 - deliberately not calling Future.__init__
        self._cond: threading.Condition | None = None
        #: called (once) when a thread is about to wait or register a callback: the bridge makes its
        #: loop thread drain messages it was not woken up for
        self.on_wait: Callable[[], None] | None = None
        self._state = RUNNING
        self._result = None
        self._exception: BaseException | None = None
        self._w: list[Any] | None = None
        self._cbs: list[Any] | None = None

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _create_lock:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
            # someone is about to wait (or register a callback): make sure the producer's loop
            # thread is not sitting idle on a message it was not woken up for
            on_wait = self.on_wait
            if on_wait is not None and self._state != FINISHED:
                on_wait()
        return cond

    # the waiter / callback lists are only needed on the slow paths: create them on first use
    # (always under the condition, i.e. after the lazy creation above)

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        w = self._w
        if w is None:
            w = self._w = []
        return w

    @property  # type: ignore[override]
    def _done_callbacks(self) -> list[Any]:
        c = self._cbs
        if c is None:
            c = self._cbs = []
        return c

    # ---- completion (called by the producer's loop thread)

    def complete(self, result: Any, exc: BaseException | None) -> None:
        """The outcome (the producer's loop thread, exactly once)."""
        if self._cond is None:
            with _create_lock:
                if self._cond is None:  # nobody waits and no callback is registered
                    self._result = result
                    self._exception = exc
                    self._state = FINISHED
                    return
        if exc is None:
            self.set_result(result)
        else:
            self.set_exception(exc)

    # ---- lock-free fast paths for finished futures

    def done(self) -> bool:
        if self._state == FINISHED:
            return True
        return super().done()

    def result(self, timeout: float | None = None) -> T:
        if self._state == FINISHED and self._exception is None:
            return self._result  # type: ignore[return-value]
        return super().result(timeout)  # type: ignore[no-any-return]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)


class Waiter:
    """What a blocking ``send()`` taking the loop's route waits on: a lock taken at creation and
    released by the loop thread when the message completes. ``result`` / ``exc`` are written before
    the release and read after the acquire, so the lock orders them (no reliance on the GIL)."""

    __slots__ = ("exc", "lock", "result")

    def __init__(self) -> None:
        self.lock = _allocate_lock()
        self.lock.acquire()
        self.result: Any = None
        self.exc: BaseException | None = None

    def complete(self, result: Any, exc: BaseException | None) -> None:
        """Loop thread, exactly once (the engine's ``settle`` guarantees it)."""
        self.result = result
        self.exc = exc
        self.lock.release()


__all__ = ["SendFuture", "Waiter"]
