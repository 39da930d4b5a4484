"""Every consumer route against every server mode that changes a request or an answer.

Routes: ``for msg in consumer`` (fetching on the iterating thread, or through the loop with TLS),
``poll``, ``async for``, the push listener, the bound consumer's ``read_range``. Modes: plain, signed
authentication with visit tokens checked at the broker, TLS, stream-id filters, paused partitions,
a broker that goes away and comes back. Each route reads every message sent (the filtered subset with a
filter; nothing of a paused partition until it is resumed). Real TCP on 127.0.0.1; one server per mode
for the module, one topic per case.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _support import FAST_CLIENT, FAST_SERVER
from _support.tls import self_signed_cert

import tubemq
from tubemq.server import EmbeddedCluster

N = 30
#: how long a paused route is watched for messages it must not give
PAUSED_WATCH_S = 1.0
#: generous limit for reading everything (a loaded CI machine)
READ_LIMIT_S = 25.0
_names = itertools.count()

ROUTES = ["iterator", "poll", "async_for", "listener", "bound"]
MODES = ["plain", "auth", "tls", "filter", "paused", "broker_away"]


class Mode:
    """A running cluster and what a client of it needs (credentials, CA)."""

    def __init__(self, name: str, cluster: EmbeddedCluster, client: dict[str, Any]) -> None:
        self.name = name
        self.cluster = cluster
        self.client = client


@pytest.fixture(scope="module")
def modes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Mode]]:
    """One cluster per mode, started on first use and shared by the module."""
    started: dict[str, Mode] = {}
    stack: list[EmbeddedCluster] = []

    def get(name: str) -> Mode:
        if name in started:
            return started[name]
        base = tmp_path_factory.mktemp(f"routes-{name}")
        server: dict[str, Any] = {}
        client: dict[str, Any] = {}
        if name == "auth":
            server = {"auth_enabled": True, "auth_users": {"alice": "s3cret"}, "visit_token_check": True}
            client = {"auth_user": "alice", "auth_password": "s3cret"}
        elif name == "tls":
            crt, key = self_signed_cert(base)
            server = {"tls_cert": crt, "tls_key": key}
            client = {"tls": True, "tls_ca": crt}
        elif name == "broker_away":
            server = {"brokers": 2}
        cluster = EmbeddedCluster(data_dir=base / "data", **{**FAST_SERVER, **server})
        cluster.start()
        stack.append(cluster)
        started[name] = Mode(name, cluster, client)
        return started[name]

    yield get
    for cluster in reversed(stack):
        cluster.stop()


def _bodies(mode: str) -> tuple[list[tuple[bytes, str | None]], set[bytes], dict[str, Any]]:
    """(body, stream id) to send, the bodies a consumer must read, the consumer's ``topics`` value
    filled in later (stream-id filters)."""
    if mode == "filter":
        sent = [(b"m-%03d" % i, "keep" if i % 3 == 0 else "skip") for i in range(N)]
        return sent, {b for b, s in sent if s == "keep"}, {"keep"}  # type: ignore[return-value]
    sent = [(b"m-%03d" % i, None) for i in range(N)]
    return sent, {b for b, _ in sent}, {}  # type: ignore[return-value]


class Case:
    def __init__(self, mode: Mode) -> None:
        n = next(_names)
        self.mode = mode
        self.topic = f"routes_{mode.name}_{n}"
        self.group = f"g_routes_{mode.name}_{n}"
        mode.cluster.create_topic(self.topic, partitions=2)
        #: partitions of the topic: two on each broker
        self.partitions = 2 * len(mode.cluster.broker_addresses)
        self.sent, self.expected, filters = _bodies(mode.name)
        self.topics: Any = {self.topic: filters} if filters else [self.topic]
        self.options = {**FAST_CLIENT, **mode.client, "consume_from": "earliest"}

    def produce(self) -> None:
        with tubemq.Producer(self.mode.cluster.master_address, rpc_timeout_ms=3000, **self.mode.client) as p:
            for body, stream in self.sent:
                p.send(self.topic, body, stream_id=stream)

    def consumer(self, **kw: Any) -> tubemq.Consumer:
        return tubemq.Consumer(self.mode.cluster.master_address, group=self.group, topics=self.topics,
                               **{**self.options, **kw})


def _wait_assigned(c: Any, n: int = 2) -> None:
    end = time.monotonic() + READ_LIMIT_S
    while len(c.assignment()) < n:
        assert time.monotonic() < end, f"only {c.assignment()} assigned"
        time.sleep(0.05)


# ---- the routes: each returns the bodies read, and with ``paused`` first watches the paused
# ---- partitions give nothing (the count of what came meanwhile is the first element)

def _iterator(case: Case, paused: bool) -> tuple[int, list[bytes]]:
    early = 0
    with case.consumer(iter_timeout_ms=int(PAUSED_WATCH_S * 1000)) as c:
        if paused:
            _wait_assigned(c)
            c.pause(c.assignment())
            early = sum(1 for _ in c)  # ends by itself after iter_timeout_ms without a message
            c.resume(c.assignment())
        got: list[bytes] = []
        end = time.monotonic() + READ_LIMIT_S
        while len(set(got)) < len(case.expected) and time.monotonic() < end:
            got.extend(m.data for m in c)
    return early, got


def _poll(case: Case, paused: bool) -> tuple[int, list[bytes]]:
    early = 0
    with case.consumer() as c:
        if paused:
            _wait_assigned(c)
            c.pause(c.assignment())
            end = time.monotonic() + PAUSED_WATCH_S
            while time.monotonic() < end:
                b = c.poll(0.2)
                if b is not None:
                    early += len(b.messages)
                    c.confirm(b)
            c.resume(c.assignment())
        got: list[bytes] = []
        end = time.monotonic() + READ_LIMIT_S
        while len(set(got)) < len(case.expected) and time.monotonic() < end:
            b = c.poll(0.5)
            if b is not None:
                got.extend(m.data for m in b.messages)
                c.confirm(b)
    return early, got


def _async_for(case: Case, paused: bool) -> tuple[int, list[bytes]]:
    async def run() -> tuple[int, list[bytes]]:
        early = 0
        async with tubemq.aio.Consumer(case.mode.cluster.master_address, group=case.group, topics=case.topics,
                                       **case.options) as c:
            if paused:
                end = time.monotonic() + READ_LIMIT_S
                while len(c.assignment()) < 2:
                    assert time.monotonic() < end
                    await asyncio.sleep(0.05)
                c.pause(c.assignment())
                try:
                    async with asyncio.timeout(PAUSED_WATCH_S):
                        async for _ in c:
                            early += 1
                except TimeoutError:
                    pass
                c.resume(c.assignment())
            got: list[bytes] = []
            try:
                async with asyncio.timeout(READ_LIMIT_S):
                    async for m in c:
                        got.append(m.data)
                        if len(set(got)) >= len(case.expected):
                            break
            except TimeoutError:
                pass
            return early, got

    return asyncio.run(run())


def _listener(case: Case, paused: bool) -> tuple[int, list[bytes]]:
    got: list[bytes] = []
    lock = threading.Lock()

    def listener(m: Any) -> None:
        with lock:
            got.append(m.data)

    early = 0
    with case.consumer() as c:
        if paused:
            _wait_assigned(c)
            c.pause(c.assignment())
        c.subscribe(listener)
        if paused:
            time.sleep(PAUSED_WATCH_S)
            with lock:
                early = len(got)
            c.resume(c.assignment())
        end = time.monotonic() + READ_LIMIT_S
        while time.monotonic() < end:
            with lock:
                if len(set(got)) >= len(case.expected):
                    break
            time.sleep(0.05)
    with lock:
        return early, list(got)


def _bound(case: Case, paused: bool) -> tuple[int, list[bytes]]:
    got: list[bytes] = []
    opts = {k: v for k, v in case.options.items() if k != "consume_from"}
    with tubemq.BoundConsumer(case.mode.cluster.master_address, group=case.group, topics=case.topics,
                              **opts) as b:
        end = time.monotonic() + READ_LIMIT_S
        parts = b.partitions(case.topic)
        while len(parts) < case.partitions and time.monotonic() < end:  # a broker coming back is announced again
            time.sleep(0.2)
            parts = b.partitions(case.topic)
        for p in parts:
            while time.monotonic() < end:
                try:
                    got.extend(m.data for m in b.read_range(p, 0, timeout=3.0))
                    break
                except tubemq.errors.TubeMQError:  # its broker is still away: try again
                    time.sleep(0.2)
    return 0, got


RUN: dict[str, Callable[[Case, bool], tuple[int, list[bytes]]]] = {
    "iterator": _iterator, "poll": _poll, "async_for": _async_for, "listener": _listener, "bound": _bound,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("route", ROUTES)
def test_route_reads_everything(modes: Callable[[str], Mode], route: str, mode: str) -> None:
    if route == "bound" and mode == "paused":
        pytest.skip("a bound consumer has no pause: it reads the ranges it is asked for")
    m = modes(mode)
    case = Case(m)
    case.produce()
    away: threading.Thread | None = None
    if mode == "broker_away":
        m.cluster.stop_broker(2)  # its partition's messages are readable only once it is back

        def back() -> None:
            time.sleep(1.5)
            m.cluster.start_broker(2)

        away = threading.Thread(target=back, daemon=True)
        away.start()
    t0 = time.monotonic()
    try:
        early, got = RUN[route](case, mode == "paused")
    finally:
        if away is not None:
            away.join(30)
    print(f"{route}/{mode}: {len(set(got))} of {len(case.expected)} in {time.monotonic() - t0:.2f} s")
    assert early == 0, f"{early} message(s) of a paused partition delivered"
    assert set(got) == case.expected, (f"{route} on {mode}: read {len(set(got))} of {len(case.expected)}; "
                                       f"unexpected {sorted(set(got) - case.expected)[:5]}")

