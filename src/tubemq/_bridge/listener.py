"""A blocking push listener's calls, run on a dispatcher thread of their own (the ``runner`` of
:meth:`tubemq.aio.Consumer.subscribe` in the blocking API)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .dispatch import Dispatcher

__all__ = ["ListenerRunner"]


class ListenerRunner:
    """``await runner(listener, items, closing)`` calls ``listener`` on each item on the dispatcher thread,
    stopping once ``closing()``; True if every item was handed over.

    Why here: the asyncio consumer knows nothing of threads; whether a blocking ``close()`` is called
    from inside a listener call (and so must not wait for that call to end) is a question of threads,
    answered by :meth:`calling_thread`.
    """

    def __init__(self, name: str) -> None:
        self.dispatcher = Dispatcher(name)

    async def __call__(self, listener: Callable[[Any], Any], items: list[Any], closing: Callable[[], bool]) -> bool:
        return await self.dispatcher(_call_each, listener, items, closing)

    def calling_thread(self) -> bool:
        """True on the thread that runs the listener calls (user code there is inside one)."""
        return threading.current_thread() is self.dispatcher.thread

    def stop(self) -> None:
        self.dispatcher.stop()


def _call_each(listener: Callable[[Any], Any], items: list[Any], closing: Callable[[], bool]) -> bool:
    for item in items:
        if closing():
            return False
        listener(item)
    return True
