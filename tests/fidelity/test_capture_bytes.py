"""Every answer a REAL master/broker wrote in the captures goes through our client's decoding paths.

No server here: the recorded m2c/b2c bytes are fed to exactly the functions our clients use on the
wire (Connection.unwrap_response, the protobuf response classes, codec.decode_get_message_response,
codec.decode_send_response, the topicInfo/brokerInfo/subscribeInfo parsers, FlowControl.update), and
the results are checked against what the capture tool decoded and what the Java API reported.
"""

from __future__ import annotations

import hashlib

import pytest
from _data import load_json

from tubemq import codec
from tubemq.consumer.flowctrl import FlowControl
from tubemq.errors import RemoteError, StandbyError
from tubemq.net.connection import unwrap_response

from .replay import MESSAGES, answer, decode_answer, load

ALL = ["s1_producer", "s2_consumer_pull", "s3_rebalance", "s4_filter", "s5_client_balance", "s6a_errors_send",
       "s6b_errors_master", "s6c_errors_consumer_broker", "s6d_errors_transport"]


def _answers(name: str):  # noqa: ANN202 - test helper
    return [f for f in load(name).frames if f.direction in ("m2c", "b2c") and not f.truncated]


@pytest.mark.parametrize("name", ALL)
def test_unwrap_every_real_answer(name: str) -> None:
    """Success answers give the body; ERROR/FATAL answers give RemoteError with the real texts."""
    n = 0
    for f in _answers(name):
        frames = codec.FrameDecoder().feed(f.raw)
        assert [s for s, _ in frames] == [f.serial]
        payload = frames[0][1]
        if f.exception is None:
            body = unwrap_response(payload)
            if f.method in MESSAGES:
                MESSAGES[f.method][1].FromString(body)  # every required field present
            n += 1
            continue
        with pytest.raises(RemoteError) as info:
            unwrap_response(payload)
        err = info.value
        assert not isinstance(err, StandbyError)  # no standby master in the captures
        assert err.exception_name == f.exception["exceptionName"]
        assert err.message == f.exception.get("stackTrace", "")
        assert err.is_fatal == (f.status == "FATAL"), f.status
        n += 1
    assert n > 0


@pytest.mark.parametrize("name", ["s1_producer", "s2_consumer_pull", "s3_rebalance", "s4_filter",
                                  "s5_client_balance"])
def test_replay_server_reencodes_real_bytes_exactly(name: str) -> None:
    """The fake servers re-encode an answer only to substitute strings: that path must reproduce the
    real master/broker bytes exactly when nothing is substituted."""
    for f in _answers(name):
        if f.exception is None:
            assert answer(f, f.serial, edit=lambda m: None) == f.raw
            assert answer(f, 0x1234, {"no-such-text": "x"})[8:] == f.raw[8:]


@pytest.mark.parametrize("name", ["s2_consumer_pull", "s3_rebalance", "s4_filter", "s5_client_balance",
                                  "s6c_errors_consumer_broker"])
def test_get_message_answers_decode_like_java(name: str) -> None:
    """Every real getMessage answer: messages, checksums, attributes and all offsets/flags."""
    cap = load(name)
    seen = 0
    for f in cap.answers(17):
        if f.exception is not None or f.truncated:
            continue
        m = f.message
        res = codec.decode_get_message_response(_body(f), "t")
        assert res.success == m["success"] and res.err_code == m["errCode"]
        assert res.err_msg == m.get("errMsg", "")
        assert res.curr_offset == m.get("currOffset", -1)
        assert res.min_limit_time == m.get("minLimitTime", 0)
        assert res.esc_flow_ctrl == m.get("escFlowCtrl", False)
        assert res.curr_data_dlt == m.get("currDataDlt", -1)
        assert res.require_slow == m.get("requireSlow", False)
        assert res.max_offset == m.get("maxOffset", -1)
        expected = m.get("_messages_decoded", [])
        assert res.dropped == 0 and len(res.messages) == len(expected)
        for msg, exp, raw in zip(res.messages, expected, m.get("messages", []), strict=True):
            assert exp["checksum_ok"]
            assert msg.message_id == raw["messageId"] and msg.flag == raw["flag"]
            assert hashlib.sha256(msg.data).hexdigest() == exp["body_sha256"]
            attr = exp.get("attribute")
            assert msg.attributes == (codec.decode_attributes(attr) if attr else {})
            if attr and "$msgType$" in attr:
                assert msg.stream_id == codec.decode_attributes(attr)["$msgType$"]
            seen += 1
    assert seen > 0 or name == "s3_rebalance"


def test_the_three_404_texts() -> None:
    """captures README item 3: three 404 texts, minLimitTime -1 / 0 / positive; all are 'no data'."""
    texts = {}
    for name in ("s2_consumer_pull", "s3_rebalance", "s4_filter"):
        for f in load(name).answers(17):
            if f.message.get("errCode") == 404:
                res = codec.decode_get_message_response(_body(f), "t")
                texts[res.err_msg] = res.min_limit_time
                assert res.curr_offset == -1 and res.curr_data_dlt == -1 and res.max_offset == -1
                assert not res.success and not res.messages and not res.require_slow
    assert texts["The request offset reached maxOffset!"] == -1
    assert texts["Request offset reached cache maxOffset"] == 0
    assert texts["current offset is exceed max file offset"] > 0


def test_send_answers_decode_like_java() -> None:
    cap = load("s1_producer")
    for f in cap.answers(13):
        m = f.message
        res = codec.decode_send_response(_body(f))
        assert res.success and res.err_code == 200
        assert res.message_id == m["messageId"] == int(m["errMsg"])
        assert (res.append_time, res.append_offset, res.require_auth) == (m["appendTime"], m["appendOffset"], False)
    errors = [f for f in load("s6a_errors_send").answers(13) if f.exception is None and not f.truncated]
    assert errors
    for f in errors:
        res = codec.decode_send_response(_body(f))
        assert res.success == f.message["success"] and res.err_code == f.message["errCode"]
        if not res.success:
            assert res.err_msg == f.message["errMsg"] and res.message_id == -1


def test_broker_and_topic_strings_as_the_real_master_writes_them() -> None:
    """Blank-port brokerInfos; topicInfos with an empty size segment and with an explicit size."""
    reg = decode_answer(load("s1_producer").answers(1)[0])
    assert list(reg.brokerInfos) == ["1:127.0.0.1: "]
    brokers = {b.broker_id: b for b in (codec.parse_broker_info(s) for s in reg.brokerInfos)}
    assert brokers[1] == codec.BrokerInfo(1, "127.0.0.1", 8123)
    assert codec.parse_broker_info("1:127.0.0.1: ", 8124).port == 8124  # TLS default port
    hb = decode_answer(load("s1_producer").answers(2)[0])
    assert not hb.brokerInfos  # omitted: our checksum equals the master's
    parts, sizes = codec.parse_topic_info(hb.topicInfos, brokers)
    assert sizes == {}  # empty segment: the client keeps its cluster default
    ids = {(p.topic, p.partition_id) for p in parts}
    assert ids == {("cap_main", 0), ("cap_main", 1), ("cap_main", 2), ("cap_store2", 0), ("cap_store2", 1),
                   ("cap_store2", 10000), ("cap_store2", 10001)}
    big = [decode_answer(f) for f in load("s6b_errors_master").answers(2) if f.exception is None]
    infos = [s for rsp in big for s in rsp.topicInfos]
    assert "cap_big#1:1:1#2097152" in infos
    _, sizes = codec.parse_topic_info(infos, brokers)
    assert sizes == {"cap_big": 2097152}


def test_event_and_failure_strings() -> None:
    for name in ("s2_consumer_pull", "s3_rebalance", "s4_filter"):
        for f in load(name).answers(5):
            rsp = decode_answer(f)
            if rsp.HasField("event"):
                assert not rsp.event.HasField("status")  # the master never sets it (§3.2)
                for s in rsp.event.subscribeInfo:
                    info = codec.parse_subscribe_info(s)
                    assert info.partition.port == 8123 and info.partition.broker_id == 1
    fails = [s for f in load("s5_client_balance").answers(16) for s in decode_answer(f).failureInfo]
    assert fails == ["411:1:127.0.0.1:8123#cap_main:0"]
    code, _, text = fails[0].partition(":")
    assert code == "411" and codec.parse_partition(text).key == "1:cap_main:0"


def test_client_balance_meta_and_empty_ops_task_info() -> None:
    cap = load("s5_client_balance")
    reg = decode_answer(cap.answers(20)[0])
    assert not hasattr(reg, "success") or "success" not in reg.DESCRIPTOR.fields_by_name
    assert reg.HasField("opsTaskInfo") and reg.opsTaskInfo.ByteSize() == 0
    brokers = {1: codec.parse_broker_info(reg.brokerConfigList[0])}
    meta = decode_answer(cap.answers(22)[0])
    parts = codec.parse_topic_meta_info(meta.topicMetaInfoList, brokers)
    assert sorted((p.partition_id, ok) for p, ok in parts) == [(0, True), (1, True), (2, True)]
    flow = FlowControl()
    flow.update(reg.opsTaskInfo)
    assert (flow.def_id, flow.group_id, flow.qry_priority_id) == (-2, -2, -2)


def test_flow_fields_of_real_consumer_answers_mean_no_rules() -> None:
    flow = FlowControl()
    for name in ("s2_consumer_pull", "s3_rebalance", "s4_filter"):
        for method in (4, 5):
            for f in load(name).answers(method):
                flow.update(decode_answer(f))
    assert (flow.def_id, flow.group_id, flow.qry_priority_id) == (-2, -2, -2)
    assert flow.empty_delay(1) == flow.msg_not_found_wait_ms / 1000.0
    assert not flow.has_data_limits


def _body(f) -> bytes:  # noqa: ANN001 - test helper
    return unwrap_response(codec.FrameDecoder().feed(f.raw)[0][1])


@pytest.mark.parametrize("name", ["frame_standby_exception_response", "frame_standby_exception_response_protocol_v2"])
def test_standby_exception_is_recognised_by_substring(name: str) -> None:
    """No standby in the captures: the spec's vectors (protocolVer 3 and the rewritten 2 prefix)."""

    vectors = load_json("vectors.json")["vectors"]
    vec = next(v for v in vectors if v["name"] == name)
    payload = codec.FrameDecoder().feed(bytes.fromhex(vec["expected"]["frame_hex"]))[0][1]
    with pytest.raises(StandbyError) as info:
        unwrap_response(payload)
    assert not info.value.is_fatal and info.value.exception_name == vec["inputs"]["exceptionName"]
