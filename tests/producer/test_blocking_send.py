"""The blocking ``send`` doing its round trip on the calling thread (``tubemq._bridge``): order per
partition with many threads (mixed with ``send_async``), large frames, a connection dying under
blocking senders, ``close()`` while they wait, a channel that cannot be written (falls back to the
loop, stored once), a broker that closed an idle channel."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

import tubemq
from tubemq._bridge import _plain_py
from tubemq._bridge import producer as bridge_producer
from tubemq._bridge.channel import BlockingChannel
from tubemq.errors import ClientClosedError, TubeMQError

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}
FAKE = {"heartbeat_period_ms": 100, "retry_backoff_ms": 10}


def _run_threads(n: int, target: Any, timeout: float = 120) -> None:
    threads = [threading.Thread(target=target, args=(t,), daemon=True) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a sender thread hung"


def test_many_threads_keep_their_order_per_partition(cluster: Any, stored: Any) -> None:
    """Each thread sends to its own key (one partition) with blocking sends and, every fourth message,
    a send_async it does not wait for: the broker must store each thread's messages in its order
    (a blocking send must not overtake the thread's own queued send_async) and every frame whole."""
    cluster.create_topic("order", partitions=3)
    n_threads, per_thread = 6, 120
    errors: list[BaseException] = []
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.publish("order")
        p.send("order", b"warm-up")

        def worker(t: int) -> None:
            try:
                futs = []
                for i in range(per_thread):
                    body = b"t%d-%04d" % (t, i)
                    if i % 4 == 3:
                        futs.append(p.send_async("order", body, key=f"k{t}"))
                    else:
                        p.send("order", body, key=f"k{t}")
                for f in futs:
                    f.result(timeout=60)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        _run_threads(n_threads, worker)
        direct = p._bridge.round_trips
        counters = p.metrics()["counters"]
    assert not errors, errors
    assert direct > 0  # some blocking sends ran on their thread (the others had send_async outstanding)
    assert counters["producer.sent"] == counters["producer.acknowledged"] == n_threads * per_thread + 1
    by_thread: dict[int, list[int]] = {}
    for msgs in stored(cluster.broker_address, "order", range(3)).values():
        for m in msgs:
            if m.data.startswith(b"t"):
                t, i = m.data[1:].split(b"-")
                by_thread.setdefault(int(t), []).append(int(i))
    assert sorted(by_thread) == list(range(n_threads))
    for t, seq in by_thread.items():
        assert seq == list(range(per_thread)), f"thread {t}: stored out of order or incomplete"


def test_large_frames_from_many_threads_stay_whole(cluster: Any, stored: Any) -> None:
    """1 MiB messages from three threads with a tiny SO_SNDBUF on the loop's connections (the kernel
    takes part of a frame at a time there) mixed with small ones: all stored intact, once each."""
    cluster.create_topic("big", partitions=2)
    big = [bytes([t]) * (1024 * 1024) for t in range(3)]
    errors: list[BaseException] = []
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("big", b"warm-up")
        for conn in list(p._core.session.pool._conns.values()):
            conn._transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)

        def worker(t: int) -> None:
            try:
                for i in range(4):
                    p.send("big", big[t])
                    p.send_async("big", b"small %d %d" % (t, i)).result(60)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        _run_threads(3, worker)
        direct = p._bridge.round_trips
    assert not errors, errors
    assert direct >= 12  # the big ones went over the threads' own channels
    bodies = sorted(m.data for ms in stored(cluster.broker_address, "big", range(2)).values() for m in ms)
    expected = sorted([b"warm-up"] + [big[t] for t in range(3) for _ in range(4)]
                      + [b"small %d %d" % (t, i) for t in range(3) for i in range(4)])
    assert bodies == expected


def test_connection_dying_under_blocking_senders(fake_cluster: Any) -> None:
    """The broker drops its connections now and then: every blocking send ends, in time, with a
    result or a typed error (``retries=0``: a lost connection is reported, not resent), and sending
    carries on."""
    fc = fake_cluster()
    broker = fc.brokers[0]
    outcomes: list[Any] = []
    lock = threading.Lock()
    with tubemq.Producer(fc.master_list, retries=0, rpc_timeout_ms=3000, **FAKE) as p:
        p.publish("demo")
        p.send("demo", b"warm-up")
        broker.script = ([200] * 7 + ["close"]) * 6

        def worker(t: int) -> None:
            for i in range(15):
                t0 = time.monotonic()
                try:
                    r: Any = p.send("demo", b"%d-%d" % (t, i))
                except TubeMQError as exc:
                    r = exc
                with lock:
                    outcomes.append((r, time.monotonic() - t0))

        _run_threads(4, worker, timeout=60)
        direct = p._bridge.round_trips
        # sending carries on once the broker stops dropping connections (a "close" can be left in the
        # script: a drop fails every send in flight on the connection but uses one entry)
        broker.script.clear()
        assert p.send("demo", b"after").message_id > 0
    assert len(outcomes) == 60
    failures = [r for r, _ in outcomes if isinstance(r, BaseException)]
    assert failures, "no connection was dropped: the test did not test it"
    assert all(isinstance(e, (tubemq.errors.ConnectionLostError, tubemq.errors.TubeMQConnectionError))
               for e in failures), failures
    assert max(dt for _, dt in outcomes) < 10  # an error within the rpc timeout's order, no hang
    assert direct > 0


def test_close_during_blocking_sends(fake_cluster: Any) -> None:
    """Threads blocked in send() (the broker holds its answers) when close(0) runs: each gets a
    ClientClosedError at once (not its rpc timeout), later sends are refused the same way."""
    fc = fake_cluster()
    broker = fc.brokers[0]
    p = tubemq.Producer(fc.master_list, rpc_timeout_ms=30000, **FAKE)
    p.publish("demo")
    p.send("demo", b"warm-up")
    broker.script = ["drop"] * 100
    outcomes: list[Any] = []
    started = threading.Barrier(5)

    def worker(t: int) -> None:
        started.wait(10)
        try:
            outcomes.append(p.send("demo", b"stuck %d" % t))
        except TubeMQError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(4)]
    for t in threads:
        t.start()
    started.wait(10)
    deadline = time.monotonic() + 10
    while len(broker.sends) < 5 and time.monotonic() < deadline:  # all four written (and unanswered)
        time.sleep(0.01)
    assert len(broker.sends) == 5
    assert len(p._bridge._channels) == 5  # each thread wrote on its own channel (and the main one)
    t0 = time.monotonic()
    p.close(timeout=0)
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert time.monotonic() - t0 < 10
    assert len(outcomes) == 4 and all(isinstance(e, ClientClosedError) for e in outcomes), outcomes
    with pytest.raises(ClientClosedError):
        p.send("demo", b"after close")


def test_unwritable_channel_falls_back_to_the_loop(cluster: Any, stored: Any, monkeypatch: Any) -> None:
    """A channel whose write fails (nothing reached the broker): the message is written once more on a
    new channel of the thread, then goes through the loop; it is stored exactly once, in order, and
    the caller sees a plain success; the next send opens a new channel."""
    cluster.create_topic("fb", partitions=1)
    real_init = BlockingChannel.__init__
    plan: list[bool] = []

    class FlakySocket:
        """The channel's socket; ``plan`` decides, per write of a blocking send (whichever route
        makes it: the compiled one or the general one), whether the peer is gone first."""

        def __init__(self, sock: socket.socket) -> None:
            self._sock = sock

        def sendall(self, frame: bytes, *flags: int) -> None:
            if plan and plan.pop(0):
                self._sock.shutdown(socket.SHUT_RDWR)  # what a dead peer leaves: the write fails
            self._sock.sendall(frame, *flags)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._sock, name)

    def flaky_init(self: BlockingChannel, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.sock = FlakySocket(self.sock)  # type: ignore[assignment]

    monkeypatch.setattr(BlockingChannel, "__init__", flaky_init)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("fb", b"warm-up")
        plan.extend([True, False, True, True, False, False])
        results = [p.send("fb", b"m%d" % i) for i in range(8)]
        direct = p._bridge.round_trips
    assert not plan
    # plan T, F: m0's write fails, its second write on a fresh channel of the thread succeeds (direct);
    # T, T: m1 fails on both channels -> through the loop; F, F: m2, m3 direct; m4..m7 direct (the
    # warm-up went through the loop: it published the topic)
    assert direct == 8 - 1
    assert len({r.message_id for r in results}) == 8
    bodies = [m.data for ms in stored(cluster.broker_address, "fb", [0]).values() for m in ms]
    assert bodies == [b"warm-up"] + [b"m%d" % i for i in range(8)]  # once each, in order


def test_channel_closed_by_the_broker_while_idle_is_replaced(cluster: Any, stored: Any) -> None:
    """The broker (or a middlebox) closed a thread's idle channel: the next send notices before
    writing, opens a new one and succeeds; no error reaches the caller."""
    cluster.create_topic("idle", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.publish("idle")
        p.send("idle", b"one")
        (channel,) = p._bridge._lane().channels.values()
        channel.sock.shutdown(socket.SHUT_RDWR)
        time.sleep(0.05)
        r = p.send("idle", b"two")
        (again,) = p._bridge._lane().channels.values()
        direct = p._bridge.round_trips
    assert again is not channel and r.message_id > 0
    assert direct == 2
    bodies = [m.data for ms in stored(cluster.broker_address, "idle", [0]).values() for m in ms]
    assert bodies == [b"one", b"two"]


def test_dead_broker_gives_a_typed_error_within_the_rpc_timeout(fake_cluster: Any) -> None:
    """A broker that accepts the write and never answers: the blocking send fails with
    TubeMQTimeoutError after about rpc_timeout_ms (printed), not later, and the thread is free."""
    fc = fake_cluster()
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, rpc_timeout_ms=3000, retries=0, **FAKE) as p:
        p.publish("demo")
        p.send("demo", b"warm-up")
        broker.script = ["drop"]
        t0 = time.monotonic()
        with pytest.raises(tubemq.errors.TubeMQTimeoutError):
            p.send("demo", b"silent")
        took = time.monotonic() - t0
        print(f"silent broker: typed timeout after {took:.2f} s (rpc_timeout 3.0 s)")
        assert took < 30  # bounded (generous: a loaded machine), no hang
        assert p.send("demo", b"after").message_id > 0
        assert p.metrics()["counters"]["producer.unknown_outcome"] >= 1


def test_blocking_round_trips_are_in_the_metrics(cluster: Any) -> None:
    """Sends done on the callers' threads count like the loop's: sent / acknowledged / bytes / latency,
    and their wire bytes in the broker's figures and the net.* counters."""
    cluster.create_topic("bm", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.publish("bm")
        before = p.metrics()
        for _ in range(64):
            p.send("bm", b"y" * 100)
        m = p.metrics()
        direct = p._bridge.round_trips
    c, c0 = m["counters"], before["counters"]
    assert direct == 64
    assert c["producer.sent"] - c0["producer.sent"] == 64
    assert c["producer.acknowledged"] - c0["producer.acknowledged"] == 64
    assert c["producer.bytes_sent"] - c0["producer.bytes_sent"] == 64 * 100
    assert c["producer.failed"] == c0["producer.failed"] and c["producer.accepted"] >= 64
    assert m["latency"]["producer.send_latency"]["count"] >= 64 // 8
    (address, broker), = m["brokers"].items()
    assert broker["bytes_sent"] - before["brokers"][address]["bytes_sent"] > 64 * 100  # frames, not bodies
    assert c["net.bytes_sent"] - c0["net.bytes_sent"] > 64 * 100
    assert m["gauges"]["producer.outstanding"] == 0


def test_close_right_after_send_async_leaves_no_future_pending(cluster: Any) -> None:
    """Threads queue send_async messages and the producer closes at once: every future ends, in
    time, acknowledged or with a typed error (nothing stays queued between the threads and the loop)."""
    cluster.create_topic("cq", partitions=2)
    p = tubemq.Producer(cluster.master_address, **FAST)
    p.send("cq", b"warm-up")
    futures: list[Any] = []
    lock = threading.Lock()
    go = threading.Barrier(4)

    def worker(t: int) -> None:
        go.wait(10)
        for i in range(500):
            try:
                f = p.send_async("cq", b"%d-%d" % (t, i))
            except TubeMQError:
                return  # refused once closed
            with lock:
                futures.append(f)

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(3)]
    for t in threads:
        t.start()
    go.wait(10)
    time.sleep(0.01)
    p.close(timeout=0)
    for t in threads:
        t.join(30)
    outcomes = [f.exception(timeout=30) for f in futures]  # raises TimeoutError if one hangs
    print(f"{len(futures)} queued, {sum(e is None for e in outcomes)} acknowledged before the close")
    assert all(e is None or isinstance(e, TubeMQError) for e in outcomes)


def test_send_from_a_callback_on_the_loop_thread_is_refused(cluster: Any) -> None:
    """A blocking send called on the client's own event-loop thread (a send_async callback) would
    stall every other message: it is refused with a typed error, before anything is written."""
    cluster.create_topic("cbsend", partitions=1)
    seen: list[BaseException | None] = []
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("cbsend", b"warm-up")  # publishes the topic
        p.send("cbsend", b"warm-up 2")  # this thread's channel is open: the route is ready
        before = p._bridge.round_trips

        def callback(result: Any, exc: Any) -> None:
            try:
                p.send("cbsend", b"from the callback")
                seen.append(None)
            except TubeMQError as e:
                seen.append(e)

        p.send_async("cbsend", b"first", callback=callback).result(10)
        p.send_async("cbsend", b"second", callback=callback).result(10)  # the loop thread has a lane now
        direct = p._bridge.round_trips
    assert len(seen) == 2 and all(isinstance(e, TubeMQError) and "event-loop thread" in str(e) for e in seen)
    assert direct == before  # nothing went out from the loop thread


def test_a_thread_given_the_dead_loop_threads_ident_is_not_taken_for_it(cluster: Any, monkeypatch: Any) -> None:
    """Thread idents are reused: after close, a thread (an executor's, say) may get the ident of the
    producer's ended loop thread. Its send must get ClientClosedError, not the loop-thread refusal;
    and while open, a thread with that ident that is not the loop thread sends normally. (The twin's
    plain sender, whose copy of the ident a test can set, stands for both.)"""
    monkeypatch.setattr(bridge_producer, "_plain", _plain_py)
    cluster.create_topic("reuse", partitions=1)
    p = tubemq.Producer(cluster.master_address, heartbeat_period_ms=300)
    try:
        p.send("reuse", b"warm-up")
        # as if this thread had been given the loop thread's ident
        p._bridge._loop_ident = p._bridge.plain.loop_ident = threading.get_ident()
        assert p.send("reuse", b"open").message_id > 0
    finally:
        p.close()
    with pytest.raises(ClientClosedError):
        p.send("reuse", b"late")
