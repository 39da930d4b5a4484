"""The asyncio producer on uvloop (the ``tubemq[uvloop]`` extra): same results as on asyncio's own loop.

Why: uvloop's transports differ from asyncio's in details the producer relies on (buffered reads
through ``get_buffer`` / ``buffer_updated``, ``set_write_buffer_limits``, writes from a callback,
``call_later`` for the timeout sweep), so the one-in-flight path, the pipelined path and a timeout
are run on it against the embedded server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import tubemq.aio
from tubemq.errors import TubeMQTimeoutError

uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed (pip install 'tubemq[uvloop]')")

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}


def run_on_uvloop(coro: Any, timeout: float = 60.0) -> Any:
    loop = uvloop.new_event_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        loop.close()


def test_aio_producer_round_trip_on_uvloop(cluster: Any, stored: Any) -> None:
    cluster.create_topic("uv", partitions=1)

    async def main() -> list[Any]:
        assert "uvloop" in type(asyncio.get_running_loop()).__module__
        async with tubemq.aio.Producer(cluster.master_address, **FAST) as p:
            results = [await p.send("uv", b"one-%d" % i) for i in range(20)]
            futs = [await p.send_async("uv", b"pipe-%03d" % i) for i in range(300)]
            results += await asyncio.gather(*futs)
            assert await p.flush(10) == 0
            return results

    results = run_on_uvloop(main())
    assert len({r.message_id for r in results}) == 320
    bodies = [m.data for ms in stored(cluster.broker_address, "uv", [0]).values() for m in ms]
    assert bodies == [b"one-%d" % i for i in range(20)] + [b"pipe-%03d" % i for i in range(300)]


def test_silent_broker_times_out_on_uvloop(fake_cluster: Any) -> None:
    """A broker that does not answer gives the typed timeout on uvloop too (the connection's timeout
    sweep runs on uvloop's timers), never resent; the next message goes through."""
    fc = fake_cluster()
    broker = fc.brokers[0]

    async def main() -> None:
        async with tubemq.aio.Producer(fc.master_list, retries=3, rpc_timeout_ms=3000, heartbeat_period_ms=100,
                                       retry_backoff_ms=10) as p:
            await p.publish("demo")
            broker.script = ["drop"]
            with pytest.raises(TubeMQTimeoutError) as info:
                await p.send("demo", b"maybe stored")
            assert info.value.topic == "demo"  # type: ignore[attr-defined]
            assert len(broker.sends) == 1  # never resent: the broker may have stored it
            assert (await p.send("demo", b"next")).message_id > 0

    run_on_uvloop(main())
