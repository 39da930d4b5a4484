"""The master over real TCP with raw frames (codec + protobuf): rebalancing, standby, auth.

The consumers here are minimal raw-frame clients that follow the Java client's protocol: heartbeat the
master, register/unregister the partitions of each event at the broker, report the event back (status
2 + full subscription) in the next heartbeat, fetch with ``lastPackConsumed`` true (which commits the
previous batch) and unregister with readStatus 0. The checks are about the server: no partition is ever
owned by two members, every event is delivered once, the group rebalances on join and leave, and every
produced message is consumed exactly once.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import wait_for
from _support.wire import response_class
from google.protobuf.message import Message

from tubemq import codec
from tubemq.protocol import broker_pb, master_pb
from tubemq.protocol.constants import EXC_STANDBY, EventType
from tubemq.server import EmbeddedCluster
from tubemq.server.auth import MSG_TIMESTAMP, MSG_USER_BLANK, auth_signature

FAST = {
    "balance_period_ms": 100,
    "consumer_heartbeat_timeout_ms": 3000,
    "producer_heartbeat_timeout_ms": 3000,
    "consumer_reg_timeout_ms": 3000,
}
DISCONNECTS = (EventType.DISCONNECT, EventType.ONLY_DISCONNECT)


class RpcError(Exception):
    def __init__(self, status: int, name: str, message: str) -> None:
        super().__init__(f"{status} {name}: {message}")
        self.status, self.name, self.message = status, name, message


class Rpc:
    """One blocking RPC connection (one request at a time, 10 s bound on every answer)."""

    _serials = itertools.count(1)

    def __init__(self, address: str, service_type: int) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.service_type = service_type
        self.decoder = codec.FrameDecoder()

    def call(self, method: int, req: Message, *, protocol_ver: int = 3) -> Any:
        serial = next(self._serials)
        self.sock.sendall(
            codec.encode_request(
                serial,
                self.service_type,
                method,
                req.SerializeToString(),
                timeout_ms=10000,
                protocol_ver=protocol_ver,
            )
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            for got_serial, payload in self.decoder.feed(data):
                if got_serial != serial:
                    continue
                resp = codec.decode_response(payload)
                if resp.status != 0:
                    raise RpcError(resp.status, resp.exception_name, resp.message)
                return response_class(method).FromString(resp.body)
        raise TimeoutError(f"no answer to method {method}")

    def close(self) -> None:
        self.sock.close()


class RawConsumer:
    """Server-balance consumer speaking raw frames, one step at a time."""

    def __init__(
        self,
        cluster: EmbeddedCluster,
        cid: str,
        group: str,
        topic: str,
        owners: dict[str, str],
        consumed: list[bytes],
    ) -> None:
        self.cid, self.group, self.topic = cid, group, topic
        self.master = Rpc(cluster.master_address, 1)
        self.broker = Rpc(cluster.broker_address, 2)
        self.owned: dict[str, codec.Partition] = {}
        self.owners = owners  # partition key -> consumer id, shared: detects double ownership
        self.consumed = consumed
        self.done: master_pb.EventProto | None = None
        self.events: list[tuple[int, int, tuple[str, ...]]] = []
        r = self.master.call(
            4,
            master_pb.RegisterRequestC2M(
                clientId=cid,
                groupName=group,
                hostName="127.0.0.1",
                topicList=[topic],
                requireBound=False,
                groupFlowCheckId=-2,
                defFlowCheckId=-2,
                qryPriorityId=-2,
            ),
        )
        assert r.success, r.errMsg

    def _broker_register(self, p: codec.Partition, op_type: int) -> Any:
        """Register (31) or unregister (32) ``p`` at the broker."""
        return self.broker.call(
            15,
            broker_pb.RegisterRequestC2B(
                opType=op_type,
                clientId=self.cid,
                groupName=self.group,
                topicName=p.topic,
                partitionId=p.partition_id,
                readStatus=0,
            ),
        )

    def _unregister(self, p: codec.Partition) -> None:
        r = self._broker_register(p, 32)
        assert r.success, r.errMsg
        del self.owned[p.key]
        assert self.owners.pop(p.key) == self.cid

    def _register(self, p: codec.Partition) -> None:
        assert p.key not in self.owners, (
            f"{p.key} handed to {self.cid} while {self.owners.get(p.key)} owns it"
        )
        r = self._broker_register(p, 31)
        assert r.success, f"{self.cid} register {p.key}: {r.errCode} {r.errMsg}"
        self.owned[p.key] = p
        self.owners[p.key] = self.cid

    def heartbeat(self) -> None:
        req = master_pb.HeartRequestC2M(
            clientId=self.cid,
            groupName=self.group,
            reportSubscribeInfo=False,
            defFlowCheckId=-2,
            groupFlowCheckId=-2,
            qryPriorityId=-2,
        )
        if self.done is not None:
            req.event.CopyFrom(self.done)
            req.reportSubscribeInfo = True
            req.subscribeInfo.extend(f"{self.cid}@{self.group}#{p}" for p in self.owned.values())
            self.done = None
        r = self.master.call(5, req)
        assert r.success, r.errMsg
        if not r.HasField("event"):
            return
        ev = r.event
        assert not ev.HasField("status"), "events from the master carry no status"
        assert ev.rebalanceId > 0
        infos = [codec.parse_subscribe_info(s) for s in ev.subscribeInfo]
        assert all(i.consumer_id == self.cid and i.group == self.group for i in infos)
        self.events.append((ev.rebalanceId, ev.opType, tuple(sorted(i.partition.key for i in infos))))
        for info in infos:
            if ev.opType in DISCONNECTS:
                if info.partition.key in self.owned:
                    self._unregister(info.partition)
            else:
                self._register(info.partition)
        self.done = master_pb.EventProto(
            rebalanceId=ev.rebalanceId, opType=ev.opType, status=2, subscribeInfo=ev.subscribeInfo
        )

    def fetch(self) -> None:
        for p in list(self.owned.values()):
            r = self.broker.call(
                17,
                broker_pb.GetMessageRequestC2B(
                    clientId=self.cid,
                    partitionId=p.partition_id,
                    groupName=self.group,
                    topicName=p.topic,
                    lastPackConsumed=True,
                    manualCommitOffset=False,
                    escFlowCtrl=False,
                ),
            )
            if r.success:
                result = codec.decode_get_message_response(r.SerializeToString(), p.topic, p.partition_id)
                self.consumed.extend(m.data for m in result.messages)
            else:
                assert r.errCode == 404, f"{self.cid} fetch {p.key}: {r.errCode} {r.errMsg}"

    def step(self) -> None:
        self.heartbeat()
        self.fetch()

    def close(self) -> None:
        for p in list(self.owned.values()):
            self.fetch()
            self._unregister(p)
        r = self.master.call(6, master_pb.CloseRequestC2M(clientId=self.cid, groupName=self.group))
        assert r.success
        self.master.close()
        self.broker.close()


def produce(cluster: EmbeddedCluster, topic: str, partitions: int, count: int, start: int = 0) -> list[bytes]:
    rpc = Rpc(cluster.broker_address, 3)
    sent = []
    try:
        for i in range(start, start + count):
            data = f"m-{i}".encode()
            r = rpc.call(
                13,
                broker_pb.SendMessageRequestP2B(
                    clientId="raw-producer",
                    topicName=topic,
                    partitionId=i % partitions,
                    data=data,
                    flag=0,
                    checkSum=-1,
                    sentAddr=2130706433,
                ),
            )
            assert r.success, r.errMsg
            sent.append(data)
    finally:
        rpc.close()
    return sent


@pytest.fixture
def fast_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(data_dir=tmp_path / "data", **FAST) as c:
        yield c


@pytest.mark.parametrize("partitions,members", [(3, 2), (3, 3), (7, 2), (7, 3)])
def test_group_rebalances_without_double_ownership(
    fast_cluster: EmbeddedCluster, partitions: int, members: int
) -> None:
    topic = f"reb_{partitions}_{members}"
    fast_cluster.create_topic(topic, partitions)
    sent = produce(fast_cluster, topic, partitions, 5 * partitions)
    owners: dict[str, str] = {}
    consumed: list[bytes] = []
    group = f"g_{partitions}_{members}"
    consumers: list[RawConsumer] = []

    def step_all() -> None:
        for c in consumers:
            c.step()

    def balanced(n: int) -> bool:
        counts = [len(c.owned) for c in consumers]
        return (
            len(owners) == partitions
            and len(counts) == n
            and max(counts) - min(counts) <= 1
            and all(c.done is None for c in consumers)
        )

    # members join one by one; after each join the group settles to a balanced split
    for i in range(members):
        consumers.append(RawConsumer(fast_cluster, f"{group}_c{i}", group, topic, owners, consumed))
        wait_for(lambda n=i + 1: balanced(n), step=step_all)
        assert all(len(c.owned) >= partitions // (i + 1) for c in consumers)
    # more data while balanced, then the first member leaves: its partitions move to the others
    sent += produce(fast_cluster, topic, partitions, 3 * partitions, start=len(sent))
    leaving = consumers.pop(0)
    leaving.close()
    wait_for(lambda: balanced(members - 1), step=step_all)
    sent += produce(fast_cluster, topic, partitions, 2 * partitions, start=len(sent))
    wait_for(lambda: sorted(consumed) == sorted(sent), step=step_all)
    assert len(consumed) == len(set(consumed)), "a message was delivered twice"
    # each event was handed out once: no (id, opType, partitions) repeats for one consumer
    for c in [leaving, *consumers]:
        assert len(c.events) == len(set(c.events)), c.events
    for c in consumers:
        c.close()


def test_barrier_connect_waits_for_disconnect_report(fast_cluster: EmbeddedCluster) -> None:
    """Capture s3 over the wire: B's connect arrives only after A reported its disconnect."""
    fast_cluster.create_topic("barrier_t", 3)
    owners: dict[str, str] = {}
    a = RawConsumer(fast_cluster, "bar_a", "bar_g", "barrier_t", owners, [])
    wait_for(lambda: len(a.owned) == 3 and a.done is None, step=a.heartbeat)
    b = RawConsumer(fast_cluster, "bar_b", "bar_g", "barrier_t", owners, [])
    # wait until A is told to give something up, without reporting it yet
    deadline = time.monotonic() + 10
    while not a.done and time.monotonic() < deadline:
        a.heartbeat()
        time.sleep(0.02)
    assert a.done is not None and a.done.opType == EventType.ONLY_DISCONNECT
    disconnect_id = a.done.rebalanceId
    for _ in range(5):  # several balance periods: B still gets nothing
        b.heartbeat()
        assert not b.events
        time.sleep(0.12)
    a.heartbeat()  # report
    wait_for(lambda: bool(b.events), step=b.heartbeat)
    assert b.events[0][0] == disconnect_id and b.events[0][1] == EventType.ONLY_CONNECT
    b.heartbeat()
    assert len(owners) == 3
    a.close()
    b.close()


def test_consumer_expiry_triggers_rebalance(tmp_path: Path) -> None:
    # broker registrations expire (1 s) before the master drops the member (3 s), as with the real
    # defaults' order of events for a client that stops talking
    opts = {**FAST, "consumer_reg_timeout_ms": 1000}
    with EmbeddedCluster(data_dir=tmp_path / "exp", **opts) as cluster:
        cluster.create_topic("expiry_t", 3)
        owners: dict[str, str] = {}
        a = RawConsumer(cluster, "exp_a", "exp_g", "expiry_t", owners, [])
        b = RawConsumer(cluster, "exp_b", "exp_g", "expiry_t", owners, [])
        wait_for(
            lambda: len(owners) == 3 and a.done is None and b.done is None, step=lambda: (a.step(), b.step())
        )
        # A goes silent: the broker expires its registrations, the master its membership
        for key in list(a.owned):
            owners.pop(key)
        a.owned.clear()
        wait_for(lambda: len(b.owned) == 3 and b.done is None, timeout=20, step=b.step)
        r = a.master.call(
            5, master_pb.HeartRequestC2M(clientId="exp_a", groupName="exp_g", reportSubscribeInfo=False)
        )
        assert r.errCode == 411
        b.close()


def test_standby_answers_every_master_call_and_promotes(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "sb", standby=True, **FAST) as cluster:
        cluster.create_topic("sb_t", 3)
        rpc = Rpc(cluster.master_address, 1)
        port = cluster.master_address.rsplit(":", 1)[1]
        calls: list[tuple[int, Message]] = [
            (1, master_pb.RegisterRequestP2M(clientId="p", brokerCheckSum=-1, hostName="h")),
            (2, master_pb.HeartRequestP2M(clientId="p", brokerCheckSum=-1, hostName="h")),
            (3, master_pb.CloseRequestP2M(clientId="p")),
            (4, master_pb.RegisterRequestC2M(clientId="c", groupName="g", hostName="h", topicList=["sb_t"])),
            (5, master_pb.HeartRequestC2M(clientId="c", groupName="g", reportSubscribeInfo=False)),
            (6, master_pb.CloseRequestC2M(clientId="c", groupName="g")),
            (
                20,
                master_pb.RegisterRequestC2MV2(
                    clientId="v", groupName="gv", hostName="h", sourceCount=1, nodeId=0, topicList=["sb_t"]
                ),
            ),
            (21, master_pb.HeartRequestC2MV2(clientId="v", groupName="gv")),
            (
                22,
                master_pb.GetPartMetaRequestC2M(
                    clientId="v", groupName="gv", brokerConfigId=-2, topicMetaInfoId=-2
                ),
            ),
        ]
        for method, req in calls:
            with pytest.raises(RpcError) as ei:
                rpc.call(method, req)
            assert ei.value.status == 1 and ei.value.name == EXC_STANDBY, method
            client = req.clientId
            assert (
                ei.value.message
                == f"127.0.0.1:{port} is not master now. the connecting client id is {client}"
            )
        # protocolVer 2 gets the com.apache.tubemq. prefix (§2.4)
        with pytest.raises(RpcError) as ei:
            rpc.call(1, calls[0][1], protocol_ver=2)
        assert ei.value.name == "com.apache.tubemq.corerpc.exception.StandbyException"
        # parameter checks still come first
        r = rpc.call(1, master_pb.RegisterRequestP2M(clientId=" ", brokerCheckSum=-1, hostName="h"))
        assert (r.success, r.errCode) == (False, 400)
        # promotion at run time: the same connection now gets real answers
        cluster.set_standby(False)
        r = rpc.call(1, calls[0][1])
        assert r.success and r.errMsg == "OK!"
        cluster.set_standby(True)
        with pytest.raises(RpcError):
            rpc.call(2, calls[1][1])
        rpc.close()


def _auth_info(user: str, password: str, ts: int) -> master_pb.MasterCertificateInfo:
    info = master_pb.AuthenticateInfo(
        userName=user, timestamp=ts, nonce=42, othParams="", signature=auth_signature(user, password, ts, 42)
    )
    return master_pb.MasterCertificateInfo(authInfo=info)


@pytest.mark.parametrize("enabled", [False, True])
def test_auth_on_off(tmp_path: Path, enabled: bool) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "auth", auth_enabled=enabled, **FAST) as cluster:
        cluster.create_topic("auth_t", 3)
        rpc = Rpc(cluster.master_address, 1)
        now = int(time.time() * 1000)
        plain = master_pb.RegisterRequestP2M(clientId="p", brokerCheckSum=-1, hostName="h")
        r = rpc.call(1, plain)
        if not enabled:
            assert r.success
            r = rpc.call(
                4,
                master_pb.RegisterRequestC2M(clientId="c", groupName="g", hostName="h", topicList=["auth_t"]),
            )
            assert r.success and not r.authorizedInfo.HasField("authAuthorizedToken")
            return
        assert (r.success, r.errCode, r.errMsg) == (False, 415, MSG_USER_BLANK)
        stale = master_pb.RegisterRequestP2M(
            clientId="p", brokerCheckSum=-1, hostName="h", authInfo=_auth_info("u", "pw", now - 60_000)
        )
        r = rpc.call(1, stale)
        assert (r.errCode, r.errMsg) == (415, MSG_TIMESTAMP)
        good = master_pb.RegisterRequestP2M(
            clientId="p", brokerCheckSum=-1, hostName="h", authInfo=_auth_info("u", "pw", now)
        )
        r = rpc.call(1, good)
        assert r.success and r.authorizedInfo.authAuthorizedToken
        token = r.authorizedInfo.authAuthorizedToken
        hb = master_pb.HeartRequestP2M(
            clientId="p",
            brokerCheckSum=-1,
            hostName="h",
            authInfo=master_pb.MasterCertificateInfo(authorizedToken=token),
        )
        assert rpc.call(2, hb).success
        hb.authInfo.authorizedToken = "forged"
        assert rpc.call(2, hb).errCode == 415
        c = master_pb.RegisterRequestC2M(clientId="c", groupName="g", hostName="h", topicList=["auth_t"])
        assert rpc.call(4, c).errCode == 415
        c.authInfo.CopyFrom(_auth_info("u", "pw", now + 1))  # a signed authInfo is accepted once (replays)
        assert rpc.call(4, c).success
        rpc.close()
