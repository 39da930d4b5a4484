"""Portal and Facade: a blocking handle on an asyncio client running on the shared loop thread.

Why: every behaviour (sending, the send buffer, iteration, listeners, closing, the finalizer) is
implemented once, in the asyncio classes of :mod:`tubemq.aio`. ``tubemq.Producer``, ``Consumer`` and
``BoundConsumer`` only hold a :class:`Portal` to such an object living on the shared event-loop
thread (:class:`~tubemq.net.loop.LoopThread`) and run its coroutines there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from ..errors import ClientClosedError, TubeMQTimeoutError
from ..net.loop import LoopThread

log = logging.getLogger("tubemq.client")

T = TypeVar("T")
P = ParamSpec("P")

#: How long ``call()`` waits for a busy loop thread before running the function without it (s).
_CALL_WAIT = 5.0


class AsyncClient(Protocol):
    """What a :class:`Portal` / :class:`Facade` needs of an asyncio client."""

    #: set by the portal before ``start()``: the finalizer releases the loop thread with it
    release_loop: Callable[[], None] | None

    @property
    def client_id(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    async def start(self) -> Any: ...

    def metrics(self) -> dict[str, Any]: ...


A = TypeVar("A", bound=AsyncClient)
F = TypeVar("F", bound="Facade[Any]")


class Portal(Generic[A]):
    """A blocking handle on one asyncio client built and started on the shared loop thread.

    ``run(coro)`` waits for a coroutine of it; ``call(fn)`` runs a plain method on the loop thread;
    ``iterate(agen)`` iterates an async generator one item per hop; ``close(coro)`` runs the
    client's close once and releases the loop thread (also when the close fails).
    """

    __slots__ = ("_lock", "_released", "client", "lt")

    def __init__(self, build: Callable[[], A], close: Callable[[A], Coroutine[Any, Any, Any]]) -> None:
        lt = LoopThread.shared()
        try:
            client = lt.call(build)  # on the loop thread: asyncio objects belong to their loop
            client.release_loop = lt.stop
            try:
                lt.run(client.start())
            except BaseException:
                client.release_loop = None
                try:
                    lt.run(close(client))
                except BaseException:  # noqa: BLE001 - the start failure is the error to report
                    pass
                raise
        except BaseException:
            lt.stop()
            raise
        self.lt = lt
        self.client = client
        self._lock = threading.Lock()
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    @property
    def in_loop_thread(self) -> bool:
        return self.lt.in_loop_thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and wait for it (ClientClosedError once closed)."""
        if self._released:
            coro.close()
            raise ClientClosedError(f"{type(self.client).__name__} is closed")
        return self.lt.run(coro, timeout)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the loop thread (where the client's state lives); after close, or with the
        loop thread busy past a few seconds, in the calling thread (best effort, e.g. metrics)."""
        try:
            return self.lt.call(fn, *args, timeout=_CALL_WAIT)
        except TubeMQTimeoutError:
            return fn(*args)

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """A blocking iterator over ``agen``: one hop to the loop thread per item."""

        async def step() -> tuple[bool, T | None]:
            try:
                return True, await agen.__anext__()
            except StopAsyncIteration:
                return False, None

        try:
            while True:
                more, item = self.run(step())
                if not more:
                    return
                yield item  # type: ignore[misc]
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None and not self._released:
                try:
                    self.lt.run(aclose())
                except Exception:  # noqa: BLE001 - the generator is abandoned either way
                    pass

    def close(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> None:
        """Run the client's close (``coro``, waited for up to ``timeout``) once, then release the loop
        thread. Idempotent; a close that fails or times out is logged, not raised (the client is
        closed either way: nothing of it runs any more once the loop thread is released)."""
        with self._lock:
            if self._released:
                coro.close()
                return
            self._released = True
        try:
            if self.lt.in_loop_thread:
                coro.close()
                raise RuntimeError("close() of a blocking client called on its event-loop thread (from a "
                                   "callback?): use the asyncio client there")
            self.lt.run(coro, timeout)
        except Exception:
            log.exception("%s: close did not finish cleanly", type(self.client).__name__)
        finally:
            self.lt.stop()


class Facade(Generic[A]):
    """Base of the blocking clients: a :class:`Portal` to the asyncio client and the members that only
    forward (identity, state, metrics, the context manager); subclasses forward the rest."""

    _portal: Portal[A]
    _aio: A

    def _open(self, build: Callable[[], A], close: Callable[[A], Coroutine[Any, Any, Any]]) -> None:
        self._portal = Portal(build, close)
        self._aio = self._portal.client

    @property
    def client_id(self) -> str:
        return self._aio.client_id

    @property
    def _lt(self) -> LoopThread:
        """The loop thread the client runs on (for tests and debugging)."""
        return self._portal.lt

    @property
    def closed(self) -> bool:
        return self._aio.closed

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, latency percentiles, master and per-broker health
        (keys listed in docs/guide/metrics.md). Taken on the client's loop thread, where the
        figures live, so it is consistent; works after ``close()`` too."""
        return self._portal.call(self._aio.metrics)

    @abstractmethod
    def close(self) -> None:
        """Close the asyncio client (each facade says how) and release the loop thread."""

    def __enter__(self: F) -> F:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<tubemq.{type(self).__name__} {self.client_id} {'closed' if self.closed else 'open'}>"


def blocking(method: Callable[Concatenate[A, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[Facade[A], P], T]:
    """The blocking form of a coroutine method of the asyncio client, as a facade method:
    ``attach = blocking(AsyncBoundConsumer.attach)`` runs ``await client.attach(...)`` on the loop thread
    and returns its result (same signature and docstring, for type checkers and ``help()`` too)."""

    @functools.wraps(method)
    def run(self: Facade[A], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._portal.run(method(self._aio, *args, **kwargs))

    return run


def to_thread(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """A blocking callback as a coroutine function run on a worker thread (an ``async`` one, or None,
    is returned as is): what the blocking API's rebalance hooks run as."""
    if fn is None or asyncio.iscoroutinefunction(fn):
        return fn

    async def run(*args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    return run


__all__ = ["AsyncClient", "Facade", "Portal", "blocking", "to_thread"]
