"""Master handlers called directly (no sockets): answers shaped like the captured real master."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tubemq.protocol import master_pb
from tubemq.protocol.constants import EXC_STANDBY, EventType
from tubemq.server.auth import auth_signature
from tubemq.server.config import ServerConfig
from tubemq.server.master import Master
from tubemq.server.meta import BrokerEntry, MetaStore
from tubemq.server.rpc import RpcException

from ._master import ctx, master_with


@pytest.fixture
def master(tmp_path: Path) -> Master:
    return master_with(tmp_path, {"cap_main": {"partitions": 3}, "cap_store2": {"partitions": 2, "stores": 2},
                                  "cap_big": {"partitions": 1, "max_msg_size": 2 * 1024 * 1024},
                                  "cap_rebal": {"partitions": 3}})


def preg(m: Master, cid: str = "p1", **kw: Any) -> master_pb.RegisterResponseM2P:
    req = master_pb.RegisterRequestP2M(clientId=cid, brokerCheckSum=-1, hostName="127.0.0.1", **kw)
    return m.producer_register(req, ctx(1))


def phb(m: Master, cid: str = "p1", topics: list[str] | None = None, checksum: int = -1, **kw: Any) -> Any:
    req = master_pb.HeartRequestP2M(
        clientId=cid, brokerCheckSum=checksum, hostName="127.0.0.1", topicList=topics or [], **kw
    )
    return m.producer_heartbeat(req, ctx(2))


def creg(m: Master, cid: str, group: str = "g", topics: tuple[str, ...] = ("cap_rebal",), **kw: Any) -> Any:
    req = master_pb.RegisterRequestC2M(
        clientId=cid,
        groupName=group,
        hostName="127.0.0.1",
        topicList=topics,
        requireBound=False,
        groupFlowCheckId=-2,
        defFlowCheckId=-2,
        qryPriorityId=-2,
        **kw,
    )
    return m.consumer_register(req, ctx(4))


def chb(m: Master, cid: str, group: str = "g", event: Any = None, report: list[str] | None = None) -> Any:
    req = master_pb.HeartRequestC2M(
        clientId=cid,
        groupName=group,
        reportSubscribeInfo=report is not None,
        defFlowCheckId=-2,
        groupFlowCheckId=-2,
        qryPriorityId=-2,
    )
    if report:
        req.subscribeInfo.extend(report)
    if event is not None:
        req.event.CopyFrom(event)
    return m.consumer_heartbeat(req, ctx(5))


def test_producer_register_shape(master: Master) -> None:
    r = preg(master, appdConfig=master_pb.ApprovedClientConfig(configId=-2))
    assert (r.success, r.errCode, r.errMsg) == (True, 200, "OK!")
    assert r.brokerCheckSum == master.meta.broker_checksum
    assert list(r.brokerInfos) == ["1:127.0.0.1: "]
    assert r.authorizedInfo.visitAuthorizedToken == master.tokens.current
    assert not r.authorizedInfo.HasField("authAuthorizedToken")
    assert r.appdConfig.configId == -2 and not r.appdConfig.HasField("maxMsgSize")
    r2 = preg(master, "p2", appdConfig=master_pb.ApprovedClientConfig(configId=999))
    assert r2.appdConfig.maxMsgSize == 1048576


def test_producer_register_validation_order_and_texts(master: Master) -> None:
    r = preg(master, " ", topicList=["__offset_history__"])
    assert (r.success, r.errCode, r.errMsg, r.brokerCheckSum) == (
        False,
        400,
        "Request miss necessary clientId data!",
        -1,
    )
    r = preg(master, "p" * 1025)
    assert r.errMsg == "clientId's length over max value, allowed max length is 1024"
    r = preg(master, topicList=["__offset_history__"])
    assert r.errMsg == "System Topic __offset_history__ does not allow client produce data!"
    req = master_pb.RegisterRequestP2M(clientId="x", brokerCheckSum=-1, hostName="  ")
    assert master.producer_register(req, ctx()).errMsg == "Request miss necessary hostName data!"


def test_producer_heartbeat_topic_infos_and_checksum(master: Master) -> None:
    r = phb(master)
    assert (r.success, r.errCode, r.brokerCheckSum) == (False, 411, -1)
    assert r.errMsg == "Invalid node id:p1, you have to append node first!"
    preg(master)
    r = phb(master, topics=["cap_main", "cap_store2", "cap_big", "nope", "bad#topic"])
    assert r.success and list(r.brokerInfos) == ["1:127.0.0.1: "]
    assert sorted(r.topicInfos) == sorted(["cap_main#1:3:1#", "cap_store2#1:2:2#", "cap_big#1:1:1#2097152"])
    assert r.appdConfig.configId == -2 and r.appdConfig.HasField("maxMsgSize")  # absent appdConfig = id 0
    r = phb(
        master,
        topics=["cap_main"],
        checksum=master.meta.broker_checksum,
        appdConfig=master_pb.ApprovedClientConfig(configId=-2),
    )
    assert list(r.brokerInfos) == [] and list(r.topicInfos) == ["cap_main#1:3:1#"]
    assert not r.appdConfig.HasField("maxMsgSize")


def test_offline_broker_and_closed_topic_publish_nothing(master: Master) -> None:
    preg(master)
    master.meta.update_topic("cap_main", accept_publish=False)
    assert list(phb(master, topics=["cap_main", "cap_rebal"]).topicInfos) == ["cap_rebal#1:3:1#"]
    master.set_broker_online(1, False)
    assert list(phb(master, topics=["cap_rebal"]).topicInfos) == []
    master.set_broker_online(1, True)
    assert list(phb(master, topics=["cap_rebal"]).topicInfos) == ["cap_rebal#1:3:1#"]


def test_tls_broker_list(master: Master) -> None:
    r = master.producer_register(
        master_pb.RegisterRequestP2M(clientId="t", brokerCheckSum=-1, hostName="h"), ctx(tls=True)
    )
    assert list(r.brokerInfos) == ["1:127.0.0.1: "]  # 8124 is the default TLS port
    master.meta.set_broker(BrokerEntry(1, "127.0.0.1", 9000, 9001))
    assert master.broker_infos(False) == ["1:127.0.0.1:9000"]
    assert master.broker_infos(True) == ["1:127.0.0.1:9001"]


def test_producer_close_unknown_is_ok(master: Master) -> None:
    r = master.producer_close(master_pb.CloseRequestP2M(clientId="nobody"), ctx(3))
    assert (r.success, r.errCode, r.errMsg) == (True, 200, "OK!")


def test_consumer_register_errors(master: Master) -> None:
    assert creg(master, "c", topics=("no_such",)).errMsg == "Requested topic [[no_such]] not deployed!"
    assert creg(master, "c", topics=("no_such",)).errCode == 431
    assert creg(master, "c", topics=()).errMsg == "Request miss necessary subscribed topicList data!"
    assert creg(master, "c", topics=(" ",)).errMsg == "Request subscribed topicList data must not Blank!"
    assert creg(master, "c", group="  ").errMsg == "Request miss necessary groupName data!"
    r = creg(master, "c", topics=("cap_rebal",), topicCondition=["cap_main#typeA"])
    assert (r.errCode, r.errMsg) == (400, "Filter's Topic not subscribed :[cap_main]")
    ok = creg(master, "c1")
    assert ok.success and ok.notAllocated and ok.defFlowControlInfo == " " and ok.ssdStoreId == -2
    r = creg(master, "c2", topics=("cap_main",))
    assert r.errCode == 425
    assert r.errMsg == (
        "[Inconsistency subscribe] c2 subscribed topics [cap_main] is inconsistency with other "
        "consumers in the group, existedTopics: [cap_rebal]"
    )
    r = creg(master, "c2", topicCondition=["cap_rebal#typeA"])
    assert r.errCode == 426
    assert r.errMsg == (
        "[Inconsistency subscribe] c2 subscribe with filter condition {cap_rebal=[typeA]} is "
        "inconsistency with other consumers in the group: topic without conditions"
    )
    v2 = master_pb.RegisterRequestC2MV2(
        clientId="c2", groupName="g", hostName="h", sourceCount=-1, nodeId=0, topicList=["cap_rebal"]
    )
    r = master.consumer_register_v2(v2, ctx(20))
    assert r.errCode == 424 and not r.HasField("opsTaskInfo")
    assert r.errMsg.endswith(
        "using client-rebalance subscribe is inconsistency with other consumers using "
        "unbound subscribe in the group"
    )


def test_consumer_register_without_flow_ids_has_no_flow_fields(master: Master) -> None:
    req = master_pb.RegisterRequestC2M(clientId="c", groupName="g", hostName="h", topicList=["cap_rebal"])
    r = master.consumer_register(req, ctx(4))
    assert r.success and not r.HasField("defFlowCheckId") and not r.HasField("qryPriorityId")


def test_consumer_heartbeat_errors(master: Master) -> None:
    r = chb(master, "c1")
    assert (r.success, r.errCode, r.errMsg) == (False, 411, "Not found groupName g in holder!")
    creg(master, "c1")
    r = chb(master, "c2")
    assert r.errMsg == "Update consumer node exception:Invalid node id:c2@g, you have to append node first!"


def test_rebalance_flow_like_capture_s3(master: Master) -> None:
    creg(master, "A")
    rid = master.balance_round()
    r = chb(master, "A")
    assert r.event.rebalanceId == rid and r.event.opType == EventType.ONLY_CONNECT
    assert not r.event.HasField("status")
    infos = list(r.event.subscribeInfo)
    assert sorted(infos) == [f"A@g#1:127.0.0.1:8123#cap_rebal:{i}" for i in range(3)]
    assert r.notAllocated
    assert not chb(master, "A").HasField("event")  # delivered once
    done = master_pb.EventProto(rebalanceId=rid, opType=10, status=2, subscribeInfo=infos)
    r = chb(master, "A", event=done, report=infos)
    assert not r.notAllocated and not r.HasField("event")
    creg(master, "B")
    rid2 = master.balance_round()
    assert rid2 == rid + 1
    ra = chb(master, "A")
    assert ra.event.opType == EventType.ONLY_DISCONNECT and ra.event.rebalanceId == rid2
    moved = list(ra.event.subscribeInfo)
    assert len(moved) == 1
    assert not chb(master, "B").HasField("event")  # barrier: A has not reported yet
    master.balance_round()  # skipped: unfinished events
    kept = [s for s in infos if s not in moved]
    chb(
        master,
        "A",
        event=master_pb.EventProto(rebalanceId=rid2, opType=20, status=2, subscribeInfo=moved),
        report=kept,
    )
    rb = chb(master, "B")
    assert rb.event.opType == EventType.ONLY_CONNECT and rb.event.rebalanceId == rid2
    assert [s.split("#", 1)[1] for s in rb.event.subscribeInfo] == [s.split("#", 1)[1] for s in moved]
    detail = master.group_detail("g")
    assert detail["count"] == 2 and detail["rebInfo"]["isRebalanced"]
    assert [d["parCount"] for d in detail["data"]] == [2, 0]  # B has not reported yet
    # A leaves: the next round gives B everything
    master.consumer_close(master_pb.CloseRequestC2M(clientId="A", groupName="g"), ctx(6))
    chb(
        master,
        "B",
        event=master_pb.EventProto(rebalanceId=rid2, opType=10, status=2),
        report=[s.replace("A@", "B@") for s in moved],
    )
    rid3 = master.balance_round()
    rb = chb(master, "B")
    assert rb.event.rebalanceId == rid3 and rb.event.opType == EventType.ONLY_CONNECT
    assert len(rb.event.subscribeInfo) == 2


def test_group_dropped_when_last_member_leaves(master: Master) -> None:
    creg(master, "c1")
    master.consumer_close(master_pb.CloseRequestC2M(clientId="c1", groupName="g"), ctx(6))
    assert chb(master, "c1").errMsg == "Not found groupName g in holder!"
    assert master.group_detail("g") == {
        "result": True,
        "errCode": 0,
        "errMsg": "OK",
        "count": 0,
        "topicSet": [],
        "consumeGroup": "g",
        "re-rebalance": {},
        "isBandConsume": "unbound",
        "rebInfo": {"isRebalanced": False},
        "filterConds": {},
        "data": [],
    }


def test_expiry_releases_consumers_and_producers(master: Master) -> None:
    preg(master)
    creg(master, "c1")
    master.expire(time.monotonic() + 31)
    assert phb(master).errCode == 411
    assert chb(master, "c1").errCode == 411


def test_standby_after_parameter_checks(master: Master) -> None:
    master.standby = True
    r = preg(master, " ")
    assert r.errCode == 400  # parameter checks come first
    with pytest.raises(RpcException) as ei:
        preg(master)
    assert ei.value.exception_name == EXC_STANDBY
    assert ei.value.message == "127.0.0.1:8715 is not master now. the connecting client id is p1"
    with pytest.raises(RpcException):
        creg(master, "c1")
    assert creg(master, "c1", topics=("nope",)).errCode == 431  # topic check precedes standby
    master.standby = False
    assert preg(master).success


def test_client_balance_flow_like_capture_s5(master: Master) -> None:
    sub = master_pb.ClientSubRepInfo(brokerConfigId=-2, topicMetaInfoId=-2, reportSubInfo=False)
    req = master_pb.RegisterRequestC2MV2(
        clientId="cb",
        groupName="g5",
        hostName="h",
        sourceCount=1,
        nodeId=0,
        topicList=["cap_main"],
        subRepInfo=sub,
    )
    r = master.consumer_register_v2(req, ctx(20))
    assert (r.errCode, r.errMsg) == (200, "OK!")
    assert r.brokerConfigId == master.meta.broker_checksum and list(r.brokerConfigList) == ["1:127.0.0.1: "]
    assert r.HasField("opsTaskInfo") and r.opsTaskInfo.ByteSize() == 0
    hb = master_pb.HeartRequestC2MV2(
        clientId="cb",
        groupName="g5",
        subRepInfo=master_pb.ClientSubRepInfo(
            brokerConfigId=master.meta.broker_checksum, topicMetaInfoId=-2, reportSubInfo=False
        ),
    )
    r = master.consumer_heartbeat_v2(hb, ctx(21))
    assert r.errCode == 200 and list(r.brokerConfigList) == [] and not r.HasField("topicMetaInfoId")
    meta = master_pb.GetPartMetaRequestC2M(
        clientId="cb", groupName="g5", brokerConfigId=master.meta.broker_checksum, topicMetaInfoId=-2
    )
    r = master.consumer_get_part_meta(meta, ctx(22))
    assert r.errCode == 200 and list(r.topicMetaInfoList) == ["cap_main#1:1:3:1"]
    assert r.topicMetaInfoId > 1_600_000_000_000
    meta.topicMetaInfoId = r.topicMetaInfoId
    assert list(master.consumer_get_part_meta(meta, ctx(22)).topicMetaInfoList) == []
    bad = master_pb.RegisterRequestC2MV2(
        clientId="x", groupName="g6", hostName="h", sourceCount=2, nodeId=5, topicList=["cap_main"]
    )
    r = master.consumer_register_v2(bad, ctx(20))
    assert (r.errCode, r.errMsg) == (400, "Request nodeId value must be between in [0, sourceCount-1]!")
    r = master.consumer_get_part_meta(
        master_pb.GetPartMetaRequestC2M(clientId="x", groupName="nog", brokerConfigId=-2, topicMetaInfoId=-2),
        ctx(22),
    )
    assert (r.errCode, r.errMsg) == (411, "Not found groupName nog in holder!")
    r = master.consumer_get_part_meta(
        master_pb.GetPartMetaRequestC2M(clientId="x", groupName="g5", brokerConfigId=-2, topicMetaInfoId=-2),
        ctx(22),
    )
    assert (r.errCode, r.errMsg) == (411, "Not found client x in group(g5)")
    # partSubInfo report shows in the admin view
    hb.subRepInfo.reportSubInfo = True
    hb.subRepInfo.partSubInfo.append("cap_main#1:1,1:2")
    master.consumer_heartbeat_v2(hb, ctx(21))
    d = master.group_detail("g5")
    assert d["isBandConsume"] == "client-rebalance" and d["data"][0]["parCount"] == 2
    assert d["data"][0]["sourceCount"] == 1 and d["metaDetails"] == ["cap_main#1:1:3:1"]
    # duplicate nodeId and sourceCount mismatch
    dup = master_pb.RegisterRequestC2MV2(
        clientId="cb2", groupName="g5", hostName="h", sourceCount=1, nodeId=0, topicList=["cap_main"]
    )
    assert master.consumer_register_v2(dup, ctx(20)).errCode == 430
    dup.sourceCount = 2
    assert master.consumer_register_v2(dup, ctx(20)).errCode == 429


def test_auth_enabled(tmp_path: Path) -> None:
    cfg = ServerConfig(data_dir=tmp_path, auth_enabled=True)
    meta = MetaStore(tmp_path)
    meta.set_broker(BrokerEntry(1, "127.0.0.1", 8123))
    m = Master(cfg, meta)
    r = preg(m)
    assert (r.success, r.errCode, r.errMsg) == (False, 415, "Illegal value: authInfo.userName is Blank!")
    now = int(time.time() * 1000)
    info = master_pb.AuthenticateInfo(
        userName="u",
        timestamp=now - 60_000,
        nonce=1,
        othParams="",
        signature=auth_signature("u", "pw", now - 60_000, 1),
    )
    r = preg(m, authInfo=master_pb.MasterCertificateInfo(authInfo=info))
    assert (r.errCode, r.errMsg) == (
        415,
        "Illegal value: timestamp out of effective period in authenticateToken!",
    )
    info.timestamp = now
    info.signature = auth_signature("u", "pw", now, 1)
    r = preg(m, authInfo=master_pb.MasterCertificateInfo(authInfo=info))
    assert r.success and r.authorizedInfo.authAuthorizedToken
    token = r.authorizedInfo.authAuthorizedToken
    r = phb(m, authInfo=master_pb.MasterCertificateInfo(authorizedToken=token))
    assert r.success
    assert re.fullmatch(r"\d+", str(r.authorizedInfo.visitAuthorizedToken))


def test_new_group_balanced_at_once(tmp_path: Path) -> None:
    """first_balance_delay_ms=0 (default): the register balances a NEW group, the first heartbeat answer
    carries its CONNECT event exactly as a real periodic round's would (captures s2/s3: no event on the
    register answer, ONLY_CONNECT with explicit-port subscribeInfo on the heartbeat answer)."""
    meta = MetaStore(tmp_path)
    meta.set_broker(BrokerEntry(1, "127.0.0.1", 8123, 8124))
    meta.create_topic("cap_rebal", 3)
    m = Master(ServerConfig(data_dir=tmp_path), meta)
    r = creg(m, "A")
    assert r.success
    hb = chb(m, "A")
    assert hb.event.opType == EventType.ONLY_CONNECT and hb.event.rebalanceId == 1
    assert sorted(hb.event.subscribeInfo) == [f"A@g#1:127.0.0.1:8123#cap_rebal:{i}" for i in range(3)]
    assert not chb(m, "A").HasField("event")  # delivered once
    # a second member joins an existing group: it waits for the periodic round, like the real master
    creg(m, "B")
    assert not chb(m, "B").HasField("event")
    assert m.balance_round() == 2


def test_first_balance_real_master_timing(tmp_path: Path) -> None:
    meta = MetaStore(tmp_path)
    meta.set_broker(BrokerEntry(1, "127.0.0.1", 8123, 8124))
    meta.create_topic("cap_rebal", 3)
    m = Master(ServerConfig(data_dir=tmp_path, first_balance_delay_ms=-1), meta)
    creg(m, "A")
    assert not chb(m, "A").HasField("event")
    rid = m.balance_round()
    assert chb(m, "A").event.rebalanceId == rid == 1
