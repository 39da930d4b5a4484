"""Metrics: the registry, the loop-thread snapshot, pool health, and producer/consumer figures over real TCP."""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import wait_for

import tubemq
import tubemq.aio
from tubemq.errors import MessageTooLargeError, TubeMQConnectionError, TubeMQTimeoutError
from tubemq.metrics import Histogram, Metrics
from tubemq.net.connection import Connection
from tubemq.net.loop import LoopThread
from tubemq.net.pool import ConnectionPool, PoolSettings

#: client timers that keep the integration tests fast (the server side is FAST_SERVER)
FAST: dict[str, Any] = {"heartbeat_period_ms": 200, "register_retry_wait_ms": 100, "rpc_timeout_ms": 3000,
                        "connect_timeout_ms": 1000}
FAST_CONSUMER: dict[str, Any] = {**FAST, "msg_not_found_wait_ms": 20, "rebalance_confirm_wait_ms": 1000,
                                 "heartbeat_fail_wait_ms": 300, "shutdown_wait_ms": 2000}

PRODUCER_COUNTERS = {"producer.accepted", "producer.sent", "producer.acknowledged", "producer.failed",
                     "producer.retried", "producer.unknown_outcome", "producer.bytes_sent"}
CONSUMER_COUNTERS = {"consumer.fetches", "consumer.messages", "consumer.bytes_received", "consumer.empty_fetches",
                     "consumer.batches", "consumer.confirms", "consumer.rebalances", "consumer.rebalance.connect",
                     "consumer.rebalance.disconnect", "consumer.rebalance.only_connect",
                     "consumer.rebalance.only_disconnect", "consumer.partitions_assigned",
                     "consumer.partitions_revoked", "consumer.partitions_lost", "consumer.fetch_errors",
                     "consumer.decode_errors", "consumer.dropped_messages", "consumer.confirm_timeouts",
                     "consumer.commit_failures"}
NET_COUNTERS = {"net.reconnects", "net.connect_failures", "net.disconnects", "net.bytes_sent", "net.bytes_received"}
CONNECTION_HEALTH = {"connected", "in_flight", "backing_off", "backoff_s", "connects", "reconnects",
                     "connect_failures", "consecutive_connect_failures", "disconnects", "bytes_sent",
                     "bytes_received", "last_error"}


def documented_names() -> set[str]:
    """Every `name` in backticks in the docs' "Metrics and logging" guide."""
    section = (Path(__file__).parent.parent / "docs" / "guide" / "metrics.md").read_text(encoding="utf-8")
    return set(re.findall(r"`([\w.]+)`", section))


def assert_documented(snap: dict[str, Any]) -> None:
    """The metrics guide lists every key a real snapshot has (and the top-level layout)."""
    names = set(snap["counters"]) | set(snap["gauges"]) | set(snap["latency"]) | set(snap["master"])
    for entry in snap["brokers"].values():
        names |= set(entry)
    names -= {"address", "registered", "broker_id"}  # shown in the layout block
    missing = names - documented_names()
    assert not missing, f"docs/guide/metrics.md does not document {sorted(missing)}"
    text = (Path(__file__).parent.parent / "docs" / "guide" / "metrics.md").read_text(encoding="utf-8")
    for key in ("time", "uptime_s", "counters", "gauges", "latency", "master", "brokers", "address",
                "registered", "broker_id", "count", "mean_ms", "p50_ms", "p99_ms", "p999_ms", "max_ms"):
        assert f'"{key}"' in text, key


# ---------------------------------------------------------------------------------------------------
# registry


def test_histogram_record_is_exact_for_one_writer_and_reset_clears() -> None:
    h = Histogram()
    for i in range(1, 10001):
        h.record(i / 1e6)  # 1 µs .. 10 ms
    h.record(-1.0)  # clock oddities land in bucket 0, never raise
    h.record(1e9)  # absurdly long: clamped into the last bucket
    snap = h.snapshot()
    assert snap["count"] == 10002 == h.count
    assert 4.7 <= snap["p50_ms"] <= 5.4
    assert 9.5 <= snap["p99_ms"] <= 10.7
    assert snap["max_ms"] == pytest.approx(1e12)
    assert h.snapshot(reset=True)["count"] == 10002
    assert h.snapshot() == {"count": 0, "mean_ms": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "p999_ms": 0.0, "max_ms": 0.0}


def test_snapshot_is_plain_data_and_survives_broken_sources() -> None:
    m = Metrics()
    m.inc("a.count", 3)
    m.register_counter("a.hot", lambda: 41 + 1)
    m.register_counter("a.broken", lambda: 1 // 0)
    m.set_gauge("g.ok", lambda: 2)
    m.set_gauge("g.broken", lambda: [][0])
    m.add_section("extra", lambda: {"x": 1})
    m.add_section("bad", lambda: {}["missing"])
    m.histogram("lat").record(0.002)
    snap = m.snapshot()
    assert snap["counters"] == {"a.broken": -1, "a.count": 3, "a.hot": 42}
    assert snap["gauges"]["g.ok"] == 2.0 and math.isnan(snap["gauges"]["g.broken"])
    assert snap["extra"] == {"x": 1}
    assert snap["bad"]["error"].startswith("KeyError")
    assert snap["latency"]["lat"]["count"] == 1 and snap["latency"]["lat"]["max_ms"] == pytest.approx(2.0)
    assert snap["uptime_s"] >= 0 and snap["time"] > 1.6e9
    assert list(snap["counters"]) == sorted(snap["counters"])


def test_loop_thread_call_runs_on_the_loop_and_falls_back_when_stopped() -> None:
    lt = LoopThread("test-call")
    try:
        assert lt.call(threading.current_thread) is lt.thread
        with pytest.raises(ZeroDivisionError):
            lt.call(lambda: 1 // 0)
        # from the loop thread itself: direct call, no deadlock
        assert lt.run(_call_from_loop(lt), timeout=5) is lt.thread
        blocker = threading.Event()
        lt.call_soon(blocker.wait, 5)  # the loop is busy for a while
        with pytest.raises(TubeMQTimeoutError):
            lt.call(threading.current_thread, timeout=0.1)
        blocker.set()
    finally:
        lt.stop()
    assert lt.call(threading.current_thread) is threading.current_thread()  # stopped: runs here


async def _call_from_loop(lt: LoopThread) -> threading.Thread:
    return lt.call(threading.current_thread)


def test_pool_stats_count_connects_losses_failures_and_bytes() -> None:
    async def main() -> None:
        peers: list[asyncio.StreamWriter] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peers.append(writer)
            await reader.read(100)
            writer.write(b"\x00" * 3)  # some bytes back (not a frame yet)
            await writer.drain()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        pool = ConnectionPool(PoolSettings(connect_timeout=1.0, backoff_base=0.2))
        try:
            conn: Connection = await pool.get(address)
            conn.start_call_cb(lambda serial, arg: b"ping", None, 1000, lambda *a: None)
            for _ in range(200):
                if conn.bytes_received:
                    break
                await asyncio.sleep(0.01)
            s = pool.stats(address)
            assert s["connected"] and s["connects"] == 1 and s["reconnects"] == 0 and s["in_flight"] == 1
            assert s["bytes_sent"] == 4 and s["bytes_received"] == 3
            peers[0].transport.abort()  # the peer drops the connection
            for _ in range(200):
                if conn.closed:
                    break
                await asyncio.sleep(0.01)
            s = pool.stats(address)
            assert not s["connected"] and s["disconnects"] == 1 and s["bytes_sent"] == 4
            await pool.get(address)  # reconnect
            s = pool.stats(address)
            assert s["connects"] == 2 and s["reconnects"] == 1 and s["disconnects"] == 1
            await pool.discard(address)  # closed by us: not a disconnect
            assert pool.stats(address)["disconnects"] == 1
            server.close()
            await server.wait_closed()
            with pytest.raises(TubeMQConnectionError):
                await pool.get(address)
            s = pool.stats(address)
            assert s["connect_failures"] == 1 and s["consecutive_connect_failures"] == 1
            assert s["backing_off"] and 0 < s["backoff_s"] <= 0.2 and "failed" in s["last_error"]
            assert pool.stats("127.0.0.1:9")["connects"] == 0  # never seen: zeros, no entry created
        finally:
            await pool.close()

    asyncio.run(asyncio.wait_for(main(), 30))


# ---------------------------------------------------------------------------------------------------
# producer


def test_producer_metrics_over_real_tcp(cluster: Any) -> None:
    cluster.create_topic("pm", partitions=2)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        bodies = [b"m" * (10 + i) for i in range(40)]
        futs = [p.send_async("pm", b, attributes={"k": "v"} if i % 2 else None) for i, b in enumerate(bodies)]
        for f in futs:
            f.result(timeout=30)
        with pytest.raises(MessageTooLargeError):  # refused by the producer: failed, never sent
            p.send("pm", b"x" * (1024 * 1024 + 1))
        m = p.metrics()
        c = m["counters"]
        assert PRODUCER_COUNTERS | NET_COUNTERS | {"master.registrations"} <= set(c)
        expected_bytes = sum(len(b) + (3 if i % 2 else 0) for i, b in enumerate(bodies))  # body + "k=v"
        assert (c["producer.accepted"], c["producer.sent"], c["producer.acknowledged"], c["producer.failed"]) == \
            (41, 40, 40, 1)
        assert c["producer.bytes_sent"] == expected_bytes
        assert c["producer.retried"] == 0 and c["producer.unknown_outcome"] == 0
        assert m["gauges"] == {"producer.backlog": 0.0, "producer.in_flight": 0.0, "producer.outstanding": 0.0}
        lat = m["latency"]["producer.send_latency"]
        assert lat["count"] == 40 // 8 and 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["p999_ms"] <= lat["max_ms"]
        assert m["master"]["address"] == cluster.master_address and m["master"]["registered"]
        assert m["master"]["connected"]
        (address, broker), = m["brokers"].items()
        assert address == cluster.broker_address
        assert CONNECTION_HEALTH | {"broker_id", "send_errors", "consecutive_failures", "shielded"} == \
            set(broker)
        assert broker["connected"] and broker["broker_id"] == p.partitions("pm")[0].broker_id and not broker["shielded"]
        assert broker["bytes_sent"] > expected_bytes and broker["bytes_received"] > 0
        assert c["net.bytes_sent"] == broker["bytes_sent"] + m["master"]["bytes_sent"]

        # a lost broker connection: counted, then reconnected by the next send
        def drop() -> None:
            conn = p._core.session.pool.connected(address)
            assert conn is not None
            conn._transport.abort()

        p._lt.call(drop)
        # through the loop (a blocking send would use the thread's own channel, not the pool's)
        assert p.send_async("pm", b"after the drop").result(30).message_id > 0
        m = p.metrics()
        assert m["brokers"][address]["disconnects"] == 1 and m["brokers"][address]["reconnects"] == 1
        assert m["counters"]["net.disconnects"] == 1 and m["counters"]["net.reconnects"] == 1
    assert_documented(m)
    after = p.metrics()  # after close: still a snapshot, figures kept
    assert not after["master"]["registered"]
    assert after["counters"]["producer.acknowledged"] == 41 and after["counters"]["net.reconnects"] == 1


def test_metrics_snapshot_is_taken_on_the_loop_thread(cluster: Any) -> None:
    cluster.create_topic("pth", partitions=1)
    seen: list[threading.Thread] = []
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("pth", b"x")
        p._core.metrics.add_section("probe", lambda: seen.append(threading.current_thread()) or "ok")
        assert p.metrics()["probe"] == "ok"
        assert seen == [p._lt.thread]


# ---------------------------------------------------------------------------------------------------
# consumer


def test_consumer_metrics_fetches_bytes_and_rebalances(cluster: Any) -> None:
    cluster.create_topic("cm", partitions=2)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        for f in [p.send_async("cm", b"c%03d" % i) for i in range(60)]:
            f.result(timeout=30)
    opts = {**FAST_CONSUMER, "consume_from": "earliest"}
    with tubemq.Consumer(cluster.master_address, group="g_cm", topics=["cm"], **opts) as a:
        got = 0
        deadline = time.monotonic() + 30
        while got < 60 and time.monotonic() < deadline:
            batch = a.poll(0.2)
            if batch is not None:
                got += len(batch)
                assert a.confirm(batch)
        assert got == 60
        m = a.metrics()
        c = m["counters"]
        assert CONSUMER_COUNTERS | NET_COUNTERS | {"master.registrations", "master.heartbeats"} <= set(c)
        assert c["consumer.messages"] == 60 and c["consumer.batches"] == c["consumer.confirms"] >= 1
        assert c["consumer.fetches"] >= c["consumer.batches"]
        assert c["consumer.bytes_received"] > 60 * 4
        assert c["consumer.partitions_assigned"] == 2 and c["consumer.partitions_revoked"] == 0
        connects = c["consumer.rebalance.connect"] + c["consumer.rebalance.only_connect"]
        assert connects >= 1 and c["consumer.rebalances"] >= connects
        assert m["gauges"]["consumer.partitions"] == 2.0
        assert {"consumer.buffered_batches", "consumer.in_flight", "consumer.pending_events"} <= set(m["gauges"])
        lat = m["latency"]["consumer.fetch_latency"]
        assert lat["count"] >= c["consumer.batches"] and lat["max_ms"] > 0
        (address, broker), = m["brokers"].items()
        assert address == cluster.broker_address and broker["partitions"] == 2 and broker["connected"]
        assert CONNECTION_HEALTH | {"broker_id", "partitions", "heartbeat_failures",
                                    "consecutive_heartbeat_failures", "fetch_errors", "healthy",
                                    "unhealthy_reason"} == set(broker)
        assert m["master"]["registered"]
        # a second member: the first one gives a partition away (a counted disconnect event)
        with tubemq.Consumer(cluster.master_address, group="g_cm", topics=["cm"], **opts) as b:
            wait_for(lambda: len(b.assignment()) == 1, 30, "the second member's partition")
            wait_for(lambda: a.metrics()["counters"]["consumer.partitions_revoked"] == 1, 30, "revocation")
            c = a.metrics()["counters"]
            assert c["consumer.rebalance.disconnect"] + c["consumer.rebalance.only_disconnect"] >= 1
            assert a.metrics()["brokers"][address]["partitions"] == 1
        assert_documented(a.metrics())


# ---------------------------------------------------------------------------------------------------
# stats_callback for the four clients


def test_stats_callback_for_sync_and_asyncio_producer_and_consumer(cluster: Any) -> None:
    cluster.create_topic("sc", partitions=1)
    got: dict[str, list[tuple[dict[str, Any], threading.Thread]]] = {k: [] for k in ("p", "ap", "c", "ac")}

    def collector(name: str) -> Callable[[dict[str, Any]], None]:
        return lambda snap: got[name].append((snap, threading.current_thread()))

    def enough(name: str, key: str) -> bool:
        return sum(1 for s, _ in got[name] if s["counters"].get(key, 0) > 0) >= 2

    stats = {"stats_interval_ms": 50}
    with tubemq.Producer(cluster.master_address, stats_callback=collector("p"), **stats, **FAST) as p:
        p.send("sc", b"from sync")
        wait_for(lambda: enough("p", "producer.acknowledged"), what="sync producer stats")
        assert all(t is p._lt.thread for _, t in got["p"])  # the client's loop thread
    with tubemq.Consumer(cluster.master_address, group="g_sc", topics=["sc"], consume_from="earliest",
                         stats_callback=collector("c"), **stats, **FAST_CONSUMER) as c:
        wait_for(lambda: enough("c", "consumer.fetches"), what="sync consumer stats")

    async def main() -> None:
        async with tubemq.aio.Producer(cluster.master_address, stats_callback=collector("ap"), **stats,
                                       **FAST) as ap:
            await ap.send("sc", b"from asyncio")
            await _async_wait(lambda: enough("ap", "producer.acknowledged"))
            assert ap.metrics()["counters"]["producer.acknowledged"] == 1
        async with tubemq.aio.Consumer(cluster.master_address, group="g_asc", topics=["sc"],
                                       consume_from="earliest", stats_callback=collector("ac"), **stats,
                                       **FAST_CONSUMER) as ac:
            await _async_wait(lambda: enough("ac", "consumer.fetches"))
            assert ac.metrics()["counters"]["consumer.fetches"] > 0
        assert all(t is threading.current_thread() for _, t in got["ap"] + got["ac"])  # the caller's loop

    asyncio.run(asyncio.wait_for(main(), 60))
    for name in got:
        snap = got[name][-1][0]
        assert {"time", "uptime_s", "counters", "gauges", "latency", "master", "brokers"} <= set(snap), name
    # no report after close
    counts = {k: len(v) for k, v in got.items()}
    time.sleep(0.2)
    assert counts == {k: len(v) for k, v in got.items()}
    assert p.metrics()["counters"]["producer.acknowledged"] == 1 and c.metrics()["counters"]["consumer.fetches"] > 0


async def _async_wait(cond: Callable[[], Any], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s")
        await asyncio.sleep(0.02)


def test_a_raising_stats_callback_is_logged_and_reporting_goes_on(cluster: Any,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    cluster.create_topic("scr", partitions=1)
    calls: list[int] = []

    def bad(snap: dict[str, Any]) -> None:
        calls.append(1)
        raise RuntimeError("callback bug")

    with caplog.at_level("ERROR", logger="tubemq"):
        with tubemq.Producer(cluster.master_address, stats_interval_ms=30, stats_callback=bad, **FAST) as p:
            wait_for(lambda: len(calls) >= 3, what="three calls despite the errors")
            assert p.send("scr", b"still fine").message_id > 0
    assert any("stats_callback" in r.getMessage() and r.exc_info for r in caplog.records)
