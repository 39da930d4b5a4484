"""A private asyncio event loop on a daemon thread: the engine behind the sync facades (DESIGN.md).

Why: one asyncio implementation of every behaviour; the blocking ``Producer``/``Consumer`` classes
submit coroutines here. By default all sync clients of a process share one loop thread
(:meth:`LoopThread.shared`, reference-counted: the thread stops when the last client releases it),
which is also what makes the connection pool process-wide.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, TypeVar

from ..errors import ClientClosedError, TubeMQConnectionError, TubeMQError, TubeMQTimeoutError

log = logging.getLogger("tubemq.net.loop")

T = TypeVar("T")


class LoopThread:
    """An event loop running forever on its own daemon thread."""

    _shared: ClassVar[LoopThread | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, name: str = "tubemq-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._refs = 1
        self._lock = threading.Lock()
        self._stopped = False
        ready = threading.Event()
        self.thread = threading.Thread(target=self._main, args=(ready,), name=name, daemon=True)
        self.thread.start()
        ready.wait()

    @classmethod
    def shared(cls) -> LoopThread:
        """The process-wide loop thread; each call takes a reference that ``stop()`` releases."""
        with cls._shared_lock:
            inst = cls._shared
            if inst is None or inst._stopped:
                inst = cls._shared = cls("tubemq-shared-loop")
            else:
                with inst._lock:
                    inst._refs += 1
            return inst

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; returns a thread-safe future."""
        if self._stopped:
            coro.close()
            raise ClientClosedError("the event-loop thread is stopped")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop thread (thread-safe)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def call(self, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """``fn(*args)`` on the loop thread, blocking for its result (for reading state the loop owns,
        e.g. a metrics snapshot). Runs ``fn`` directly when called from the loop thread itself or
        when the loop no longer runs; raises TubeMQTimeoutError if the loop is busy past ``timeout``.
        """
        if self.in_loop_thread or self._stopped or not self.loop.is_running():
            return fn(*args)
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not fut.set_running_or_notify_cancel():
                return
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                fut.set_exception(exc)

        try:
            self.loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop closed meanwhile
            return fn(*args)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError as exc:
            if isinstance(exc, TubeMQError):  # on 3.11+ fn's own TubeMQTimeoutError is one too
                raise
            fut.cancel()
            raise TubeMQTimeoutError(f"the event-loop thread did not run {_name(fn)} within {timeout} s") from exc

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it is done (never from the loop thread itself)."""
        if self.in_loop_thread:
            coro.close()
            raise RuntimeError("LoopThread.run() called from its own loop thread: it would deadlock")
        what = _name(coro)
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError as exc:
            # on 3.11+ concurrent.futures.TimeoutError is the builtin TimeoutError, which the
            # coroutine's own TubeMQTimeoutError (naming peer and operation) also is: pass it on
            if isinstance(exc, TubeMQError) or fut.done():
                raise
            fut.cancel()
            raise TubeMQTimeoutError(f"{what} did not finish within {timeout} s") from exc

    def stop(self) -> None:
        """Release one reference; the last one stops the loop and joins the thread."""
        with LoopThread._shared_lock, self._lock:  # the class lock orders us with shared()
            if self._stopped:
                return
            self._refs -= 1
            if self._refs > 0:
                return
            self._stopped = True
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.in_loop_thread:
            self.thread.join(timeout=10)

    @property
    def stopped(self) -> bool:
        return self._stopped


#: How long a forgotten client's close may hold up the thread that collects it (or interpreter exit).
FORGOTTEN_CLOSE_WAIT = 5.0
_orphans: set[asyncio.Task[Any]] = set()


def close_when_forgotten(owner: object, close: Callable[[], Coroutine[Any, Any, Any]],
                         release: Callable[[], None] | None = None) -> weakref.finalize:
    """Run ``close()`` on the running loop when ``owner`` is garbage-collected without being closed,
    or is still open at interpreter exit; then ``release()`` (a sync facade's loop-thread reference).

    Why: a forgotten client must not keep heartbeating (and, for a consumer, holding partitions until
    the master's timeout). ``close`` must not reference ``owner``, or ``owner`` is never collected;
    the owner's ``close()`` calls ``detach()`` on the returned finalizer. The close is waited for at
    most :data:`FORGOTTEN_CLOSE_WAIT` seconds.
    """
    loop = asyncio.get_running_loop()
    return weakref.finalize(owner, _close_forgotten, loop, close, release, type(owner).__qualname__)


def _close_forgotten(loop: asyncio.AbstractEventLoop, close: Callable[[], Coroutine[Any, Any, Any]],
                     release: Callable[[], None] | None, what: str) -> None:
    """The finalizer of :func:`close_when_forgotten`; never raises."""
    later = False
    try:
        if loop.is_closed() or not loop.is_running():
            return  # an asyncio client whose loop has ended: nothing can run any more
        log.info("a tubemq %s was not closed; closing it", what)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # collected on its own loop: close in the background
            task = loop.create_task(close())
            _orphans.add(task)
            task.add_done_callback(_orphans.discard)
            if release is not None:
                task.add_done_callback(lambda _t: release())
                later = True
        else:
            asyncio.run_coroutine_threadsafe(close(), loop).result(FORGOTTEN_CLOSE_WAIT)
    except BaseException as exc:  # noqa: BLE001 - finalizers must not raise
        log.debug("closing a forgotten %s failed: %r", what, exc)
    finally:
        if release is not None and not later:
            try:
                release()
            except BaseException:  # noqa: BLE001
                pass


def with_operation(exc: BaseException, operation: str) -> BaseException:
    """A transport failure (timeout, connection) re-raised with the operation it broke, e.g.
    ``producer start (register with master h:p): h:p: no answer ...``; other errors unchanged."""
    if not isinstance(exc, (TubeMQTimeoutError, TubeMQConnectionError)):
        return exc
    try:
        fresh = type(exc)(f"{operation}: {exc}")
    except TypeError:  # a subclass with another signature: keep it as it is
        return exc
    fresh.__cause__ = exc
    return fresh


def _name(obj: Any) -> str:
    """``Producer.start`` for a coroutine or function: what a timeout message names."""
    return str(getattr(obj, "__qualname__", None) or type(obj).__name__)


__all__ = ["FORGOTTEN_CLOSE_WAIT", "LoopThread", "close_when_forgotten", "with_operation"]
