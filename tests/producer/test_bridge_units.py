"""Units of the thread crossing: the send buffer shared by threads and tasks, and the asyncio producer
having no thread entry points (they live in ``tubemq._bridge``)."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

import tubemq.aio
from tubemq import codec
from tubemq.errors import ClientClosedError, TubeMQTimeoutError
from tubemq.producer.buffer import SendBuffer
from tubemq.producer.router import Router


def test_the_asyncio_producer_has_no_thread_entry_points() -> None:
    for name in ("send_blocking", "send_threadsafe", "submit_threadsafe"):
        assert not hasattr(tubemq.aio.Producer, name), name


def test_buffer_bounds_threads_and_frees_slots_released_elsewhere() -> None:
    """Eight threads take 2000 slots of a 16-slot buffer; another thread releases them as they come:
    never more than 16 taken at once, every take served, nothing left over."""
    buf = SendBuffer(16, 30.0)
    taken = threading.Semaphore(0)
    peak = 0
    lock = threading.Lock()
    held = 0

    def taker() -> None:
        nonlocal peak, held
        for _ in range(250):
            buf.take(False)
            with lock:
                held += 1
                peak = max(peak, held)
            taken.release()

    def releaser() -> None:
        nonlocal held
        for _ in range(2000):
            assert taken.acquire(timeout=30)
            with lock:
                held -= 1
            buf.release()

    threads = [threading.Thread(target=taker) for _ in range(8)] + [threading.Thread(target=releaser)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert 0 < peak <= 16 and buf.used == 0


def test_buffer_full_times_out_typed_and_close_wakes_waiters() -> None:
    buf = SendBuffer(1, 0.2)
    buf.take(False)
    t0 = time.monotonic()
    with pytest.raises(TubeMQTimeoutError):
        buf.take(False)
    print(f"full buffer refused after {time.monotonic() - t0:.2f} s (max_block 0.2 s)")
    with pytest.raises(TubeMQTimeoutError):
        buf.take(True)  # on the loop thread it cannot wait at all
    outcome: list[BaseException] = []

    def waiter() -> None:
        slow = SendBuffer(1, 60.0)
        slow.take(False)
        threading.Timer(0.1, slow.close).start()
        try:
            slow.take(False)
        except ClientClosedError as exc:
            outcome.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    t.join(30)
    assert len(outcome) == 1  # woken by close, not after its 60 s


def test_buffer_wakes_an_asyncio_waiter_from_another_thread() -> None:
    """A task waiting for room is woken on its loop when a thread releases a slot."""

    async def main() -> float:
        buf = SendBuffer(1, 30.0)
        await buf.take_async()
        t0 = time.monotonic()
        threading.Timer(0.05, buf.release).start()
        await buf.take_async()
        return time.monotonic() - t0

    waited = asyncio.run(main())
    print(f"task woken {waited:.3f} s after the wait began (release after 0.05 s)")
    assert waited < 20


def _FakeChannel() -> Any:  # noqa: N802 - stands in for a class
    """What a route reads of a channel (never written to here)."""
    sock = SimpleNamespace(sendall=lambda *a: None, recv_into=lambda *a: 0)
    buf = bytearray(16)
    return SimpleNamespace(sock=sock, buf=buf, view=memoryview(buf), decoder=codec.FrameDecoder())


def test_a_threads_route_cache_is_bounded() -> None:
    """The per-thread topic -> route cache of the blocking send never grows past its bound (a
    thread may send to ever new topics): it starts over when full."""
    from tubemq._bridge import producer as bridge_producer

    lane = bridge_producer._Lane()
    parts = [codec.Partition(1, "127.0.0.1", 1, "t", 0)]
    session = SimpleNamespace(route_gen=0, partitions={}, topics={}, topic_max_sizes={}, max_msg_size=1024)
    engine = SimpleNamespace(session=session, closed=False, direct_ok=True, router=Router())
    bridge: Any = SimpleNamespace(engine=engine, _channel_for=lambda lane, part, now: _FakeChannel())
    for i in range(bridge_producer._MAX_ROUTES * 3 + 7):
        topic = f"t{i}"
        session.partitions[topic] = parts
        session.topics[topic] = 1
        route = bridge_producer.ProducerBridge._plain_route(bridge, lane, topic)
        assert route is not None and route.topic == topic
        assert len(lane.routes) <= bridge_producer._MAX_ROUTES
    assert lane.routes[f"t{bridge_producer._MAX_ROUTES * 3 + 6}"] is route
