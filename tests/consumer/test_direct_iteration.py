"""``for msg in consumer`` fetching on the iterating thread (:class:`tubemq._bridge.consumer.DirectFeed`).

Real TCP on 127.0.0.1: an in-process embedded cluster for delivery, a server child process frozen with
SIGSTOP for a broker that stops answering in the middle of a blocking getMessage.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tubemq
from tubemq.cli.common import temporary_server_process
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

from ._produce import produce
from .conftest import FAST_CLIENT, drain, wait_for

BODIES = [b"direct-%04d-" % i + b"y" * 60 for i in range(300)]


@pytest.fixture
def small_batches(tmp_path: Any) -> Iterator[EmbeddedCluster]:
    """A broker that returns a few messages per getMessage: many round trips per partition."""
    with EmbeddedCluster(data_dir=tmp_path / "tubemq-data", transfer_size=600, **FAST_TIMERS) as c:
        yield c


def open_consumer(master: str, group: str, topic: str, **kw: Any) -> tubemq.Consumer:
    # the iterator fetches on its own thread for every fetch_concurrency (not with TLS)
    opts = {**FAST_CLIENT, "consume_from": "earliest", "iter_timeout_ms": 1500, "fetch_concurrency": 1, **kw}
    return tubemq.Consumer(master, group=group, topics=[topic], **opts)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_iterator_fetches_itself_and_delivers_each_message_once(small_batches: EmbeddedCluster,
                                                                 concurrency: int) -> None:
    cluster = small_batches
    cluster.create_topic("dir", partitions=3)
    produce(cluster, "dir", BODIES, partitions=3)
    got: list[bytes] = []
    suspended: list[bool] = []
    in_flight: list[int] = []
    with open_consumer(cluster.master_address, "g_dir", "dir", fetch_concurrency=concurrency) as c:
        fetcher = c._core.fetcher
        for msg in c:
            got.append(msg.data)
            if len(got) % 50 == 1:
                suspended.append(c._core.workers.suspended)  # the loop's fetch workers wait meanwhile
            in_flight.append(fetcher.in_flight)  # getMessage calls this thread wrote ahead, not answered yet
        assert all(suspended) and suspended
        wait_for(lambda: not c._core.workers.suspended, timeout=10, what="fetch workers resumed after the loop")
        snap = c.metrics()
        assert snap["counters"]["consumer.fetches"] > len(BODIES) // 10  # many small getMessage calls
        assert snap["counters"].get("consumer.confirm_timeouts", 0) == 0
        # every request written is answered and judged (the last answer may still be judged on the loop)
        wait_for(lambda: c.metrics()["gauges"]["consumer.in_flight"] == 0, timeout=10, what="no getMessage in flight")
    print(f"fetch_concurrency {concurrency}: getMessage calls in flight while iterating, max {max(in_flight)}")
    # one partition's batch is with the caller: the other two may each have a request written ahead
    assert max(in_flight) <= min(concurrency, 2)
    if concurrency > 1:
        assert max(in_flight) == 2
    assert sorted(got) == BODIES
    with open_consumer(cluster.master_address, "g_dir", "dir", iter_timeout_ms=800) as c:
        assert [m.data for m in c] == []  # every batch iterated to its end was committed


def test_poll_after_a_broken_loop_continues_where_it_stopped(small_batches: EmbeddedCluster) -> None:
    cluster = small_batches
    cluster.create_topic("brk2", partitions=2)
    produce(cluster, "brk2", BODIES[:120], partitions=2)
    got: list[bytes] = []
    with open_consumer(cluster.master_address, "g_brk2", "brk2") as c:
        for msg in c:
            got.append(msg.data)
            if len(got) == 10:
                break  # the rest of the current batch stays unconfirmed, with the iterator
        got.extend(m.data for m in list(c._aio.iteration.messages or []))
        current = c._aio.iteration.batch
        assert current is not None and c.confirm(current)
        got.extend(m.data for m in drain(c, 120 - len(got), timeout=30))  # the loop's fetch workers again
        assert c.metrics()["counters"].get("consumer.confirm_timeouts", 0) == 0
    assert sorted(got) == sorted(BODIES[:120])


def test_two_iterators_of_one_consumer_share_the_messages(small_batches: EmbeddedCluster) -> None:
    """Only one iterator fetches on its own thread; a second one is fed through the loop."""
    cluster = small_batches
    cluster.create_topic("two", partitions=3)
    produce(cluster, "two", BODIES, partitions=3)
    got: list[bytes] = []
    lock = threading.Lock()
    with open_consumer(cluster.master_address, "g_two", "two") as c:
        def run() -> None:
            for msg in c:
                with lock:
                    got.append(msg.data)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    assert sorted(got) == BODIES


frozen_server = pytest.mark.skipif(not hasattr(signal, "SIGSTOP") or sys.platform == "win32",
                                   reason="needs POSIX SIGSTOP/SIGCONT to freeze the server process")


@frozen_server
@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_silent_broker_during_the_blocking_fetch_ends_in_bounded_time(concurrency: int) -> None:
    """The server stops answering while the iterator waits for a getMessage answer: the fetch fails
    with the rpc timeout (counted against the broker), the iteration ends by ``iter_timeout_ms``."""
    with temporary_server_process(quiet=True, balance_period_ms=200) as server:
        server.create_topic("frz", partitions=3)
        with tubemq.Producer(server.master) as producer:
            for b in BODIES[:20]:
                producer.send("frz", b)
        c = open_consumer(server.master, "g_frz", "frz", rpc_timeout_ms=3000, iter_timeout_ms=8000,
                          close_timeout_ms=3000, fetch_concurrency=concurrency)
        got: list[bytes] = []
        t0 = 0.0
        try:
            for msg in c:
                got.append(msg.data)
                if len(got) == 20:
                    os.kill(server.process.pid, signal.SIGSTOP)  # the next getMessage gets no answer
                    t0 = time.monotonic()
            ended = time.monotonic() - t0
            errors = c.metrics()["counters"]["consumer.fetch_errors"]
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
            c.close()
        print(f"iteration ended {ended:.1f} s after the server froze; {errors} fetch error(s)")
        assert sorted(got) == BODIES[:20]
        assert errors >= 1  # the blocking getMessage timed out, as the loop's would


@frozen_server
@pytest.mark.parametrize("concurrency", [1, 3])
def test_close_from_another_thread_cuts_a_blocked_fetch_short(concurrency: int) -> None:
    """A read blocked on a silent broker returns when the consumer closes, not at the rpc timeout."""
    with temporary_server_process(quiet=True, balance_period_ms=200) as server:
        server.create_topic("cut", partitions=3)
        with tubemq.Producer(server.master) as producer:
            producer.send("cut", b"one")
        c = open_consumer(server.master, "g_cut", "cut", rpc_timeout_ms=120_000, iter_timeout_ms=0,
                          close_timeout_ms=2000, fetch_concurrency=concurrency)
        first = threading.Event()
        out: list[Any] = []

        def run() -> None:
            try:
                for msg in c:
                    out.append(msg.data)
                    first.set()
                out.append("ended")
            except BaseException as exc:  # noqa: BLE001 - reported below
                out.append(exc)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        try:
            assert first.wait(60), "no message arrived"
            os.kill(server.process.pid, signal.SIGSTOP)
            time.sleep(0.5)  # the iterator is now waiting for an answer that will not come
            t0 = time.monotonic()
            c.close()
            t.join(60)  # far below the 120 s rpc timeout
            print(f"iteration ended {time.monotonic() - t0:.2f} s after close() was called")
            assert not t.is_alive(), "the blocked fetch was not cut short by close()"
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        assert out == [b"one", "ended"]


def test_first_readable_picks_the_channel_with_an_answer_and_times_out_without_one() -> None:
    """The iterator reads whichever of its waiting channels has bytes first (a slow broker does not
    hold up another's answers); with none, it gives up after the timeout."""
    import socket

    from tubemq._bridge.consumer import _first_readable

    class Chan:
        def __init__(self, sock: socket.socket) -> None:
            self.sock = sock

    pairs = [socket.socketpair() for _ in range(3)]
    try:
        chans: Any = [Chan(a) for a, _ in pairs]
        assert _first_readable(chans, 0.05) is None
        pairs[2][1].sendall(b"x")
        assert _first_readable(chans, 5.0) == 2
        pairs[1][1].close()  # EOF counts: the read then reports the lost connection
        assert _first_readable(chans, 5.0) == 1
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_an_idle_channel_the_broker_closed_is_replaced_before_a_request_is_written() -> None:
    """A channel idle for a while (nothing was fetchable) is checked before reuse: one the peer closed
    is replaced, so the next getMessage is not lost to it (and not counted against the broker)."""
    import socket

    from tubemq._bridge.consumer import DirectFeed

    srv = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{srv.getsockname()[1]}"
    feed = DirectFeed.__new__(DirectFeed)  # only the channel bookkeeping is exercised here
    feed._idle, feed._channels, feed._aborted = {}, [], False
    feed._connect_timeout = feed._rpc_timeout = 5.0
    feed._open = lambda channel: None  # no broker here to present tokens to (tests/consumer/test_routes.py does)
    peers: list[socket.socket] = []
    try:
        first = feed._channel(address)
        peers.append(srv.accept()[0])
        feed._idle[address] = [first]
        assert feed._channel(address) is first  # just used: taken as it is
        feed._idle[address] = [first]
        first.last_used -= 60.0
        peers[0].close()  # the broker side goes away while the channel is idle
        wait_for(first.stale, timeout=10, what="the peer's close seen by the idle channel")
        second = feed._channel(address)
        peers.append(srv.accept()[0])
        assert second is not first and first.closed and feed._channels == [second]
    finally:
        for c in feed._channels:
            c.close()
        for p in peers:
            p.close()
        srv.close()


def test_close_on_the_iterator_ends_it_like_a_break(small_batches: EmbeddedCluster) -> None:
    """``iter(consumer)`` walks batches in C (``itertools.chain``) and keeps a generator's
    ``close()``: the loop thread's fetch workers take over again and nothing is lost."""
    cluster = small_batches
    cluster.create_topic("cls", partitions=2)
    produce(cluster, "cls", BODIES[:60], partitions=2)
    with open_consumer(cluster.master_address, "g_cls", "cls", fetch_concurrency=3) as c:
        it = iter(c)
        got = [next(it).data]
        assert c._core.workers.suspended
        it.close()
        wait_for(lambda: not c._core.workers.suspended, timeout=10, what="fetch workers resumed after close()")
        got.extend(m.data for m in list(c._aio.iteration.messages or []))  # the current batch stays with the iterator
        current = c._aio.iteration.batch
        assert current is not None and c.confirm(current)
        got.extend(m.data for m in drain(c, 60 - len(got), timeout=30))
    assert sorted(got) == sorted(BODIES[:60])


def test_a_partition_paused_while_its_request_is_written_ahead_is_not_delivered(
        small_batches: EmbeddedCluster) -> None:
    """The iterator writes the next partitions' requests before handing a batch out; pausing one of
    them meanwhile rolls its answer back (as the loop's buffer does): nothing of it reaches the loop
    until it is resumed, and then every message once."""
    cluster = small_batches
    cluster.create_topic("pz", partitions=2)
    produce(cluster, "pz", BODIES[:100], partitions=2)
    got: list[tuple[int, bytes]] = []
    paused: int | None = None
    with open_consumer(cluster.master_address, "g_pz", "pz", fetch_concurrency=3, iter_timeout_ms=1500) as c:
        for msg in c:
            got.append((msg.partition.partition_id, msg.data))
            if paused is None:
                other = [p for p in c.assignment() if p.partition_id != msg.partition.partition_id]
                assert len(other) == 1
                paused = other[0].partition_id
                c.pause(other)
        assert paused is not None
        assert [d for pid, d in got if pid == paused] == []  # the answer written ahead was rolled back
        c.resume([f"1:pz:{paused}"])
        rest = [m.data for m in drain(c, 100 - len(got), timeout=30)]
    print(f"{len(got)} messages before the resume, {len(rest)} after")
    assert sorted([d for _, d in got] + rest) == sorted(BODIES[:100])
