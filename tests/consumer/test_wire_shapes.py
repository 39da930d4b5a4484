"""Our consumer requests carry exactly the fields the official Java client sends (captures s2-s5).

Every request our consumers send during real runs against the embedded server is recorded, decoded,
and its field-presence shape (names of the fields on the wire, nested for sub-messages) compared with
the shapes of the Java client's requests in tests/data/captures.
"""

from __future__ import annotations

from typing import Any

import pytest
from _data import load_capture
from _pbcompat import is_repeated

import tubemq
from tubemq import BoundConsumer
from tubemq.net.connection import Connection
from tubemq.net.invoker import MasterInvoker
from tubemq.protocol import broker_pb, master_pb

from ._produce import produce
from .conftest import FAST_CLIENT, drain, wait_for

FILES = ["s2_consumer_pull.json", "s3_rebalance.json", "s4_filter.json", "s5_client_balance.json"]

MASTER = {
    4: ("CONSUMER_REGISTER", master_pb.RegisterRequestC2M),
    5: ("CONSUMER_HEARTBEAT", master_pb.HeartRequestC2M),
    6: ("CONSUMER_CLOSECLIENT", master_pb.CloseRequestC2M),
    20: ("CONSUMER_REGISTER_V2", master_pb.RegisterRequestC2MV2),
    21: ("CONSUMER_HEARTBEAT_V2", master_pb.HeartRequestC2MV2),
    22: ("CONSUMER_GET_PART_META", master_pb.GetPartMetaRequestC2M),
}
BROKER = {
    15: ("BROKER_CONSUMER_REGISTER", broker_pb.RegisterRequestC2B),
    16: ("BROKER_CONSUMER_HEARTBEAT", broker_pb.HeartBeatRequestC2B),
    17: ("BROKER_CONSUMER_GETMESSAGE", broker_pb.GetMessageRequestC2B),
    18: ("BROKER_CONSUMER_COMMIT", broker_pb.CommitOffsetRequestC2B),
}

#: shapes Java sends but the captures happen not to show: reportSubscribeInfo on every 6th heartbeat
#: (with or without partitions); V2 heartbeats before the topic meta was applied, after it without a
#: report, and reports when no partition is attached (empty partSubInfo is absent on the wire)
EXTRA_ALLOWED = {
    "CONSUMER_HEARTBEAT": [
        {"clientId", "groupName", "reportSubscribeInfo", "defFlowCheckId", "groupFlowCheckId", "qryPriorityId",
         "subscribeInfo"},
        {"clientId", "groupName", "reportSubscribeInfo", "defFlowCheckId", "groupFlowCheckId", "qryPriorityId",
         "event", "event.rebalanceId", "event.opType", "event.status", "event.subscribeInfo"},
    ],
    "CONSUMER_HEARTBEAT_V2": [
        {"clientId", "groupName", "subRepInfo", "subRepInfo.brokerConfigId", "subRepInfo.topicMetaInfoId",
         "subRepInfo.reportSubInfo", "subRepInfo.partSubInfo"},
        {"clientId", "groupName", "subRepInfo", "subRepInfo.brokerConfigId", "subRepInfo.topicMetaInfoId",
         "subRepInfo.lstAssignedTime", "subRepInfo.reportSubInfo"},
    ],
}


def shape_of_dict(d: dict[str, Any], prefix: str = "") -> frozenset[str]:
    out: set[str] = set()
    for k, v in d.items():
        if k.startswith("_"):
            continue
        out.add(prefix + k)
        if isinstance(v, dict) and "hex_prefix" not in v:
            out |= shape_of_dict(v, prefix + k + ".")
    return frozenset(out)


def shape_of_msg(msg: Any, prefix: str = "") -> frozenset[str]:
    out: set[str] = set()
    for fd, value in msg.ListFields():
        out.add(prefix + fd.name)
        if fd.message_type is not None and not is_repeated(fd):
            out |= shape_of_msg(value, prefix + fd.name + ".")
    return frozenset(out)


def capture_shapes() -> dict[str, set[frozenset[str]]]:
    shapes: dict[str, set[frozenset[str]]] = {}
    for name in FILES:
        doc = load_capture(name)
        for f in doc["frames"]:
            if f["direction"] not in ("c2m", "c2b"):
                continue
            dec = f["decoded"]
            m = dec.get("method_name")
            if m is None or "PRODUCER" in m or not isinstance(dec.get("message"), dict):
                continue
            shapes.setdefault(m, set()).add(shape_of_dict(dec["message"]))
    for m, extra in EXTRA_ALLOWED.items():
        shapes.setdefault(m, set()).update(frozenset(e) for e in extra)
    return shapes


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    sent: list[tuple[str, Any]] = []
    orig_master = MasterInvoker.call
    orig_conn = Connection.call

    async def master_call(self: Any, method: int, request: Any, response_cls: Any) -> Any:
        if method in MASTER:
            copy = type(request)()
            copy.CopyFrom(request)
            sent.append((MASTER[method][0], copy))
        return await orig_master(self, method, request, response_cls)

    async def conn_call(self: Any, service_type: int, method: int, body: bytes, *, timeout_ms: int) -> bytes:
        if service_type == 2 and method in BROKER:
            name, cls = BROKER[method]
            sent.append((name, cls.FromString(body)))
        return await orig_conn(self, service_type, method, body, timeout_ms=timeout_ms)

    monkeypatch.setattr(MasterInvoker, "call", master_call)
    monkeypatch.setattr(Connection, "call", conn_call)
    return sent


def test_requests_match_java_field_presence(cluster: Any, recorder: list[tuple[str, Any]]) -> None:
    cluster.create_topic("shape", partitions=2)
    cluster.create_topic("shapef", partitions=1)
    produce(cluster, "shape", [b"s%d" % i for i in range(6)], partitions=2)
    produce(cluster, "shapef", [b"a", b"b"], msg_type="typeA")
    opts = {**FAST_CLIENT, "consume_from": "earliest"}
    with tubemq.Consumer(cluster.master_address, group="g_shape", topics=["shape"], **opts) as c:
        assert "_" in c.client_id and c.client_id.startswith("g_shape_") and "-Pull-py-" in c.client_id
        drain(c, 6)
        # a few heartbeats with and without reports, and broker heartbeats
        n = len(recorder)
        wait_for(lambda: sum(1 for name, _ in recorder[n:] if name == "BROKER_CONSUMER_HEARTBEAT") >= 2,
                 what="broker heartbeats")
    with tubemq.Consumer(cluster.master_address, group="g_shapef", topics={"shapef": {"typeA"}}, **opts) as c:
        drain(c, 2)
    with BoundConsumer(cluster.master_address, "g_shape_b", ["shape"], **opts) as bc:
        assert "-Balance-py-" in bc.client_id
        p = bc.partitions()[0]
        bc.attach(p, 0)
        batch = bc.fetch(p, timeout=2)
        assert batch is not None
        bc.confirm(batch)
        wait_for(lambda: sum(1 for name, _ in recorder if name == "CONSUMER_HEARTBEAT_V2") >= 3, what="V2 hb")
        bc.detach(p)
    allowed = capture_shapes()
    seen: set[str] = set()
    for name, msg in recorder:
        shape = shape_of_msg(msg)
        seen.add(name)
        assert shape in allowed[name], (
            f"{name}: our field set {sorted(shape)} is not one the Java client sends: "
            f"{[sorted(s) for s in allowed[name]]}")
        if name == "CONSUMER_HEARTBEAT" and msg.HasField("event"):
            assert msg.event.status == 2 and msg.reportSubscribeInfo
    assert seen >= {"CONSUMER_REGISTER", "CONSUMER_HEARTBEAT", "CONSUMER_CLOSECLIENT", "CONSUMER_REGISTER_V2",
                    "CONSUMER_HEARTBEAT_V2", "CONSUMER_GET_PART_META", "BROKER_CONSUMER_REGISTER",
                    "BROKER_CONSUMER_HEARTBEAT", "BROKER_CONSUMER_GETMESSAGE", "BROKER_CONSUMER_COMMIT"}
    # first fetch of a partition: lastPackConsumed false (s2); unregister of a consumed partition: 0
    first: dict[tuple[str, int], bool] = {}
    for name, msg in recorder:
        if name == "BROKER_CONSUMER_GETMESSAGE":
            first.setdefault((msg.groupName, msg.partitionId), msg.lastPackConsumed)
    assert first and not any(first.values())
