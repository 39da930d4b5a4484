"""BoundConsumer.metrics(): the same snapshot shape as the other clients (README "Metrics and logging")."""

from __future__ import annotations

import asyncio
from typing import Any

import tubemq
from tubemq import aio

from ._produce import produce


def test_bound_consumer_metrics_count_fetches_and_brokers(cluster: Any) -> None:
    cluster.create_topic("bm", partitions=1)
    produce(cluster, "bm", [b"m%d" % i for i in range(20)])
    with tubemq.BoundConsumer(cluster.master_address, "bm-group", ["bm"]) as bc:
        (part,) = bc.partitions("bm")
        bc.attach(part, offset=0)
        got = list(bc.read_range(part, 0, bc.offsets(part).max, timeout=10))
        assert len(got) == 20
        snap = bc.metrics()
        assert snap["counters"]["consumer.fetches"] >= 1
        assert snap["counters"]["consumer.messages"] == 20
        assert snap["gauges"]["consumer.partitions"] == 1
        assert snap["master"]["registered"] is True
        assert [b["broker_id"] for b in snap["brokers"].values()] == [part.broker_id]
        assert snap["latency"]["consumer.fetch_latency"]["count"] >= 1
    assert bc.metrics()["counters"]["consumer.messages"] == 20  # still readable after close


def test_async_bound_consumer_metrics(cluster: Any) -> None:
    cluster.create_topic("bm2", partitions=1)
    produce(cluster, "bm2", [b"x"] * 5)

    async def main() -> dict[str, Any]:
        async with aio.BoundConsumer(cluster.master_address, "bm2-group", ["bm2"]) as bc:
            (part,) = await bc.partitions("bm2")
            await bc.attach(part, offset=0)
            async for _ in bc.read_range(part, 0, (await bc.offsets(part)).max, timeout=10):
                pass
            return bc.metrics()

    snap = asyncio.run(asyncio.wait_for(main(), 60))
    assert snap["counters"]["consumer.messages"] == 5
