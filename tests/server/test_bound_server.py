"""Server-side bound consumption on the embedded master (handlers called directly, no sockets).

The rules are the real master's (ConsumeGroupInfo.addConsumer/bookPartitionInfo/validBoundParameters,
PBParameterUtils.checkConsumerOffsetSetInfo/checkConsumerInputInfo, DefaultLoadBalancer's reset
allocation): the first member fixes sessionKey, sourceCount and selectBig; later members must match
(427, 429, 428), bound and unbound members cannot mix (424); nothing is allocated until all
``sourceCount`` members are there; each required partition then goes to the member whose offset won.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tubemq.protocol import master_pb
from tubemq.protocol.constants import EventType
from tubemq.server.master import Master

from ._master import ctx, master_with

TOPIC = "bnd"


@pytest.fixture
def master(tmp_path: Path) -> Master:
    return master_with(tmp_path, {TOPIC: {"partitions": 4}, "other": {"partitions": 1}})


def breg(
    m: Master,
    cid: str,
    parts: str = "",
    *,
    session: str = "s1",
    count: int = 2,
    big: bool | None = None,
    group: str = "g",
    topics: tuple[str, ...] = (TOPIC,),
    **kw: Any,
) -> Any:
    """A register as the Java client sends it with completeSubscribe(sessionKey, sourceCount, ...)."""
    req = master_pb.RegisterRequestC2M(
        clientId=cid, groupName=group, hostName="127.0.0.1", topicList=topics, requireBound=True,
        sessionTime=1700000000000, sessionKey=session, totalCount=count, requiredPartition=parts,
        notAllocated=True, groupFlowCheckId=-2, defFlowCheckId=-2, qryPriorityId=-2, **kw,
    )
    if big is not None:
        req.selectBig = big
    return m.consumer_register(req, ctx(4))


def ureg(m: Master, cid: str, group: str = "g") -> Any:
    req = master_pb.RegisterRequestC2M(
        clientId=cid, groupName=group, hostName="127.0.0.1", topicList=[TOPIC], requireBound=False,
        sessionTime=1700000000000, groupFlowCheckId=-2, defFlowCheckId=-2, qryPriorityId=-2,
    )
    return m.consumer_register(req, ctx(4))


def hb(m: Master, cid: str, event: Any = None, report: list[str] | None = None, group: str = "g") -> Any:
    req = master_pb.HeartRequestC2M(clientId=cid, groupName=group, reportSubscribeInfo=report is not None)
    if report:
        req.subscribeInfo.extend(report)
    if event is not None:
        req.event.CopyFrom(event)
    return m.consumer_heartbeat(req, ctx(5))


def ack(m: Master, cid: str, rsp: Any, kept: list[str] | None = None) -> Any:
    """Report the event of ``rsp`` done, the way the Java client does (status 2 + subscription)."""
    infos = list(rsp.event.subscribeInfo)
    done = master_pb.EventProto(rebalanceId=rsp.event.rebalanceId, opType=rsp.event.opType, status=2,
                                subscribeInfo=infos)
    return hb(m, cid, event=done, report=(kept or []) + infos)


def keys(rsp: Any) -> list[str]:
    """Partition keys ``brokerId:topic:partitionId`` of an event's subscribeInfo strings."""
    out = []
    for s in rsp.event.subscribeInfo:
        _, broker, part = s.split("#")
        topic, pid = part.split(":")
        out.append(f"{broker.split(':')[0]}:{topic}:{pid}")
    return sorted(out)


def close(m: Master, cid: str, group: str = "g") -> None:
    assert m.consumer_close(master_pb.CloseRequestC2M(clientId=cid, groupName=group), ctx(6)).success


def test_parameter_checks_and_texts(master: Master) -> None:
    r = breg(master, "c1", "1:bnd:0")
    assert (r.errCode, r.errMsg) == (
        400, "[Parameter error] unformatted Partition-Offset value : 1:bnd:0 must be aa:bbb:ccc=val1,ddd:eee:ff=val2"
    )
    r = breg(master, "c1", "bnd:0=5")
    assert r.errCode == 400 and "unformatted Partition-Offset value : bnd:0=5" in r.errMsg
    r = breg(master, "c1", "1:other:0=5")
    assert (r.errCode, r.errMsg) == (
        400, "[Parameter error] wrong offset reset for unsubscribed topic: reset item is 1:other:0=5, "
        "request topicList are [bnd]"
    )
    r = breg(master, "c1", "1:bnd:0=x5")
    assert (r.errCode, r.errMsg) == (400, "[Parameter error] required long type value of 1:bnd:0=x5' Offset!")
    r = breg(master, "c1", "1:bnd:0=1_0")  # Long.parseLong refuses what Python's int() takes
    assert r.errCode == 400 and "required long type value" in r.errMsg
    r = breg(master, "c1", session="  ")
    assert (r.errCode, r.errMsg) == (400, "[Parameter error] blank value of sessionKey!")
    r = breg(master, "c1", count=0)
    assert (r.errCode, r.errMsg) == (400, "[Parameter error] totalSourceCount must over zero!")
    assert master.groups == {}  # nothing was registered by the refused calls
    assert breg(master, "c1", "1:bnd:0=0,1:bnd:1=28").success


def test_members_must_agree_427_428_429(master: Master) -> None:
    first = breg(master, "c1", "1:bnd:0=28", session="run-1", count=2, big=True)
    assert first.success and first.notAllocated
    r = breg(master, "c2", "1:bnd:0=28", session="run-2", count=2, big=True)
    assert (r.errCode, r.errMsg) == (
        427, "[Inconsistency subscribe] c2's sessionKey is inconsistency with other consumers in the group, "
        "required is run-1, request is run-2"
    )
    r = breg(master, "c2", "1:bnd:0=28", session="run-1", count=2, big=False)
    assert (r.errCode, r.errMsg) == (
        428, "[Inconsistency subscribe] c2's isSelectBig is inconsistency with other consumers in the group, "
        "required is true, request is false"
    )
    r = breg(master, "c2", "1:bnd:0=28", session="run-1", count=3, big=True)
    assert (r.errCode, r.errMsg) == (
        429, "[Inconsistency subscribe] c2's sourceCount is inconsistency with other consumers in the group, "
        "required is 2, request is 3"
    )
    # selectBig absent on the wire reads as true (TMaster: !hasSelectBig() || getSelectBig())
    assert breg(master, "c2", "1:bnd:0=28", session="run-1", count=2).success
    assert len(master.groups["g"].consumers) == 2


def test_bound_and_unbound_cannot_mix_424(master: Master) -> None:
    assert ureg(master, "u1").success
    r = breg(master, "b1", "1:bnd:0=0")
    assert (r.errCode, r.errMsg) == (
        424, "[Inconsistency subscribe] b1 using bound subscribe is inconsistency with other consumers "
        "using unbound subscribe in the group"
    )
    assert breg(master, "b1", "1:bnd:0=0", group="g2").success
    r = ureg(master, "u2", group="g2")
    assert (r.errCode, r.errMsg) == (
        424, "[Inconsistency subscribe] u2 using unbound subscribe is inconsistency with other consumers "
        "using bound subscribe in the group"
    )


@pytest.mark.parametrize(
    ("big", "c1_offset", "c2_offset", "winner", "offset"),
    [
        (True, 280, 560, "c2", 560),   # bigger wins
        (True, 560, 280, "c1", 560),
        (True, 280, 280, "c2", 280),   # tie: the newcomer (>=)
        (False, 280, 560, "c1", 280),  # smaller wins
        (False, 560, 280, "c2", 280),
        (False, 280, 280, "c1", 280),  # tie: the first stays (<)
    ],
)
def test_conflicting_offsets_select_big(
    master: Master, big: bool, c1_offset: int, c2_offset: int, winner: str, offset: int
) -> None:
    breg(master, "c1", f"1:bnd:0={c1_offset},1:bnd:1=0", big=big)
    breg(master, "c2", f"1:bnd:0={c2_offset}", big=big)
    g = master.groups["g"]
    assert g.bound_owner == {"1:bnd:0": winner, "1:bnd:1": "c1"}
    assert g.bound_offsets == {"1:bnd:0": offset, "1:bnd:1": 0}


def test_first_members_offsets_win_within_a_session(master: Master) -> None:
    """Identical maps (the usual case: every member passes the same partOffsetMap): the session's
    first booking stays for selectBig=false; a re-register of a member books nothing new."""
    breg(master, "c1", "1:bnd:0=28,1:bnd:1=56", big=False)
    breg(master, "c1", "1:bnd:0=0,1:bnd:1=0", big=False)  # re-register: updates the member only
    breg(master, "c2", "1:bnd:0=28,1:bnd:1=56", big=False)
    g = master.groups["g"]
    assert g.bound_owner == {"1:bnd:0": "c1", "1:bnd:1": "c1"}
    assert g.bound_offsets == {"1:bnd:0": 28, "1:bnd:1": 56}
    assert g.consumers["c1"].required_partitions == {"1:bnd:0": 28, "1:bnd:1": 56}


def test_allocation_waits_for_all_members_then_assigns_the_winners(master: Master) -> None:
    breg(master, "c1", "1:bnd:0=28,1:bnd:1=56")
    master.balance_round()
    assert not hb(master, "c1").HasField("event")  # 1 of 2 members: nothing allocated, not even normally
    breg(master, "c2", "1:bnd:2=84")
    rid = master.balance_round()
    r1, r2 = hb(master, "c1"), hb(master, "c2")
    assert r1.event.rebalanceId == rid and r1.event.opType == EventType.ONLY_CONNECT
    assert keys(r1) == ["1:bnd:0", "1:bnd:1"] and keys(r2) == ["1:bnd:2"]
    assert r1.notAllocated and r2.notAllocated
    # partition 3 was named by nobody: held back until the group is allocated
    master.balance_round()
    assert ack(master, "c1", r1).notAllocated is False  # the first processed event allocates the group
    ack(master, "c2", r2)
    rid3 = master.balance_round()
    extra = [hb(master, c) for c in ("c1", "c2")]
    got = [(c, keys(r)) for c, r in zip(("c1", "c2"), extra, strict=True) if r.HasField("event")]
    assert len(got) == 1 and got[0][1] == ["1:bnd:3"]
    assert [r.event.rebalanceId for r in extra if r.HasField("event")] == [rid3]


def test_new_session_after_all_members_left_resets_again(master: Master) -> None:
    breg(master, "c1", "1:bnd:0=28", session="run-1", count=1)
    master.balance_round()
    r = hb(master, "c1")
    assert keys(r) == ["1:bnd:0"]
    ack(master, "c1", r)
    assert not master.groups["g"].not_allocated
    # a member of the next run while the old one is alive: refused, the old run is not over
    assert breg(master, "c9", "1:bnd:0=0", session="run-2", count=1).errCode == 427
    close(master, "c1")
    assert "g" not in master.groups
    r = breg(master, "c2", "1:bnd:0=0,1:bnd:1=0", session="run-2", count=1)
    assert r.success and r.notAllocated
    g = master.groups["g"]
    assert (g.session_key, g.bound_offsets) == ("run-2", {"1:bnd:0": 0, "1:bnd:1": 0})
    master.balance_round()
    assert keys(hb(master, "c2")) == ["1:bnd:0", "1:bnd:1"]


def test_member_leaving_before_allocation_gives_up_its_partitions(master: Master) -> None:
    breg(master, "c1", "1:bnd:0=28", count=2)
    breg(master, "c2", "1:bnd:1=56", count=2)
    close(master, "c2")
    g = master.groups["g"]
    assert g.bound_owner == {"1:bnd:0": "c1"} and not g.full_size
    master.balance_round()
    assert not hb(master, "c1").HasField("event")


def test_unknown_required_partitions_do_not_hold_the_group(master: Master) -> None:
    """Required keys that match no partition: two reset attempts, then the normal balance."""
    breg(master, "c1", "9:bnd:0=28", count=1)
    master.balance_round()
    assert not hb(master, "c1").HasField("event")
    master.balance_round()
    r = hb(master, "c1")
    assert r.event.opType == EventType.ONLY_CONNECT and len(keys(r)) == 4


def test_bound_without_offsets_balances_normally(master: Master) -> None:
    breg(master, "c1", "", count=2)
    master.balance_round()
    assert len(keys(hb(master, "c1"))) == 4  # nothing to reset: the normal balance does not wait


def test_group_detail_shows_the_bound_session(master: Master) -> None:
    """admin_query_consume_group_detail fields of a bound group (WebOtherInfoHandler)."""
    breg(master, "c1", "1:bnd:0=28,1:bnd:1=56", session="run-7", count=2, big=False)
    master.balance_round()
    d = master.group_detail("g")
    assert d["isBandConsume"] == "bound"
    assert (d["isNotAllocate"], d["sessionKey"], d["isSelectBig"], d["reqSourceCount"], d["curSourceCount"]) == (
        True, "run-7", False, 2, 1)
    assert d["rebalanceCheckTime"] == 1  # one round found the group short of members
    assert d["data"][0]["initReSetPartCount"] == 2
    assert d["data"][0]["initReSetPartInfo"] == [
        {"partitionKey": "1:bnd:0", "Offset": 28}, {"partitionKey": "1:bnd:1", "Offset": 56}]
