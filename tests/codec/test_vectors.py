"""Every codec-related vector of vectors.json, against both implementations."""

from __future__ import annotations

import struct
import zlib
from types import ModuleType
from typing import Any

import pytest

from tubemq.protocol import broker_pb
from tubemq.protocol.constants import BEGIN_TOKEN, MAX_BLOCK_SIZE

from .pbutil import build, pb_class

REQUEST_FRAMES = [
    "frame_producer_register_request",
    "frame_producer_heartbeat_request",
    "frame_producer_close_request",
    "frame_send_message_no_attribute",
    "frame_send_message_with_attribute",
    "frame_send_message_large_split",
    "frame_consumer_register_c2m_request",
    "frame_consumer_heartbeat_c2m_report_done",
    "frame_consumer_register_c2b_request",
    "frame_consumer_unregister_c2b_request",
    "frame_get_message_request",
    "frame_commit_offset_request",
    "frame_consumer_heartbeat_c2b_request",
    "frame_consumer_close_c2m_request",
]
RESPONSE_FRAMES = [
    "frame_producer_register_response",
    "frame_producer_heartbeat_response",
    "frame_send_message_response",
    "frame_send_message_overflow_response",
    "frame_consumer_register_c2m_response",
    "frame_consumer_heartbeat_response_with_connect_event",
    "frame_consumer_register_c2b_response",
    "frame_consumer_register_c2b_occupied",
    "frame_get_message_response",
    "frame_get_message_not_found",
    "frame_commit_offset_response",
    "frame_consumer_heartbeat_c2b_response",
]
ERROR_FRAMES = [
    "frame_standby_exception_response",
    "frame_standby_exception_response_protocol_v2",
    "frame_fatal_unsupported_method",
]


def block_lengths(frame: bytes) -> list[int]:
    token, _serial, n = struct.unpack_from(">III", frame, 0)
    assert token == BEGIN_TOKEN
    pos, out = 12, []
    for _ in range(n):
        (length,) = struct.unpack_from(">I", frame, pos)
        out.append(length)
        pos += 4 + length
    assert pos == len(frame)
    return out


def decode_one(impl: ModuleType, frame: bytes) -> tuple[int, bytes]:
    frames = impl.FrameDecoder().feed(frame)
    assert len(frames) == 1
    return frames[0]


def vector_body(vectors: dict[str, Any], name: str) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    """A frame vector's inputs and expectations, and its protobuf body built from the inputs (which must
    be the recorded body bytes)."""
    v = vectors[name]
    inp, exp = v["inputs"], v["expected"]
    body = build(inp["message"], inp["fields"]).SerializeToString()
    assert body.hex() == exp["body_hex"]
    return inp, exp, body


def check_frame(impl: ModuleType, frame: bytes, inp: dict[str, Any], exp: dict[str, Any]) -> bytes:
    """``frame`` is the recorded one (bytes, length, blocks) and the decoder reads back its serial and
    the recorded stream; returns that stream (the payload)."""
    assert frame.hex() == exp["frame_hex"]
    assert len(frame) == exp["frame_len"]
    assert block_lengths(frame) == exp["block_lengths"]
    serial, payload = decode_one(impl, frame)
    assert serial == inp["serialNo"]
    assert payload.hex() == exp["stream_hex"]
    return payload


def test_every_frame_vector_is_covered(vectors: dict[str, Any]) -> None:
    frame_vectors = {n for n in vectors if n.startswith("frame_")}
    covered = set(REQUEST_FRAMES) | set(RESPONSE_FRAMES) | set(ERROR_FRAMES) | {"frame_cpp_client_padded_request"}
    assert frame_vectors == covered


@pytest.mark.parametrize("name", REQUEST_FRAMES)
def test_request_frame_from_protobuf_body(impl: ModuleType, vectors: dict[str, Any], name: str) -> None:
    inp, exp, body = vector_body(vectors, name)
    frame = impl.encode_request(
        inp["serialNo"], inp["serviceType"], inp["method"], body,
        timeout_ms=inp["timeout"], protocol_ver=inp["protocolVer"],
    )
    payload = check_frame(impl, frame, inp, exp)  # and the server side reads it back
    req = impl.decode_request(payload)
    assert (req.flag, req.service_type, req.protocol_ver) == (0, inp["serviceType"], inp["protocolVer"])
    assert (req.method, req.timeout, req.body) == (inp["method"], inp["timeout"], body)


@pytest.mark.parametrize("name", [n for n in REQUEST_FRAMES if n.startswith("frame_send_message")])
def test_send_request_vectors_hand_encoded(impl: ModuleType, vectors: dict[str, Any], name: str) -> None:
    v = vectors[name]
    inp, exp = v["inputs"], v["expected"]
    msg = build(inp["message"], inp["fields"])
    assert isinstance(msg, broker_pb.SendMessageRequestP2B)
    frame = impl.encode_send_request(
        inp["serialNo"], msg.clientId, msg.topicName, msg.partitionId, msg.data, msg.flag, msg.sentAddr,
        msg.authInfo.visitAuthorizedToken,
        msg_type=msg.msgType if msg.HasField("msgType") else None,
        msg_time=msg.msgTime if msg.HasField("msgTime") else None,
        auth_token=msg.authInfo.authAuthorizedToken or None,
        checksum=msg.checkSum, timeout_ms=inp["timeout"], service_type=inp["serviceType"],
        protocol_ver=inp["protocolVer"],
    )
    assert frame.hex() == exp["frame_hex"]


@pytest.mark.parametrize("name", RESPONSE_FRAMES)
def test_response_frames(impl: ModuleType, vectors: dict[str, Any], name: str) -> None:
    inp, exp, body = vector_body(vectors, name)
    frame = impl.encode_response(inp["serialNo"], inp["method"], body)
    payload = check_frame(impl, frame, inp, exp)
    rsp = impl.decode_response(payload)
    assert rsp == impl.Response(1, 0, inp["method"], body, "", "", 3)
    # and the body decodes to the same message protobuf sees
    decoded = pb_class(inp["message"])()
    decoded.ParseFromString(rsp.body)
    assert decoded.SerializeToString() == body


@pytest.mark.parametrize("name", ERROR_FRAMES)
def test_error_response_frames(impl: ModuleType, vectors: dict[str, Any], name: str) -> None:
    v = vectors[name]
    inp, exp = v["inputs"], v["expected"]
    frame = impl.encode_error_response(
        inp["serialNo"], inp["exceptionName"], inp["stackTrace"], status=inp["status"],
        protocol_ver=inp["protocolVer"],
    )
    assert frame.hex() == exp["frame_hex"]
    serial, payload = decode_one(impl, frame)
    assert serial == inp["serialNo"]
    rsp = impl.decode_response(payload)
    assert rsp.status == inp["status"]
    assert rsp.method == -1 and rsp.body == b""
    assert rsp.exception_name == inp["exceptionName"]
    assert rsp.message == inp["stackTrace"]
    assert rsp.protocol_ver == (inp["protocolVer"] if inp["protocolVer"] is not None else -1)
    assert f"{rsp.exception_name}#{rsp.message}" == exp["client_error_string"]


def test_cpp_padded_request(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["frame_cpp_client_padded_request"]
    inp, exp = v["inputs"], v["expected"]
    serial, payload = decode_one(impl, bytes.fromhex(exp["frame_hex"]))
    assert serial == inp["serialNo"]
    assert payload.endswith(b"\x00" * exp["padding_len"])
    req = impl.decode_request(payload)
    assert req.method == exp["parsed_method"] == inp["method"]
    assert req.protocol_ver == inp["protocolVer"]
    assert req.timeout == inp["timeout"]
    assert build(inp["message"], inp["fields"]).SerializeToString() == req.body


def test_block_split_lengths(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["block_split_lengths"]
    for n in v["inputs"]["stream_lengths"]:
        payload = bytes(i % 256 for i in range(n))
        frame = impl.encode_frame(7, payload)
        assert block_lengths(frame) == v["expected"]["block_lengths"][str(n)]
        assert max(block_lengths(frame)) <= MAX_BLOCK_SIZE
        assert decode_one(impl, frame) == (7, payload)


def test_varint_examples(impl: ModuleType, vectors: dict[str, Any]) -> None:
    """Varints are internal; messageId (field 1) of a TransferedMessage exposes them exactly."""
    v = vectors["protobuf_varint_examples"]
    for value, hexed in zip(v["inputs"]["values"], v["expected"]["hex"], strict=True):
        encoded = impl.encode_transfered_message(value, 0, b"", 0)
        assert encoded[0] == 0x08
        assert encoded[1 : 1 + len(hexed) // 2].hex() == hexed
        assert encoded == broker_pb.TransferedMessage(
            messageId=value, checkSum=0, payLoadData=b"", flag=0
        ).SerializeToString()


def test_attribute_payload_encoding(impl: ModuleType, vectors: dict[str, Any]) -> None:
    for case in vectors["attribute_payload_encoding"]["expected"]["cases"]:
        data = bytes.fromhex(case["data_hex"])
        payload = impl.encode_payload(data, case["attribute"])
        assert payload.hex() == case["payload_hex"]
        assert impl.crc32(payload) == case["crc32_masked"]
        if case["attribute"] == "":
            # Java sets flag 1 for a blank attribute without writing a header (its consumers then drop
            # the message, docs/PROTOCOL.md §4.7); we set the bit only when a header is written.
            assert impl.payload_flag(case["attribute"]) == 0
        else:
            assert impl.payload_flag(case["attribute"]) == case["flag"]
        attrs, body = impl.decode_payload(payload, impl.payload_flag(case["attribute"]))
        assert body == data
        assert attrs == impl.decode_attributes(case["attribute"])


def test_attribute_mapping_encoding(impl: ModuleType) -> None:
    text = impl.encode_attributes({"$msgType$": "类型", "a": 1})
    assert text == "$msgType$=类型,a=1"
    assert impl.decode_attributes(text) == {"$msgType$": "类型", "a": "1"}
    assert impl.encode_payload(b"x", {"a": "1"}) == impl.encode_payload(b"x", "a=1")
    assert impl.payload_flag({}) == 0 and impl.payload_flag({"a": "1"}) == 1
    for bad in ({"a,b": "1"}, {"a": "x=y"}, {"": "v"}, {"k": "1,2"}):
        with pytest.raises(ValueError):
            impl.encode_attributes(bad)


def test_put_system_header(impl: ModuleType, vectors: dict[str, Any]) -> None:
    for case in vectors["put_system_header"]["expected"]["cases"]:
        assert impl.put_system_header(case["previous"], case["msgType"], case["msgTime"]) == case["result"]


def test_crc32(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["crc32_checksum"]
    for hexed, masked in zip(v["inputs"]["inputs_hex"], v["expected"]["masked"], strict=True):
        data = bytes.fromhex(hexed)
        assert impl.crc32(data) == masked
        assert impl.crc32(bytearray(data)) == masked
        assert impl.crc32(memoryview(data)) == masked


def test_crc32_every_length_agrees_with_zlib(impl: ModuleType) -> None:
    """Every code path (byte tail, 16-byte slices, 64-byte folding, zlib above a threshold) is exercised."""
    data = bytes((i * 131 + 7) % 256 for i in range(3000))
    for n in [*range(0, 1100), 2047, 2048, 2049, 3000]:
        want = zlib.crc32(data[:n]) & 0x7FFFFFFF
        assert impl.crc32(data[:n]) == want, n
        assert impl.crc32(bytearray(data[1 : n + 1])) == zlib.crc32(data[1 : n + 1]) & 0x7FFFFFFF, n


def test_ipv4(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["ipv4_to_sentaddr"]
    for ip, value, back in zip(v["inputs"]["ips"], v["expected"]["ints"], v["expected"]["back"], strict=True):
        assert impl.ip_to_int(ip) == value
        assert ".".join(str(b) for b in struct.pack(">i", value)) == back
    for bad in ("1.2.3", "1.2.3.256", "a.b.c.d", "1.2.3.4.5", "-1.2.3.4"):
        with pytest.raises(ValueError):
            impl.ip_to_int(bad)


def test_java_hashcode(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["java_string_hashcode_for_filters"]
    for s, h in zip(v["inputs"]["strings"], v["expected"]["hashcodes"], strict=True):
        assert impl.java_hash(s) == h
    # a non-BMP character counts as two UTF-16 code units in Java
    assert impl.java_hash("\U0001f600") == (31 * 0xD83D + 0xDE00)
    assert impl.java_hash("x" * 50) == pytest.approx(impl.java_hash("x" * 50))  # int32 wrap, no overflow
    assert -(2**31) <= impl.java_hash("the quick brown fox jumps over the lazy dog" * 9) < 2**31


def test_broker_info_parsing(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["frame_producer_register_response"]
    infos = v["inputs"]["fields"]["brokerInfos"]
    for key, port in (("brokers", 8123), ("brokers_tls", 8124)):
        parsed = [impl.parse_broker_info(s, default_port=port) for s in infos]
        want = [impl.BrokerInfo(b["brokerId"], b["host"], b["port"]) for b in v["expected"]["parsed"][key]]
        assert parsed == want
    b = impl.parse_broker_info("2:10.0.0.2:8125")
    assert (b.address, str(b)) == ("10.0.0.2:8125", "2:10.0.0.2:8125")
    for bad in ("", "1", ":host:1", "x:host:1", "1: :8123", "1:h:port"):
        with pytest.raises(impl.DecodeError if hasattr(impl, "DecodeError") else Exception):
            impl.parse_broker_info(bad)


def test_topic_info_parsing(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["topic_info_parsing_variants"]
    brokers = {
        int(k): impl.BrokerInfo(b["brokerId"], b["host"], b["port"]) for k, b in v["inputs"]["brokers"].items()
    }
    partitions, sizes = impl.parse_topic_info(v["inputs"]["topicInfos"], brokers)
    by_topic, want_sizes = v["expected"]["partitions_and_sizes"]
    want = [
        impl.Partition(p["brokerId"], p["host"], p["port"], topic, p["partitionId"])
        for topic, plist in by_topic.items()
        for p in plist
    ]
    assert partitions == want
    assert [p.key for p in partitions] == [p["partitionKey"] for plist in by_topic.values() for p in plist]
    assert sizes == want_sizes


def test_topic_info_from_heartbeat_vector(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["frame_producer_heartbeat_response"]
    brokers = {1: impl.BrokerInfo(1, "10.0.0.1", 8123), 2: impl.BrokerInfo(2, "10.0.0.2", 8125)}
    partitions, sizes = impl.parse_topic_info(v["inputs"]["fields"]["topicInfos"], brokers)
    assert sizes == {"demo": 1048576}
    # '1:3:1' = broker 1, 3 partitions, 1 store; '2:2:2' = broker 2, 2 partitions in each of 2 stores
    assert [p.key for p in partitions] == [
        "1:demo:0", "1:demo:1", "1:demo:2", "2:demo:0", "2:demo:1", "2:demo:10000", "2:demo:10001",
    ]


def test_subscribe_info_parsing(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["subscribe_info_parsing"]
    for text, want in zip(v["inputs"]["strings"], v["expected"]["parsed"], strict=True):
        info = impl.parse_subscribe_info(text)
        assert (info.consumer_id, info.group) == (want["consumerId"], want["group"])
        p = info.partition
        assert (p.broker_id, p.host, p.port, p.topic, p.partition_id) == (
            want["brokerId"], want["host"], want["port"], want["topic"], want["partitionId"]
        )
        assert p.key == want["partitionKey"]
        assert str(info) == text


def test_misc_string_formats(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["misc_string_formats"]
    inp, exp = v["inputs"], v["expected"]
    p = impl.Partition(inp["brokerId"], "10.0.0.1", 8123, inp["topic"], inp["partitionId"])
    assert p.key == exp["partitionKey"]
    assert str(p) == exp["partition_full_str"]
    assert impl.parse_partition(exp["partition_full_str"]) == p


def _raw(impl: ModuleType, m: dict[str, Any]) -> Any:
    return impl.RawMessage(m["messageId"], m["checkSum"], bytes.fromhex(m["payLoadData"]["hex"]), m["flag"])


def test_transfered_message_decode(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["transfered_message_decode"]
    p = impl.Partition(1, "10.0.0.1", 8123, "demo", 0)
    for i, (m, want) in enumerate(zip(v["inputs"]["messages"], v["expected"]["decoded"], strict=True)):
        msg = impl.decode_message(_raw(impl, m), "demo", p, 100 + i)
        if want is None:
            assert msg is None
            continue
        assert msg.message_id == want["messageId"]
        assert msg.flag == want["flag"]
        assert msg.data.hex() == want["data_hex"]
        assert msg.data.decode() == want["data_utf8"]
        assert msg.stream_id == want["msgType"]
        assert msg.msg_time == want["msgTime"]
        assert msg.attributes == impl.decode_attributes(want["attribute"])
        assert (msg.topic, msg.partition, msg.offset) == ("demo", p, 100 + i)
        stored = impl.encode_transfered_message(m["messageId"], m["checkSum"], msg.data if not m["flag"] else
                                                bytes.fromhex(m["payLoadData"]["hex"]), m["flag"])
        assert stored == broker_pb.TransferedMessage(
            messageId=m["messageId"], checkSum=m["checkSum"], payLoadData=bytes.fromhex(m["payLoadData"]["hex"]),
            flag=m["flag"],
        ).SerializeToString()


def test_get_message_response(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["frame_get_message_response"]
    f, exp = v["inputs"]["fields"], v["expected"]
    _serial, payload = decode_one(impl, bytes.fromhex(exp["frame_hex"]))
    rsp = impl.decode_response(payload)
    p = impl.Partition(1, "10.0.0.1", 8123, "demo", 0)
    r = impl.decode_get_message_response(rsp.body, "demo", p)
    assert (r.success, r.err_code, r.err_msg) == (True, 200, "OK!")
    assert (r.curr_offset, r.min_limit_time, r.esc_flow_ctrl, r.curr_data_dlt, r.require_slow, r.max_offset) == (
        f["currOffset"], f["minLimitTime"], f["escFlowCtrl"], f["currDataDlt"], f["requireSlow"], f["maxOffset"]
    )
    assert r.dropped == 2
    decoded = vectors["transfered_message_decode"]["expected"]["decoded"]
    assert [m.message_id for m in r.messages] == [d["messageId"] for d in decoded if d]
    assert [m.data.hex() for m in r.messages] == [d["data_hex"] for d in decoded if d]
    assert [m.stream_id for m in r.messages] == [None, "order"]
    # no per-message offset: the answer has none, and start + 28 x i would be wrong for a shared store
    assert [m.offset for m in r.messages] == [None, None]
    assert all(m.partition is p and m.topic == "demo" for m in r.messages)
    # verify=False keeps the bad-checksum message; the truncated header then raises
    with pytest.raises(Exception, match="shorter than 4 bytes"):
        impl.decode_get_message_response(rsp.body, "demo", p, verify=False)


def test_get_message_not_found(impl: ModuleType, vectors: dict[str, Any]) -> None:
    v = vectors["frame_get_message_not_found"]
    f = v["inputs"]["fields"]
    _serial, payload = decode_one(impl, bytes.fromhex(v["expected"]["frame_hex"]))
    r = impl.decode_get_message_response(impl.decode_response(payload).body, "demo")
    assert (r.success, r.err_code, r.err_msg, r.messages, r.dropped) == (False, 404, f["errMsg"], [], 0)
    assert (r.curr_offset, r.min_limit_time, r.curr_data_dlt, r.esc_flow_ctrl) == (-1, -1, -1, False)


@pytest.mark.parametrize("name", ["frame_send_message_response", "frame_send_message_overflow_response"])
def test_send_response(impl: ModuleType, vectors: dict[str, Any], name: str) -> None:
    v = vectors[name]
    f = v["inputs"]["fields"]
    _serial, payload = decode_one(impl, bytes.fromhex(v["expected"]["frame_hex"]))
    r = impl.decode_send_response(impl.decode_response(payload).body)
    assert (r.success, r.err_code, r.err_msg) == (f["success"], f["errCode"], f["errMsg"])
    assert r.message_id == f.get("messageId", -1)
    assert r.append_time == f.get("appendTime", -1)
    assert r.append_offset == f.get("appendOffset", -1)
    assert r.require_auth is False


def test_send_response_message_id_fallback(impl: ModuleType) -> None:
    """Old brokers only put the id in errMsg (decimal)."""
    body = broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg="12345").SerializeToString()
    assert impl.decode_send_response(body).message_id == 12345
    body = broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg="OK").SerializeToString()
    assert impl.decode_send_response(body).message_id == -1
    with pytest.raises(Exception, match="missing required"):
        impl.decode_send_response(broker_pb.SendMessageResponseB2P(success=True).SerializeToString())
