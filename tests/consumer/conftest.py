"""Consumer test helpers: fast client timers and bounded polling helpers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

#: client timers that keep integration tests fast (the server side is FAST_SERVER in tests/conftest.py)
FAST_CLIENT: dict[str, Any] = {
    "heartbeat_period_ms": 200,
    "msg_not_found_wait_ms": 20,
    "register_retry_wait_ms": 100,
    "rebalance_confirm_wait_ms": 1000,
    "heartbeat_fail_wait_ms": 300,
    "shutdown_wait_ms": 2000,
    "rpc_timeout_ms": 3000,
    "connect_timeout_ms": 1000,
}


def wait_for(cond: Callable[[], Any], timeout: float = 15.0, interval: float = 0.02, what: str = "") -> Any:
    """Poll ``cond`` until it returns a truthy value; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or cond}")
        time.sleep(interval)


def drain(consumer: Any, count: int, timeout: float = 15.0, confirm: bool = True) -> list[Any]:
    """Poll (and confirm) until ``count`` messages arrived; fail after ``timeout`` seconds."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"got {len(out)} of {count} messages within {timeout} s")
        batch = consumer.poll(0.2)
        if batch is None:
            continue
        out.extend(batch.messages)
        if confirm:
            consumer.confirm(batch)
    return out


def quiet(consumer: Any, seconds: float = 0.5) -> list[Any]:
    """Messages that arrive within ``seconds`` (expected: none)."""
    out: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = consumer.poll(0.05)
        if batch is not None:
            out.extend(batch.messages)
            consumer.confirm(batch)
    return out


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
