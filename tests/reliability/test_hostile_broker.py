"""Issue 11.2 and the broker half of the hostile-peer suite: a consumer whose broker misbehaves says
so (metrics, WARNING log, ``on_error``), releases that broker's partitions for the master to assign
again, fetches them again once the broker answers, and closes within ``close_timeout_ms``. Producers
and bound consumers facing such a broker fail typed and bounded.

The embedded master is made to advertise a :class:`~.hostile.HostilePeer` proxy as its broker; the
proxy forwards faithfully until a test turns it hostile mid-connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _support import waited

import tubemq
from tubemq.errors import TubeMQError

from .hostile import HostilePeer, redirect_broker

RPC_TIMEOUT_MS = 3000
OPTS: dict[str, Any] = {"rpc_timeout_ms": RPC_TIMEOUT_MS, "pool": "private", "heartbeat_period_ms": 1000}
#: marked unhealthy after 2 request timeouts: fetches run in parallel, so about one RPC timeout
UNHEALTHY_BOUND_S = 2 * RPC_TIMEOUT_MS / 1000 + 4


@pytest.fixture
def proxied(cluster: Any) -> Iterator[tuple[Any, HostilePeer]]:
    cluster.create_topic("rel_t", partitions=3)
    with HostilePeer("pass", upstream=cluster.broker_address) as proxy:
        redirect_broker(cluster, proxy.address)
        yield cluster, proxy


def _consume_one(consumer: Any, bound: float) -> list[bytes]:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        batch = consumer.poll(0.5)
        if batch is not None:
            consumer.confirm(batch)
            return [m.data for m in batch]
    raise AssertionError(f"no message within {bound:.0f} s")


def _counters(consumer: Any) -> dict[str, Any]:
    return consumer.metrics()["counters"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["silent", "stall"])
def test_misbehaving_broker_is_reported_released_refetched(proxied: Any, mode: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    cluster, proxy = proxied
    producer = tubemq.Producer(cluster.master_address, pool="private")
    errors: list[TubeMQError] = []
    consumer = tubemq.Consumer(cluster.master_address, group=f"g_rel_{mode}", topics=["rel_t"],
                               consume_from="earliest", on_error=errors.append, **OPTS)
    try:
        producer.send("rel_t", b"before")
        assert b"before" in _consume_one(consumer, 30)
        assert _counters(consumer)["consumer.broker_unhealthy"] == 0

        proxy.mode = mode
        caplog.set_level(logging.WARNING, logger="tubemq")
        took = waited(lambda: _counters(consumer)["consumer.broker_unhealthy"] >= 1 and errors,
                      UNHEALTHY_BOUND_S, f"{mode} broker marked unhealthy")
        assert proxy.address in str(errors[0]) and "unhealthy" in str(errors[0])
        assert any(r.levelno == logging.WARNING and "unhealthy" in r.getMessage() and proxy.address in
                   r.getMessage() for r in caplog.records), "no WARNING naming the broker"
        brokers = consumer.metrics()["brokers"]
        assert brokers[proxy.address]["healthy"] is False, brokers
        assert _counters(consumer)["consumer.partitions_lost"] >= 1
        assert took < UNHEALTHY_BOUND_S

        # the broker recovers: the master assigns the partitions again and they are fetched again
        proxy.mode = "pass"
        producer.send("rel_t", b"after")
        got: list[bytes] = []
        deadline = time.monotonic() + 40
        while b"after" not in got and time.monotonic() < deadline:
            batch = consumer.poll(0.5)
            if batch is not None:
                got += [m.data for m in batch]
                consumer.confirm(batch)
        assert b"after" in got, "partitions were not fetched again after the broker recovered"
        assert consumer.metrics()["brokers"][proxy.address]["healthy"] is True

        # close() is bounded however many requests are outstanding on a broker that went silent
        proxy.mode = "silent"
        time.sleep(0.5)  # fetches now wait on the silent broker
        t0 = time.monotonic()
        consumer.close()
        took_close = time.monotonic() - t0
        assert took_close < consumer.config.close_timeout_ms / 1000 + 1.0, f"close() took {took_close:.1f} s"
    finally:
        proxy.mode = "pass"
        consumer.close()
        producer.close()


@pytest.mark.parametrize("mode", ["half", "garbage", "oversized", "token", "close"])
def test_poll_reports_every_broken_broker(proxied: Any, mode: str) -> None:
    """The other failure modes: poll() keeps working (returns None, never raises untyped) while the
    broker is marked unhealthy within about one RPC timeout."""
    cluster, proxy = proxied
    producer = tubemq.Producer(cluster.master_address, pool="private")
    consumer = tubemq.Consumer(cluster.master_address, group=f"g_rel_m_{mode}", topics=["rel_t"],
                               consume_from="earliest", **OPTS)
    try:
        producer.send("rel_t", b"before")
        assert b"before" in _consume_one(consumer, 30)
        proxy.mode = mode
        # the fetches' answers ("no message" now) arrive broken, or not at all
        t0 = time.monotonic()
        while _counters(consumer)["consumer.broker_unhealthy"] == 0:
            assert time.monotonic() - t0 < UNHEALTHY_BOUND_S, f"{mode} broker not marked unhealthy"
            consumer.poll(0.2)  # must neither raise nor block past its timeout
        assert consumer.metrics()["brokers"][proxy.address]["healthy"] is False
    finally:
        proxy.mode = "pass"
        consumer.close()
        producer.close()


def test_close_timeout_is_configurable(proxied: Any) -> None:
    cluster, proxy = proxied
    consumer = tubemq.Consumer(cluster.master_address, group="g_rel_close", topics=["rel_t"],
                               consume_from="earliest", close_timeout_ms=300, **OPTS)
    try:
        waited(lambda: len(consumer.assignment()) == 3, 30, "assignment")
        proxy.mode = "silent"
        time.sleep(0.3)
        t0 = time.monotonic()
        consumer.close()
        assert time.monotonic() - t0 < 0.3 + 1.0
    finally:
        proxy.mode = "pass"
        consumer.close()


def _fails_typed_and_bounded(name: str, op: Callable[[], Any], mode: str) -> None:
    """``op()`` against a broker in ``mode`` raises a TubeMQError (nothing else) within the bound."""
    t0 = time.monotonic()
    try:
        op()
    except TubeMQError:
        pass
    except BaseException as exc:  # noqa: BLE001
        raise AssertionError(f"{name}() raised untyped {type(exc).__name__}: {exc}") from exc
    else:
        if mode != "garbage":  # garbage may be skipped by the codec only if it is not a frame
            raise AssertionError(f"{name}() succeeded against a {mode} broker")
    took = time.monotonic() - t0
    assert took < 3 * RPC_TIMEOUT_MS / 1000 + 3, f"{name}() took {took:.1f} s against a {mode} broker"


@pytest.mark.parametrize("mode", ["silent", "half", "stall", "garbage", "oversized", "token", "close"])
def test_send_and_bound_consumer_fail_typed_and_bounded(proxied: Any, mode: str) -> None:
    """send(), BoundConsumer.attach() and .offsets() against a broker turned hostile: a TubeMQError
    within about one RPC timeout (plus the producer's own retry budget).

    The producer and the bound consumer are separate clients with their own (private) connections, so
    send() runs on a thread while offsets() then attach() run here: the waits overlap, nothing is shared."""
    cluster, proxy = proxied
    producer = tubemq.Producer(cluster.master_address, **OPTS)
    bound = tubemq.BoundConsumer(cluster.master_address, f"g_rel_b_{mode}", ["rel_t"], **OPTS)
    send_failure: list[BaseException] = []

    def send() -> None:
        try:
            _fails_typed_and_bounded("send", lambda: producer.send("rel_t", b"x"), mode)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            send_failure.append(exc)

    sender = threading.Thread(target=send, daemon=True)
    try:
        producer.send("rel_t", b"warm")  # connection to the (proxied) broker is open
        part = bound.partitions("rel_t")[0]
        bound.attach(part)
        proxy.mode = mode
        sender.start()
        _fails_typed_and_bounded("offsets", lambda: bound.offsets(part), mode)
        _fails_typed_and_bounded("attach", lambda: bound.attach(bound.partitions("rel_t")[1]), mode)
        sender.join(3 * RPC_TIMEOUT_MS / 1000 + 30)
        assert not sender.is_alive(), f"send() still running against a {mode} broker"
        if send_failure:
            raise send_failure[0]
    finally:
        proxy.mode = "pass"
        bound.close()
        producer.close()
