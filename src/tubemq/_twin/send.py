"""The twin's hot path: checksums, the send request / response and the getMessage response."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from ..errors import DecodeError
from ..protocol import wire_fields as F
from ..protocol.constants import INDEX_ENTRY_SIZE, TOKEN_MSG_TIME, TOKEN_MSG_TYPE, Method, ServiceType
from .datatypes import GetMessageResult, Message, Partition, RawMessage, SendResponse
from .envelope import decode_response, encode_request
from .payload import _split_payload, decode_attributes
from .pbwire import _f_bytes, _f_varint, _iter_fields, _signed32, _signed64, _varint

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)


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
    buf = memoryview(body).cast("B")
    success = False
    code = 0
    msg = ""
    mid = None
    atime = aoff = -1
    require_auth = False
    seen = 0
    for f, wt, v in _iter_fields(buf, 0, len(buf)):
        if wt == F.WT_VARINT:
            if f == F.SEND_RSP_SUCCESS:
                success = bool(v)
                seen |= 1
            elif f == F.SEND_RSP_ERR_CODE:
                code = _signed32(v)
                seen |= 2
            elif f == F.SEND_RSP_REQUIRE_AUTH:
                require_auth = bool(v)
            elif f == F.SEND_RSP_MESSAGE_ID:
                mid = _signed64(v)
            elif f == F.SEND_RSP_APPEND_TIME:
                atime = _signed64(v)
            elif f == F.SEND_RSP_APPEND_OFFSET:
                aoff = _signed64(v)
        elif f == F.SEND_RSP_ERR_MSG and wt == F.WT_LEN:
            msg = bytes(v).decode("utf-8", "replace")
            seen |= 4
    if seen != 7:
        raise DecodeError("SendMessageResponseB2P: Message missing required fields")
    if mid is None:
        mid = java_parse_long(msg) if success else -1
    return SendResponse(success, code, msg, mid, atime, aoff, require_auth)


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
    raw: RawMessage, topic: str, partition: Partition | None = None, offset: int = -1
) -> Message | None:
    """One TransferedMessage -> Message, or None when §4.9 says drop (bad checksum / header)."""
    if crc32(raw.payload) != raw.checksum:
        return None
    try:
        attr, body = _split_payload(raw.payload, raw.flag)
    except DecodeError:
        return None
    attrs = decode_attributes(attr)
    return Message(
        topic,
        bytes(body),
        attrs,
        attrs.get(TOKEN_MSG_TYPE),
        attrs.get(TOKEN_MSG_TIME),
        raw.message_id,
        raw.flag,
        partition,
        offset,
    )


def _parse_transfered(buf: Any) -> RawMessage:
    mid = cs = flag = None
    payload = None
    for f, wt, v in _iter_fields(buf, 0, len(buf)):
        if f == F.TM_MESSAGE_ID and wt == F.WT_VARINT:
            mid = _signed64(v)
        elif f == F.TM_CHECKSUM and wt == F.WT_VARINT:
            cs = _signed32(v)
        elif f == F.TM_PAYLOAD and wt == F.WT_LEN:
            payload = v
        elif f == F.TM_FLAG and wt == F.WT_VARINT:
            flag = _signed32(v)
    if mid is None or cs is None or payload is None or flag is None:
        raise DecodeError("TransferedMessage: Message missing required fields")
    return RawMessage(mid, cs, bytes(payload), flag)


def decode_get_message_response(
    body: Any, topic: str, partition: Partition | None = None, verify: bool = True
) -> GetMessageResult:
    """GetMessageResponseB2C with its messages decoded and checked (§3.7, §4.9)."""
    buf = memoryview(body).cast("B")
    success = False
    code = 0
    msg = ""
    raws: list[RawMessage] = []
    curr = -1
    min_limit = 0
    esc = False
    dlt = -1
    slow = False
    max_off = -1
    seen = 0
    for f, wt, v in _iter_fields(buf, 0, len(buf)):
        if wt == F.WT_VARINT:
            if f == F.GET_RSP_SUCCESS:
                success = bool(v)
                seen |= 1
            elif f == F.GET_RSP_ERR_CODE:
                code = _signed32(v)
                seen |= 2
            elif f == F.GET_RSP_CURR_OFFSET:
                curr = _signed64(v)
            elif f == F.GET_RSP_MIN_LIMIT_TIME:
                min_limit = _signed32(v)
            elif f == F.GET_RSP_ESC_FLOW_CTRL:
                esc = bool(v)
            elif f == F.GET_RSP_CURR_DATA_DLT:
                dlt = _signed64(v)
            elif f == F.GET_RSP_REQUIRE_SLOW:
                slow = bool(v)
            elif f == F.GET_RSP_MAX_OFFSET:
                max_off = _signed64(v)
        elif wt == F.WT_LEN:
            if f == F.GET_RSP_ERR_MSG:
                msg = bytes(v).decode("utf-8", "replace")
            elif f == F.GET_RSP_MESSAGES:
                raws.append(_parse_transfered(v))
    if seen != 3:
        raise DecodeError("GetMessageResponseB2C: Message missing required fields")
    messages: list[Message] = []
    dropped = 0
    for i, raw in enumerate(raws):
        if verify:
            m = decode_message(raw, topic, partition, curr + INDEX_ENTRY_SIZE * i if curr >= 0 else -1)
        else:
            attr, data = _split_payload(raw.payload, raw.flag)
            attrs = decode_attributes(attr)
            m = Message(topic, bytes(data), attrs, attrs.get(TOKEN_MSG_TYPE), attrs.get(TOKEN_MSG_TIME),
                        raw.message_id, raw.flag, partition, curr + INDEX_ENTRY_SIZE * i)
        if m is None:
            dropped += 1
        else:
            messages.append(m)
    return GetMessageResult(success, code, msg, messages, curr, min_limit, esc, dlt, slow, max_off, dropped)


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
