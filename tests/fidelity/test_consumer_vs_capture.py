"""Our consumer against the REAL master's and broker's recorded answers (captures s2, s3, s4).

The fake master and broker replay the real answers (serial rewritten; the Java client's id inside
events and the broker port pointed at our run, as the capture relay did). Our consumer then has to do
what the Java client did next, and every request is compared with the Java client's: register ->
heartbeats -> event -> broker register (readStatus) -> first fetch with lastPackConsumed false ->
commit -> event report (status 2 + reportSubscribeInfo) -> unregister (readStatus 1 after 404s) ->
close. Differences allowed: client id, sessionTime, jdkVersion (ours), and our own timing.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from _support.aio import aclose_all

import tubemq
from tubemq.protocol.constants import MSG_OPTYPE_REGISTER, MSG_OPTYPE_UNREGISTER, Method, ServiceType

from .consumer_replay import ConsumerReplay
from .replay import Deadline, ReplayServer, diff, java_dict, load, run, shape

JAVA_IP = "192.0.2.2"
FAST: dict[str, Any] = {
    "heartbeat_period_ms": 100,
    "msg_not_found_wait_ms": 20,
    "filter_wait_ms": 20,
    "register_retry_wait_ms": 100,
    "rebalance_confirm_wait_ms": 1000,
    "heartbeat_fail_wait_ms": 300,
    "shutdown_wait_ms": 2000,
    "connect_timeout_ms": 1000,
    "pool": "private",
    "local_address": JAVA_IP,
}


async def _start(rp: ConsumerReplay, topics: Any, **options: Any) -> tuple[Any, ReplayServer, ReplayServer]:
    broker = await ReplayServer("broker", rp.broker).start()
    master = await ReplayServer("master", rp.master).start()
    consumer = tubemq.aio.Consumer(master.address, group=rp.group, topics=topics, consume_from="earliest",
                                   **{**FAST, **options})
    rp.bind(consumer.client_id, broker)
    await consumer.start()
    return consumer, master, broker


async def _consume(consumer: Any, count: int, seconds: float = 20.0) -> tuple[list[Any], list[Any]]:
    batches: list[Any] = []
    messages: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(messages) < count:
        assert time.monotonic() < deadline, f"got {len(messages)} of {count} messages"
        batch = await consumer.poll(0.2)
        if batch is None:
            continue
        batches.append(batch)
        messages.extend(batch.messages)
        assert await consumer.confirm(batch)
    return batches, messages


def _java(rp: ConsumerReplay, method: int, broker: bool = False, **match: Any) -> list[dict[str, Any]]:
    conn = rp.broker_conn if broker else rp.master_conn
    return [java_dict(f.message) for f in rp.cap.requests(method, conn=conn, **match)]


def _check_envelopes(master: ReplayServer, broker: ReplayServer) -> None:
    for s in master.log:
        assert (s.service_type, s.protocol_ver) == (ServiceType.MASTER, 3)
        assert s.timeout is not None and s.timeout > 0
    for s in broker.log:
        assert (s.service_type, s.protocol_ver) == (ServiceType.BROKER_READ, 3)
        assert s.timeout is not None and s.timeout > 0


def _check_fetch_rule(rp: ConsumerReplay, broker: ReplayServer) -> dict[int, list[bool]]:
    """lastPackConsumed: false on a partition's first fetch and after a 404 (nothing consumed), true
    after a 200 (a batch we confirmed, or an empty read the broker already committed) — as Java."""
    flags: dict[int, list[bool]] = {}
    for s in broker.requests(Method.BROKER_CONSUMER_GET_MESSAGE):
        pid = s.msg.partitionId
        seq = rp.fetches[pid]
        k = len(flags.setdefault(pid, []))
        if k == 0:
            expected = False
        else:
            prev = seq.frames[min(k - 1, len(seq.frames) - 1)]
            expected = prev.message["errCode"] == 200
        assert s.msg.lastPackConsumed is expected, (pid, k, s.fields)
        flags[pid].append(s.msg.lastPackConsumed)
        assert s.fields["manualCommitOffset"] is False and s.fields["escFlowCtrl"] is False
    return flags


def _real_messages(rp: ConsumerReplay) -> dict[int, dict[str, Any]]:
    out = {}
    for seq in rp.fetches.values():
        for f in seq.frames:
            for raw, dec in zip(f.message.get("messages", []), f.message.get("_messages_decoded", []), strict=True):
                out[raw["messageId"]] = {**dec, "currOffset": f.message["currOffset"],
                                         "maxOffset": f.message["maxOffset"]}
    return out


def test_pull_consumer_s2_matches_java_against_real_answers() -> None:
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)

    async def body() -> None:
        consumer, master, broker = await _start(rp, ["cap_main"])
        try:
            batches, messages = await _consume(consumer, 7)
            await Deadline(15).until(rp.fetched_all, "every partition drained to 404")
            await Deadline(15).until(lambda: rp.all_events_reported, "event report")
            await Deadline(15).until(lambda: broker.requests(Method.BROKER_CONSUMER_HEARTBEAT), "broker heartbeat")
        finally:
            await aclose_all(consumer, master, broker)
        cid = consumer.client_id
        _check_envelopes(master, broker)

        # ---- the messages the real broker returned, decoded, with the real offsets
        real = _real_messages(rp)
        assert sorted(m.message_id for m in messages) == sorted(real)
        for m in messages:
            exp = real[m.message_id]
            assert hashlib.sha256(m.data).hexdigest() == exp["body_sha256"]
            assert m.attributes == (tubemq.codec.decode_attributes(exp["attribute"]) if "attribute" in exp else {})
        for b in batches:
            first = real[b.messages[0].message_id]
            assert (b.start_offset, b.max_offset) == (first["currOffset"], first["maxOffset"])
            assert b.next_offset > b.start_offset  # the real commit answer's currOffset

        # ---- master: register, heartbeats, report, close — Java's fields
        methods = [s.method for s in master.log]
        assert methods[0] == Method.MASTER_CONSUMER_REGISTER and methods[-1] == Method.MASTER_CONSUMER_CLOSE
        assert methods.count(Method.MASTER_CONSUMER_REGISTER) == 1 and methods.count(Method.MASTER_CONSUMER_CLOSE) == 1
        reg = master.log[0].fields
        java_reg = _java(rp, Method.MASTER_CONSUMER_REGISTER)[0]
        assert diff(reg, java_reg, ignore=("clientId", "sessionTime", "jdkVersion")) == {}
        assert shape(reg) == shape(java_reg)
        assert abs(reg["sessionTime"] - time.time() * 1000) < 120_000
        assert reg["clientId"] == cid and cid.startswith(f"{rp.group}_{JAVA_IP}-") and "-Pull-" in cid
        java_hb = _java(rp, Method.MASTER_CONSUMER_HEARTBEAT)
        assert master.log[1].fields == {**java_hb[0], "clientId": cid}  # no report, flow ids -2
        # the event report: same rebalanceId/opType/subscribeInfo as delivered, status 2, plus our partitions
        assert len(rp.reports) == 1
        report = rp.reports[0].fields
        java_report = next(h for h in java_hb if "event" in h)
        assert diff(report, java_report, ignore=("clientId", "subscribeInfo", "event")) == {}
        assert report["event"] == {**rp.delivered[0], "status": 2}
        assert sorted(report["subscribeInfo"]) == sorted(rp.delivered[0]["subscribeInfo"])
        assert master.log[-1].fields == {**_java(rp, Method.MASTER_CONSUMER_CLOSE)[0], "clientId": cid}

        # ---- broker: register (readStatus 0, qryPriorityId -2, visit token) before any fetch
        regs = [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER) if s.msg.opType == MSG_OPTYPE_REGISTER]
        java_regs = {d["partitionId"]: d for d in _java(rp, Method.BROKER_CONSUMER_REGISTER, broker=True,
                                                           opType=MSG_OPTYPE_REGISTER)}
        assert sorted(s.msg.partitionId for s in regs) == sorted(java_regs)
        for s in regs:
            assert diff(s.fields, java_regs[s.msg.partitionId], ignore=("clientId",)) == {}
        first_fetch = broker.requests(Method.BROKER_CONSUMER_GET_MESSAGE)[0]
        assert max(s.t for s in regs) < rp.reports[0].t  # registered before reporting the event done
        assert min(s.t for s in regs) <= first_fetch.t
        _check_fetch_rule(rp, broker)
        java_fetch = _java(rp, Method.BROKER_CONSUMER_GET_MESSAGE, broker=True)[0]
        assert shape(first_fetch.fields) == shape(java_fetch)
        # commits: one per confirmed batch, lastPackConsumed true, Java's shape
        commits = broker.requests(Method.BROKER_CONSUMER_COMMIT)
        assert len(commits) == len(batches)
        java_commit = _java(rp, Method.BROKER_CONSUMER_COMMIT, broker=True)[0]
        for s in commits:
            assert shape(s.fields) == shape(java_commit) and s.msg.lastPackConsumed is True
        # broker heartbeat: every partition we hold, partition-string format, qryPriorityId, token
        hb = broker.requests(Method.BROKER_CONSUMER_HEARTBEAT)[0].fields
        java_bhb = _java(rp, Method.BROKER_CONSUMER_HEARTBEAT, broker=True)[0]
        assert diff(hb, java_bhb, ignore=("clientId", "partitionInfo")) == {}
        assert sorted(hb["partitionInfo"]) == sorted(f"1:127.0.0.1:{broker.port}#cap_main:{i}" for i in range(3))
        # close: unregister every partition with readStatus 1 (the last fetches were 404s), then close
        unregs = [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER) if s.msg.opType == MSG_OPTYPE_UNREGISTER]
        java_unregs = {d["partitionId"]: d for d in _java(rp, Method.BROKER_CONSUMER_REGISTER, broker=True,
                                                             opType=MSG_OPTYPE_UNREGISTER)}
        assert sorted(s.msg.partitionId for s in unregs) == [0, 1, 2]
        for s in unregs:
            assert diff(s.fields, java_unregs[s.msg.partitionId], ignore=("clientId",)) == {}
            assert s.t < master.log[-1].t
        assert max(s.t for s in broker.requests(Method.BROKER_CONSUMER_GET_MESSAGE)) < min(s.t for s in unregs)

    run(body(), 60)


def _partition_of(info: str) -> int:
    return int(info.rsplit(":", 1)[1])


def test_rebalance_s3_member_a_gives_a_partition_back_like_java() -> None:
    """ONLY_CONNECT(12) of 3 partitions on an empty topic (404 'Request offset reached cache maxOffset',
    minLimitTime 0), then ONLY_DISCONNECT(13) of partition 1: unregister it (readStatus 1), report 13."""
    rp = ConsumerReplay(load("s3_rebalance"), master_conn=1, broker_conn=2)

    async def body() -> None:
        consumer, master, broker = await _start(rp, ["cap_rebal"])
        try:
            await Deadline(20).until(lambda: rp.all_events_reported, "both events reported")
            await Deadline(10).until(rp.fetched_all, "a fetch on every partition")
            assert sorted(p.partition_id for p in consumer.assignment()) == [0, 2]
        finally:
            await aclose_all(consumer, master, broker)
        _check_envelopes(master, broker)
        _check_fetch_rule(rp, broker)
        assert [e["opType"] for e in rp.delivered] == [10, 20]
        java_reports = [h for h in _java(rp, Method.MASTER_CONSUMER_HEARTBEAT) if "event" in h]
        assert len(rp.reports) == 2
        for ours, java, ev in zip(rp.reports, java_reports, rp.delivered, strict=True):
            assert diff(ours.fields, java, ignore=("clientId", "subscribeInfo", "event")) == {}
            assert ours.fields["event"] == {**ev, "status": 2}
        assert sorted(rp.reports[0].fields["subscribeInfo"]) == sorted(rp.delivered[0]["subscribeInfo"])
        assert sorted(_partition_of(s) for s in rp.reports[1].fields["subscribeInfo"]) == [0, 2]

        unregs = [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER) if s.msg.opType == MSG_OPTYPE_UNREGISTER]
        java_unregs = _java(rp, Method.BROKER_CONSUMER_REGISTER, broker=True, opType=MSG_OPTYPE_UNREGISTER)
        # the revoked partition first (between the event and its report), then 0 and 2 at close
        assert unregs[0].msg.partitionId == 1
        assert rp.delivered_at[1] < unregs[0].t < rp.reports[1].t
        assert sorted(s.msg.partitionId for s in unregs[1:]) == [0, 2]
        by_pid = {d["partitionId"]: d for d in java_unregs}
        for s in unregs:
            assert diff(s.fields, by_pid[s.msg.partitionId], ignore=("clientId",)) == {}  # readStatus 1
        assert all(s.t < unregs[0].t for s in broker.requests(Method.BROKER_CONSUMER_GET_MESSAGE)
                   if s.msg.partitionId == 1)

    run(body(), 60)


def test_rebalance_s3_member_b_takes_partitions_over_with_the_rotated_token() -> None:
    """B: ONLY_CONNECT(13) of partition 1, later ONLY_CONNECT(16) of 0 and 2 in an answer that also
    carries the master's rotated visitAuthorizedToken, which every later broker request must use."""
    rp = ConsumerReplay(load("s3_rebalance"), master_conn=3, broker_conn=4)

    async def body() -> None:
        consumer, master, broker = await _start(rp, ["cap_rebal"])
        try:
            await Deadline(20).until(lambda: rp.all_events_reported, "both events reported")
            assert sorted(p.partition_id for p in consumer.assignment()) == [0, 1, 2]
            await Deadline(10).until(rp.fetched_all, "a fetch on every partition")
        finally:
            await aclose_all(consumer, master, broker)
        _check_envelopes(master, broker)
        _check_fetch_rule(rp, broker)
        assert [(e["rebalanceId"], e["opType"]) for e in rp.delivered] == [(13, 10), (16, 10)]
        assert sorted(_partition_of(s) for s in rp.reports[1].fields["subscribeInfo"]) == [0, 1, 2]
        regs = [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER) if s.msg.opType == MSG_OPTYPE_REGISTER]
        java_regs = _java(rp, Method.BROKER_CONSUMER_REGISTER, broker=True, opType=MSG_OPTYPE_REGISTER)
        assert [s.msg.partitionId for s in regs][:1] == [1]
        assert sorted(s.msg.partitionId for s in regs[1:]) == [0, 2]
        by_pid = {d["partitionId"]: d for d in java_regs}
        for s in regs:  # includes the token: old for partition 1, rotated for 0 and 2
            assert diff(s.fields, by_pid[s.msg.partitionId], ignore=("clientId",)) == {}
        rotated = 1795303596108
        later = [s for s in broker.log if s.t > rp.delivered_at[1] and "authInfo" in s.fields]
        assert later and all(s.msg.authInfo.visitAuthorizedToken == rotated for s in later)

    run(body(), 60)


def test_filter_consumer_s4_matches_java_against_real_answers() -> None:
    """topicCondition / filterCondStr as Java; the real broker's filtered reads (first a 404 'current
    offset is exceed max file offset' with a positive minLimitTime, then 200s with requireSlow and
    many empty 200s) give exactly the 5 matching messages."""
    rp = ConsumerReplay(load("s4_filter"), master_conn=3, broker_conn=4)

    async def body() -> None:
        consumer, master, broker = await _start(rp, {"cap_filter2": ["typeA", "typeC"]})
        try:
            _, messages = await _consume(consumer, 5)
            await Deadline(15).until(rp.fetched_all, "every partition drained")
        finally:
            await aclose_all(consumer, master, broker)
        _check_envelopes(master, broker)
        real = _real_messages(rp)
        assert sorted(m.message_id for m in messages) == sorted(real) and len(real) == 5
        assert sorted(m.stream_id for m in messages) == ["typeA", "typeA", "typeA", "typeC", "typeC"]
        reg = master.log[0].fields
        java_reg = _java(rp, Method.MASTER_CONSUMER_REGISTER)[0]
        assert diff(reg, java_reg, ignore=("clientId", "sessionTime", "jdkVersion")) == {}
        assert reg["topicCondition"] == ["cap_filter2#typeA,typeC"]
        java_regs = {d["partitionId"]: d for d in _java(rp, Method.BROKER_CONSUMER_REGISTER, broker=True,
                                                           opType=MSG_OPTYPE_REGISTER)}
        for s in broker.requests(Method.BROKER_CONSUMER_REGISTER):
            if s.msg.opType == MSG_OPTYPE_REGISTER:
                assert diff(s.fields, java_regs[s.msg.partitionId], ignore=("clientId",)) == {}
        flags = _check_fetch_rule(rp, broker)
        assert flags[0][:2] == [False, False]  # the first read of partition 0 was a 404
        java_unregs = {d["partitionId"]: d for d in _java(rp, Method.BROKER_CONSUMER_REGISTER, broker=True,
                                                             opType=MSG_OPTYPE_UNREGISTER)}
        for s in broker.requests(Method.BROKER_CONSUMER_REGISTER):
            if s.msg.opType == MSG_OPTYPE_UNREGISTER:
                assert diff(s.fields, java_unregs[s.msg.partitionId], ignore=("clientId",)) == {}

    run(body(), 60)
