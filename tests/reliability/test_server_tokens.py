"""Issue 11.6: the broker's visit token cannot be guessed, and token-less reads need a verified connection.

The probe that found the defect sent raw SendMessage requests whose visit token was a guessed
millisecond timestamp around the server's start: one was accepted after 500 guesses. Here the same
500 guesses all fail, each connection is closed after 3 wrong tokens, and a legitimate producer and
consumer (signed login at the master, visit tokens at the broker) still work.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from server._raw import RawClient  # tests/ is on sys.path (rootdir-relative packages)

import tubemq
from tubemq import codec
from tubemq.errors import ConnectionLostError
from tubemq.protocol import broker_pb
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

CLIENT: dict[str, Any] = {"heartbeat_period_ms": 200, "register_retry_wait_ms": 100, "rpc_timeout_ms": 3000,
                          "connect_timeout_ms": 1000}
USERS = {"alice": "wonderland"}
AUTH: dict[str, Any] = {"auth_enabled": True, "auth_users": USERS, "visit_token_check": True}
GUESSES = 500


def _guess_round(address: str, topic: str, guesses: list[int]) -> tuple[int, int, int]:
    """Send forged SendMessage requests, a new connection whenever the server closes one.

    Returns (accepted, refused with 415, connections used).
    """
    accepted = refused = conns = 0
    pending = list(guesses)
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        conns += 1
        with RawClient(address) as c:
            while pending:
                token = pending[0]
                serial = next(c.serials)
                try:
                    c.send_raw(codec.encode_send_request(serial, "forger", topic, 0, b"forged", 0, 0, token))
                    r = c.wait(serial, timeout=5)
                except (ConnectionError, OSError, TimeoutError):
                    break  # closed by the server: the guess is retried on a fresh connection
                pending.pop(0)
                resp = broker_pb.SendMessageResponseB2P.FromString(r.body)
                if resp.success:
                    accepted += 1
                else:
                    assert resp.errCode == 415, resp.errMsg
                    refused += 1
    assert not pending, "guessing loop ran out of time"
    return accepted, refused, conns


def test_guessed_visit_tokens_are_refused_and_connections_closed(tmp_path: Path) -> None:
    started_ms = time.time_ns() // 1_000_000
    with EmbeddedCluster(data_dir=tmp_path / "d", **AUTH, **FAST_TIMERS) as cl:
        cl.create_topic("vault", partitions=1)
        # the probe's guesses: every millisecond from just before the start to now
        guesses = [started_ms - 100 + i for i in range(GUESSES)]
        accepted, refused, conns = _guess_round(cl.broker_address, "vault", guesses)
        assert accepted == 0
        assert refused == GUESSES
        assert conns >= GUESSES // 3  # at most 3 wrong tokens per connection
        tokens = cl._call(lambda: cl.server.master.tokens.tokens())
        assert all(abs(t - started_ms) > 10**9 for t in tokens)  # not a timestamp
        # nothing forged reached the store
        assert cl._call(lambda: cl.server.stores.get("vault", 0).max_offset) == 0


def test_connection_closed_after_three_bad_tokens(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", **AUTH, **FAST_TIMERS) as cl:
        cl.create_topic("vault", partitions=1)
        with RawClient(cl.broker_address) as c:
            for _ in range(2):
                assert c.register("g", "vault", 0).errCode == 415  # token -2
            serial = next(c.serials)
            req = broker_pb.RegisterRequestC2B(opType=31, clientId="c1", groupName="g", topicName="vault",
                                               partitionId=0, readStatus=0)
            req.authInfo.visitAuthorizedToken = 12345
            c.send_raw(codec.encode_request(serial, 2, 15, req.SerializeToString(), timeout_ms=10000))
            c.sock.settimeout(5)
            try:
                data = c.sock.recv(4096)
            except (TimeoutError, ConnectionError) as exc:  # reset also counts as closed
                data = b"" if isinstance(exc, ConnectionError) else b"timeout"
            assert data == b""  # the third wrong token closes without an answer


def test_reads_need_a_connection_that_presented_a_valid_token(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", **AUTH, **FAST_TIMERS) as cl:
        cl.create_topic("vault", partitions=1)
        token = cl._call(lambda: cl.server.master.tokens.current)
        with RawClient(cl.broker_address) as legit:
            req = broker_pb.RegisterRequestC2B(opType=31, clientId="c1", groupName="g", topicName="vault",
                                               partitionId=0, readStatus=0)
            req.authInfo.visitAuthorizedToken = token
            assert legit.rpc(15, req, broker_pb.RegisterResponseB2C).success
            assert legit.fetch("g", "vault", 0, "c1").errCode == 404  # served: nothing there yet
            # a forger who knows the consumer id but has no token is refused on its own connection,
            # however often it tries (no token presented, so no strike: the legit client is not at risk)
            with RawClient(cl.broker_address) as forger:
                for _ in range(5):
                    assert forger.fetch("g", "vault", 0, "c1").errCode == 415
                    assert forger.commit("g", "vault", 0, "c1").errCode == 415


def test_legitimate_producer_and_consumer_work_with_auth(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", **AUTH, **FAST_TIMERS) as cl:
        cl.create_topic("vault", partitions=2)
        creds = {"auth_user": "alice", "auth_password": USERS["alice"]}
        with tubemq.Producer(cl.master_address, **creds, **CLIENT) as p:
            for i in range(20):
                p.send("vault", b"m%d" % i)
        got: list[bytes] = []
        with tubemq.Consumer(cl.master_address, group="g", topics=["vault"], consume_from="earliest",
                             msg_not_found_wait_ms=20, **creds, **CLIENT) as cons:
            deadline = time.monotonic() + 30
            while len(got) < 20 and time.monotonic() < deadline:
                batch = cons.poll(0.2)
                if batch is not None:
                    got += [m.data for m in batch]
                    cons.confirm(batch)
        assert sorted(got) == sorted(b"m%d" % i for i in range(20))


def test_consumer_survives_losing_its_verified_broker_connection(tmp_path: Path) -> None:
    """After a reconnect, token-less getMessage is refused (415) until the consumer re-registers: it must."""
    with EmbeddedCluster(data_dir=tmp_path / "d", **AUTH, **FAST_TIMERS) as cl:
        cl.create_topic("vault", partitions=2)
        creds = {"auth_user": "alice", "auth_password": USERS["alice"]}
        got: list[bytes] = []

        def drain(count: int, cons: Any) -> None:
            deadline = time.monotonic() + 40
            while len(got) < count and time.monotonic() < deadline:
                batch = cons.poll(0.2)
                if batch is not None:
                    got.extend(m.data for m in batch)
                    cons.confirm(batch)

        with tubemq.Producer(cl.master_address, **creds, **CLIENT) as p, \
                tubemq.Consumer(cl.master_address, group="g", topics=["vault"], consume_from="earliest",
                                msg_not_found_wait_ms=20, **creds, **CLIENT) as cons:
            for i in range(10):
                p.send("vault", b"a%d" % i)
            drain(10, cons)
            assert len(got) == 10
            brk = cl._call(lambda: cl.server.nodes[0].rpc)
            closed = cl._call(lambda: [c.close() for c in list(brk._conns)])
            assert closed  # the consumer's (and producer's) verified connections are gone
            for i in range(10):
                for attempt in range(3):  # a send racing the close fails typed; the next reconnects
                    try:
                        p.send("vault", b"b%d" % i)
                        break
                    except ConnectionLostError:
                        assert attempt < 2
                        time.sleep(0.2)
            drain(20, cons)
        assert sorted(got[10:]) == sorted(b"b%d" % i for i in range(10))
