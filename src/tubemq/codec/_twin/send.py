"""The twin's hot path: checksums, the send request / response and the getMessage response."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from ...errors import DecodeError
from ...protocol import wire_fields as F
from ...protocol.constants import TOKEN_MSG_TIME, TOKEN_MSG_TYPE, Method, ServiceType
from .datatypes import GetMessageResult, Message, Partition, RawMessage, SendResponse
from .envelope import decode_response, encode_request
from .payload import decode_payload
from .pbwire import FieldSpec, _f_bytes, _f_varint, _read_fields, _signed32, _signed64, _utf8, _varint

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)

_V, _LEN = F.WT_VARINT, F.WT_LEN
#: what the decoders keep of each message (pbwire._read_fields)
_SEND_RSP: FieldSpec = {
    F.SEND_RSP_SUCCESS: (_V, bool), F.SEND_RSP_ERR_CODE: (_V, _signed32), F.SEND_RSP_ERR_MSG: (_LEN, _utf8),
    F.SEND_RSP_REQUIRE_AUTH: (_V, bool), F.SEND_RSP_MESSAGE_ID: (_V, _signed64),
    F.SEND_RSP_APPEND_TIME: (_V, _signed64), F.SEND_RSP_APPEND_OFFSET: (_V, _signed64),
}
_GET_RSP: FieldSpec = {
    F.GET_RSP_SUCCESS: (_V, bool), F.GET_RSP_ERR_CODE: (_V, _signed32), F.GET_RSP_ERR_MSG: (_LEN, _utf8),
    F.GET_RSP_CURR_OFFSET: (_V, _signed64), F.GET_RSP_MIN_LIMIT_TIME: (_V, _signed32),
    F.GET_RSP_ESC_FLOW_CTRL: (_V, bool), F.GET_RSP_CURR_DATA_DLT: (_V, _signed64),
    F.GET_RSP_REQUIRE_SLOW: (_V, bool), F.GET_RSP_MAX_OFFSET: (_V, _signed64),
    F.GET_RSP_MESSAGES: (_LEN, lambda v: _parse_transfered(v)),
}
_TRANSFERED: FieldSpec = {
    F.TM_MESSAGE_ID: (_V, _signed64), F.TM_CHECKSUM: (_V, _signed32), F.TM_PAYLOAD: (_LEN, bytes),
    F.TM_FLAG: (_V, _signed32),
}


def crc32(data: Any) -> int:
    """Masked CRC-32 TubeMQ stores with every message (§4.6)."""
    return zlib.crc32(data) & 0x7FFFFFFF


def ip_to_int(ip: str) -> int:
    """IPv4 text to the signed int32 the Java client sends as ``sentAddr`` (§4.5)."""
    parts = ip.strip().split(".")
    if len(parts) != 4:
        raise ValueError(f"not an IPv4 address: {ip!r}")
    value = 0
    for p in parts:
        n = int(p)
        if not 0 <= n <= 255:
            raise ValueError(f"not an IPv4 address: {ip!r}")
        value = (value << 8) | n
    return value - (1 << 32) if value >= 1 << 31 else value


def encode_send_request(
    serial: int,
    client_id: str,
    topic: str,
    partition_id: int,
    data: Any,
    flag: int,
    sent_addr: int,
    visit_token: int,
    *,
    msg_type: str | None = None,
    msg_time: str | None = None,
    auth_token: str | None = None,
    checksum: int = -1,
    timeout_ms: int = 10000,
    service_type: int = ServiceType.BROKER_WRITE,
    protocol_ver: int = 3,
) -> bytes:
    """The whole send-message frame, byte-identical to building SendMessageRequestP2B with protobuf."""
    auth = _f_varint(F.AUTH_VISIT_TOKEN, visit_token)
    if auth_token:
        auth += _f_bytes(F.AUTH_AUTH_TOKEN, auth_token.encode())
    body = (
        _f_bytes(F.SEND_REQ_CLIENT_ID, client_id.encode())
        + _f_bytes(F.SEND_REQ_TOPIC, topic.encode())
        + _f_varint(F.SEND_REQ_PARTITION_ID, partition_id)
        + _f_bytes(F.SEND_REQ_DATA, bytes(data))
        + _f_varint(F.SEND_REQ_FLAG, flag)
        + _f_varint(F.SEND_REQ_CHECKSUM, checksum)
        + _f_varint(F.SEND_REQ_SENT_ADDR, sent_addr)
    )
    if msg_type is not None:
        body += _f_bytes(F.SEND_REQ_MSG_TYPE, msg_type.encode())
    if msg_time is not None:
        body += _f_bytes(F.SEND_REQ_MSG_TIME, msg_time.encode())
    body += _f_bytes(F.SEND_REQ_AUTH_INFO, auth)
    return encode_request(
        serial, service_type, Method.BROKER_PRODUCER_SEND_MESSAGE, body, timeout_ms=timeout_ms,
        protocol_ver=protocol_ver,
    )


def decode_send_result(payload: Any, result_type: Any, topic: Any, partition: Any, key: Any) -> Any:
    """A send answer (a response frame's payload) straight to what a sender returns:
    ``result_type(topic, partition, message_id, append_time, append_offset, key)`` when the broker
    stored the message, None when it did not (an error status or a refusal: :func:`decode_response`
    and :func:`decode_send_response` tell which). Raises DecodeError on a malformed answer."""
    rsp = decode_response(payload)
    if rsp.status:
        return None
    answer = decode_send_response(rsp.body)
    if not answer.success:
        return None
    return tuple.__new__(result_type, (topic, partition, answer.message_id, answer.append_time,
                                       answer.append_offset, key))


def decode_send_response(body: Any) -> SendResponse:
    """SendMessageResponseB2P; the message id falls back to errMsg for old brokers (§3.7)."""
    got = _read_fields(memoryview(body).cast("B"), _SEND_RSP)
    if not got.keys() >= {F.SEND_RSP_SUCCESS, F.SEND_RSP_ERR_CODE, F.SEND_RSP_ERR_MSG}:
        raise DecodeError("SendMessageResponseB2P: Message missing required fields")
    success, msg = got[F.SEND_RSP_SUCCESS], got[F.SEND_RSP_ERR_MSG]
    mid = got.get(F.SEND_RSP_MESSAGE_ID)
    if mid is None:
        mid = java_parse_long(msg) if success else -1
    return SendResponse(
        success, got[F.SEND_RSP_ERR_CODE], msg, mid, got.get(F.SEND_RSP_APPEND_TIME, -1),
        got.get(F.SEND_RSP_APPEND_OFFSET, -1), got.get(F.SEND_RSP_REQUIRE_AUTH, False),
    )


def java_parse_long(text: str) -> int:
    """``Long.parseLong(text)``, or -1 where Java throws (old brokers' errMsg message id, §3.7).

    Java takes an optional sign and decimal digits only (no spaces, no ``_``) within int64; Python's
    ``int()`` is more lenient, so the rules are checked here for both codecs.
    """
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isdecimal():
        return -1
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else -1


def decode_message(
    raw: RawMessage, topic: str, partition: Partition | None = None, offset: int | None = -1
) -> Message | None:
    """One TransferedMessage -> Message, or None when §4.9 says drop (bad checksum / header)."""
    if crc32(raw.payload) != raw.checksum:
        return None
    try:
        return _to_message(raw, topic, partition, offset)
    except DecodeError:
        return None


def _to_message(raw: RawMessage, topic: str, partition: Partition | None, offset: int | None) -> Message:
    """The Message a TransferedMessage carries (DecodeError when its attribute header does not fit)."""
    attrs, body = decode_payload(raw.payload, raw.flag)
    return Message(topic, body, attrs, attrs.get(TOKEN_MSG_TYPE), attrs.get(TOKEN_MSG_TIME), raw.message_id,
                   raw.flag, partition, offset)


def _parse_transfered(buf: Any) -> RawMessage:
    got = _read_fields(buf, _TRANSFERED)
    if len(got) != len(_TRANSFERED):
        raise DecodeError("TransferedMessage: Message missing required fields")
    return RawMessage(got[F.TM_MESSAGE_ID], got[F.TM_CHECKSUM], got[F.TM_PAYLOAD], got[F.TM_FLAG])


def decode_get_message_response(
    body: Any, topic: str, partition: Partition | None = None, verify: bool = True
) -> GetMessageResult:
    """GetMessageResponseB2C with its messages decoded and checked (§3.7, §4.9)."""
    got = _read_fields(memoryview(body).cast("B"), _GET_RSP, repeated=F.GET_RSP_MESSAGES)
    if F.GET_RSP_SUCCESS not in got or F.GET_RSP_ERR_CODE not in got:
        raise DecodeError("GetMessageResponseB2C: Message missing required fields")
    raws: list[RawMessage] = got[F.GET_RSP_MESSAGES]
    curr = got.get(F.GET_RSP_CURR_OFFSET, -1)
    messages: list[Message] = []
    dropped = 0
    for raw in raws:
        # no per-message offset (None): the answer carries none and start + 28 x i is wrong when the
        # partition shares its store; the result's curr_offset is the batch's exact start
        if verify:
            m = decode_message(raw, topic, partition, None)
        else:
            m = _to_message(raw, topic, partition, None)
        if m is None:
            dropped += 1
        else:
            messages.append(m)
    return GetMessageResult(
        got[F.GET_RSP_SUCCESS], got[F.GET_RSP_ERR_CODE], got.get(F.GET_RSP_ERR_MSG, ""), messages, curr,
        got.get(F.GET_RSP_MIN_LIMIT_TIME, 0), got.get(F.GET_RSP_ESC_FLOW_CTRL, False),
        got.get(F.GET_RSP_CURR_DATA_DLT, -1), got.get(F.GET_RSP_REQUIRE_SLOW, False),
        got.get(F.GET_RSP_MAX_OFFSET, -1), dropped,
    )


def encode_transfered_message(message_id: int, checksum: int, payload: Any, flag: int) -> bytes:
    """Server side: one TransferedMessage, in the form stored on disk and returned by getMessage."""
    return (
        _f_varint(F.TM_MESSAGE_ID, message_id)
        + _f_varint(F.TM_CHECKSUM, checksum)
        + _f_bytes(F.TM_PAYLOAD, bytes(payload))
        + _f_varint(F.TM_FLAG, flag)
    )


def wrap_repeated(field: int, encoded_messages: Iterable[Any]) -> bytes:
    """Server side: join pre-encoded sub-messages as a repeated LEN field (no re-encoding)."""
    out = bytearray()
    key = _varint((field << 3) | 2)
    for m in encoded_messages:
        out += key
        out += _varint(len(m))
        out += m
    return bytes(out)
