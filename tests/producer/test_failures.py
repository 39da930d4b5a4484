"""Failure paths against a scripted fake master/broker over real TCP: retries by code (§6.2),
503 shielding, timeouts and drops (never retried: the outcome is unknown), standby fail-over during
heartbeats, tokens and authentication fields."""

from __future__ import annotations

import time

import pytest

import tubemq
from tubemq.errors import (
    ConnectionLostError,
    ForbiddenError,
    InternalServerError,
    ServerOverflowError,
    ServiceUnavailableError,
    TubeMQTimeoutError,
)

FAST = {"heartbeat_period_ms": 100, "retry_backoff_ms": 10}


def test_retryable_codes_are_resent_without_duplicates(fake_cluster) -> None:
    fc = fake_cluster()
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, retries=2, **FAST) as p:
        broker.script = [419, 500]
        r = p.send("demo", b"payload-1")
        assert r.message_id > 0
        assert [s.data for s in broker.sends] == [b"payload-1"] * 3
        assert p.metrics()["counters"]["producer.sent"] == 1

        broker.sends.clear()
        broker.script = [500, 500, 500]
        with pytest.raises(InternalServerError) as ei:
            p.send("demo", b"payload-2")
        assert ei.value.code == 500 and "scripted" in ei.value.message
        assert len(broker.sends) == 3  # 1 + retries

        broker.sends.clear()
        broker.script = [419]
    with tubemq.Producer(fc.master_list, retries=0, **FAST) as p:
        broker.script = [419]
        with pytest.raises(ServerOverflowError):
            p.send("demo", b"payload-3")
        assert len(broker.sends) == 1


def test_non_retryable_codes_fail_at_once(fake_cluster) -> None:
    fc = fake_cluster()
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, retries=5, **FAST) as p:
        broker.script = [403]
        with pytest.raises(ForbiddenError) as ei:
            p.send("demo", b"x")
        assert ei.value.code == 403 and ei.value.partition.broker_id == 1  # where it was going
        assert len(broker.sends) == 1


def test_503_shields_the_broker(fake_cluster) -> None:
    fc = fake_cluster(brokers=2)
    a, b = fc.brokers
    with tubemq.Producer(fc.master_list, retries=2, **FAST) as p:
        p.publish("demo")
        a.script = [503] * 100
        b.script = []
        results = [p.send("demo", b"m%d" % i) for i in range(20)]
        assert all(r.partition.broker_id == 2 for r in results)
        assert len(a.sends) <= 1  # at most the one that answered 503; afterwards it is skipped
        assert p._aio.engine.quality.is_shielded(1)
    with tubemq.Producer(fc.master_list, retries=0, **FAST) as p:
        a.script = [503]
        a.sends.clear()
        outcome = []
        for i in range(6):
            try:
                outcome.append(p.send("demo", b"n%d" % i).partition.broker_id)
            except ServiceUnavailableError:
                outcome.append("503")
        assert outcome.count("503") <= 1


def test_timeout_is_reported_not_retried(fake_cluster) -> None:
    fc = fake_cluster()
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, retries=3, rpc_timeout_ms=3000, **FAST) as p:
        p.publish("demo")
        broker.script = ["drop"]
        t0 = time.monotonic()
        with pytest.raises(TubeMQTimeoutError):
            p.send("demo", b"maybe stored")
        assert 2.5 < time.monotonic() - t0 < 15
        assert len(broker.sends) == 1  # never resent: the broker may have stored it
        assert p.send("demo", b"next").message_id > 0
        assert p.metrics()["counters"]["producer.unknown_outcome"] == 1


def test_connection_drop_is_resent_within_retries(fake_cluster) -> None:
    """A connection lost before the answer (a broker restarting) is resent on a new connection, up to
    ``retries`` times (at-least-once: the lost attempt may have been stored); then it is reported."""
    fc = fake_cluster()
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, retries=2, **FAST) as p:
        p.publish("demo")
        broker.script = ["close"]
        n = len(broker.sends)
        assert p.send("demo", b"resent").message_id > 0
        assert len(broker.sends) - n == 2  # the lost attempt, then the resend
        broker.script = ["close"] * 3
        n = len(broker.sends)
        with pytest.raises(ConnectionLostError):
            p.send("demo", b"lost")
        assert len(broker.sends) - n == 3  # the first attempt and two resends
        assert p.send("demo", b"reconnects").message_id > 0
        assert p.metrics()["counters"]["producer.unknown_outcome"] == 1


def test_pipelined_sends_on_a_dropped_connection_are_resent_and_name_no_tls_port(fake_cluster) -> None:
    """Pipelined sends written to the loop's connection when the broker drops it are resent (a broker
    restart); once the resends run out the error does not suggest a TLS port: this broker answered
    before (on the caller's own channel), so the loop's connection closing unanswered is no TLS port."""
    fc = fake_cluster()
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, retries=2, **FAST) as p:
        p.publish("demo")
        p.send("demo", b"warm-up")  # answered on this thread's own channel, not the loop's connection
        broker.script = ["close"]
        n = len(broker.sends)
        assert p.send_async("demo", b"resent").result(30).message_id > 0
        assert len(broker.sends) - n == 2
        broker.script = ["close"] * 3
        n = len(broker.sends)
        exc = p.send_async("demo", b"lost").exception(30)
        assert isinstance(exc, ConnectionLostError), exc
        assert len(broker.sends) - n == 3
        assert "tls=True" not in str(exc), exc
        assert p.send_async("demo", b"reconnects").result(30).message_id > 0


def test_connection_drop_is_reported_without_retries(fake_cluster) -> None:
    fc = fake_cluster()
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, retries=0, **FAST) as p:
        p.publish("demo")
        broker.script = ["close"]
        with pytest.raises(ConnectionLostError):
            p.send("demo", b"lost")
        assert len(broker.sends) == 1
        assert p.send("demo", b"reconnects").message_id > 0


def test_standby_during_heartbeat_moves_to_the_next_master(fake_cluster, poll) -> None:
    fc = fake_cluster(masters=2)
    with tubemq.Producer(fc.master_list, **FAST) as p:
        p.publish("demo")
        session = p._aio._core.session
        first = session.current_master
        m_first = next(m for m in fc.masters if m.server.address == first)
        m_other = next(m for m in fc.masters if m is not m_first)
        m_first.standby = True
        poll(lambda: session.current_master != first and session.registrations >= 2, timeout=10)
        assert any(method == 1 for method, _ in m_other.requests)  # registered there
        poll(lambda: any(method == 2 for method, _ in m_other.requests), timeout=10)
        assert p.send("demo", b"still sending").message_id > 0


def test_tokens_and_auth_fields(fake_cluster, poll) -> None:
    fc = fake_cluster()
    master = fc.masters[0]
    master.auth_token = "tok-1"
    broker = fc.brokers[0]
    with tubemq.Producer(fc.master_list, auth_user="alice", auth_password="s3cret", **FAST) as p:
        p.send("demo", b"x")
        poll(lambda: sum(1 for m, _ in master.requests if m == 2) >= 2, timeout=10)
    reg = master.requests[0][1]
    assert reg.authInfo.authInfo.userName == "alice" and reg.authInfo.authInfo.signature
    assert reg.authInfo.authInfo.othParams == "" and reg.authInfo.authInfo.nonce >= 0
    hb = [m for k, m in master.requests if k == 2][-1]
    assert hb.authInfo.authorizedToken == "tok-1" and not hb.authInfo.HasField("authInfo")
    close = master.requests[-1][1]
    assert master.requests[-1][0] == 3 and close.authInfo.authInfo.userName == "alice"
    send = broker.sends[0]
    assert send.authInfo.visitAuthorizedToken == 4242 and send.authInfo.authAuthorizedToken == "tok-1"


def test_no_auth_fields_without_auth(fake_cluster) -> None:
    fc = fake_cluster()
    with tubemq.Producer(fc.master_list, **FAST) as p:
        p.send("demo", b"x")
    for _, msg in fc.masters[0].requests:
        assert not msg.HasField("authInfo")
    assert not fc.brokers[0].sends[0].authInfo.HasField("authAuthorizedToken")


def test_hung_broker_does_not_delay_other_sends(fake_cluster) -> None:
    fc = fake_cluster(brokers=2)
    a, b = fc.brokers
    a.script = ["drop"] * 10

    def by_key(topic, key, parts):  # key "a" -> broker 1, everything else -> broker 2
        return next(p for p in parts if p.broker_id == (1 if key == "a" else 2))

    with tubemq.Producer(fc.master_list, partitioner=by_key, rpc_timeout_ms=30000, **FAST) as p:
        p.publish("demo")
        stuck = p.send_async("demo", b"to the hung broker", key="a")
        # answers from broker 1 never come; broker 2 traffic must not wait for them (or the timeout)
        for i in range(20):
            assert p.send_async("demo", b"ok %d" % i, key="b").result(timeout=10).broker_id == 2
        assert not stuck.done()
        p.close(timeout=0)
        assert isinstance(stuck.exception(timeout=0), tubemq.errors.ClientClosedError)


def test_partitioner_errors_fail_only_that_message(fake_cluster) -> None:
    fc = fake_cluster()

    def picky(topic, key, parts):
        if key == "bad":
            raise LookupError("no partition for 'bad'")
        return parts[0]

    with tubemq.Producer(fc.master_list, partitioner=picky, **FAST) as p:
        assert p.send("demo", b"fine", key="good").message_id > 0
        with pytest.raises(LookupError):
            p.send("demo", b"x", key="bad")
        futs = [p.send_async("demo", b"m", key="bad" if i == 3 else "good") for i in range(8)]
        outcomes = [f.exception(timeout=10) for f in futs]
        assert [o is None for o in outcomes] == [i != 3 for i in range(8)]
        assert p.flush(5) == 0
