"""Things a real cluster does that the embedded server rarely does, replayed with the REAL answers.

* an answer that never comes (the Java server silently drops answers once a request's timeout has
  passed, §2.7) and an answer that comes after our timeout (its serial must be ignored);
* a master that answers with a different broker list (broker moved / a new broker took over);
* a broker that disappears (connection refused, connections cut);
* a standby master (StandbyException, protocolVer-3 spelling, vectors.json) and master fail-over,
  where the new master answers the real 411 of s6b ("Invalid node id ..., you have to append node
  first!") and the client re-registers;
* FATAL answers (real bytes from s6b) that must move the client to the next master.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _data import load_json
from _support.aio import aclose_all

import tubemq
from tubemq.errors import TubeMQConnectionError, TubeMQTimeoutError
from tubemq.producer import SendResult
from tubemq.protocol.constants import Method

from .replay import Deadline, ReplayServer, Sequence, answer, load, run, with_serial

JAVA_IP = "192.0.2.2"
FAST: dict[str, Any] = {"heartbeat_period_ms": 100, "register_retry_wait_ms": 100, "pool": "private",
                        "local_address": JAVA_IP, "rpc_timeout_ms": 3000, "connect_timeout_ms": 1000}


def _standby_frame() -> bytes:
    vectors = load_json("vectors.json")["vectors"]
    vec = next(v for v in vectors if v["name"] == "frame_standby_exception_response")
    return bytes.fromhex(vec["expected"]["frame_hex"])


class ProducerReplay:
    """s1's real master answers; knobs to drop, delay or rewrite them."""

    def __init__(self) -> None:
        self.cap = load("s1_producer")
        self.reg = self.cap.answers(Method.MASTER_PRODUCER_REGISTER)[0]
        self.beat = self.cap.answers(Method.MASTER_PRODUCER_HEARTBEAT)[0]
        self.close = self.cap.answers(Method.MASTER_PRODUCER_CLOSE)[0]
        self.sends = Sequence(self.cap.answers(Method.BROKER_PRODUCER_SEND_MESSAGE))
        self.subs: dict[str, str] = {}
        self.drop_heartbeats: set[int] = set()  # heartbeat numbers (1-based) left unanswered
        self.beat_edit: Any = None
        self.standby = False
        self.unknown_client = False  # answer heartbeats with the real 411 (a master that lost us)
        self.heartbeats = 0

    def master(self, s: Any) -> Any:
        if self.standby:
            return with_serial(_standby_frame(), s.serial)
        if s.method == Method.MASTER_PRODUCER_REGISTER:
            self.unknown_client = False
            return answer(self.reg, s.serial, self.subs)
        if s.method == Method.MASTER_PRODUCER_HEARTBEAT:
            self.heartbeats += 1
            if self.heartbeats in self.drop_heartbeats:
                return None
            if self.unknown_client:
                real_411 = load("s6b_errors_master").answers(Method.MASTER_PRODUCER_HEARTBEAT)[0]
                java_cid = real_411.message["errMsg"].split(":", 1)[1].split(",")[0]
                return answer(real_411, s.serial, {java_cid: s.msg.clientId})
            return answer(self.beat, s.serial, self.subs, edit=self.beat_edit)
        if s.method == Method.MASTER_PRODUCER_CLOSE:
            return answer(self.close, s.serial)
        return None

    def broker(self, s: Any) -> Any:
        return answer(self.sends.next(), s.serial)


@contextlib.asynccontextmanager
async def _publishing(rp: ProducerReplay, broker: ReplayServer | None = None, master_script: Any = None,
                      **options: Any) -> AsyncIterator[tuple[ReplayServer, ReplayServer, Any]]:
    """(master, broker, producer): s1's fake broker (``rp.broker`` unless ``broker`` is given) and master
    (``rp.master`` unless ``master_script``), and a producer (``FAST`` + ``options``) that has published
    cap_main; the three are closed at the end, the producer first."""
    broker = broker or await ReplayServer("broker", rp.broker).start()
    rp.subs = {"127.0.0.1: ": f"127.0.0.1:{broker.port}"}
    master = await ReplayServer("master", master_script or rp.master).start()
    p = tubemq.aio.Producer(master.address, **{**FAST, **options})
    try:
        await p.start()
        assert await p.publish("cap_main") == {"cap_main"}
        yield master, broker, p
    finally:
        await aclose_all(p, master, broker)


def test_master_answer_that_never_comes_then_recovers() -> None:
    """The real master drops an answer when the request's timeout passed: the heartbeat times out,
    the client opens a new connection and carries on; sends are not affected."""
    rp = ProducerReplay()
    rp.drop_heartbeats = {3}

    async def body() -> None:
        async with _publishing(rp) as (master, _, p):
            res = await p.send("cap_main", b"during the lost heartbeat")
            assert res.message_id > 0
            await Deadline(15).until(lambda: rp.heartbeats >= 6, "heartbeats after the lost one")
            assert master.connections == 2  # the timed-out connection was replaced
            after = [s for s in master.requests(Method.MASTER_PRODUCER_HEARTBEAT) if s.conn == 2]
            assert after and all(s.msg.topicList == ["cap_main"] for s in after)
            assert (await p.send("cap_main", b"after")).message_id > 0

    run(body(), 40)


def test_late_answer_for_a_timed_out_send_is_ignored() -> None:
    """An answer arriving after our timeout carries a serial nobody waits for: it must be ignored,
    and the next request on the same connection gets its own answer."""
    rp = ProducerReplay()
    answers = rp.cap.answers(Method.BROKER_PRODUCER_SEND_MESSAGE)

    async def late(frame: bytes, seconds: float) -> bytes:
        await asyncio.sleep(seconds)
        return frame

    def broker_script(s: Any) -> Any:
        n = len([x for x in broker.log if x.method == Method.BROKER_PRODUCER_SEND_MESSAGE])
        if n == 1:
            return late(answer(answers[0], s.serial), 3.4)  # after the client's 3 s timeout
        if n == 2:
            return late(answer(answers[1], s.serial), 0.8)  # still pending when the late one arrives
        return answer(answers[min(n - 1, len(answers) - 1)], s.serial)

    async def body() -> None:
        nonlocal broker
        broker = await ReplayServer("broker", broker_script).start()
        async with _publishing(rp, broker) as (_, _, p):
            with pytest.raises(TubeMQTimeoutError):
                await p.send("cap_main", b"first")
            second = await p.send("cap_main", b"second")  # in flight while the late answer arrives
            assert second.message_id == answers[1].message["messageId"]
            third = await p.send("cap_main", b"third")
            assert third.message_id == answers[2].message["messageId"]
            assert broker.connections == 1  # the same connection throughout

    broker: Any = None
    run(body(), 40)


def test_producer_follows_a_changed_broker_list_and_a_vanished_broker() -> None:
    """The master's heartbeat answer carries a new brokerCheckSum and brokerInfos (broker 1 now at
    another address, e.g. after a broker restart elsewhere): sends move there; the old broker then
    disappears and nothing hangs."""
    rp = ProducerReplay()

    async def body() -> None:
        new = await ReplayServer("new broker", rp.broker).start()
        try:
            async with _publishing(rp) as (master, old, p):
                await p.send("cap_main", b"to the old broker")
                assert len(old.log) == 1

                def moved(m: Any) -> None:
                    m.brokerCheckSum += 10
                    del m.brokerInfos[:]
                    m.brokerInfos.append(f"1:127.0.0.1:{new.port}")

                rp.beat_edit = moved
                await Deadline(10).until(lambda: {x.address for x in p.partitions("cap_main")} == {new.address},
                                         "partitions re-pointed at the new broker address")
                await old.close()
                for i in range(6):
                    await asyncio.wait_for(p.send("cap_main", f"moved {i}".encode()), 10)
                assert len(new.log) == 6 and len(old.log) == 1
                # the heartbeats now carry the new checksum (the master omits the list again)
                await Deadline(10).until(
                    lambda: master.requests(Method.MASTER_PRODUCER_HEARTBEAT)[-1].msg.brokerCheckSum
                    == 1795303356321 + 10, "a heartbeat with the new checksum")
        finally:
            await new.close()

    run(body(), 40)


def test_send_to_a_broker_that_disappeared_fails_with_a_typed_error() -> None:
    rp = ProducerReplay()

    async def body() -> None:
        async with _publishing(rp) as (_, broker, p):
            await p.send("cap_main", b"ok")
            await broker.close()  # listener gone, connections cut
            with pytest.raises(TubeMQConnectionError):
                await asyncio.wait_for(p.send("cap_main", b"nowhere"), 10)

    run(body(), 40)


def test_standby_master_and_failover_with_the_real_411() -> None:
    """Two masters: the first (in sorted order) is a standby; the client registers on the other.
    Later that one turns standby and the first becomes active, answering heartbeats with the real
    411 ('Invalid node id ..., you have to append node first!'): the client must re-register there
    and carry on heartbeating with its published topics."""
    first, second = ProducerReplay(), ProducerReplay()
    first.standby = True

    async def body() -> None:
        broker = await ReplayServer("broker", first.broker).start()
        for rp in (first, second):
            rp.subs = {"127.0.0.1: ": f"127.0.0.1:{broker.port}"}
        a = await ReplayServer("a", first.master).start()
        b = await ReplayServer("b", second.master).start()
        # the client sorts the master list: make "first" the one it tries first
        ordered = sorted([(a.address, first, a), (b.address, second, b)], key=lambda t: t[0])
        (_, rp0, m0), (_, rp1, m1) = ordered
        rp0.standby, rp1.standby = True, False
        p = tubemq.aio.Producer([a.address, b.address], **FAST)
        try:
            await p.start()
            assert [s.method for s in m0.log] == [Method.MASTER_PRODUCER_REGISTER]
            assert [s.method for s in m1.log] == [Method.MASTER_PRODUCER_REGISTER]
            await p.publish("cap_main")
            assert (await p.send("cap_main", b"x")).message_id > 0
            # fail-over: m1 becomes standby, m0 active but without any record of us
            rp0.standby, rp0.unknown_client = False, True
            rp1.standby = True
            n0 = len(m0.log)
            await Deadline(10).until(
                lambda: any(s.method == Method.MASTER_PRODUCER_REGISTER for s in m0.log[n0:]), "re-register on m0")
            await Deadline(10).until(
                lambda: rp0.heartbeats >= 3 and not rp0.unknown_client
                and m0.log[-1].method == Method.MASTER_PRODUCER_HEARTBEAT, "heartbeats on m0 again")
            reg = next(s for s in m0.log[n0:] if s.method == Method.MASTER_PRODUCER_REGISTER)
            assert list(reg.msg.topicList) == ["cap_main"]  # re-register names the published topics
            assert (await p.send("cap_main", b"y")).message_id > 0
        finally:
            await p.close()
        for m in (a, b):
            await m.close()
        await broker.close()

    run(body(), 40)


def test_fatal_answer_moves_to_the_next_master() -> None:
    """A FATAL answer (real bytes: 'Message missing required fields: brokerCheckSum', status only,
    no protocolVer) is an I/O-class failure for the fail-over invoker: next master."""
    fatal = next(f for f in load("s6b_errors_master").answers(Method.MASTER_PRODUCER_REGISTER)
                 if f.status == "FATAL")
    good = ProducerReplay()

    async def body() -> None:
        broker = await ReplayServer("broker", good.broker).start()
        good.subs = {"127.0.0.1: ": f"127.0.0.1:{broker.port}"}
        x = await ReplayServer("x").start()
        y = await ReplayServer("y").start()
        (bad_srv, good_srv) = sorted([x, y], key=lambda s: s.address)
        bad_srv.script = lambda s: with_serial(fatal.raw, s.serial)
        good_srv.script = good.master
        p = tubemq.aio.Producer([x.address, y.address], **FAST)
        try:
            await p.start()
            await p.publish("cap_main")
            assert len(bad_srv.log) == 1 and bad_srv.connections == 1
            assert good_srv.log[0].method == Method.MASTER_PRODUCER_REGISTER
        finally:
            await p.close()
        for s in (x, y, broker):
            await s.close()

    run(body(), 40)


def _upstream_auth_failure(msg: Any) -> str | None:
    """The check of the upstream SimpleCertificateMasterHandler (§8.2) when authentication is on: every
    master request needs authInfo with a user name, a signature and a fresh timestamp; it issues no
    authAuthorizedToken, so a heartbeat carrying only ``authorizedToken`` is refused."""
    info = msg.authInfo.authInfo
    if not info.userName.strip():
        return "Illegal value: authInfo.userName is Blank!"
    if not info.signature.strip():
        return "Illegal value: authInfo.signature is Blank!"
    if abs(time.time() * 1000 - info.timestamp) > 20000:
        return "Illegal value: timestamp out of effective period in authenticateToken!"
    return None


def test_auth_against_the_upstream_default_master_handler() -> None:
    """With authentication on, the upstream master handler wants authInfo on heartbeats too and never
    issues an authAuthorizedToken: publish (a synchronous heartbeat) must not fail with 415, and the
    periodic heartbeats must not fail every other time."""
    rp = ProducerReplay()
    refused: list[Any] = []

    def master(s: Any) -> Any:
        if s.method in (Method.MASTER_PRODUCER_REGISTER, Method.MASTER_PRODUCER_HEARTBEAT):
            why = _upstream_auth_failure(s.msg)
            if why is not None:
                refused.append(s)
                frame = rp.reg if s.method == Method.MASTER_PRODUCER_REGISTER else rp.beat

                def refuse(m: Any) -> None:
                    for f in [f.name for f, _ in m.ListFields()]:
                        m.ClearField(f)
                    m.success, m.errCode, m.errMsg, m.brokerCheckSum = False, 415, why, -1

                return answer(frame, s.serial, rp.subs, edit=refuse)
        return rp.master(s)

    async def body() -> None:
        async with _publishing(rp, master_script=master, auth_user="admin", auth_password="secret") as (m, _, p):
            await Deadline(10).until(lambda: rp.heartbeats >= 6, "periodic heartbeats")
            assert (await p.send("cap_main", b"authenticated")).message_id > 0
        assert refused == []
        beats = m.requests(Method.MASTER_PRODUCER_HEARTBEAT)
        assert all(b.msg.authInfo.authInfo.userName == "admin" for b in beats)
        # a fresh timestamp/nonce/signature each time, like register (§8.1)
        assert len({b.msg.authInfo.authInfo.nonce for b in beats}) == len(beats)

    run(body(), 40)


class _StallFirst(ReplayServer):
    """A broker whose first connection stops reading (a stalled broker process: the socket stays open,
    the kernel buffers fill up, nothing is ever answered); later connections are served normally."""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections == 0:
            self.connections += 1
            self.writers.append(writer)
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass
            return
        await super()._serve(reader, writer)


def test_broker_that_stops_reading_never_hangs_a_send() -> None:
    """Every send gets a typed answer within its timeout even when the broker's socket stops
    accepting bytes (the connection's write buffer stays above its high-water mark), and the client
    recovers on a new connection."""
    rp = ProducerReplay()

    async def body() -> None:
        broker = await _StallFirst("stalled broker", rp.broker).start()
        async with _publishing(rp, broker) as (_, _, p):
            big = b"x" * 900_000
            futs = [await asyncio.wait_for(p.send_async("cap_main", big), 10) for _ in range(30)]
            results = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 15)
            # typed outcomes only: timeouts / lost connection for what went to the stalled socket,
            # success for what went through the new connection
            assert all(isinstance(r, (TubeMQTimeoutError, TubeMQConnectionError, SendResult)) for r in results), \
                {type(r).__name__ for r in results}
            assert any(isinstance(r, TubeMQTimeoutError) for r in results)
            res = await asyncio.wait_for(p.send("cap_main", b"after the stall"), 15)
            assert res.message_id > 0 and broker.connections >= 2

    run(body(), 60)


def test_a_call_waiting_for_room_on_a_stalled_connection_times_out() -> None:
    """Connection.call (consumer, master, shared broker connections) bounds its wait for room too."""
    from tubemq.net.connection import Connection

    async def body() -> None:
        server = await _StallFirst("stalled").start()
        conn = await Connection.open(server.address)
        try:
            calls = [asyncio.ensure_future(conn.call(2, 17, b"y" * 1_000_000, timeout_ms=800)) for _ in range(20)]
            await Deadline(5).until(lambda: not conn.has_capacity, "the write buffer above its high-water mark")
            with pytest.raises(TubeMQTimeoutError, match="no room to send"):
                await asyncio.wait_for(conn.call(2, 17, b"z", timeout_ms=800), 10)
            results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)
            assert all(isinstance(r, TubeMQTimeoutError) for r in results), {type(r).__name__ for r in results}
        finally:
            await conn.close()
            await server.close()

    run(body(), 30)
