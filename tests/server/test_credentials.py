"""Credentials (issue 22 items 6-8): replayed registers refused, guessing delayed per source, topics
the client would refuse refused by the admin API with the limit named."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tubemq import codec
from tubemq.client import auth as client_auth
from tubemq.protocol import master_pb
from tubemq.protocol.constants import ErrorCode
from tubemq.server import EmbeddedCluster, auth
from tubemq.server.auth import (
    MSG_BAD_PASSWORD,
    MSG_REPLAYED,
    MSG_TOO_MANY,
    FailureThrottle,
    MasterAuthenticator,
)

from ._raw import RawClient

OTHER_SOURCE = "127.0.0.2"  # Linux answers the whole 127/8 on loopback: a second client address


def cert(ts: int, nonce: int, password: str = "secret") -> master_pb.MasterCertificateInfo:
    return client_auth.master_cert_info("admin", password, timestamp_ms=ts, nonce=nonce)


# ---- item 6: replay


def test_replayed_signature_refused_and_memory_bounded_by_window() -> None:
    now = [1_000_000]
    a = MasterAuthenticator(True, {"admin": "secret"}, clock_ms=lambda: now[0])
    first = cert(now[0], 1)
    assert a.check(first).ok
    r = a.check(first)
    assert (r.ok, r.err_code, r.message) == (False, ErrorCode.CERTIFICATE_FAILURE, MSG_REPLAYED)
    assert a.check(cert(now[0], 2)).ok  # a fresh nonce is a fresh request
    assert len(a._seen) == 2
    now[0] += 20_001  # the timestamps left the window: a replay is refused by the window, memory freed
    assert a.check(first).message == auth.MSG_TIMESTAMP
    assert a.check(cert(now[0], 3)).ok
    assert len(a._seen) == 1
    # a wrong password is not remembered (garbage cannot fill the memory)
    assert a.check(cert(now[0], 4, password="nope")).message == MSG_BAD_PASSWORD
    assert len(a._seen) == 1


def test_seen_signatures_capped_fail_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "MAX_SEEN_SIGNATURES", 3)
    now = [1_000_000]
    a = MasterAuthenticator(True, {"admin": "secret"}, clock_ms=lambda: now[0])
    for n in range(3):
        assert a.check(cert(now[0], n)).ok
    assert a.check(cert(now[0], 99)).message == MSG_TOO_MANY
    now[0] += 20_001
    assert a.check(cert(now[0], 99)).ok


def _register(address: str, body: bytes) -> Any:
    with RawClient(address) as c:  # a connection of its own each time: the attacker's, same bytes
        return master_pb.RegisterResponseM2P.FromString(c.call(1, body, service_type=1).body)


@pytest.mark.parametrize("restart", [False, True], ids=["same-master", "after-restart"])
def test_replayed_register_refused_over_tcp(tmp_path: Path, restart: bool) -> None:
    """Also right after a master restart, inside the 20 s window (the replay memory is journaled)."""
    opts: dict[str, Any] = {"auth_enabled": True, "auth_users": {"admin": "secret"}}
    req = master_pb.RegisterRequestP2M(clientId="p-replay", brokerCheckSum=-1, hostName="127.0.0.1")
    req.authInfo.CopyFrom(client_auth.master_cert_info("admin", "secret"))
    captured = req.SerializeToString()
    cl = EmbeddedCluster(data_dir=tmp_path / "d", **opts)
    cl.start()
    try:
        first = _register(cl.master_address, captured)
        assert first.success, first
        if restart:
            cl.stop()
            cl = EmbeddedCluster(data_dir=tmp_path / "d", **opts)
            cl.start()
        again = _register(cl.master_address, captured)
    finally:
        cl.stop()
    assert (again.success, again.errCode, again.errMsg) == (False, 415, MSG_REPLAYED)
    assert not again.HasField("authorizedInfo")  # no visit token for the replay


def test_replay_memory_survives_a_restart_and_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_000_000]
    journal = tmp_path / "auth_replay.journal"
    a = MasterAuthenticator(True, {"admin": "secret"}, clock_ms=lambda: now[0], journal=journal)
    first = cert(now[0], 1)
    assert a.check(first).ok
    a.close()
    b = MasterAuthenticator(True, {"admin": "secret"}, clock_ms=lambda: now[0] + 5_000, journal=journal)
    assert b.check(first).message == MSG_REPLAYED  # the restarted master remembers it
    assert b.check(cert(now[0], 2)).ok
    b.close()
    monkeypatch.setattr(auth.ReplayJournal, "COMPACT_MIN", 4)
    now[0] += 20_001  # both left the window: the next start drops them from the file
    c = MasterAuthenticator(True, {"admin": "secret"}, clock_ms=lambda: now[0], journal=journal)
    assert len(c._seen) == 0 and journal.read_text() == ""
    for n in range(20):
        assert c.check(cert(now[0], 100 + n)).ok
        now[0] += 3_000  # older entries keep expiring: compaction keeps the file near the live count
    assert len(journal.read_text().splitlines()) <= max(4, 2 * len(c._seen)) + 1
    c.close()
    with journal.open("a") as f:
        f.write("12 torn-line\n99999999999")  # garbage and a torn tail are skipped
    d = MasterAuthenticator(True, {"admin": "secret"}, clock_ms=lambda: now[0], journal=journal)
    assert set(d._seen) == {k for k, until in c._seen.items() if until >= now[0]}
    d.close()


# ---- item 7: throttling


def test_throttle_delays_per_source_with_bounded_memory() -> None:
    now = [100.0]
    t = FailureThrottle(2.0, free=3, base_s=0.1, forget_s=60.0, max_sources=4, clock=lambda: now[0])
    waits = [t.failure("a") for _ in range(8)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] == pytest.approx(0.1) and waits[4] == pytest.approx(0.3)  # reservations add up
    assert all(b > a for a, b in zip(waits[3:], waits[4:], strict=False))
    assert t.wait("a") > 0 and t.wait("b") == 0.0  # other sources unaffected
    assert t.wait("a") <= auth.MAX_THROTTLE_WAIT_S
    for i in range(100):
        t.failure(f"src{i}")
    assert len(t) == 4  # LRU bound
    now[0] += 61
    assert t.wait("src99") == 0.0  # forgotten after a quiet minute
    t.failure("x")
    t.success("x")
    assert t.wait("x") == 0.0


def _admin_post(url: str, params: dict[str, str], source: str | None = None) -> dict[str, Any]:
    split = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(split.hostname, split.port, timeout=60,
                                      source_address=None if source is None else (source, 0))
    try:
        conn.request("POST", split.path, body=urllib.parse.urlencode(params),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        return json.loads(conn.getresponse().read())  # type: ignore[no-any-return]
    finally:
        conn.close()


def test_wrong_admin_tokens_are_delayed_per_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "BAD_CREDENTIAL_DELAY_MAX_S", 0.4)
    with EmbeddedCluster(data_dir=tmp_path / "d", admin_token="right") as cl:
        bad = {"type": "op_modify", "method": "admin_add_new_topic_record", "topicName": "x",
               "confModAuthToken": "wrong"}
        spent = []
        for _ in range(9):
            t0 = time.monotonic()
            r = _admin_post(cl.admin_url, bad)
            spent.append(time.monotonic() - t0)
            assert r["errCode"] == 400 and "unauthorized request" in r["errMsg"]  # the real master's answer
        print("wrong-token answers (s):", " ".join(f"{s:.3f}" for s in spent))
        # lower bounds only (a slow machine only adds): after 5 free tries each waits its delay
        assert sum(spent[6:]) >= 0.05 + 0.1 + 0.2 - 0.01
        assert cl.server.admin is not None
        throttle = cl.server.admin.throttle
        good = {"type": "op_modify", "method": "admin_add_new_topic_record", "topicName": "ok_t",
                "confModAuthToken": "right"}
        r = _admin_post(cl.admin_url, good, source=OTHER_SOURCE)
        assert r["result"], r
        assert throttle.wait(OTHER_SOURCE) == 0.0 and throttle.wait("127.0.0.1") > 0


def test_wrong_passwords_are_delayed_per_source_over_tcp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "BAD_CREDENTIAL_DELAY_MAX_S", 0.4)
    with EmbeddedCluster(data_dir=tmp_path / "d", auth_enabled=True, auth_users={"admin": "secret"}) as cl:
        frames = []
        for i in range(9):  # pipelined in one write: the server must not answer them all at once
            req = master_pb.RegisterRequestP2M(clientId=f"g{i}", brokerCheckSum=-1, hostName="127.0.0.1")
            req.authInfo.CopyFrom(client_auth.master_cert_info("admin", f"guess-{i}"))
            frames.append(codec.encode_request(i + 1, 1, 1, req.SerializeToString(), timeout_ms=60000))
        with RawClient(cl.master_address) as c:
            t0 = time.monotonic()
            c.send_raw(b"".join(frames))
            answers = [master_pb.RegisterResponseM2P.FromString(c.wait(i + 1, timeout=60).body) for i in range(9)]
            spent = time.monotonic() - t0
        print(f"9 pipelined wrong passwords answered in {spent:.3f} s")
        assert all(a.errCode == 415 and a.errMsg == MSG_BAD_PASSWORD for a in answers)
        assert spent >= 0.05 + 0.1 + 0.2 - 0.01  # the 6th.. waited (lower bound: load only adds)
        req = master_pb.RegisterRequestP2M(clientId="good", brokerCheckSum=-1, hostName="127.0.0.2")
        req.authInfo.CopyFrom(client_auth.master_cert_info("admin", "secret"))
        with RawClient(cl.master_address, source=OTHER_SOURCE) as c:
            t0 = time.monotonic()
            ok = master_pb.RegisterResponseM2P.FromString(c.call(1, req, service_type=1).body)
            print(f"good register from another source answered in {time.monotonic() - t0:.3f} s")
        assert ok.success, ok


# ---- item 8: topics the client would refuse


def test_admin_refuses_topic_over_client_partition_limit(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d") as cl:
        r = _admin_post(cl.admin_url, {"type": "op_modify", "method": "admin_add_new_topic_record",
                                       "topicName": "huge", "numPartitions": "10000", "numTopicStores": "100"})
        assert not r["result"] and r["errCode"] == 400
        assert "1000000 partitions" in r["errMsg"] and str(codec.DEFAULT_MAX_PARTITIONS) in r["errMsg"]
        assert "max_partitions" in r["errMsg"]
        assert all(t.name != "huge" for t in cl.topics())
        r = _admin_post(cl.admin_url, {"type": "op_modify", "method": "admin_add_new_topic_record",
                                       "topicName": "edge", "numPartitions": "100", "numTopicStores": "100"})
        assert r["result"], r  # exactly at the limit: accepted
