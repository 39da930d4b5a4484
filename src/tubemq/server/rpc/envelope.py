"""RPC framing and envelopes of the embedded servers: what a request is, how Java says it is wrong.

Parses the RpcConnHeader/RequestHeader/RequestBody envelope (docs/PROTOCOL.md §1, §2) and the
request bodies, and produces the texts protobuf-java (3.19) and the real server's PbEnDecoder give
for malformed input (captures s6a/b/d). No sockets here: ``server/rpc/__init__.py`` and
``server/rpc/connection.py`` carry the bytes.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError as PbDecodeError
from google.protobuf.message import Message

from ... import codec
from ...protocol import broker_pb, master_pb
from ...protocol import constants as C
from .. import wire

#: method id -> request protobuf class (PbEnDecoder.pbDecode, §2.3). Methods 7-9 (broker -> master) have
#: no message types in our .proto files, so like 11/12/14/19 they decode as "Unsupported method ID".
REQUEST_TYPES: dict[int, type[Message]] = {
    1: master_pb.RegisterRequestP2M,
    2: master_pb.HeartRequestP2M,
    3: master_pb.CloseRequestP2M,
    4: master_pb.RegisterRequestC2M,
    5: master_pb.HeartRequestC2M,
    6: master_pb.CloseRequestC2M,
    13: broker_pb.SendMessageRequestP2B,
    15: broker_pb.RegisterRequestC2B,
    16: broker_pb.HeartBeatRequestC2B,
    17: broker_pb.GetMessageRequestC2B,
    18: broker_pb.CommitOffsetRequestC2B,
    20: master_pb.RegisterRequestC2MV2,
    21: master_pb.HeartRequestC2MV2,
    22: master_pb.GetPartMetaRequestC2M,
}

MASTER_METHODS = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21, 22})
BROKER_METHODS = frozenset({11, 12, 13, 14, 15, 16, 17, 18, 19})

_FATAL_READ = "IPC server unable to read call parameters:"
_FATAL_HANDLE = "IPC server handle request error :"

# protobuf-java (3.19) InvalidProtocolBufferException texts.
PB_TRUNCATED = (
    "While parsing a protocol message, the input ended unexpectedly in the middle of a field.  "
    "This could mean either that the input has been truncated or that an embedded message "
    "misreported its own length."
)
PB_NEGATIVE_SIZE = (
    "CodedInputStream encountered an embedded string or message which claimed to have negative size."
)
PB_MALFORMED_VARINT = "CodedInputStream encountered a malformed varint."
PB_INVALID_TAG = "Protocol message contained an invalid tag (zero)."
PB_INVALID_END_TAG = "Protocol message end-group tag did not match expected tag."
PB_INVALID_WIRE_TYPE = "Protocol message tag had invalid wire type."
PB_MISSING = "Message missing required fields: "


class RpcException(Exception):
    """Raised by handlers for an ERROR (status 1) or FATAL (status 2) RPC answer."""

    def __init__(self, exception_name: str, message: str = "", status: int = 1) -> None:
        super().__init__(f"{exception_name}: {message}")
        self.exception_name = exception_name
        self.message = message
        self.status = status


def rewrite_exception_name(name: str, protocol_ver: int) -> str:
    """MixUtils.replaceClassNamePrefix (§2.4): only the org.apache.inlong.tubemq. prefix changes."""
    repl = C.JAVA_PREFIX_BY_VERSION.get(protocol_ver)
    if repl is not None and name.startswith(C.JAVA_PREFIX):
        return repl + name[len(C.JAVA_PREFIX) :]
    return name


# ----------------------------------------------------------------------------------------------------
# protobuf-java error emulation (only used on failure paths)


class _JavaParseError(Exception):
    pass


def _read_varint(buf: bytes, pos: int, end: int, limit: int = 10) -> tuple[int, int]:
    result = 0
    shift = 0
    for _ in range(limit):
        if pos >= end:
            raise _JavaParseError(PB_TRUNCATED)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise _JavaParseError(PB_MALFORMED_VARINT)


def _check_wire(buf: bytes, pos: int, end: int, descriptor: Any, end_group: int = 0) -> int:
    """Walk a protobuf message like CodedInputStream would; raise _JavaParseError with Java's text."""
    fields = descriptor.fields_by_number if descriptor is not None else {}
    while pos < end:
        tag, pos = _read_varint(buf, pos, end)
        tag &= 0xFFFFFFFF
        number, wt = tag >> 3, tag & 7
        if number == 0:
            raise _JavaParseError(PB_INVALID_TAG)
        if wt == 0:
            _, pos = _read_varint(buf, pos, end)
        elif wt == 1:
            if end - pos < 8:
                raise _JavaParseError(PB_TRUNCATED)
            pos += 8
        elif wt == 5:
            if end - pos < 4:
                raise _JavaParseError(PB_TRUNCATED)
            pos += 4
        elif wt == 2:
            n, pos = _read_varint(buf, pos, end)
            if n >= 1 << 63 or (n & 0xFFFFFFFF) >= 1 << 31:
                raise _JavaParseError(PB_NEGATIVE_SIZE)
            if end - pos < n:
                raise _JavaParseError(PB_TRUNCATED)
            fd = fields.get(number)
            if fd is not None and fd.type == FieldDescriptor.TYPE_MESSAGE:
                _check_wire(buf, pos, pos + n, fd.message_type)
            pos += n
        elif wt == 3:
            pos = _check_wire(buf, pos, end, None, end_group=number)
        elif wt == 4:
            if number != end_group:
                raise _JavaParseError(PB_INVALID_END_TAG)
            return pos
        else:
            raise _JavaParseError(PB_INVALID_WIRE_TYPE)
    if end_group:
        raise _JavaParseError(PB_TRUNCATED)
    return pos


def java_parse_error(data: bytes, message_type: type[Message]) -> str:
    """protobuf-java's exception text for ``data`` parsed as ``message_type`` ("" if it would parse)."""
    try:
        _check_wire(data, 0, len(data), message_type.DESCRIPTOR)
    except _JavaParseError as exc:
        return str(exc)
    msg = message_type()
    try:
        msg.MergeFromString(data)
    except PbDecodeError:
        return PB_TRUNCATED  # upb refused something our walker accepted; closest Java text
    if not msg.IsInitialized():
        return PB_MISSING + ", ".join(msg.FindInitializationErrors())
    return ""


def parse_request_message(method: int, data: bytes) -> Message:
    """Decode a request body like PbEnDecoder: raise _JavaParseError with Java's wording on failure."""
    cls = REQUEST_TYPES.get(method)
    if cls is None:
        raise _JavaParseError(f"Unsupported method ID :{method}")
    msg = cls()
    try:
        msg.MergeFromString(data)
    except PbDecodeError:
        raise _JavaParseError(java_parse_error(data, cls) or PB_TRUNCATED) from None
    if not msg.IsInitialized():
        raise _JavaParseError(PB_MISSING + ", ".join(msg.FindInitializationErrors()))
    return msg


_ENVELOPE = (
    ("RpcConnHeader", ((1, 0),)),  # (field, wire type) of required fields
    ("RequestHeader", ()),
    ("RequestBody", ((1, 0),)),
)


def _slow_envelope(payload: bytes) -> tuple[int, int, int, int | None, bytes]:
    """Envelope parse with Java's failure texts: (service_type, protocol_ver, method, timeout, body)."""
    from ...protocol import rpc_pb

    types = (rpc_pb.RpcConnHeader, rpc_pb.RequestHeader, rpc_pb.RequestBody)
    pos = 0
    end = len(payload)
    parsed: list[Message] = []
    for cls in types:
        n, pos = _read_varint(payload, pos, end)
        if n >= 1 << 31:
            raise _JavaParseError(PB_NEGATIVE_SIZE)
        if end - pos < n:
            raise _JavaParseError(PB_TRUNCATED)
        chunk = payload[pos : pos + n]
        pos += n
        err = java_parse_error(chunk, cls)
        if err:
            raise _JavaParseError(err)
        parsed.append(cls.FromString(chunk))
    header, body = parsed[1], parsed[2]
    return (
        header.serviceType if header.HasField("serviceType") else -1,
        header.protocolVer if header.HasField("protocolVer") else -1,
        body.method,
        body.timeout if body.HasField("timeout") else None,
        body.request,
    )


def _fast_envelope(payload: bytes) -> tuple[int, int, int, int | None, bytes]:
    """Hot path: the codec's envelope decoder; any failure is re-diagnosed by the slow path."""
    try:
        r = wire.decode_request(payload)
    except Exception:
        return _slow_envelope(payload)
    return r.service_type, r.protocol_ver, r.method, r.timeout, r.body


# ----------------------------------------------------------------------------------------------------
# server


def _served_service_types(methods: Collection[int]) -> frozenset[int]:
    types: set[int] = set()
    for m in methods:
        if m in MASTER_METHODS:
            types.add(int(C.ServiceType.MASTER))
        if m in BROKER_METHODS:
            types.update((int(C.ServiceType.BROKER_READ), int(C.ServiceType.BROKER_WRITE)))
    return frozenset(types)


#: Bytes of RPC envelope (headers, clientId, topic, msgType, msgTime, auth info) around a message body,
#: with room to spare.
ENVELOPE_ALLOWANCE = 64 * 1024


def frame_limit_for(max_msg_size: int) -> int:
    """Largest incomplete request frame kept for topics of at most ``max_msg_size`` bytes per message.

    A legal send needs data (max + 10240 header allowance) plus the envelope; twice the data part is
    kept so that a message up to twice too large still reaches the broker and gets its real 400
    answer (``data length over max length``) instead of a closed connection.
    """
    return 2 * (max_msg_size + C.META_MAX_MESSAGE_HEADER_SIZE) + ENVELOPE_ALLOWANCE


def _has_zero_list_header(data: bytes) -> bool:
    """True when ``data`` holds a frame header (token, serial) with list size 0."""
    token = codec.BEGIN_TOKEN.to_bytes(4, "big")
    start = data.find(token)
    while start >= 0:
        if len(data) >= start + 12 and data[start + 8 : start + 12] == b"\x00\x00\x00\x00":
            return True
        start = data.find(token, start + 1)
    return False
