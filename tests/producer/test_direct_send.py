"""The blocking ``send`` writing its frame from the calling thread (``ProducerCore.send_direct``):
order per partition with many threads (mixed with ``send_async``), whole frames when the socket takes
only part of one, a connection dying under blocking senders, ``close()`` while they wait."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

import tubemq
from tubemq.errors import ClientClosedError, TubeMQError
from tubemq.net import connection as conn_mod

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
        direct = p._core._direct_sent
        counters = p.metrics()["counters"]
    assert not errors, errors
    assert direct > 0  # some blocking sends took the direct path (the others found messages in flight)
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


def test_partial_socket_writes_keep_frames_whole(cluster: Any, stored: Any, monkeypatch: Any) -> None:
    """A tiny SO_SNDBUF and 1 MiB messages: the kernel takes part of a frame, the loop writes the rest
    before anything else, blocking senders meanwhile fall back to the loop; all stored intact."""
    cluster.create_topic("big", partitions=2)
    writes: list[tuple[int, int]] = []
    real_write = conn_mod._write

    def spy(sock: socket.socket | None, fd: int, data: bytes) -> int:
        n = real_write(sock, fd, data)
        writes.append((len(data), n))
        return n

    monkeypatch.setattr(conn_mod, "_write", spy)
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
                    p.send("big", b"small %d %d" % (t, i))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        _run_threads(3, worker)
    assert not errors, errors
    assert any(n < size for size, n in writes), "no partial write happened: the test did not test it"
    bodies = sorted(m.data for ms in stored(cluster.broker_address, "big", range(2)).values() for m in ms)
    expected = sorted([b"warm-up"] + [big[t] for t in range(3) for _ in range(4)]
                      + [b"small %d %d" % (t, i) for t in range(3) for i in range(4)])
    assert bodies == expected


def test_connection_dying_under_blocking_senders(fake_cluster: Any) -> None:
    """The broker drops its connections now and then: every blocking send ends, in time, with a
    result or a typed error (the message was written, so never retried), and sending carries on."""
    fc = fake_cluster()
    broker = fc.brokers[0]
    outcomes: list[Any] = []
    lock = threading.Lock()
    with tubemq.Producer(fc.master_list, retries=2, rpc_timeout_ms=3000, **FAKE) as p:
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
        direct = p._core._direct_sent
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
    assert p._core._direct_sent >= 1  # the first one written by its own thread, the others by the loop
    t0 = time.monotonic()
    p.close(timeout=0)
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert time.monotonic() - t0 < 10
    assert len(outcomes) == 4 and all(isinstance(e, ClientClosedError) for e in outcomes), outcomes
    with pytest.raises(ClientClosedError):
        p.send("demo", b"after close")


def test_would_block_and_dead_socket_fall_back_to_the_loop(cluster: Any, stored: Any, monkeypatch: Any) -> None:
    """A socket that would block (EAGAIN) or is dead (EPIPE) at the direct write: nothing was written,
    so the message goes through the loop (a new connection for the dead one) and is stored exactly once,
    the caller sees a plain success."""
    cluster.create_topic("fb", partitions=1)
    real_write = conn_mod._write
    plan: list[type[OSError] | None] = []
    failed: list[str] = []

    def flaky(sock: socket.socket | None, fd: int, data: bytes) -> int:
        exc = plan.pop(0) if plan else None
        if exc is not None:
            failed.append(exc.__name__)
            raise exc(f"scripted {exc.__name__}")
        return real_write(sock, fd, data)

    monkeypatch.setattr(conn_mod, "_write", flaky)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("fb", b"warm-up")
        connects = p.metrics()["brokers"]
        plan.extend([BlockingIOError, None, BlockingIOError, BrokenPipeError, None, None])
        results = [p.send("fb", b"m%d" % i) for i in range(8)]
        after = p.metrics()["brokers"]
    assert failed == ["BlockingIOError", "BlockingIOError", "BrokenPipeError"]
    assert len({r.message_id for r in results}) == 8
    bodies = [m.data for ms in stored(cluster.broker_address, "fb", [0]).values() for m in ms]
    assert bodies == [b"warm-up"] + [b"m%d" % i for i in range(8)]  # once each, in order
    (address,) = list(after)  # the one broker
    assert after[address]["reconnects"] == connects[address]["reconnects"] + 1  # the dead socket was replaced
