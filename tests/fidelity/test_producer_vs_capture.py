"""Our producer against the REAL master's and broker's recorded answers of captures/s1_producer.json.

The fake master and broker answer with the captured bytes (serial rewritten; the broker address in
brokerInfos pointed at the fake broker, as the capture relay did). The producer does what the Java
test program did (register, publish {cap_store2, cap_main}, 11 sends, close) with the Java client's
IPv4 label as local address, so every request can be compared with the Java client's field by field:
only the client id, jdkVersion and the (randomly started round-robin) partition ids may differ.
"""

from __future__ import annotations

import re

import tubemq
from tubemq.protocol.constants import Method, ServiceType

from .replay import Deadline, ReplayServer, Sequence, answer, diff, java_dict, load, run, shape

JAVA_IP = "192.0.2.2"  # the Java client's address label in s1 (sentAddr -1073741310, hostName)

#: the 11 sends of the Java test program, in order: topic, data, attributes, stream id, msg time
SENDS = [
    ("cap_main", b"plain message #1", None, None, None),
    ("cap_main", b"plain message #2", None, None, None),
    ("cap_main", b"plain message #3", None, None, None),
    ("cap_main", b"attr message #4", {"k1": "v1", "k2": "v2"}, None, None),
    ("cap_main", b"attr message #5", {"k": "v"}, "typeA", "202611221030"),
    ("cap_main", b"attr message #6", {"k3": "v3"}, "typeB", None),
    ("cap_main", bytes(i & 0xFF for i in range(20000)), None, None, None),
    ("cap_store2", b"store2 message #1", None, None, None),
    ("cap_store2", b"store2 message #2", None, None, None),
    ("cap_store2", b"store2 message #3", None, None, None),
    ("cap_store2", b"store2 message #4", None, None, None),
]


async def _servers(cap, **edits):  # noqa: ANN001, ANN003, ANN202 - test helper
    """Fake broker + master replaying s1; returns (master, broker)."""
    broker = ReplayServer("broker")
    sends = Sequence(cap.answers(Method.BROKER_PRODUCER_SEND_MESSAGE))
    broker.script = lambda s: answer(sends.next(), s.serial)
    await broker.start()
    subs = {"127.0.0.1: ": f"127.0.0.1:{broker.port}"}  # the real master's blank-port brokerInfo
    reg = cap.answers(Method.MASTER_PRODUCER_REGISTER)[0]
    beats = Sequence(cap.answers(Method.MASTER_PRODUCER_HEARTBEAT))
    close = cap.answers(Method.MASTER_PRODUCER_CLOSE)[0]

    def master_script(s):  # noqa: ANN001, ANN202
        if s.method == Method.MASTER_PRODUCER_REGISTER:
            return answer(reg, s.serial, subs)
        if s.method == Method.MASTER_PRODUCER_HEARTBEAT:
            return answer(beats.next(), s.serial, subs)
        if s.method == Method.MASTER_PRODUCER_CLOSE:
            return answer(close, s.serial)
        return None

    master = await ReplayServer("master", master_script).start()
    return master, broker


def test_producer_lifecycle_matches_java_against_real_answers() -> None:
    cap = load("s1_producer")
    java_reg = java_dict(cap.requests(Method.MASTER_PRODUCER_REGISTER)[0].message)
    java_hb = [java_dict(f.message) for f in cap.requests(Method.MASTER_PRODUCER_HEARTBEAT)]
    java_sends = [java_dict(f.message) for f in cap.requests(Method.BROKER_PRODUCER_SEND_MESSAGE)]
    java_close = java_dict(cap.requests(Method.MASTER_PRODUCER_CLOSE)[0].message)
    real_sends = cap.answers(Method.BROKER_PRODUCER_SEND_MESSAGE)

    async def body() -> None:
        master, broker = await _servers(cap)
        producer = tubemq.aio.Producer(master.address, local_address=JAVA_IP, heartbeat_period_ms=100,
                                       pool="private")
        try:
            await producer.start()
            assert await producer.publish(["cap_store2", "cap_main"]) == {"cap_store2", "cap_main"}
            # the real master's topicInfos 'cap_store2#1:2:2#' (empty size segment) -> ids 0,1,10000,10001
            assert sorted(p.partition_id for p in producer.partitions("cap_store2")) == [0, 1, 10000, 10001]
            assert sorted(p.partition_id for p in producer.partitions("cap_main")) == [0, 1, 2]
            assert {p.address for p in producer.partitions("cap_main")} == {broker.address}
            await Deadline(10).until(lambda: len(master.requests(Method.MASTER_PRODUCER_HEARTBEAT)) >= 4,
                                     "periodic heartbeats")
            results = []
            for topic, data, attrs, stream, mtime in SENDS:
                results.append(await producer.send(topic, data, attributes=attrs, stream_id=stream, msg_time=mtime))
        finally:
            await producer.close()
        n_master = len(master.log)
        await master.close()
        await broker.close()

        # ---- what the real broker said reaches the application unchanged
        for res, real in zip(results, real_sends, strict=True):
            assert res.message_id == real.message["messageId"]
            assert (res.append_time, res.append_offset) == (real.message["appendTime"], real.message["appendOffset"])

        # ---- envelope of every request: protocolVer 3, positive timeout, Java's service types
        for s in master.log:
            assert (s.service_type, s.protocol_ver, s.timeout) == (ServiceType.MASTER, 3, 10000)
        for s in broker.log:
            assert (s.service_type, s.protocol_ver, s.timeout) == (ServiceType.BROKER_WRITE, 3, 10000)

        # ---- order: register -> publish heartbeat -> periodic heartbeats ... -> sends -> close (last)
        methods = [s.method for s in master.log]
        assert methods[0] == Method.MASTER_PRODUCER_REGISTER and methods.count(Method.MASTER_PRODUCER_REGISTER) == 1
        assert methods[-1] == Method.MASTER_PRODUCER_CLOSE and methods.count(Method.MASTER_PRODUCER_CLOSE) == 1
        assert set(methods[1:-1]) == {Method.MASTER_PRODUCER_HEARTBEAT}
        assert master.log[1].t < broker.log[0].t  # publish heartbeat before the first send
        assert master.log[-1].t > broker.log[-1].t
        assert len(master.log) == n_master  # nothing after close

        # ---- register: Java's fields exactly (client id and runtime version are ours)
        reg = master.log[0].fields
        assert diff(reg, java_reg, ignore=("clientId", "jdkVersion")) == {}
        assert shape(reg) == shape(java_reg)
        cid = reg["clientId"]
        assert re.fullmatch(r"192\.0\.2\.2-\d+-\d+-\d+-py-[\w.]+", cid), cid
        # ---- heartbeats: the master's brokerCheckSum, topicList, appdConfig{-2}, exactly as Java
        for s in master.requests(Method.MASTER_PRODUCER_HEARTBEAT):
            assert diff(s.fields, java_hb[0], ignore=("clientId",)) == {}
            assert s.fields["clientId"] == cid
        # ---- sends: data, flag, checkSum -1, sentAddr, msgType/msgTime, visit token: as Java
        ours = [s.fields for s in broker.log]
        assert len(ours) == len(java_sends)
        for o, j in zip(ours, java_sends, strict=True):
            assert diff(o, j, ignore=("clientId", "partitionId")) == {}, (o, j)
            assert shape(o) == shape(j)
            assert o["clientId"] == cid
        store2 = sorted(o["partitionId"] for o in ours if o["topicName"] == "cap_store2")
        assert store2 == [0, 1, 10000, 10001]  # round robin over the 2x2 expansion
        assert {o["partitionId"] for o in ours if o["topicName"] == "cap_main"} == {0, 1, 2}
        # ---- close: CloseRequestP2M{clientId} only
        assert master.log[-1].fields == {**java_close, "clientId": cid}

    run(body(), 60)
