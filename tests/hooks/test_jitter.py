"""Reconnect back-off jitter: within [d/2, d], and actually spread (not one value for everyone)."""

from __future__ import annotations

import asyncio

from _support.ports import dead_address

from tubemq.errors import TubeMQConnectionError
from tubemq.net.pool import ConnectionPool, PoolSettings, jittered


def test_jittered_bounds() -> None:
    assert jittered(2.0, lambda: 0.0) == 1.0
    assert jittered(2.0, lambda: 1.0) == 2.0
    values = [jittered(1.0) for _ in range(200)]
    assert all(0.5 <= v <= 1.0 for v in values)
    assert len({round(v, 6) for v in values}) > 50  # spread, not a constant


def test_pools_failing_together_back_off_differently() -> None:
    async def main() -> list[float]:
        addr = dead_address()
        pools = [ConnectionPool(PoolSettings(backoff_base=1.0, backoff_max=1.0)) for _ in range(8)]
        for pool in pools:
            try:
                await pool.get(addr)
            except TubeMQConnectionError:
                pass
        waits = [pool.backoff_left(addr) for pool in pools]
        for pool in pools:
            await pool.close()
        return waits

    waits = asyncio.run(main())
    print("back-off left per pool:", waits)
    assert all(0.3 < w <= 1.0 for w in waits)
    assert max(waits) - min(waits) > 0.01
