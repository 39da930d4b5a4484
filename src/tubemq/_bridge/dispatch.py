"""Blocking callbacks run in order on a thread of their own (a push listener of the blocking API)."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Dispatcher:
    """One daemon thread that runs a client's blocking callbacks in order (a push listener): what
    ``runner`` means for :meth:`tubemq.aio.Consumer.subscribe` in the blocking API.

    ``await dispatcher(fn, *args)`` runs ``fn`` there; cancelling the await abandons the result, not
    the call. Daemon, so a listener that never returns cannot hold up interpreter exit.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, fut, fn, args))
        return await fut

    def _main(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            loop, fut, fn, args = item
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                outcome = (False, exc)
            try:
                loop.call_soon_threadsafe(_settle, fut, *outcome)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    def stop(self) -> None:
        """Let the thread end after the call it is running (if any)."""
        self._queue.put(None)


def _settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


__all__ = ["Dispatcher"]
