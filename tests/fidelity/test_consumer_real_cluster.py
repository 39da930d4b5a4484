"""Our consumer when the real cluster misbehaves, with the REAL answers (s2 run + error answers of s5,
s6b, s6c): a master that forgot the group (411), broker heartbeat failureInfo, getMessage 412, a broker
that disappears, and a master answer that never comes for the heartbeat reporting an event.
"""

from __future__ import annotations

from typing import Any

from _support.aio import aclose_all

from tubemq.protocol.constants import MSG_OPTYPE_REGISTER, MSG_OPTYPE_UNREGISTER, Method

from .consumer_replay import ConsumerReplay, inject
from .replay import Deadline, answer, load, run
from .test_consumer_vs_capture import _consume, _start


def _pids(infos: Any) -> list[int]:
    return sorted(int(s.rsplit(":", 1)[1]) for s in infos)


async def _steady(rp: ConsumerReplay, **options: Any) -> tuple[Any, Any, Any]:
    """s2 up to the point where all 7 messages were consumed and the event was reported."""
    consumer, master, broker = await _start(rp, ["cap_main"], **options)
    await _consume(consumer, 7)
    await Deadline(15).until(lambda: rp.all_events_reported, "event report")
    await Deadline(15).until(rp.fetched_all, "drained")
    return consumer, master, broker


async def _dropped_and_reported(consumer: Any, master: Any, broker: Any, keep: list[int]) -> float:
    """Wait until the consumer holds only ``keep``, then until it told the master so in a heartbeat
    report; returns the time of the broker's last request when the partition was gone."""
    await Deadline(10).until(lambda: sorted(p.partition_id for p in consumer.assignment()) == keep,
                             f"only partitions {keep} left")
    t_drop: float = broker.log[-1].t
    await Deadline(10).until(
        lambda: any(s.msg.reportSubscribeInfo and _pids(s.msg.subscribeInfo) == keep
                    for s in master.requests(Method.MASTER_CONSUMER_HEARTBEAT)), f"a report of only {keep}")
    return t_drop


def test_master_forgot_the_group_real_411_reregisters_with_our_partitions() -> None:
    """Real answer: 411 'Not found groupName <g> in holder!' (s6b). Java re-registers at once with the
    partitions it holds in subscribeInfo; the partitions stay registered at the broker."""
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)
    real_411 = next(f for f in load("s6b_errors_master").answers(Method.MASTER_CONSUMER_HEARTBEAT)
                    if "Not found groupName" in f.message["errMsg"])
    their_group = real_411.message["errMsg"].split("groupName ")[1].split(" ")[0]
    forgot = inject(rp, "master", lambda s: s.method == Method.MASTER_CONSUMER_HEARTBEAT,
                    lambda s: answer(real_411, s.serial, {their_group: rp.group}),
                    off_at=lambda s: s.method == Method.MASTER_CONSUMER_REGISTER)  # registered again: known

    async def body() -> None:
        consumer, master_srv, broker = await _steady(rp)
        try:
            forgot.on = True
            await Deadline(10).until(lambda: len(master_srv.requests(Method.MASTER_CONSUMER_REGISTER)) == 2,
                                     "re-register")
            n = len(master_srv.log)
            await Deadline(10).until(lambda: len(master_srv.log) > n + 2, "heartbeats after re-register")
            again = master_srv.requests(Method.MASTER_CONSUMER_REGISTER)[1]
            assert _pids(again.msg.subscribeInfo) == [0, 1, 2]
            assert sorted(again.msg.subscribeInfo) == sorted(rp.delivered[0]["subscribeInfo"])
            assert sorted(p.partition_id for p in consumer.assignment()) == [0, 1, 2]
            assert not [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER)
                        if s.msg.opType == MSG_OPTYPE_UNREGISTER]
        finally:
            await aclose_all(consumer, master_srv, broker)

    run(body(), 40)


def test_broker_heartbeat_failure_info_drops_the_partition_and_reports() -> None:
    """Real answer of s5: success, hasPartFailure, failureInfo ['411:1:127.0.0.1:8123#cap_main:0']:
    drop partition 0 locally (no unregister RPC, §5.2.5), stop fetching it, tell the master."""
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)
    failing = load("s5_client_balance").answers(Method.BROKER_CONSUMER_HEARTBEAT)[0]
    fail = inject(rp, "broker", lambda s: s.method == Method.BROKER_CONSUMER_HEARTBEAT,
                  lambda s: answer(failing, s.serial, rp.subs))

    async def body() -> None:
        consumer, master, broker_srv = await _steady(rp)
        try:
            fail.on = True
            t_drop = await _dropped_and_reported(consumer, master, broker_srv, [1, 2])
            await Deadline(10).until(lambda: broker_srv.log[-1].t > t_drop + 0.2, "more broker traffic")
            late = [s for s in broker_srv.log if s.t > t_drop + 0.1]
            assert late and not [s for s in late if getattr(s.msg, "partitionId", None) == 0]
            assert not [s for s in broker_srv.requests(Method.BROKER_CONSUMER_REGISTER)
                        if s.msg.opType == MSG_OPTYPE_UNREGISTER and s.t < t_drop + 0.1]
        finally:
            await aclose_all(consumer, master, broker_srv)

    run(body(), 40)


def test_get_message_412_drops_the_partition() -> None:
    """Real answer of s6c: 412 '[Duplicated Request] Partition=... has been consumed by <other>'."""
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)
    dup = next(f for f in load("s6c_errors_consumer_broker").answers(Method.BROKER_CONSUMER_GET_MESSAGE)
               if f.message.get("errCode") == 412)
    stolen = inject(rp, "broker", lambda s: s.method == Method.BROKER_CONSUMER_GET_MESSAGE and s.msg.partitionId == 2,
                    lambda s: answer(dup, s.serial))

    async def body() -> None:
        consumer, master, broker_srv = await _steady(rp)
        try:
            stolen.on = True
            await _dropped_and_reported(consumer, master, broker_srv, [0, 1])
        finally:
            await aclose_all(consumer, master, broker_srv)
        unregs = [s.msg.partitionId for s in broker_srv.requests(Method.BROKER_CONSUMER_REGISTER)
                  if s.msg.opType == MSG_OPTYPE_UNREGISTER]
        assert sorted(unregs) == [0, 1]  # not the partition another consumer owns

    run(body(), 40)


def test_broker_that_disappears_loses_its_partitions_and_the_master_is_told() -> None:
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)

    async def body() -> None:
        consumer, master, broker = await _steady(rp)
        try:
            await broker.close()  # listener gone, connections cut
            await Deadline(15).until(lambda: not consumer.assignment(), "partitions dropped")
            await Deadline(10).until(
                lambda: any(s.msg.reportSubscribeInfo and not s.msg.subscribeInfo
                            for s in master.requests(Method.MASTER_CONSUMER_HEARTBEAT)), "empty report")
            assert consumer.metrics()["counters"]["consumer.partitions_lost"] >= 1
        finally:
            await aclose_all(consumer, master)

    run(body(), 40)


def test_event_report_whose_answer_never_comes_is_sent_again() -> None:
    """The master may drop the answer to the heartbeat carrying our event report (timeout passed,
    §2.7): we cannot know it arrived, so the report is repeated on the next heartbeat."""
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)
    script = rp.master
    dropped: list[Any] = []

    def master(s: Any) -> Any:
        if s.method == Method.MASTER_CONSUMER_HEARTBEAT and s.msg.HasField("event") and not dropped:
            dropped.append(s)
            script(s)  # the master processed it...
            return None  # ...but the answer never comes
        return script(s)

    rp.master = master  # type: ignore[method-assign]

    async def body() -> None:
        consumer, master_srv, broker = await _start(rp, ["cap_main"], rpc_timeout_ms=3000)
        try:
            await _consume(consumer, 7)
            await Deadline(15).until(lambda: len(rp.reports) >= 2, "the report sent again")
            first, second = rp.reports[:2]
            assert second.conn != first.conn  # the timed-out connection was replaced
            assert second.fields["event"] == first.fields["event"] == {**rp.delivered[0], "status": 2}
            assert second.msg.reportSubscribeInfo and _pids(second.msg.subscribeInfo) == [0, 1, 2]
        finally:
            await aclose_all(consumer, master_srv, broker)
        regs = [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER) if s.msg.opType == MSG_OPTYPE_REGISTER]
        assert len(regs) == 3  # the event was processed once

    run(body(), 40)


def test_consumer_auth_against_the_upstream_default_handlers() -> None:
    """Authentication on, upstream default handlers (§8.2, §8.3): the master wants authInfo on every
    request (it issues no authAuthorizedToken) and the broker refuses a blank authAuthorizedToken on
    consumer register/heartbeat with 415 'authAuthorizedToken is Blank!'. Our consumer must get its
    partitions and keep them (Java only adds the broker token after a requireAuth, so its very first
    registration at such a broker is refused)."""
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)
    refused: list[Any] = []
    m_script, b_script = rp.master, rp.broker

    def refuse(why: str, extra: dict[str, Any]) -> Any:
        def edit(m: Any) -> None:
            for f in [f.name for f, _ in m.ListFields()]:
                m.ClearField(f)
            m.success, m.errCode, m.errMsg = False, 415, why
            for k, v in extra.items():
                setattr(m, k, v)
        return edit

    def master(s: Any) -> Any:
        info = s.msg.authInfo.authInfo
        if not info.userName.strip() or not info.signature.strip():
            refused.append(s)
            frame = rp.register if s.method == Method.MASTER_CONSUMER_REGISTER else rp.quiet_before
            return answer(frame, s.serial, edit=refuse("Illegal value: authInfo.userName is Blank!", {}))
        return m_script(s)

    def broker(s: Any) -> Any:
        if s.method in (Method.BROKER_CONSUMER_REGISTER, Method.BROKER_CONSUMER_HEARTBEAT) \
                and not s.msg.authInfo.authAuthorizedToken.strip():
            refused.append(s)
            if s.method == Method.BROKER_CONSUMER_REGISTER:
                return answer(rp.reg[s.msg.partitionId], s.serial,
                              edit=refuse("authAuthorizedToken is Blank!", {"currOffset": -1}))
            return answer(rp.broker_heartbeat, s.serial, edit=refuse("authAuthorizedToken is Blank!", {}))
        return b_script(s)

    rp.master, rp.broker = master, broker  # type: ignore[method-assign]

    async def body() -> None:
        consumer, master_srv, broker_srv = await _start(rp, ["cap_main"], auth_user="admin", auth_password="secret")
        try:
            await _consume(consumer, 7)
            await Deadline(15).until(lambda: rp.all_events_reported, "event report")
            await Deadline(15).until(lambda: broker_srv.requests(Method.BROKER_CONSUMER_HEARTBEAT), "broker heartbeat")
            assert sorted(p.partition_id for p in consumer.assignment()) == [0, 1, 2]
        finally:
            await aclose_all(consumer, master_srv, broker_srv)
        assert refused == []
        for s in broker_srv.requests(Method.BROKER_CONSUMER_REGISTER):
            user, ts, nonce, sig = s.msg.authInfo.authAuthorizedToken.split(" ")
            assert user == "admin" and int(ts) > 0 and int(nonce) >= 0 and sig

    run(body(), 40)


def test_get_message_answer_that_never_comes() -> None:
    """The answer to a getMessage that also committed the previous batch (lastPackConsumed true) is
    lost. Whether the broker processed it is unknown, so the next read must not claim anything
    consumed (lastPackConsumed false: a re-delivery at worst, never a loss) — as Java."""
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)
    script = rp.broker
    lost: list[Any] = []

    def broker(s: Any) -> Any:
        if s.method == Method.BROKER_CONSUMER_GET_MESSAGE and s.msg.partitionId == 1 and s.msg.lastPackConsumed \
                and not lost:
            lost.append(s)
            return None
        return script(s)

    rp.broker = broker  # type: ignore[method-assign]

    async def body() -> None:
        consumer, master, broker_srv = await _start(rp, ["cap_main"], rpc_timeout_ms=3000)
        try:
            await _consume(consumer, 7, seconds=30)
            await Deadline(15).until(lambda: rp.fetched_all(), "drained")
        finally:
            await aclose_all(consumer, master, broker_srv)
        p1 = [s for s in broker_srv.requests(Method.BROKER_CONSUMER_GET_MESSAGE) if s.msg.partitionId == 1]
        i = next(k for k, s in enumerate(p1) if s is lost[0])
        assert p1[i + 1].msg.lastPackConsumed is False
        assert p1[i + 1].t - lost[0].t >= 2.9  # only after our timeout

    run(body(), 60)
