"""Where a consumed batch spends its time: a per-fetch timeline of one fresh consumer group.

Wraps the consumer's own fetch, confirm and take steps (on the loop thread) with timestamps while a
fresh group drains ``--messages`` from an existing topic, then prints, from the first message on:

* broker round trip: getMessage sent -> answer decoded (what the broker, and the decode, take);
* fetch gap: the application's confirm of a batch -> the partition's next getMessage;
* buffered: answer decoded -> batch taken for the application;
* fetches at the broker on average (sum of round trips / wall): at most one per partition (TubeMQ locks
  a partition per fetch), so a figure near the partition count means the client always has a fetch
  waiting wherever it may, and the broker sets the pace.

Usage: python bench/consume_timeline.py --master HOST:PORT --topic T [--messages 600000]
       [--fetch-concurrency 3] [--api sync|aio]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

import tubemq
import tubemq.aio
from tubemq.consumer import fetch, rebalance, workers

now = time.perf_counter
events: list[tuple[float, str, str]] = []


def instrument() -> None:
    round_trip = workers.round_trip
    confirm = rebalance.PartitionTable.confirm
    take_nowait = fetch.DeliveryBuffer.take_nowait

    async def timed_fetch(engine: Any, lease: Any, get_connection: Any, timeout_ms: int) -> Any:
        events.append((now(), "send", lease.key))
        batch = await round_trip(engine, lease, get_connection, timeout_ms)
        events.append((now(), "answer", lease.key))
        return batch

    def timed_confirm(self: Any, slot: Any, booking: int, consumed: bool, delay: float = 0.0) -> bool:
        events.append((now(), "confirm", slot.key))
        return confirm(self, slot, booking, consumed, delay)

    def timed_take(self: Any, is_current: Any) -> Any:
        batch = take_nowait(self, is_current)
        if batch is not None:
            events.append((now(), "take", batch.partition.key))
        return batch

    workers.round_trip = timed_fetch
    rebalance.PartitionTable.confirm = timed_confirm  # type: ignore[method-assign]
    fetch.DeliveryBuffer.take_nowait = timed_take  # type: ignore[method-assign]


def drain(args: argparse.Namespace) -> float:
    opts: dict[str, Any] = {"group": f"timeline_{os.getpid()}", "topics": [args.topic], "consume_from": "earliest",
                            "fetch_concurrency": args.fetch_concurrency,
                            "prefetch_batches": max(4, 2 * args.fetch_concurrency), "iter_timeout_ms": 60000}
    got, t0 = 0, 0.0

    def arrived() -> bool:
        """Count one message (the clock and the timeline start at the first); True when enough."""
        nonlocal got, t0
        if not got:
            t0 = now()
            events.clear()
        got += 1
        return got >= args.messages

    if args.api == "sync":
        with tubemq.Consumer(args.master, **opts) as c:
            for _ in c:
                if arrived():
                    break
        return got / (now() - t0)

    async def main() -> float:
        async with tubemq.aio.Consumer(args.master, **opts) as c:
            async for _ in c:
                if arrived():
                    break
        return got / (now() - t0)

    return asyncio.run(main())


def report(rate: float) -> None:
    trips: list[float] = []
    gaps: list[float] = []
    buffered: list[float] = []
    last: dict[tuple[str, str], float] = {}
    for t, kind, key in events:
        if kind == "send":
            if ("confirm", key) in last:
                gaps.append(t - last.pop(("confirm", key)))
            last[("send", key)] = t
        elif kind == "answer" and ("send", key) in last:
            trips.append(t - last.pop(("send", key)))
            last[("answer", key)] = t
        elif kind == "take" and ("answer", key) in last:
            buffered.append(t - last.pop(("answer", key)))
        elif kind == "confirm":
            last[("confirm", key)] = t

    def line(xs: list[float]) -> str:
        if not xs:
            return "-"
        xs = sorted(xs)
        return f"median {statistics.median(xs) * 1e3:.2f} ms, p90 {xs[int(len(xs) * 0.9)] * 1e3:.2f} ms (n={len(xs)})"

    wall = events[-1][0] - events[0][0] if events else 0.0
    print(f"{rate:,.0f} msg/s; load average {os.getloadavg()[0]:.1f}")
    print(f"broker round trip (getMessage sent -> answer decoded): {line(trips)}")
    print(f"fetch gap (confirm -> the partition's next getMessage): {line(gaps)}")
    print(f"buffered (answer decoded -> taken for the application): {line(buffered)}")
    if wall > 0:
        print(f"fetches at the broker on average: {sum(trips) / wall:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", required=True, help="master HOST:PORT")
    ap.add_argument("--topic", required=True, help="a topic holding a backlog")
    ap.add_argument("--messages", type=int, default=600_000, help="messages to drain (default 600000)")
    ap.add_argument("--fetch-concurrency", type=int, default=3, help="fetch_concurrency (default 3)")
    ap.add_argument("--api", choices=("sync", "aio"), default="sync", help="for msg in / async for (default sync)")
    args = ap.parse_args()
    instrument()
    report(drain(args))


if __name__ == "__main__":
    main()
