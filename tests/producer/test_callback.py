"""``send_async(..., callback=)``: once per message, on every outcome, errors in it logged and contained;
plus the failure-path metrics (retried, errors per broker, shielding) the callbacks report alongside."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

import tubemq
import tubemq.aio
from tubemq.errors import (
    ConnectionLostError,
    InternalServerError,
    InvalidMessageError,
    MessageTooLargeError,
    TopicNotPublishedError,
    TubeMQTimeoutError,
)

FAST = {"heartbeat_period_ms": 100, "retry_backoff_ms": 10}


class Recorder:
    """A thread-safe callback that records ``(result, exc, thread)`` per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, BaseException | None, threading.Thread]] = []
        self.lock = threading.Lock()

    def __call__(self, result: Any, exc: BaseException | None) -> None:
        with self.lock:
            self.calls.append((result, exc, threading.current_thread()))


def test_callback_once_per_message_before_flush_returns(cluster: Any) -> None:
    cluster.create_topic("cb", partitions=2)
    rec = Recorder()
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        futs = [p.send_async("cb", b"m%04d" % i, callback=rec) for i in range(500)]
        assert p.flush(30) == 0
        assert len(rec.calls) == 500  # every callback has run once flush() returned
        assert all(exc is None for _, exc, _ in rec.calls)
        assert {t for _, _, t in rec.calls} == {p._portal.lt.thread}  # on the client's loop thread
        results = sorted((r.partition.partition_id, r.append_offset) for r, _, _ in rec.calls)
        assert results == sorted((f.result(0).partition.partition_id, f.result(0).append_offset) for f in futs)
        # the future resolves after its callback ran: a callback seeing its own future sees it pending
        seen: list[bool] = []
        holder: dict[str, Any] = {}
        ready = threading.Event()

        def look(result: Any, exc: BaseException | None) -> None:
            ready.wait(5)
            seen.append(holder["fut"].done())

        holder["fut"] = p.send_async("cb", b"look", callback=look)
        ready.set()
        assert holder["fut"].result(30).message_id > 0
        assert seen == [False]
        assert p.metrics()["counters"]["producer.acknowledged"] == 501


def test_callback_gets_the_failure(cluster: Any) -> None:
    cluster.create_topic("cbf", partitions=1)
    rec = Recorder()
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        too_big = p.send_async("cbf", b"x" * (1024 * 1024 + 1), callback=rec)
        unknown = p.send_async("no_such_topic", b"x", callback=rec)
        p.flush(30)
        assert len(rec.calls) == 2
        by_type = {type(exc): (res, exc) for res, exc, _ in rec.calls}
        assert by_type[MessageTooLargeError][0] is None and by_type[TopicNotPublishedError][0] is None
        assert too_big.exception(0) is by_type[MessageTooLargeError][1]
        assert unknown.exception(0) is by_type[TopicNotPublishedError][1]
        assert p.metrics()["counters"]["producer.failed"] == 2


def test_raising_callback_is_logged_and_the_producer_carries_on(cluster: Any,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    cluster.create_topic("cbr", partitions=2)
    calls: list[int] = []

    def bad(result: Any, exc: BaseException | None) -> None:
        calls.append(1)
        raise ValueError("bug in the application's callback")

    with caplog.at_level(logging.ERROR, logger="tubemq"):
        with tubemq.Producer(cluster.master_address, **FAST) as p:
            futs = [p.send_async("cbr", b"r%d" % i, callback=bad) for i in range(50)]
            results = [f.result(30) for f in futs]  # every future still resolves with its result
            assert len(calls) == 50 and all(r.message_id > 0 for r in results)
            assert p.send("cbr", b"plain send still works").message_id > 0
            m = p.metrics()["counters"]
            assert m["producer.acknowledged"] == 51 and m["producer.failed"] == 0
    errors = [r for r in caplog.records if "callback" in r.getMessage() and r.levelno == logging.ERROR]
    assert len(errors) == 50
    assert errors[0].name.startswith("tubemq.producer") and errors[0].exc_info is not None
    assert "bug in the application's callback" in caplog.text


def test_non_callable_callback_is_refused_before_queueing(cluster: Any) -> None:
    cluster.create_topic("cbn", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        with pytest.raises(InvalidMessageError, match="callback must be callable"):
            p.send_async("cbn", b"x", callback="not a function")  # type: ignore[arg-type]
        assert p.metrics()["counters"]["producer.accepted"] == 0


def test_asyncio_callback(cluster: Any, caplog: pytest.LogCaptureFixture) -> None:
    cluster.create_topic("cba", partitions=2)
    ok: list[Any] = []
    failed: list[BaseException] = []

    def cb(result: Any, exc: BaseException | None) -> None:
        if exc is None:
            ok.append(result)
        else:
            failed.append(exc)

    def bad(result: Any, exc: BaseException | None) -> None:
        raise RuntimeError("asyncio callback bug")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        unretrieved: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))
        async with tubemq.aio.Producer(cluster.master_address, **FAST) as p:
            for i in range(200):
                await p.send_async("cba", b"a%d" % i, callback=cb)
            await p.send_async("cba", b"x" * (1024 * 1024 + 1), callback=cb)  # fails; future never awaited
            assert await p.flush(30) == 0
            assert len(ok) == 200 and len(failed) == 1 and isinstance(failed[0], MessageTooLargeError)
            fut = await p.send_async("cba", b"bad cb", callback=bad)
            assert (await asyncio.wait_for(fut, 30)).message_id > 0
            assert (await p.send("cba", b"after")).message_id > 0
            with pytest.raises(InvalidMessageError):
                await p.send_async("cba", b"x", callback=42)  # type: ignore[arg-type]
            c = p.metrics()["counters"]
            assert (c["producer.acknowledged"], c["producer.failed"]) == (202, 1)
        import gc

        gc.collect()  # a failed future seen by its callback must not log "exception was never retrieved"
        await asyncio.sleep(0)
        assert not unretrieved

    with caplog.at_level(logging.ERROR, logger="tubemq"):
        asyncio.run(asyncio.wait_for(main(), 60))
    assert any("asyncio callback bug" in r.getMessage() or (r.exc_info and "asyncio callback bug" in
               str(r.exc_info[1])) for r in caplog.records)


# ---------------------------------------------------------------------------------------------------
# failure paths against the scripted fake cluster: what callbacks see and what the metrics say


def test_retries_and_broker_errors_are_counted(fake_cluster) -> None:
    fc = fake_cluster()
    broker = fc.brokers[0]
    rec = Recorder()
    with tubemq.Producer(fc.master_list, retries=2, **FAST) as p:
        p.publish("demo")
        broker.script = [419, 500]  # two refusals, then stored
        assert p.send_async("demo", b"third time lucky", callback=rec).result(30).message_id > 0
        broker.script = [500, 500, 500]  # retries exhausted
        p.send_async("demo", b"never stored", callback=rec)
        p.flush(30)
        assert [type(e) for _, e, _ in rec.calls] == [type(None), InternalServerError]
        m = p.metrics()
        c = m["counters"]
        assert (c["producer.sent"], c["producer.retried"], c["producer.acknowledged"], c["producer.failed"]) == \
            (2, 4, 1, 1)
        assert len(broker.sends) == 6  # 2 messages, 4 resends
        (entry,) = m["brokers"].values()
        assert entry["send_errors"] == 5 and not entry["shielded"]


def test_lost_connection_shows_in_broker_health_and_callback(fake_cluster) -> None:
    fc = fake_cluster(brokers=2)
    a, b = fc.brokers
    rec = Recorder()
    with tubemq.Producer(fc.master_list, retries=0, broker_failure_threshold=1, **FAST) as p:
        p.publish("demo")
        a.script = ["close"] * 5
        b.script = ["close"] * 5
        for i in range(4):
            p.send_async("demo", b"lost %d" % i, callback=rec)
        p.flush(30)
        assert rec.calls and all(isinstance(e, ConnectionLostError) for _, e, _ in rec.calls)
        m = p.metrics()
        assert m["counters"]["producer.unknown_outcome"] == len(rec.calls) == m["counters"]["producer.failed"]
        assert m["counters"]["net.disconnects"] >= 1
        shielded = [e for e in m["brokers"].values() if e["shielded"]]
        assert shielded and all(e["send_errors"] >= 1 for e in shielded)
        assert sum(e["disconnects"] for e in m["brokers"].values()) == m["counters"]["net.disconnects"]


def test_send_async_from_a_callback_never_stalls_the_loop(cluster: Any) -> None:
    cluster.create_topic("cbc", partitions=1)
    outcomes: list[Any] = []
    done = threading.Event()

    def chain(result: Any, exc: BaseException | None) -> None:
        for i in range(3):  # max_pending=1: the first fits, then the buffer is full
            try:
                outcomes.append(p.send_async("cbc", b"chained %d" % i))
            except TubeMQTimeoutError as e:
                outcomes.append(e)
        done.set()

    with tubemq.Producer(cluster.master_address, max_pending=1, max_block_ms=60000, **FAST) as p:
        p.send_async("cbc", b"first", callback=chain)
        assert done.wait(30)
        assert outcomes[0].result(30).message_id > 0
        assert all(isinstance(o, TubeMQTimeoutError) and "event-loop thread" in str(o) for o in outcomes[1:])
        assert p.send("cbc", b"the buffer numbers were given back").message_id > 0
        assert p.flush(30) == 0
