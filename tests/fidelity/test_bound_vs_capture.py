"""Our BoundConsumer (client-side balance) against the REAL master's and broker's answers of s5.

The Java ClientBalanceConsumer's program is repeated: V2 register (20) -> V2 heartbeats (21) ->
get-part-meta (22) -> connect2Partition (opType 31, bootstrap currOffset 0 for partition 0, none for
the others) -> fetch/confirm -> disconnectFromPartition(0) (opType 32, readStatus 0) -> heartbeats
(V2 with partSubInfo, broker heartbeat) -> close (opType 32 for the rest, then method 6).
"""

from __future__ import annotations

import hashlib
from typing import Any

from _support.aio import aclose_all

import tubemq
from tubemq.protocol.constants import MSG_OPTYPE_REGISTER, MSG_OPTYPE_UNREGISTER, Method, ServiceType

from .replay import (
    Deadline,
    ReplayServer,
    Seen,
    Sequence,
    answer,
    diff,
    java_dict,
    load,
    run,
    shape,
)

JAVA_IP = "192.0.2.2"
MASTER_CONFIG_ID = 1795303356321  # brokerConfigId of the real master in s5
META_ID = 1795303968393


class BoundReplay:
    """Scripts for s5 (master conn 1, broker conn 2)."""

    def __init__(self) -> None:
        cap = self.cap = load("s5_client_balance")
        self.java_id = cap.requests(Method.MASTER_CONSUMER_REGISTER_V2)[0].message["clientId"]
        self.group = cap.requests(Method.MASTER_CONSUMER_REGISTER_V2)[0].message["groupName"]
        self.subs: dict[str, str] = {}
        self.registered: set[int] = set()
        self.v2_beats = Sequence(cap.answers(Method.MASTER_CONSUMER_HEARTBEAT_V2))
        # the last real "no data" answer on cap_main (s2, same topic) ends every partition's sequence
        end = [f for f in load("s2_consumer_pull").answers(Method.BROKER_CONSUMER_GET_MESSAGE)
               if f.message["errCode"] == 404][-1]
        per: dict[int, list[Any]] = {}
        for r in cap.requests(Method.BROKER_CONSUMER_GET_MESSAGE):
            per.setdefault(r.message["partitionId"], []).append(cap.answer_to(r))
        self.fetches = {pid: Sequence([*frames, end]) for pid, frames in per.items()}
        com: dict[int, list[Any]] = {}
        for r in cap.requests(Method.BROKER_CONSUMER_COMMIT):
            com.setdefault(r.message["partitionId"], []).append(cap.answer_to(r))
        self.commits = {pid: frames for pid, frames in com.items()}
        self.commit_by_fetch: dict[int, int] = {}
        self.reg = {r.message["partitionId"]: cap.answer_to(r)
                    for r in cap.requests(Method.BROKER_CONSUMER_REGISTER, opType=MSG_OPTYPE_REGISTER)}
        self.unreg = {r.message["partitionId"]: cap.answer_to(r)
                      for r in cap.requests(Method.BROKER_CONSUMER_REGISTER, opType=MSG_OPTYPE_UNREGISTER)}

    def bind(self, our_id: str, broker: ReplayServer) -> None:
        self.subs = {self.java_id: our_id, "127.0.0.1: ": f"127.0.0.1:{broker.port}",
                     "127.0.0.1:8123": f"127.0.0.1:{broker.port}"}

    def master(self, s: Seen) -> bytes | None:
        cap = self.cap
        if s.method == Method.MASTER_CONSUMER_REGISTER_V2:
            return answer(cap.answers(Method.MASTER_CONSUMER_REGISTER_V2)[0], s.serial, self.subs)
        if s.method == Method.MASTER_CONSUMER_HEARTBEAT_V2:
            return answer(self.v2_beats.next(), s.serial, self.subs)
        if s.method == Method.MASTER_CONSUMER_GET_PART_META:
            frame = cap.answers(Method.MASTER_CONSUMER_GET_PART_META)[0]
            if s.msg.topicMetaInfoId == META_ID:
                # like the real master: ids equal -> no list (GetPartMetaResponseM2C, §3.5)
                return answer(frame, s.serial, self.subs, edit=lambda m: m.ClearField("topicMetaInfoList"))
            return answer(frame, s.serial, self.subs)
        if s.method == Method.MASTER_CONSUMER_CLOSE:
            return answer(cap.answers(Method.MASTER_CONSUMER_CLOSE)[0], s.serial, self.subs)
        return None

    def broker(self, s: Seen) -> bytes | None:
        m = s.msg
        if s.method == Method.BROKER_CONSUMER_REGISTER:
            table = self.reg if m.opType == MSG_OPTYPE_REGISTER else self.unreg
            (self.registered.add if m.opType == MSG_OPTYPE_REGISTER else self.registered.discard)(m.partitionId)
            return answer(table.get(m.partitionId) or next(iter(table.values())), s.serial, self.subs)
        if s.method == Method.BROKER_CONSUMER_GET_MESSAGE:
            seq = self.fetches[m.partitionId]
            frame = seq.next()
            if frame.message.get("messages"):
                self.commit_by_fetch[m.partitionId] = self.commit_by_fetch.get(m.partitionId, -1) + 1
            return answer(frame, s.serial, self.subs)
        if s.method == Method.BROKER_CONSUMER_COMMIT:
            frames = self.commits[m.partitionId]
            # the real commit that followed the same batch (Java also committed after empty reads)
            with_data = [i for i, f in enumerate(self._java_fetches(m.partitionId)) if f.message.get("messages")]
            k = self.commit_by_fetch.get(m.partitionId, 0)
            idx = with_data[min(k, len(with_data) - 1)] if with_data else 0
            return answer(frames[min(idx, len(frames) - 1)], s.serial, self.subs)
        if s.method == Method.BROKER_CONSUMER_HEARTBEAT:
            frame = self.cap.answers(Method.BROKER_CONSUMER_HEARTBEAT)[0]
            if 0 in self.registered:  # the real broker reports failures only for lost registrations
                return answer(frame, s.serial, self.subs, edit=_no_failures)
            # the real answer after the release: failureInfo '411:...#cap_main:0'; it must not hurt us
            return answer(frame, s.serial, self.subs)
        return None

    def _java_fetches(self, pid: int) -> list[Any]:
        return self.fetches[pid].frames[:-1]


def _no_failures(m: Any) -> None:
    m.hasPartFailure = False
    m.ClearField("failureInfo")


def _java(rp: BoundReplay, method: int, **match: Any) -> list[dict[str, Any]]:
    return [java_dict(f.message) for f in rp.cap.requests(method, **match)]


def test_bound_consumer_matches_java_client_balance_against_real_answers() -> None:
    rp = BoundReplay()

    async def body() -> None:
        broker = await ReplayServer("broker", rp.broker).start()
        master = await ReplayServer("master", rp.master).start()
        bc = tubemq.aio.BoundConsumer(master.address, rp.group, ["cap_main"], source_count=1, node_id=0,
                                      consume_from="earliest", local_address=JAVA_IP, heartbeat_period_ms=100,
                                      pool="private", msg_not_found_wait_ms=20)
        rp.bind(bc.client_id, broker)
        messages = []
        offsets = []
        try:
            await bc.start()
            parts = await bc.partitions("cap_main")
            assert [p.key for p in parts] == ["1:cap_main:0", "1:cap_main:1", "1:cap_main:2"]
            assert {p.address for p in parts} == {broker.address}
            pos = [await bc.attach(parts[0], 0), await bc.attach(parts[1]), await bc.attach(parts[2])]
            assert [(p.current, p.max) for p in pos] == [(0, 196)] * 3
            again = await bc.partitions()  # the master omits the list now (ids equal): keep ours
            assert [p.key for p in again] == [p.key for p in parts]
            # Java's order: p0 p1 p2 p0 p1 p2 (its extra fetches were empty reads, which fetch() reads over)
            for i in (0, 1, 2, 0, 1, 2):
                batch = await bc.fetch(parts[i], timeout=5)
                assert batch is not None and batch.partition == parts[i]
                messages.extend(batch.messages)
                assert await bc.confirm(batch) is True
                offsets.append(batch.next_offset)  # the commit answer's currOffset
            await bc.detach(parts[0])
            await Deadline(10).until(
                lambda: any(s.msg.subRepInfo.partSubInfo for s in master.requests(Method.MASTER_CONSUMER_HEARTBEAT_V2)
                            if s.t > broker.log[-1].t), "a V2 heartbeat reporting partSubInfo")
            n = len(broker.requests(Method.BROKER_CONSUMER_HEARTBEAT))
            await Deadline(10).until(lambda: len(broker.requests(Method.BROKER_CONSUMER_HEARTBEAT)) > n + 1,
                                     "broker heartbeats after the detach")
            assert sorted(p.partition_id for p in bc.table.owned_partitions()) == [1, 2]  # 411 for 0 ignored
        finally:
            await aclose_all(bc, master, broker)
        cid = bc.client_id
        assert "-Balance-" in cid and cid.startswith(f"{rp.group}_{JAVA_IP}-")

        # ---- messages and offsets from the real broker
        real = {}
        for seq in rp.fetches.values():
            for f in seq.frames:
                for raw, dec in zip(f.message.get("messages", []), f.message.get("_messages_decoded", []),
                                    strict=True):
                    real[raw["messageId"]] = dec
        assert sorted(m.message_id for m in messages) == sorted(real) and len(real) == 7
        for m in messages:
            assert hashlib.sha256(m.data).hexdigest() == real[m.message_id]["body_sha256"]
        assert offsets == [112, 112, 112, 168, 196, 168]  # the real commit answers' currOffset

        for s in master.log:
            assert (s.service_type, s.protocol_ver, s.timeout) == (ServiceType.MASTER, 3, 10000)
        for s in broker.log:
            assert (s.service_type, s.protocol_ver, s.timeout) == (ServiceType.BROKER_READ, 3, 10000)

        # ---- master: V2 register, heartbeats, get-part-meta, close (method 6)
        methods = [s.method for s in master.log]
        assert methods[0] == Method.MASTER_CONSUMER_REGISTER_V2 and methods[-1] == Method.MASTER_CONSUMER_CLOSE
        reg = master.log[0].fields
        java_reg = _java(rp, Method.MASTER_CONSUMER_REGISTER_V2)[0]
        assert diff(reg, java_reg, ignore=("clientId", "jdkVersion")) == {}
        assert shape(reg) == shape(java_reg)
        meta = master.requests(Method.MASTER_CONSUMER_GET_PART_META)
        assert diff(meta[0].fields, _java(rp, Method.MASTER_CONSUMER_GET_PART_META)[0], ignore=("clientId",)) == {}
        assert meta[1].fields["topicMetaInfoId"] == META_ID
        java_beats = _java(rp, Method.MASTER_CONSUMER_HEARTBEAT_V2)
        java_shapes = [shape(b) for b in java_beats]
        for s in master.requests(Method.MASTER_CONSUMER_HEARTBEAT_V2):
            f = s.fields
            assert f["subRepInfo"]["brokerConfigId"] == MASTER_CONFIG_ID
            assert f["subRepInfo"]["topicMetaInfoId"] in (-2, META_ID)
            if f["subRepInfo"].get("reportSubInfo") and f["subRepInfo"].get("partSubInfo"):
                assert shape(f) in java_shapes
        last = [s for s in master.requests(Method.MASTER_CONSUMER_HEARTBEAT_V2)
                if s.t > broker.requests(Method.BROKER_CONSUMER_REGISTER)[3].t and s.msg.subRepInfo.partSubInfo]
        assert last, "no V2 report after the detach"
        assert list(last[0].msg.subRepInfo.partSubInfo) == ["cap_main#1:1,1:2"]  # as Java, without 0
        assert diff(last[0].fields["subRepInfo"], java_beats[-1]["subRepInfo"], ignore=("lstAssignedTime",)) == {}
        assert master.log[-1].fields == {**_java(rp, Method.MASTER_CONSUMER_CLOSE)[0], "clientId": cid}

        # ---- broker: connect2Partition with/without bootstrap offset, fetch rule, release, close
        regs = [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER) if s.msg.opType == MSG_OPTYPE_REGISTER]
        java_regs = {d["partitionId"]: d for d in _java(rp, Method.BROKER_CONSUMER_REGISTER,
                                                           opType=MSG_OPTYPE_REGISTER)}
        assert [s.msg.partitionId for s in regs] == [0, 1, 2]
        for s in regs:
            assert diff(s.fields, java_regs[s.msg.partitionId], ignore=("clientId",)) == {}
        first: set[int] = set()
        for s in broker.requests(Method.BROKER_CONSUMER_GET_MESSAGE):
            if s.msg.partitionId not in first:
                assert s.msg.lastPackConsumed is False
                first.add(s.msg.partitionId)
            assert shape(s.fields) == shape(_java(rp, Method.BROKER_CONSUMER_GET_MESSAGE)[0])
        for s in broker.requests(Method.BROKER_CONSUMER_COMMIT):
            assert s.msg.lastPackConsumed is True
        unregs = [s for s in broker.requests(Method.BROKER_CONSUMER_REGISTER) if s.msg.opType == MSG_OPTYPE_UNREGISTER]
        java_unregs = {d["partitionId"]: d for d in _java(rp, Method.BROKER_CONSUMER_REGISTER,
                                                             opType=MSG_OPTYPE_UNREGISTER)}
        assert [s.msg.partitionId for s in unregs][:1] == [0]
        assert sorted(s.msg.partitionId for s in unregs[1:]) == [1, 2]
        for s in unregs:
            assert diff(s.fields, java_unregs[s.msg.partitionId], ignore=("clientId",)) == {}  # readStatus 0
        # broker heartbeats after the release list only what we hold (the Java quirk is not copied)
        for s in broker.requests(Method.BROKER_CONSUMER_HEARTBEAT):
            infos = list(s.msg.partitionInfo)
            if s.t > unregs[0].t:
                assert sorted(infos) == [f"1:127.0.0.1:{broker.port}#cap_main:{i}" for i in (1, 2)]
            java_hb = _java(rp, Method.BROKER_CONSUMER_HEARTBEAT)[0]
            assert diff(s.fields, java_hb, ignore=("clientId", "partitionInfo")) == {}

    run(body(), 60)


def test_bound_consumer_follows_a_changed_broker_list() -> None:
    """The master's V2 heartbeat answer brings a new brokerConfigId + brokerConfigList (broker 1 now at
    another address) while the topic meta is unchanged: the real master then omits topicMetaInfoList
    from get-part-meta (ids equal), so the client must re-resolve its partitions itself."""
    rp = BoundReplay()

    async def body() -> None:
        old = await ReplayServer("broker", rp.broker).start()
        new = await ReplayServer("new broker", rp.broker).start()
        moved = {"on": False}

        def master(s: Seen) -> bytes | None:
            if moved["on"] and s.method in (Method.MASTER_CONSUMER_HEARTBEAT_V2, Method.MASTER_CONSUMER_GET_PART_META):
                frame = (rp.v2_beats.next() if s.method == Method.MASTER_CONSUMER_HEARTBEAT_V2
                         else rp.cap.answers(Method.MASTER_CONSUMER_GET_PART_META)[0])

                def edit(m: Any) -> None:
                    new_id = MASTER_CONFIG_ID + 10
                    req = s.msg
                    m.brokerConfigId = new_id
                    del m.brokerConfigList[:]
                    sent_id = (req.subRepInfo.brokerConfigId if s.method == Method.MASTER_CONSUMER_HEARTBEAT_V2
                               else req.brokerConfigId)
                    if sent_id != new_id:  # like the real master: the list only when the ids differ
                        m.brokerConfigList.append(f"1:127.0.0.1:{new.port}")
                    if s.method == Method.MASTER_CONSUMER_GET_PART_META and req.topicMetaInfoId == META_ID:
                        m.ClearField("topicMetaInfoList")

                return answer(frame, s.serial, rp.subs, edit=edit)
            return rp.master(s)

        m = await ReplayServer("master", master).start()
        bc = tubemq.aio.BoundConsumer(m.address, rp.group, ["cap_main"], source_count=1, node_id=0,
                                      consume_from="earliest", local_address=JAVA_IP, heartbeat_period_ms=100,
                                      pool="private", msg_not_found_wait_ms=20)
        rp.bind(bc.client_id, old)
        try:
            await bc.start()
            parts = await bc.partitions("cap_main")
            assert {p.address for p in parts} == {old.address}
            moved["on"] = True
            await Deadline(10).until(lambda: bc.session.broker_checksum == MASTER_CONFIG_ID + 10, "new broker list")
            parts = await bc.partitions("cap_main")
            assert {p.address for p in parts} == {new.address}
            await bc.attach(parts[1])
            assert [s.msg.partitionId for s in new.requests(Method.BROKER_CONSUMER_REGISTER)] == [1]
        finally:
            await bc.close()
        for s in (m, old, new):
            await s.close()

    run(body(), 30)


def test_bound_consumer_partitions_after_the_master_forgot_the_group() -> None:
    """After a master fail-over the new master answers get-part-meta with the real 411 'Not found
    groupName <g> in holder!' (s6b): register again (V2) and ask once more instead of failing."""
    rp = BoundReplay()
    real_411 = next(f for f in load("s6b_errors_master").answers(Method.MASTER_CONSUMER_GET_PART_META)
                    if f.message["errCode"] == 411)
    their_group = real_411.message["errMsg"].split("groupName ")[1].split(" ")[0]
    state = {"forgot": False}

    def master(s: Seen) -> bytes | None:
        if s.method == Method.MASTER_CONSUMER_REGISTER_V2:
            state["forgot"] = False
        elif state["forgot"] and s.method in (Method.MASTER_CONSUMER_GET_PART_META,
                                              Method.MASTER_CONSUMER_HEARTBEAT_V2):
            frame = real_411 if s.method == Method.MASTER_CONSUMER_GET_PART_META else None
            if frame is None:  # the heartbeat gets the same verdict in V2 shape
                return answer(rp.v2_beats.frames[0], s.serial, edit=lambda m: _forget(m, rp.group))
            return answer(frame, s.serial, {their_group: rp.group})
        return rp.master(s)

    async def body() -> None:
        broker = await ReplayServer("broker", rp.broker).start()
        m = await ReplayServer("master", master).start()
        bc = tubemq.aio.BoundConsumer(m.address, rp.group, ["cap_main"], source_count=1, node_id=0,
                                      consume_from="earliest", local_address=JAVA_IP, heartbeat_period_ms=60000,
                                      pool="private")
        rp.bind(bc.client_id, broker)
        try:
            await bc.start()
            # Java's order (s5): the first V2 heartbeat goes out right after register, then get-part-meta;
            # the master forgets the group after that heartbeat
            await Deadline(10).until(lambda: m.requests(Method.MASTER_CONSUMER_HEARTBEAT_V2), "first heartbeat")
            state["forgot"] = True
            parts = await bc.partitions("cap_main")
            assert [p.partition_id for p in parts] == [0, 1, 2]
            assert [s.method for s in m.log].count(Method.MASTER_CONSUMER_REGISTER_V2) == 2
        finally:
            await aclose_all(bc, m, broker)

    run(body(), 30)


def _forget(m: Any, group: str) -> None:
    for f in [f.name for f, _ in m.ListFields()]:
        m.ClearField(f)
    m.errCode, m.errMsg = 411, f"Not found groupName {group} in holder!"
