"""Producer lifecycle over real TCP: wire shapes vs the Java capture, fail-over, master restart,
broker loss, close with sends in flight, no heartbeat after close."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from _data import load_capture

import tubemq
from tubemq import codec
from tubemq.errors import ClientClosedError, TubeMQError
from tubemq.protocol import broker_pb, master_pb
from tubemq.server import EmbeddedCluster, wire

FAST_SERVER = {
    "balance_period_ms": 200,
    "consumer_heartbeat_timeout_ms": 6000,
    "producer_heartbeat_timeout_ms": 6000,
    "consumer_reg_timeout_ms": 6000,
}


def _present(msg) -> set[str]:
    return {f.name for f, _ in msg.ListFields()}


def _protobuf_frame(serial: int, service_type: int, method: int, body: bytes, timeout: int) -> bytes:
    """The request frame built with protobuf objects and writeDelimitedTo-style prefixes."""
    from google.protobuf.internal.encoder import _VarintBytes

    from tubemq.protocol import rpc_pb

    parts = [
        rpc_pb.RpcConnHeader(flag=0),
        rpc_pb.RequestHeader(serviceType=service_type, protocolVer=3),
        rpc_pb.RequestBody(method=method, timeout=timeout, request=body),
    ]
    payload = b"".join(_VarintBytes(len(b)) + b for b in (m.SerializeToString() for m in parts))
    return codec.encode_frame(serial, payload)


def _java_shapes() -> dict[str, set[str]]:
    """Field presence of the Java client's requests in the real capture (s1)."""
    shapes: dict[str, set[str]] = {}
    frames = load_capture("s1_producer")["frames"]
    for f in frames:
        if f["direction"] in ("c2m", "c2b"):
            name = f["decoded"]["method_name"]
            fields = {k for k in f["decoded"]["message"] if not k.startswith("_")}
            shapes.setdefault(name, set()).update(fields)
    return shapes


def test_requests_match_java_field_presence(cluster, relay, monkeypatch) -> None:
    cluster.create_topic("cap_main", partitions=3)
    r = relay(cluster.master_address)
    java = _java_shapes()
    frames: list[bytes] = []
    from tubemq.net import connection as conn_mod

    def spying(orig):  # every send frame, whichever path writes it (loop or blocking caller)
        def spy(self, build, arg, timeout_ms, callback, **kw):
            def capture(serial: int, a) -> bytes:
                frame = build(serial, a)
                frames.append(frame)
                return frame

            return orig(self, capture, arg, timeout_ms, callback, **kw)

        return spy

    monkeypatch.setattr(conn_mod.Connection, "start_call_cb", spying(conn_mod.Connection.start_call_cb))
    from tubemq._bridge.channel import BlockingChannel

    real_exchange = BlockingChannel.exchange

    def exchange(self, frame, serial, timeout, now):  # every frame a blocking send writes itself
        frames.append(frame)
        return real_exchange(self, frame, serial, timeout, now)

    monkeypatch.setattr(BlockingChannel, "exchange", exchange)
    with tubemq.Producer(r.address) as p:  # default rpc timeout 10000 like Java
        p.send("cap_main", b"plain message #1")
        p.send("cap_main", b"attr message #5", attributes={"k": "v"}, stream_id="typeA", msg_time="202611221030")
        p.send("cap_main", b"attr message #6", attributes={"k3": "v3"}, stream_id="typeB")
        visit_token = p._aio._core.session.visit_token
    reqs = [req for _, req in r.requests]
    assert [q.method for q in reqs[:2]] == [1, 2] and reqs[-1].method == 3
    for q in reqs:
        assert (q.service_type, q.protocol_ver, q.timeout) == (1, 3, 10000)
    reg = master_pb.RegisterRequestP2M.FromString(reqs[0].body)
    assert _present(reg) == java["PRODUCER_REGISTER"]  # clientId brokerCheckSum hostName jdkVersion appdConfig
    assert reg.brokerCheckSum == -1 and reg.appdConfig.configId == -2 and not reg.topicList
    hb = master_pb.HeartRequestP2M.FromString(reqs[1].body)
    assert _present(hb) == java["PRODUCER_HEARTBEAT"]
    assert list(hb.topicList) == ["cap_main"] and hb.brokerCheckSum != -1
    close = master_pb.CloseRequestP2M.FromString(reqs[-1].body)
    assert _present(close) == java["PRODUCER_CLOSECLIENT"] == {"clientId"}
    assert reg.clientId == hb.clientId == close.clientId
    sends = []
    for frame in frames:
        (serial, payload), = codec.FrameDecoder().feed(frame)
        q = wire.decode_request(payload)
        assert (q.service_type, q.protocol_ver, q.method, q.timeout) == (3, 3, 13, 10000)
        msg = broker_pb.SendMessageRequestP2B.FromString(q.body)
        sends.append(msg)
        # byte-identical to the same frame built from protobuf objects (Java writes field order)
        assert frame == _protobuf_frame(serial, 3, 13, msg.SerializeToString(), 10000)
    assert _present(sends[0]) | {"msgType", "msgTime"} == java["BROKER_PRODUCER_SENDMESSAGE"]
    assert _present(sends[0]) == java["BROKER_PRODUCER_SENDMESSAGE"] - {"msgType", "msgTime"}
    assert _present(sends[1]) == java["BROKER_PRODUCER_SENDMESSAGE"]
    assert "msgTime" not in _present(sends[2]) and sends[2].msgType == "typeB"
    for s in sends:
        assert s.checkSum == -1 and s.authInfo.visitAuthorizedToken == visit_token
        assert s.sentAddr == codec.ip_to_int(reg.hostName)
    assert sends[0].flag == 0 and sends[0].data == b"plain message #1"
    # attribute header exactly as the Java Message API builds it (captures/s1)
    attr = b"$msgType$=typeA,$msgTime$=202611221030,k=v"
    assert sends[1].flag == 1 and sends[1].data == len(attr).to_bytes(4, "big") + attr + b"attr message #5"
    assert sends[1].msgType == "typeA" and sends[1].msgTime == "202611221030"


def test_no_heartbeat_after_close(cluster, relay, poll) -> None:
    cluster.create_topic("demo", partitions=1)
    r = relay(cluster.master_address)
    p = tubemq.Producer(r.address, heartbeat_period_ms=50)
    p.publish("demo")
    poll(lambda: r.methods().count(2) >= 4, timeout=10)  # periodic heartbeats are running
    p.close()
    poll(lambda: 3 in r.methods(), timeout=5)
    seen = len(r.requests)
    time.sleep(0.5)  # ten heartbeat periods: absence can only be observed over time
    assert len(r.requests) == seen
    assert r.methods()[-1] == 3  # the close request is the last thing the master saw
    assert p._aio._core.session._hb_task is None


def test_heartbeats_skipped_until_publish(cluster, relay, poll) -> None:
    cluster.create_topic("demo", partitions=1)
    r = relay(cluster.master_address)
    with tubemq.Producer(r.address, heartbeat_period_ms=50) as p:
        time.sleep(0.3)
        assert r.methods() == [1]  # Java: no heartbeat while nothing is published
        p.send("demo", b"x")  # publishes: one immediate heartbeat
        poll(lambda: r.methods().count(2) >= 3, timeout=10)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_failover_standby_first_and_dead_address(tmp_path, relay) -> None:
    addrs = sorted(f"127.0.0.1:{p}" for p in _free_ports(3))
    standby_addr, dead_addr, active_addr = addrs  # the invoker tries them in sorted order
    sport = int(standby_addr.rsplit(":", 1)[1])
    aport = int(active_addr.rsplit(":", 1)[1])
    with EmbeddedCluster(data_dir=tmp_path / "s", master_port=sport, **FAST_SERVER) as standby, \
            EmbeddedCluster(data_dir=tmp_path / "a", master_port=aport, **FAST_SERVER) as active:
        standby.set_standby(True)
        active.create_topic("demo", partitions=2)
        with tubemq.Producer(",".join([active_addr, dead_addr, standby_addr]), heartbeat_period_ms=100) as p:
            assert p._aio._core.session.invoker.addresses == [standby_addr, dead_addr, active_addr]
            assert p._aio._core.session.current_master == active_addr
            assert p.send("demo", b"via the active master").message_id > 0


def test_all_masters_down_raises_typed_error(tmp_path) -> None:
    dead = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    t0 = time.monotonic()
    with pytest.raises(TubeMQError):
        tubemq.Producer(",".join(dead), register_retry_wait_ms=10, connect_timeout_ms=500)
    assert time.monotonic() - t0 < 30


def test_master_restart_mid_run(cluster, poll, stored) -> None:
    cluster.create_topic("demo", partitions=2)
    with tubemq.Producer(cluster.master_address, heartbeat_period_ms=100, register_retry_wait_ms=100) as p:
        session = p._aio._core.session
        results = [p.send("demo", b"before")]
        stop = threading.Event()
        errors: list[BaseException] = []

        def keep_sending() -> None:
            for i in range(100000):
                if stop.is_set():
                    return
                try:
                    results.append(p.send("demo", b"during %d" % i))
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)
                time.sleep(0.002)

        t = threading.Thread(target=keep_sending)
        t.start()
        try:
            cluster.restart_master()
            poll(lambda: session.registrations >= 2, timeout=20)  # 411 from the new master -> register
            n = len(results)
            poll(lambda: len(results) > n + 20, timeout=20)  # and it keeps sending
        finally:
            stop.set()
            t.join(30)
        assert not errors, errors[:3]
        results.append(p.send("demo", b"after"))
        poll(lambda: session.heartbeats_sent > 0 and session.registered, timeout=5)
    got = {m.message_id for ms in stored(cluster.broker_address, "demo", [0, 1]).values() for m in ms}
    assert {r.message_id for r in results} <= got


def test_broker_killed_mid_send(cluster, poll, stored) -> None:
    cluster.create_topic("demo", partitions=3)
    with tubemq.Producer(cluster.master_address, heartbeat_period_ms=200, rpc_timeout_ms=3000) as p:
        futs = []
        done = threading.Event()

        def producer_thread() -> None:
            for i in range(3000):
                futs.append(p.send_async("demo", b"m%d" % i))
                if i % 100 == 99:
                    time.sleep(0.01)
            done.set()

        t = threading.Thread(target=producer_thread)
        t.start()
        poll(lambda: len(futs) > 500, timeout=20)
        cluster.stop_broker()
        # while the broker is down, sends fail with a typed error (never hang, never vanish)
        with pytest.raises(TubeMQError):
            p.send("demo", b"while down", timeout=30)
        t.join(60)
        assert done.is_set()
        outcomes = []
        for f in futs:
            try:
                outcomes.append(f.result(timeout=30))
            except TubeMQError as exc:
                outcomes.append(exc)
        assert all(f.done() for f in futs)
        acked = [o for o in outcomes if isinstance(o, tubemq.SendResult)]
        failed = [o for o in outcomes if not isinstance(o, tubemq.SendResult)]
        assert acked and len(acked) + len(failed) == 3000
        cluster.start_broker()

        def sends_again() -> bool:
            try:
                acked.append(p.send("demo", b"after restart", timeout=30))
                return True
            except TubeMQError:
                return False

        poll(sends_again, timeout=30, interval=0.2)
    stored_ids = {m.message_id for ms in stored(cluster.broker_address, "demo", range(3)).values() for m in ms}
    missing = [r for r in acked if r.message_id not in stored_ids]
    assert not missing, f"{len(missing)} acknowledged messages are not stored"


def test_close_while_sends_in_flight(cluster, stored) -> None:
    cluster.create_topic("demo", partitions=2)
    p = tubemq.Producer(cluster.master_address, heartbeat_period_ms=200)
    futs = [p.send_async("demo", b"x%d" % i) for i in range(5000)]
    p.close(timeout=0)  # no grace period: whatever is not answered yet fails
    assert all(f.done() for f in futs)
    acked, failed = [], []
    for f in futs:
        exc = f.exception(timeout=0)
        (failed if exc else acked).append(exc or f.result())
    assert all(isinstance(e, ClientClosedError) for e in failed)
    assert len(acked) + len(failed) == 5000
    stored_ids = {m.message_id for ms in stored(cluster.broker_address, "demo", [0, 1]).values() for m in ms}
    assert {r.message_id for r in acked} <= stored_ids


def test_close_with_grace_flushes_everything(cluster) -> None:
    cluster.create_topic("demo", partitions=2)
    p = tubemq.Producer(cluster.master_address, heartbeat_period_ms=200)
    futs = [p.send_async("demo", b"x%d" % i) for i in range(3000)]
    p.close(timeout=30)
    assert all(f.done() and f.exception() is None for f in futs)


def test_tls_end_to_end(tmp_path, stored) -> None:
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl not available to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    with EmbeddedCluster(data_dir=tmp_path / "d", tls_cert=str(cert), tls_key=str(key), **FAST_SERVER) as c:
        c.create_topic("secure", partitions=2)
        with tubemq.Producer(c.master_address, tls=True, tls_ca=str(cert), heartbeat_period_ms=200) as p:
            r = p.send("secure", b"over tls", attributes={"a": "b"})
            assert p.send_async("secure", b"again").result(timeout=30).message_id > 0
            assert p._bridge.round_trips == 0  # TLS: the blocking send goes through the loop
        with pytest.raises(TubeMQError):  # a plain-text client cannot talk to the TLS master
            tubemq.Producer(c.master_address, connect_timeout_ms=1000, register_retry_wait_ms=10,
                            rpc_timeout_ms=3000)
    assert r.message_id > 0


def test_forgotten_producer_deregisters_when_collected(cluster, relay, poll) -> None:
    import gc

    cluster.create_topic("demo", partitions=1)
    r = relay(cluster.master_address)
    p = tubemq.Producer(r.address, heartbeat_period_ms=50)
    p.send("demo", b"x")
    core = p._aio._core
    del p
    gc.collect()
    poll(lambda: core.closed and 3 in r.methods(), timeout=10)  # close request sent, heartbeat stopped
    assert core.session._hb_task is None
