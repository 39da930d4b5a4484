"""Every README-documented producer behaviour, through both APIs (``producer_api`` fixture: the blocking
``tubemq.Producer`` and ``tubemq.aio.Producer``); they share one implementation, these tests keep it so."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest

from tubemq.errors import ClientClosedError, TubeMQTimeoutError

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}


def run(coro: Any, timeout: float = 60.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.02)


def test_send_send_async_callback_flush_close(cluster: Any, producer_api: Any, stored: Any) -> None:
    cluster.create_topic("both", partitions=1)

    async def main() -> None:
        p = await producer_api.open(cluster.master_address, **FAST)
        async with p:
            first = await p.send("both", b"one", attributes={"k": "v"}, stream_id="s1")
            assert first.topic == "both" and first.message_id > 0
            seen: list[Any] = []
            futs = [await p.send_async("both", b"m%02d" % i, callback=lambda r, e: seen.append((r, e)))
                    for i in range(40)]
            assert await p.flush(30) == 0
            assert len(seen) == 40 and all(e is None for _, e in seen)  # every callback ran before flush returned
            results = await asyncio.gather(*futs)
            assert [r.message_id for r in results] == [r.message_id for r, _ in seen]
            counters = p.metrics()["counters"]
            assert counters["producer.acknowledged"] == 41 and counters["producer.failed"] == 0
        assert p.closed
        with pytest.raises(ClientClosedError):
            await p.send("both", b"late")
        await p.close()  # idempotent

    run(main())
    got = stored(cluster.broker_address, "both", [0])[0]
    assert [m.data for m in got] == [b"one"] + [b"m%02d" % i for i in range(40)]
    assert got[0].attributes["k"] == "v" and got[0].stream_id == "s1"


def test_asyncio_send_and_wait_is_send() -> None:
    """aiokafka's name for "send and wait for the answer" works on the asyncio producer."""
    import tubemq.aio

    assert tubemq.aio.Producer.send_and_wait is tubemq.aio.Producer.send


def test_wrong_data_type_is_a_type_error(cluster: Any, producer_api: Any) -> None:
    cluster.create_topic("both", partitions=1)

    async def main() -> None:
        async with await producer_api.open(cluster.master_address, **FAST) as p:
            for bad in ("text", 5):
                with pytest.raises(TypeError, match="argument 'data' must be bytes-like"):
                    await p.send("both", bad)
                with pytest.raises(TypeError, match="argument 'data' must be bytes-like"):
                    await p.send_async("both", bad)

    run(main())


def test_full_buffer_fails_after_max_block_ms(fake_cluster: Any, producer_api: Any) -> None:
    fc = fake_cluster()
    fc.brokers[0].script = ["drop"]  # the first message gets no answer: it holds the only slot

    async def main() -> None:
        async with await producer_api.open(fc.master_list, max_pending=1, max_block_ms=200, retries=0,
                                           rpc_timeout_ms=3000) as p:
            first = await p.send_async("demo", b"held")
            t0 = time.monotonic()
            with pytest.raises(TubeMQTimeoutError, match="send buffer full"):
                await p.send_async("demo", b"refused")
            assert time.monotonic() - t0 >= 0.15  # it waited (max_block_ms) before giving up
            with pytest.raises(TubeMQTimeoutError):
                await first  # the dropped message times out (outcome unknown)
            assert (await p.send("demo", b"room again")).message_id > 0  # the slot came back

    run(main())


def test_full_buffer_blocks_send_async_until_a_slot_frees(fake_cluster: Any, producer_api: Any) -> None:
    fc = fake_cluster()
    fc.brokers[0].script = ["drop"]

    async def main() -> None:
        async with await producer_api.open(fc.master_list, max_pending=1, max_block_ms=20000, retries=0,
                                           rpc_timeout_ms=3000) as p:
            first = await p.send_async("demo", b"held")
            t0 = time.monotonic()
            second = await p.send_async("demo", b"waits")  # blocks until the first one times out
            waited = time.monotonic() - t0
            assert first.done() and isinstance(first.exception(), TubeMQTimeoutError)
            assert waited >= 2.0, waited  # rpc_timeout_ms of the held message, not max_block_ms
            assert (await second).message_id > 0

    run(main())


def test_forgotten_producer_is_closed_by_its_finalizer(cluster: Any, producer_api: Any) -> None:
    cluster.create_topic("both", partitions=1)

    async def main() -> None:
        p = await producer_api.open(cluster.master_address, heartbeat_period_ms=50)
        await p.send("both", b"x")
        core = p.core
        p.forget()  # dropped without close()
        del p
        gc.collect()
        await until(lambda: core.closed and core.session._hb_task is None)

    run(main())
