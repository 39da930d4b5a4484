"""Every send settles by its deadline (``rpc_timeout_ms`` after it was admitted) plus a small slack, also
when the broker blackholes: it accepts the connection and reads every request but never answers.

Each route is covered: a blocking ``send`` on a caller's own channel, a blocking ``send`` behind this
thread's ``send_async`` messages (the event loop's route), ``send_async`` futures (some waiting for window
room: ``max_inflight`` is small), and the asyncio ``send`` / ``send_async``. The broker is a fake over real
TCP whose script drops every send request.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import tubemq
import tubemq.aio
from tubemq.errors import ConnectionLostError, TubeMQTimeoutError

RPC_TIMEOUT_MS = 3000  # the smallest the config allows
#: what a settled-by-its-deadline send may take at most: the deadline plus a generous margin for a
#: loaded machine (the overruns this guards against were one and two whole extra timeouts)
LIMIT = RPC_TIMEOUT_MS / 1000.0 + 1.8
OPTIONS: dict[str, Any] = {"rpc_timeout_ms": RPC_TIMEOUT_MS, "retries": 2, "heartbeat_period_ms": 300,
                           "max_inflight": 8}


def _blackhole(fake_cluster: Any) -> Any:
    fc = fake_cluster(topics={"demo": 2})
    return fc


def _check(label: str, outcomes: list[tuple[float, BaseException | None]]) -> None:
    worst = max(t for t, _ in outcomes)
    print(f"{label}: {len(outcomes)} sends settled, the slowest after {worst:.2f} s (limit {LIMIT:.1f} s)")
    for took, exc in outcomes:
        # a timeout, or the connection dropped because its peer read nothing for a whole timeout
        # with the window full: both typed, both "may or may not be stored"
        assert isinstance(exc, (TubeMQTimeoutError, ConnectionLostError)), exc
        assert took <= LIMIT, f"{label}: settled after {took:.2f} s, over the deadline plus slack ({LIMIT:.1f} s)"


def test_blocking_sends_and_futures_settle_by_their_deadline(fake_cluster: Any) -> None:
    fc = _blackhole(fake_cluster)
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, **OPTIONS) as p:
        p.send("demo", b"warm-up")  # published, routes and channels built
        p.send("demo", b"warm-up")
        broker.script = ["drop"] * 100_000
        futures: list[tuple[float, Any]] = []
        settled: list[tuple[float, BaseException | None]] = []
        lock = threading.Lock()

        def record(t0: float) -> Any:
            def done(_result: Any, exc: BaseException | None) -> None:
                with lock:
                    settled.append((time.monotonic() - t0, exc))
            return done

        direct: list[tuple[float, BaseException | None]] = []

        def blocking_elsewhere() -> None:  # a thread without send_async messages: its own channel
            t0 = time.monotonic()
            try:
                p.send("demo", b"direct")
            except BaseException as exc:  # noqa: BLE001 - the outcome is asserted below
                direct.append((time.monotonic() - t0, exc))
            else:
                direct.append((time.monotonic() - t0, None))

        other = threading.Thread(target=blocking_elsewhere)
        other.start()
        for i in range(40):  # more than max_inflight: most wait for window room first
            t0 = time.monotonic()
            futures.append((t0, p.send_async("demo", b"async-%d" % i, callback=record(t0))))
        t0 = time.monotonic()
        behind: list[tuple[float, BaseException | None]] = []
        try:
            p.send("demo", b"behind")  # behind this thread's send_async messages: the loop's route
        except BaseException as exc:  # noqa: BLE001 - asserted below
            behind.append((time.monotonic() - t0, exc))
        other.join(LIMIT + 5)
        for _t0, fut in futures:
            fut.exception(timeout=LIMIT + 5)
        deadline = time.monotonic() + 5
        while len(settled) < len(futures) and time.monotonic() < deadline:
            time.sleep(0.01)
    _check("blocking send, own channel", direct)
    _check("blocking send, loop route", behind)
    _check("send_async", settled)
    assert len(settled) == len(futures) == 40
    c = p.metrics()["counters"]
    assert c["producer.failed"] == 42 and c["producer.acknowledged"] == 2


def test_asyncio_sends_settle_by_their_deadline(fake_cluster: Any) -> None:
    fc = _blackhole(fake_cluster)
    broker = fc.brokers[0]

    async def main() -> tuple[list[tuple[float, BaseException | None]], list[tuple[float, BaseException | None]]]:
        async with tubemq.aio.Producer(fc.master_list, **OPTIONS) as p:
            await p.send("demo", b"warm-up")
            broker.script = ["drop"] * 100_000
            started = time.monotonic()
            pending = [await p.send_async("demo", b"async-%d" % i) for i in range(40)]
            submitted = [time.monotonic() for _ in pending]

            async def one() -> tuple[float, BaseException | None]:
                t0 = time.monotonic()
                try:
                    await p.send("demo", b"awaited")
                except BaseException as exc:  # noqa: BLE001 - asserted below
                    return time.monotonic() - t0, exc
                return time.monotonic() - t0, None

            awaited = await asyncio.gather(one(), one())
            results = await asyncio.gather(*pending, return_exceptions=True)
            ended = time.monotonic()
            # each future's own time is at most the time until all were settled, from its submission
            futures = [(ended - t, r if isinstance(r, BaseException) else None) for t, r in zip(submitted, results, strict=True)]
            assert ended - started <= LIMIT + 1.0
            return list(awaited), futures

    awaited, futures = asyncio.run(main())
    _check("await send", awaited)
    _check("send_async futures (upper bound: until the last settled)", futures)
