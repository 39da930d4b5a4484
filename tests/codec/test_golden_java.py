"""Both frames of java_golden_frames.json, reproduced byte for byte from their inputs (protobuf + codec)."""

from __future__ import annotations

import hashlib
from types import ModuleType
from typing import Any

from tubemq.protocol import broker_pb, master_pb


def _frame(golden: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(f for f in golden if f["name"] == name)


def _check_layout(frame: bytes, g: dict[str, Any]) -> None:
    assert len(frame) == g["frame_len"]
    assert hashlib.sha256(frame).hexdigest() == g["frame_sha256"]
    assert frame.hex() == g["frame_hex"]


def test_producer_register(impl: ModuleType, golden_frames: list[dict[str, Any]]) -> None:
    g = _frame(golden_frames, "producer_register_P2M")
    inp, rpc = g["input"], g["rpc"]
    req = master_pb.RegisterRequestP2M(
        clientId=inp["clientId"],
        topicList=inp["topicList"],
        brokerCheckSum=inp["brokerCheckSum"],
        hostName=inp["hostName"],
        jdkVersion=inp["jdkVersion"],
        appdConfig=master_pb.ApprovedClientConfig(configId=inp["appdConfig"]["configId"]),
    )
    body = req.SerializeToString()
    assert body.hex() == g["request_pb_hex"]
    frame = impl.encode_request(
        rpc["serialNo"], rpc["serviceType"], rpc["methodId"], body, timeout_ms=rpc["timeout"],
        protocol_ver=rpc["protocolVer"],
    )
    _check_layout(frame, g)
    assert impl.FrameDecoder().feed(frame)[0][0] == g["layout"]["serialNo"]


def _send_inputs(impl: ModuleType, inp: dict[str, Any]) -> tuple[bytes, bytes]:
    payload = bytes(i & 0xFF for i in range(inp["payload_len"]))
    assert hashlib.sha256(payload).hexdigest() == inp["payload_sha256"]
    attrs = impl.encode_attributes({"a": 1, "b": 2})
    assert attrs == inp["msg_attribute"]
    data = impl.encode_payload(payload, attrs)
    assert len(data) == inp["data_len"]
    assert hashlib.sha256(data).hexdigest() == inp["data_sha256"]
    assert impl.payload_flag(attrs) == inp["flag"]
    return payload, data


def test_send_message_via_protobuf(impl: ModuleType, golden_frames: list[dict[str, Any]]) -> None:
    g = _frame(golden_frames, "send_message_P2B")
    inp, rpc = g["input"], g["rpc"]
    _payload, data = _send_inputs(impl, inp)
    req = broker_pb.SendMessageRequestP2B(
        clientId=inp["clientId"],
        topicName=inp["topicName"],
        partitionId=inp["partitionId"],
        data=data,
        flag=inp["flag"],
        checkSum=inp["checkSum"],
        sentAddr=impl.ip_to_int("127.0.0.1"),
        authInfo=broker_pb.AuthorizedInfo(visitAuthorizedToken=inp["authInfo"]["visitAuthorizedToken"]),
    )
    assert req.sentAddr == inp["sentAddr"]
    body = req.SerializeToString()
    assert len(body) == g["request_pb_len"]
    frame = impl.encode_request(
        rpc["serialNo"], rpc["serviceType"], rpc["methodId"], body, timeout_ms=rpc["timeout"],
        protocol_ver=rpc["protocolVer"],
    )
    _check_layout(frame, g)


def test_send_message_hand_encoded(impl: ModuleType, golden_frames: list[dict[str, Any]]) -> None:
    g = _frame(golden_frames, "send_message_P2B")
    inp, rpc = g["input"], g["rpc"]
    _payload, data = _send_inputs(impl, inp)
    for buf in (data, bytearray(data), memoryview(data)):
        frame = impl.encode_send_request(
            rpc["serialNo"], inp["clientId"], inp["topicName"], inp["partitionId"], buf, inp["flag"],
            impl.ip_to_int("127.0.0.1"), inp["authInfo"]["visitAuthorizedToken"],
            msg_type=inp["msgType"], msg_time=inp["msgTime"], checksum=inp["checkSum"],
            timeout_ms=rpc["timeout"], service_type=rpc["serviceType"], protocol_ver=rpc["protocolVer"],
        )
        _check_layout(frame, g)
    # a receiver must join the two blocks before parsing: the decoder returns the whole payload
    [(serial, payload)] = impl.FrameDecoder().feed(frame)
    req = impl.decode_request(payload)
    parsed = broker_pb.SendMessageRequestP2B.FromString(req.body)
    assert (serial, req.method, parsed.data) == (1, 13, data)
