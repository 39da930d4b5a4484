"""Consumer test helpers: both consumer APIs behind one interface; the timers and polling helpers come
from tests/_support (re-exported here for ``from .conftest import ...``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from _support import FAST_CLIENT, drain, quiet, wait_for

__all__ = ["FAST_CLIENT", "drain", "quiet", "wait_for"]  # shared helpers, from tests/_support


# ---------------------------------------------------------------------------------------------------
# one set of behaviour tests for both APIs (like tests/codec/conftest.py runs every codec test twice)


class SyncConsumerApi:
    """``tubemq.Consumer`` seen from a coroutine: every blocking call runs on a worker thread."""

    name = "sync"

    def __init__(self, c: Any) -> None:
        self.c = c

    @classmethod
    async def open(cls, master: str, **options: Any) -> SyncConsumerApi:
        import tubemq

        return cls(await asyncio.to_thread(tubemq.Consumer, master, **options))

    @property
    def core(self) -> Any:
        return self.c._aio._core

    async def poll(self, timeout: float = 1.0) -> Any:
        return await asyncio.to_thread(self.c.poll, timeout)

    async def confirm(self, batch: Any, consumed: bool = True) -> bool:
        return bool(await asyncio.to_thread(self.c.confirm, batch, consumed))

    async def iterate(self, limit: int | None = None) -> list[Any]:
        """``for msg in consumer`` until ``limit`` messages (break) or the iteration ends by itself."""

        def loop() -> list[Any]:
            out: list[Any] = []
            for msg in self.c:
                out.append(msg)
                if limit is not None and len(out) >= limit:
                    break
            return out

        return await asyncio.to_thread(loop)

    def subscribe(self, listener: Callable[[Any], Any], **kw: Any) -> None:
        self.c.subscribe(listener, **kw)

    async def pause(self) -> None:
        await asyncio.to_thread(self.c.pause)

    async def resume(self) -> None:
        await asyncio.to_thread(self.c.resume)

    @property
    def paused(self) -> bool:
        return bool(self.c.paused)

    def assignment(self) -> list[Any]:
        return list(self.c.assignment())

    async def close(self) -> None:
        await asyncio.to_thread(self.c.close)

    def close_from_listener(self) -> Any:
        """What a listener calls to close its own consumer (on the dispatcher thread)."""
        self.c.close()
        return None

    async def __aenter__(self) -> SyncConsumerApi:
        await asyncio.to_thread(self.c.__enter__)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.c.__exit__, None, None, None)

    @property
    def closed(self) -> bool:
        return bool(self.c.closed)

    def forget(self) -> None:
        self.c = None


class AioConsumerApi(SyncConsumerApi):
    """``tubemq.aio.Consumer`` on the test's own loop (async listeners run there)."""

    name = "aio"

    @classmethod
    async def open(cls, master: str, **options: Any) -> SyncConsumerApi:
        import tubemq.aio

        return cls(await tubemq.aio.Consumer(master, **options).start())

    @property
    def core(self) -> Any:
        return self.c._core

    async def poll(self, timeout: float = 1.0) -> Any:
        return await self.c.poll(timeout)

    async def confirm(self, batch: Any, consumed: bool = True) -> bool:
        return bool(await self.c.confirm(batch, consumed))

    async def iterate(self, limit: int | None = None) -> list[Any]:
        out: list[Any] = []
        async for msg in self.c:
            out.append(msg)
            if limit is not None and len(out) >= limit:
                break
        return out

    async def pause(self) -> None:
        self.c.pause()

    async def resume(self) -> None:
        self.c.resume()

    async def close(self) -> None:
        await self.c.close()

    def close_from_listener(self) -> Any:
        return self.c.close()

    async def __aenter__(self) -> SyncConsumerApi:
        await self.c.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.c.__aexit__(None, None, None)


@pytest.fixture(params=[SyncConsumerApi, AioConsumerApi], ids=["sync", "aio"])
def consumer_api(request: Any) -> type[SyncConsumerApi]:
    """The blocking ``tubemq.Consumer`` or ``tubemq.aio.Consumer``, behind one awaitable interface."""
    return request.param  # type: ignore[no-any-return]
