"""LoopThread, Metrics, ClientConfig/ProducerConfig + DSN, identity and auth helpers."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest

from tubemq.client import auth, identity
from tubemq.config import ClientConfig, ProducerConfig, parse_dsn
from tubemq.errors import ConfigError, TubeMQTimeoutError
from tubemq.metrics import Histogram, Metrics, _bucket, _bucket_upper
from tubemq.net.loop import LoopThread


def test_loop_thread_run_submit_stop() -> None:
    lt = LoopThread()
    try:
        async def where() -> str:
            await asyncio.sleep(0)
            return threading.current_thread().name

        assert lt.run(where(), timeout=5) == lt.thread.name
        assert lt.submit(where()).result(5) == lt.thread.name
        with pytest.raises(TubeMQTimeoutError):
            lt.run(asyncio.sleep(10), timeout=0.1)
        with pytest.raises(ValueError):
            lt.run(_raise(), timeout=5)
    finally:
        lt.stop()
    assert lt.stopped and not lt.thread.is_alive()


async def _raise() -> None:
    raise ValueError("boom")


def test_shared_loop_thread_refcount() -> None:
    a = LoopThread.shared()
    b = LoopThread.shared()
    assert a is b
    a.stop()
    assert not b.stopped and b.thread.is_alive()
    b.stop()
    assert b.stopped
    c = LoopThread.shared()
    assert c is not a
    c.stop()


def test_histogram_buckets_and_percentiles() -> None:
    prev = -1
    for us in list(range(0, 200)) + [1000, 10_000, 123_456, 10**7]:
        b = _bucket(us)
        assert b >= prev or us < 200
        assert us <= _bucket_upper(b)
        assert _bucket_upper(b) <= us * 1.07 + 1
        prev = b
    h = Histogram()
    for i in range(1, 1001):
        h.observe(i / 1e6 * 1000)  # 1 .. 1000 ms
    snap = h.snapshot()
    assert snap["count"] == 1000
    assert 470 <= snap["p50_ms"] <= 540
    assert 950 <= snap["p99_ms"] <= 1000
    assert snap["max_ms"] == pytest.approx(1000)


def test_metrics_registry_threadsafe() -> None:
    m = Metrics()

    def work() -> None:
        for _ in range(1000):
            m.inc("n")
            m.observe("lat", 0.001)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    m.set_gauge("g", lambda: 7)
    snap = m.snapshot()
    assert snap["counters"]["n"] == 4000
    assert snap["latency"]["lat"]["count"] == 4000
    assert snap["gauges"]["g"] == 7.0


def test_config_validation_names_the_field() -> None:
    cases = [
        ({"master": ""}, "master"),
        ({"master": "nohost"}, "master"),
        ({"master": "a:1", "rpc_timeout_ms": 10}, "rpc_timeout_ms"),
        ({"master": "a:1", "rpc_timeout_ms": "10000"}, "rpc_timeout_ms"),
        ({"master": "a:1", "pool": "global"}, "pool"),
        ({"master": "a:1", "auth_user": "u"}, "auth_user"),
        ({"master": "a:1", "local_address": "host"}, "local_address"),
        ({"master": "a:1", "max_inflight": 0}, "max_inflight"),
        ({"master": "a:1", "max_partitions": 0}, "max_partitions"),
        ({"master": "a:1", "max_partitions": "10"}, "max_partitions"),
        ({"master": "a:1", "max_total_partitions": 0}, "max_total_partitions"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ConfigError) as ei:
            ClientConfig(**kwargs)
        assert ei.value.field == field
    with pytest.raises(ConfigError) as ei:
        ProducerConfig(master="a:1", partitioner="random")
    assert ei.value.field == "partitioner"
    with pytest.raises(ConfigError) as ei:
        ProducerConfig(master="a:1", retries=-1)
    assert ei.value.field == "retries"


def test_password_never_in_repr() -> None:
    c = ClientConfig(master="a:1", auth_user="u", auth_password="s3cret")
    assert "s3cret" not in repr(c)


def test_dsn() -> None:
    assert parse_dsn("tubemq://h1:8715,h2:8716?rpc_timeout_ms=5000") == (
        ["h1:8715", "h2:8716"],
        {"rpc_timeout_ms": "5000"},
    )
    c = ProducerConfig.from_dsn("tubemq://b:2,a:1?rpc_timeout_ms=5000&tls=false&retries=0", max_pending=10)
    assert c.master == ["a:1", "b:2"] and c.rpc_timeout_ms == 5000 and c.retries == 0 and c.max_pending == 10
    assert c.tls is False
    with pytest.raises(ConfigError) as ei:
        ProducerConfig.from_dsn("tubemq://a:1?retries=x")
    assert ei.value.field == "retries"
    with pytest.raises(ConfigError) as ei:
        ProducerConfig.from_dsn("tubemq://a:1?nope=1")
    assert ei.value.field == "nope"
    with pytest.raises(ConfigError):
        parse_dsn("http://a:1")
    with pytest.raises(ConfigError) as ei:
        ProducerConfig.from_options("a:1", {"bogus": 1})
    assert ei.value.field == "bogus"
    assert ProducerConfig.from_options("tubemq://a:1?retries=3", {}).retries == 3


def test_identity_formats() -> None:
    ip = identity.local_ip()
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", ip)
    pid = identity.producer_id("10.0.0.5")
    assert re.fullmatch(r"10\.0\.0\.5-\d+-\d+-\d+-py-[\w.]+", pid)
    cid = identity.consumer_id("grp", ip="10.0.0.5")
    assert re.fullmatch(r"grp_10\.0\.0\.5-\d+-\d+-\d+-Pull-py-[\w.]+", cid)
    assert "-Balance-" in identity.consumer_id("g", "Balance")
    assert identity.producer_id() != identity.producer_id()
    for forbidden in "#@:,":
        assert forbidden not in pid
    with pytest.raises(ValueError):
        identity.check_name("topic", "a#b")


def test_auth_vector() -> None:
    assert auth.signature("admin", "secret", 1700000000000, 123456789) == "TUKLpKqdL99rgSYZ2nqBwALIpU0%3D"
    assert (
        auth.broker_auth_token("admin", "secret", timestamp_ms=1700000000000, nonce=123456789)
        == "admin 1700000000000 123456789 TUKLpKqdL99rgSYZ2nqBwALIpU0%3D"
    )
    info = auth.master_cert_info("admin", "secret", timestamp_ms=1700000000000, nonce=123456789)
    assert info.authInfo.signature == "TUKLpKqdL99rgSYZ2nqBwALIpU0%3D" and info.authInfo.othParams == ""
    info.SerializeToString()  # all required fields set
    assert auth.master_token_info("tok").authorizedToken == "tok"
