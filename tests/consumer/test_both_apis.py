"""Every README-documented consumer behaviour, through both APIs (``consumer_api`` fixture: the blocking
``tubemq.Consumer`` and ``tubemq.aio.Consumer``); they share one implementation, these tests keep it so."""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tubemq.errors import ClientClosedError

from ._produce import produce
from .conftest import FAST_CLIENT

SRC = Path(__file__).resolve().parents[2] / "src"


def run(coro: Any, timeout: float = 90.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(cond: Any, timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or cond}")
        await asyncio.sleep(0.02)


def opts(group: str, topics: list[str], **kw: Any) -> dict[str, Any]:
    return {**FAST_CLIENT, "group": group, "topics": topics, "consume_from": "earliest", **kw}


def members(cluster: Any, group: str) -> int:
    """How many consumers the master has in ``group``."""
    return int(cluster._call(lambda: cluster.server.master.group_detail(group)["count"]))


def test_iteration_confirms_each_batch_and_stops_after_iter_timeout(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("it", partitions=2)
    bodies = [b"it-%03d" % i for i in range(60)]
    produce(cluster, "it", bodies, partitions=2)

    async def main() -> None:
        async with await consumer_api.open(cluster.master_address, **opts("g_it", ["it"], iter_timeout_ms=1500)) as c:
            first = await c.iterate(limit=5)  # break out: the current batch stays unconfirmed
            rest = await c.iterate()  # resumes in that batch, ends by itself after 1.5 s without messages
            assert sorted(m.data for m in first + rest) == sorted(bodies)
            assert len(first + rest) == len(bodies)
        assert c.closed
        # every iterated batch was confirmed: a new member of the group gets nothing again
        async with await consumer_api.open(cluster.master_address, **opts("g_it", ["it"], iter_timeout_ms=1500)) as c2:
            assert await c2.iterate() == []

    run(main())


def test_poll_confirm_and_rollback(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("pc", partitions=1)
    produce(cluster, "pc", [b"a", b"b", b"c"])

    async def main() -> None:
        async with await consumer_api.open(cluster.master_address, **opts("g_pc", ["pc"])) as c:
            batch = None
            while batch is None:
                batch = await c.poll(1.0)
            assert [m.data for m in batch] == [b"a", b"b", b"c"] and batch[0].data == b"a"  # a Sequence
            assert await c.confirm(batch, consumed=False)  # rolled back: delivered again
            again = None
            while again is None:
                again = await c.poll(1.0)
            assert [m.data for m in again] == [b"a", b"b", b"c"]
            assert await c.confirm(again)
            assert not await c.confirm(again)  # a batch is confirmed once
        with pytest.raises(ClientClosedError):
            await c.poll(0.1)

    run(main())


def test_push_listener_pause_resume_and_close(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("push", partitions=2)
    produce(cluster, "push", [b"p%d" % i for i in range(10)], partitions=2)

    async def main() -> None:
        got: list[bytes] = []
        c = await consumer_api.open(cluster.master_address, **opts("g_push", ["push"]))
        try:
            c.subscribe(lambda m: got.append(m.data))
            with pytest.raises(RuntimeError, match="already subscribed"):
                c.subscribe(print)
            await until(lambda: len(got) == 10, what="first 10 messages")
            await c.pause()
            assert c.paused
            await asyncio.sleep(0.3)  # a batch in flight when pausing may still arrive
            seen = len(got)
            produce(cluster, "push", [b"q%d" % i for i in range(10)], partitions=2)
            await asyncio.sleep(1.0)
            assert len(got) == seen  # paused: no fetch, no listener call
            await c.resume()
            assert not c.paused
            await until(lambda: len(got) == 20, what="the 10 produced while paused")
            assert sorted(got) == sorted([b"p%d" % i for i in range(10)] + [b"q%d" % i for i in range(10)])
        finally:
            await c.close()
        assert c.closed

    run(main())


def test_push_listener_error_rolls_back_when_asked(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("rb", partitions=1)
    produce(cluster, "rb", [b"x"])

    async def main() -> None:
        calls: list[bytes] = []

        def listener(m: Any) -> None:
            calls.append(m.data)
            if len(calls) == 1:
                raise ValueError("first delivery fails")

        async with await consumer_api.open(cluster.master_address, **opts("g_rb", ["rb"])) as c:
            c.subscribe(listener, rollback_on_error=True)
            await until(lambda: len(calls) >= 2, what="re-delivery after the listener raised")
            assert calls[:2] == [b"x", b"x"]

    run(main())


def test_push_listener_logs_and_retries_a_failing_poll(cluster: Any, consumer_api: Any, caplog: Any) -> None:
    cluster.create_topic("pf", partitions=1)
    produce(cluster, "pf", [b"after the failure"])

    async def main() -> None:
        got: list[bytes] = []
        async with await consumer_api.open(cluster.master_address, **opts("g_pf", ["pf"])) as c:
            core = c.core
            real_poll = core.poll
            failures = 0

            async def failing_poll(timeout: float | None = None) -> Any:
                nonlocal failures
                if failures < 2:
                    failures += 1
                    raise OSError("simulated poll failure")
                return await real_poll(timeout)

            core.poll = failing_poll
            c.subscribe(lambda m: got.append(m.data))
            await until(lambda: got == [b"after the failure"], what="delivery after two failed polls")
            assert failures == 2

    with caplog.at_level(logging.ERROR, logger="tubemq.consumer"):
        run(main())
    logged = [r for r in caplog.records if "poll failed; retrying" in r.getMessage()]
    assert len(logged) == 2 and all(r.exc_info for r in logged)


def test_listener_may_close_its_consumer(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("lc", partitions=1)
    produce(cluster, "lc", [b"one", b"two", b"three"])

    async def main() -> None:
        calls: list[bytes] = []
        c = await consumer_api.open(cluster.master_address, **opts("g_lc", ["lc"], shutdown_wait_ms=30000))

        def listener(m: Any) -> Any:
            calls.append(m.data)
            return c.close_from_listener()  # asyncio: a coroutine the consumer awaits

        c.subscribe(listener)
        await until(lambda: c.closed and c.core.closed, timeout=20, what="close from inside the listener")
        assert calls == [b"one"]  # no call after close
        await asyncio.sleep(0.3)
        assert calls == [b"one"]
        await c.close()  # idempotent

    run(main())


def test_forgotten_consumer_is_closed_by_its_finalizer(cluster: Any, consumer_api: Any) -> None:
    cluster.create_topic("gc", partitions=1)

    async def main() -> None:
        c = await consumer_api.open(cluster.master_address, **opts("g_gc", ["gc"]))
        await until(lambda: len(c.assignment()) == 1, what="assignment")
        core = c.core
        c.forget()  # the client is dropped without close()
        gc.collect()
        await until(lambda: core.closed, what="the finalizer's close")
        await until(lambda: members(cluster, "g_gc") == 0, timeout=5, what="the master forgetting the member")

    run(main())


def test_consumer_left_open_at_exit_unregisters(cluster: Any) -> None:
    """A program that dies on an exception with its consumer open leaves the group at exit, instead of
    holding its partitions until the master's heartbeat timeout."""
    cluster.create_topic("ex", partitions=1)
    script = textwrap.dedent(f"""
        import time, tubemq
        c = tubemq.Consumer({cluster.master_address!r}, group="g_ex", topics=["ex"], heartbeat_period_ms=200,
                            rpc_timeout_ms=3000)
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            time.sleep(0.05)
        print("assigned", len(c.assignment()), flush=True)
        raise RuntimeError("crash with the consumer open")
    """)
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90, env=env,
                          check=False)
    assert "assigned 1" in proc.stdout, proc.stderr
    assert "crash with the consumer open" in proc.stderr
    # the member left at exit (the master's heartbeat timeout would take 30 s)
    deadline = time.monotonic() + 3
    while members(cluster, "g_ex") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert members(cluster, "g_ex") == 0
