"""Pure-Python twin of :mod:`tubemq._codec` (same contract, selected with TUBEMQ_NO_EXTENSIONS=1).

Sans-IO: bytes in, bytes and small objects out. No sockets, no asyncio, no threads. It also carries a
tiny hand-written protobuf reader/writer for the hot flat messages (send request/response, getMessage
response) because the codec layer sits *below* the generated protobuf modules (DESIGN.md layers).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ._text import encode_attributes, java_hash, put_system_header  # noqa: F401  (re-exported: the contract)
from .errors import DecodeError, FrameError
from .protocol import wire_fields as F
from .protocol.constants import (
    BEGIN_TOKEN,
    DEFAULT_BROKER_PORT,
    INDEX_ENTRY_SIZE,
    MAX_BLOCK_SIZE,
    MAX_FRAME_SIZE,
    MAX_LIST_SIZE,
    META_STORE_INS_BASE,
    TOKEN_MSG_TIME,
    TOKEN_MSG_TYPE,
    Method,
    ServiceType,
)

if TYPE_CHECKING:
    from .inlongmsg import InLongMsg

implementation = "python"

DEFAULT_MAX_FRAME_SIZE = MAX_FRAME_SIZE
#: Default cap on the partitions one topic's topicInfo / topicMetaInfo entries may expand to: real
#: deployments have at most a few thousand; a hostile ``t#1:999:999`` would otherwise build ~1M objects.
DEFAULT_MAX_PARTITIONS = 10_000
#: Default cap on all partitions one parse call may build (every topic of a metadata answer together).
DEFAULT_MAX_TOTAL_PARTITIONS = 200_000
_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)

_HEADER = struct.Struct(">III")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_TOKEN_BYTES = _U32.pack(BEGIN_TOKEN)


# ----------------------------------------------------------------------------------------------------
# small typed objects


class BrokerInfo(NamedTuple):
    """One broker of the cluster (§4.1)."""

    broker_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.broker_id}:{self.host}:{self.port}"


class Partition(NamedTuple):
    """A topic partition on a broker; ``str()`` is the wire partition string (§4.3)."""

    broker_id: int
    host: str
    port: int
    topic: str
    partition_id: int

    @property
    def key(self) -> str:
        """partitionKey ``brokerId:topic:partitionId``."""
        return f"{self.broker_id}:{self.topic}:{self.partition_id}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.broker_id}:{self.host}:{self.port}#{self.topic}:{self.partition_id}"


#: Alias kept for DESIGN.md's wording (`parse_topic_info -> list[TopicPartition]`).
TopicPartition = Partition


class SubscribeInfo(NamedTuple):
    """``consumerId@group#brokerId:host:port#topic:partitionId`` (§4.3)."""

    consumer_id: str
    group: str
    partition: Partition

    def __str__(self) -> str:
        return f"{self.consumer_id}@{self.group}#{self.partition}"


class Response(NamedTuple):
    """A decoded response payload (§2.5/§2.6)."""

    flag: int
    status: int  # 0 SUCCESS, 1 ERROR, 2 FATAL
    method: int  # -1 on error responses
    body: bytes  # RspResponseBody.data on success, b"" otherwise
    exception_name: str
    message: str
    protocol_ver: int  # -1 when absent


class Request(NamedTuple):
    """A decoded request payload (server side)."""

    flag: int
    service_type: int  # -1 when absent
    protocol_ver: int  # -1 when absent
    method: int
    timeout: int | None  # None when absent
    body: bytes


class SendResponse(NamedTuple):
    success: bool
    err_code: int
    err_msg: str
    message_id: int
    append_time: int
    append_offset: int
    require_auth: bool


class RawMessage(NamedTuple):
    """One TransferedMessage as stored by the broker (§3.7)."""

    message_id: int
    checksum: int
    payload: bytes
    flag: int


class GetMessageResult(NamedTuple):
    success: bool
    err_code: int
    err_msg: str
    messages: list[Any]  # list[Message]
    curr_offset: int
    min_limit_time: int
    esc_flow_ctrl: bool
    curr_data_dlt: int
    require_slow: bool
    max_offset: int
    dropped: int  # messages dropped by the §4.9 rules (bad checksum, bad header)


def message_repr(m: Any) -> str:
    """``repr()`` of a Message of either codec (the compiled class calls this one too)."""
    return (
        f"Message(topic={m.topic!r}, partition={m.partition.key if m.partition else None!r}, "
        f"offset={m.offset}, message_id={m.message_id}, stream_id={m.stream_id!r}, "
        f"data={m.data[:32]!r}{'...' if len(m.data) > 32 else ''})"
    )


class Message:
    """A consumed (or to-be-sent) message.

    ``offset`` is a per-partition position: the fetch's start offset plus 28 × the message's index in
    that fetch. It is strictly increasing within a partition and equals the broker's index offset
    when the partition does not share its store with siblings (§4.10).
    """

    __slots__ = (
        "topic",
        "data",
        "attributes",
        "stream_id",
        "msg_time",
        "message_id",
        "flag",
        "partition",
        "offset",
    )

    def __init__(
        self,
        topic: str,
        data: bytes,
        attributes: dict[str, str] | None = None,
        stream_id: str | None = None,
        msg_time: str | None = None,
        message_id: int = 0,
        flag: int = 0,
        partition: Partition | None = None,
        offset: int = -1,
    ) -> None:
        self.topic = topic
        self.data = data
        self.attributes = attributes if attributes is not None else {}
        self.stream_id = stream_id
        self.msg_time = msg_time
        self.message_id = message_id
        self.flag = flag
        self.partition = partition
        self.offset = offset

    @property
    def value(self) -> bytes:
        return self.data

    def inlongmsg(self) -> InLongMsg:
        """Decode ``data`` as an InLong container (:func:`tubemq.inlongmsg.decode`)."""
        # imported on first use (most programs never decode InLong data); tubemq.inlongmsg sits below
        # the codec and imports none of it, so this points down
        from .inlongmsg import decode

        return decode(self.data)

    def __repr__(self) -> str:
        return message_repr(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]


# ----------------------------------------------------------------------------------------------------
# checksums and small helpers


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


# ----------------------------------------------------------------------------------------------------
# framing (§1)


def _frame_into(out: bytearray, serial: int, payload: Any) -> None:
    view = memoryview(payload).cast("B")
    n = len(view)
    blocks = max(1, -(-n // MAX_BLOCK_SIZE))
    out += _HEADER.pack(BEGIN_TOKEN, serial & 0xFFFFFFFF, blocks)
    if n == 0:
        out += _U32.pack(0)
        return
    for start in range(0, n, MAX_BLOCK_SIZE):
        chunk = view[start : start + MAX_BLOCK_SIZE]
        out += _U32.pack(len(chunk))
        out += chunk


def encode_frame(serial: int, payload: Any) -> bytes:
    """Frame ``payload`` as token + serial + block list, Java layout (8192-byte blocks)."""
    out = bytearray()
    _frame_into(out, serial, payload)
    return bytes(out)


class FrameDecoder:
    """Streaming frame decoder: feed bytes cut anywhere, get ``(serial, payload)`` tuples back.

    Raises :class:`FrameError` on a bad begin token, a zero or oversized block count, or a frame
    above ``max_frame_size``; after that every call raises again (the stream is unusable).
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, max_blocks: int = MAX_LIST_SIZE) -> None:
        if max_frame_size <= 0 or max_blocks <= 0:
            raise ValueError("max_frame_size and max_blocks must be positive")
        self.max_frame_size = max_frame_size
        self.max_blocks = max_blocks
        self._buf = bytearray()
        self._pos = 0
        self._error: str | None = None
        # state of the frame being assembled
        self._serial = -1
        self._blocks_left = 0
        self._payload = bytearray()

    @property
    def failed(self) -> bool:
        return self._error is not None

    @property
    def buffered(self) -> int:
        """Bytes held for the incomplete frame (bounded by ``max_frame_size`` + 12)."""
        return len(self._buf) - self._pos + len(self._payload)

    def _fail(self, reason: str) -> FrameError:
        self._error = reason
        self._buf = bytearray()
        self._payload = bytearray()
        self._pos = 0
        return FrameError(reason)

    def feed(self, data: Any) -> list[tuple[int, bytes]]:
        if self._error is not None:
            raise FrameError(f"decoder failed earlier: {self._error}")
        self._buf += data
        out: list[tuple[int, bytes]] = []
        buf = self._buf
        pos = self._pos
        end = len(buf)
        while True:
            if self._serial < 0:
                if end - pos < 12:
                    break
                token, serial, blocks = _HEADER.unpack_from(buf, pos)
                if token != BEGIN_TOKEN:
                    raise self._fail(f"bad begin token 0x{token:08x}")
                if blocks == 0:
                    raise self._fail("frame with an empty block list")
                if blocks > self.max_blocks:
                    raise self._fail(f"block count {blocks} over the limit {self.max_blocks}")
                pos += 12
                self._serial = serial
                self._blocks_left = blocks
            while self._blocks_left:
                if end - pos < 4:
                    break
                (length,) = _U32.unpack_from(buf, pos)
                if length > self.max_frame_size or len(self._payload) + length > self.max_frame_size:
                    raise self._fail(f"frame size over the limit {self.max_frame_size}")
                if end - pos - 4 < length:
                    break
                self._payload += buf[pos + 4 : pos + 4 + length]
                pos += 4 + length
                self._blocks_left -= 1
            if self._blocks_left:
                break
            out.append((self._serial, bytes(self._payload)))
            self._payload = bytearray()
            self._serial = -1
        if pos:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out


# ----------------------------------------------------------------------------------------------------
# protobuf wire helpers (only what the hot messages need)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:  # a 10th byte may carry only bit 63 (protobuf's 64-bit limit)
            raise DecodeError("varint longer than 64 bits")
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _signed64(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def _signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _iter_fields(buf: Any, pos: int, end: int) -> Iterable[tuple[int, int, Any]]:
    """Yield (field number, wire type, value); value is int for varints, a slice for LEN fields."""
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        field, wt = key >> 3, key & 7
        if wt == 0:
            value, pos = _read_varint(buf, pos, end)
        elif wt == 2:
            n, pos = _read_varint(buf, pos, end)
            if pos + n > end:
                raise DecodeError("truncated length-delimited field")
            value = buf[pos : pos + n]
            pos += n
        elif wt == 1:
            if pos + 8 > end:
                raise DecodeError("truncated fixed64")
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wt == 5:
            if pos + 4 > end:
                raise DecodeError("truncated fixed32")
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise DecodeError(f"unsupported wire type {wt}")
        if field == 0:
            raise DecodeError("field number 0")
        yield field, wt, value


def _f_varint(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _f_bytes(field: int, value: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(value)) + value


def _read_delimited(buf: Any, pos: int, end: int) -> tuple[Any, int]:
    n, pos = _read_varint(buf, pos, end)
    if pos + n > end:
        raise DecodeError("truncated delimited message")
    return buf[pos : pos + n], pos + n


# ----------------------------------------------------------------------------------------------------
# envelope (§2)


def _request_payload(service_type: int, method: int, body: Any, timeout_ms: int, protocol_ver: int) -> bytes:
    conn = _f_varint(F.CONN_FLAG, 0)
    header = _f_varint(F.REQ_HDR_SERVICE_TYPE, service_type) + _f_varint(F.REQ_HDR_PROTOCOL_VER, protocol_ver)
    req_body = (
        _f_varint(F.REQ_BODY_METHOD, method)
        + _f_varint(F.REQ_BODY_TIMEOUT, timeout_ms)
        + _f_bytes(F.REQ_BODY_REQUEST, bytes(body))
    )
    return (
        _varint(len(conn)) + conn + _varint(len(header)) + header + _varint(len(req_body)) + req_body
    )


def encode_request(
    serial: int,
    service_type: int,
    method: int,
    body: Any,
    *,
    timeout_ms: int,
    protocol_ver: int = 3,
) -> bytes:
    """A whole request frame: RpcConnHeader{flag 0} + RequestHeader + RequestBody(method, timeout, body)."""
    if timeout_ms is None or timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive: the server never answers a request without it")
    return encode_frame(serial, _request_payload(service_type, method, body, timeout_ms, protocol_ver))


def decode_request(payload: Any) -> Request:
    """Server side: the three delimited messages of a request (trailing bytes ignored, §1.4)."""
    buf = memoryview(payload).cast("B")
    end = len(buf)
    conn, pos = _read_delimited(buf, 0, end)
    header, pos = _read_delimited(buf, pos, end)
    body, pos = _read_delimited(buf, pos, end)
    flag = None
    for f, wt, v in _iter_fields(conn, 0, len(conn)):
        if f == F.CONN_FLAG and wt == F.WT_VARINT:
            flag = _signed32(v)
    if flag is None:
        raise DecodeError("RpcConnHeader: Message missing required fields: flag")
    service_type = protocol_ver = -1
    for f, wt, v in _iter_fields(header, 0, len(header)):
        if f == F.REQ_HDR_SERVICE_TYPE and wt == F.WT_VARINT:
            service_type = _signed32(v)
        elif f == F.REQ_HDR_PROTOCOL_VER and wt == F.WT_VARINT:
            protocol_ver = _signed32(v)
    method = None
    timeout: int | None = None
    req = b""
    for f, wt, v in _iter_fields(body, 0, len(body)):
        if f == F.REQ_BODY_METHOD and wt == F.WT_VARINT:
            method = _signed32(v)
        elif f == F.REQ_BODY_TIMEOUT and wt == F.WT_VARINT:
            timeout = _signed64(v)
        elif f == F.REQ_BODY_REQUEST and wt == F.WT_LEN:
            req = bytes(v)
    if method is None:
        raise DecodeError("RequestBody: Message missing required fields: method")
    return Request(flag, service_type, protocol_ver, method, timeout, req)


#: Delimited RpcConnHeader{flag: response}, the same in every response.
_RESPONSE_CONN = _varint(2) + _f_varint(F.CONN_FLAG, 1)


def _response_frame(serial: int, header: bytes, body: bytes) -> bytes:
    """RpcConnHeader{flag 1} + the delimited ResponseHeader and body message, framed."""
    return encode_frame(serial, _RESPONSE_CONN + _varint(len(header)) + header + _varint(len(body)) + body)


def encode_response(serial: int, method: int, body: Any, *, protocol_ver: int = 3) -> bytes:
    """Server side: a success response frame (flag 1, status SUCCESS, protocolVer 3)."""
    header = _f_varint(F.RSP_HDR_STATUS, 0) + _f_varint(F.RSP_HDR_PROTOCOL_VER, protocol_ver)
    rsp = _f_varint(F.RSP_BODY_METHOD, method) + _f_bytes(F.RSP_BODY_DATA, bytes(body))
    return _response_frame(serial, header, rsp)


def encode_error_response(
    serial: int, exception_name: str, message: str, *, status: int = 1, protocol_ver: int | None = 3
) -> bytes:
    """Server side: ERROR (status + protocolVer) or FATAL (status only) with an RspExceptionBody."""
    header = _f_varint(F.RSP_HDR_STATUS, status)
    if protocol_ver is not None:
        header += _f_varint(F.RSP_HDR_PROTOCOL_VER, protocol_ver)
    exc = _f_bytes(F.RSP_EXC_NAME, exception_name.encode()) + _f_bytes(F.RSP_EXC_MESSAGE, message.encode())
    return _response_frame(serial, header, exc)


def decode_response(payload: Any) -> Response:
    """Client side: the three delimited messages of a response (trailing bytes ignored)."""
    buf = memoryview(payload).cast("B")
    end = len(buf)
    conn, pos = _read_delimited(buf, 0, end)
    header, pos = _read_delimited(buf, pos, end)
    body, pos = _read_delimited(buf, pos, end)
    flag = 0
    for f, wt, v in _iter_fields(conn, 0, len(conn)):
        if f == F.CONN_FLAG and wt == F.WT_VARINT:
            flag = _signed32(v)
    status = None
    protocol_ver = -1
    for f, wt, v in _iter_fields(header, 0, len(header)):
        if f == F.RSP_HDR_STATUS and wt == F.WT_VARINT:
            status = _signed32(v)
        elif f == F.RSP_HDR_PROTOCOL_VER and wt == F.WT_VARINT:
            protocol_ver = _signed32(v)
    if status is None:
        raise DecodeError("ResponseHeader without status")
    if status == 0:
        method = None
        data = None
        for f, wt, v in _iter_fields(body, 0, len(body)):
            if f == F.RSP_BODY_METHOD and wt == F.WT_VARINT:
                method = _signed32(v)
            elif f == F.RSP_BODY_DATA and wt == F.WT_LEN:
                data = bytes(v)
        if method is None or data is None:
            raise DecodeError("RspResponseBody: Message missing required fields")
        return Response(flag, status, method, data, "", "", protocol_ver)
    name = None
    message = ""
    for f, wt, v in _iter_fields(body, 0, len(body)):
        if f == F.RSP_EXC_NAME and wt == F.WT_LEN:
            name = bytes(v).decode("utf-8", "replace")
        elif f == F.RSP_EXC_MESSAGE and wt == F.WT_LEN:
            message = bytes(v).decode("utf-8", "replace")
    if name is None:
        raise DecodeError("RspExceptionBody: Message missing required fields: exceptionName")
    return Response(flag, status, -1, b"", name, message, protocol_ver)


# ----------------------------------------------------------------------------------------------------
# attributes and payloads (§4.6, §4.7)


def decode_attributes(text: str | None) -> dict[str, str]:
    """Parse an attribute string the way Java's ``getAttrValue`` reads it (malformed items skipped)."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(","):
        if not item:
            continue
        parts = item.split("=")
        if len(parts) < 2 or not parts[0]:
            continue
        result[parts[0]] = parts[1]
    return result


def encode_payload(data: Any, attributes: str | Mapping[str, Any] | None) -> bytes:
    """``SendMessageRequestP2B.data``: header only when the attribute text is non-empty (§4.7)."""
    if attributes is None or isinstance(attributes, str):
        text = attributes or ""
    else:
        text = encode_attributes(attributes)
    body = bytes(data)
    if not text:
        return body
    raw = text.encode("utf-8")
    return _I32.pack(len(raw)) + raw + body


def payload_flag(attributes: str | Mapping[str, Any] | None) -> int:
    """Flag bit 0 is set only when a header is actually written (unlike the Java quirk, §4.7)."""
    if attributes is None:
        return 0
    return 1 if (attributes if isinstance(attributes, str) else encode_attributes(attributes)) else 0


def _split_payload(data: Any, flag: int) -> tuple[str | None, Any]:
    if not flag & 1:
        return None, data
    n = len(data)
    if n < 4:
        raise DecodeError("flag says attributes but the payload is shorter than 4 bytes")
    (alen,) = _I32.unpack_from(data, 0)
    if alen < 0 or alen > n - 4:
        raise DecodeError(f"attribute length {alen} does not fit in a {n}-byte payload")
    attr = bytes(data[4 : 4 + alen]).decode("utf-8", "replace") if alen > 0 else None
    return attr, data[4 + alen :]


def decode_payload(data: Any, flag: int) -> tuple[dict[str, str], bytes]:
    """Split a stored payload into (attributes, body) (§4.9 steps 2-3)."""
    attr, body = _split_payload(data, flag)
    return decode_attributes(attr), bytes(body)


# ----------------------------------------------------------------------------------------------------
# strings (§4.1 - §4.3)


def parse_broker_info(text: str, default_port: int = DEFAULT_BROKER_PORT) -> BrokerInfo:
    """``brokerId:host:port``; a blank (or missing) port means the default port."""
    parts = text.strip().split(":")
    if len(parts) < 2 or not parts[0].strip() or not parts[1].strip():
        raise DecodeError(f"bad brokerInfo {text!r}")
    try:
        broker_id = int(parts[0])
        port = int(parts[2]) if len(parts) > 2 and parts[2].strip() else default_port
    except ValueError as exc:
        raise DecodeError(f"bad brokerInfo {text!r}") from exc
    return BrokerInfo(broker_id, parts[1].strip(), port)


def check_partition_count(
    topic: str, parts: int, stores: int, topic_count: int, total: int, max_partitions: int, max_total: int
) -> int:
    """The partitions ``parts`` x ``stores`` adds to a topic, or DecodeError over a cap (before allocating).

    ``topic_count``/``total`` are what the topic and the whole parse already hold.
    """
    if parts <= 0 or stores <= 0:
        if parts > max_partitions or stores > max_partitions:
            raise DecodeError(f"topic {topic!r}: {stores} stores x {parts} partitions over the limit {max_partitions}")
        return 0
    if parts > max_partitions or stores > max_partitions or topic_count + parts * stores > max_partitions:
        raise DecodeError(
            f"topic {topic!r}: {topic_count + parts * stores} partitions over the limit {max_partitions}"
            " (max_partitions)"
        )
    if total + parts * stores > max_total:
        raise DecodeError(f"metadata with more than {max_total} partitions (max_total_partitions)")
    return parts * stores


class PartitionBudget:
    """The partition caps of one parse call: per topic (across all its entries) and in all.

    Per-topic counts are kept only once the call holds more than ``max_partitions`` partitions in all
    (below that no topic can be over), so the usual metadata answer costs no bookkeeping.
    """

    __slots__ = ("max_partitions", "max_total", "meta", "counts", "counted")

    def __init__(self, max_partitions: int, max_total: int, meta: bool = False) -> None:
        self.max_partitions = max_partitions
        self.max_total = max_total
        self.meta = meta  # items are (Partition, subscribable) pairs
        self.counts: dict[str, int] = {}
        self.counted = 0

    def check(self, topic: str, parts: int, stores: int, count: int, start: int, items: list[Any]) -> int:
        """What ``parts`` x ``stores`` adds to ``topic``, or DecodeError (``count``: this entry's so far,
        ``start``: ``len(items)`` when the entry began)."""
        prior = 0
        if 0 < parts <= self.max_partitions and 0 < stores <= self.max_partitions and start > 0 and (
            start + count + parts * stores > self.max_partitions
        ):
            for item in items[self.counted : start]:
                key = item[0].topic if self.meta else item.topic
                self.counts[key] = self.counts.get(key, 0) + 1
            self.counted = max(self.counted, start)
            prior = self.counts.get(topic, 0)
        return check_partition_count(
            topic, parts, stores, prior + count, len(items), self.max_partitions, self.max_total
        )


def topic_info_entry(
    text: str,
    brokers: Mapping[int, BrokerInfo],
    partitions: list[Partition],
    sizes: dict[str, int],
    budget: PartitionBudget,
) -> None:
    """One ``topic#bid:parts:stores,...[#maxsize]`` entry appended to ``partitions``/``sizes``."""
    segs = text.split("#")
    if len(segs) < 2 or not segs[0]:
        raise DecodeError(f"bad topicInfo {text!r}")
    topic = segs[0]
    if len(segs) > 2 and segs[2].strip():
        try:
            size = int(segs[2])
        except ValueError as exc:
            raise DecodeError(f"bad max size in topicInfo {text!r}") from exc
    else:
        size = None
    count = 0
    start = len(partitions)
    for item in segs[1].split(","):
        if not item:
            continue
        fields = item.split(":")
        if len(fields) != 3:
            raise DecodeError(f"bad topicInfo item {item!r} in {text!r}")
        try:
            bid, parts, stores = int(fields[0]), int(fields[1]), int(fields[2])
        except ValueError as exc:
            raise DecodeError(f"bad topicInfo item {item!r} in {text!r}") from exc
        broker = brokers.get(bid)
        if broker is None:
            continue
        count += budget.check(topic, parts, stores, count, start, partitions)
        for s in range(stores if parts > 0 else 0):
            for i in range(parts):
                partitions.append(Partition(bid, broker.host, broker.port, topic, s * META_STORE_INS_BASE + i))
    if size is not None:
        sizes[topic] = size


def parse_topic_info(
    topic_infos: Iterable[str],
    brokers: Mapping[int, BrokerInfo],
    *,
    max_partitions: int = DEFAULT_MAX_PARTITIONS,
    max_total_partitions: int = DEFAULT_MAX_TOTAL_PARTITIONS,
) -> tuple[list[Partition], dict[str, int]]:
    """Expand producer topicInfos into partitions; returns (partitions, {topic: max size}).

    A topic expanding to more than ``max_partitions`` partitions (over all its entries), or a call to
    more than ``max_total_partitions``, raises DecodeError before the excess is built.
    """
    partitions: list[Partition] = []
    sizes: dict[str, int] = {}
    budget = PartitionBudget(max_partitions, max_total_partitions)
    for text in topic_infos:
        topic_info_entry(text, brokers, partitions, sizes, budget)
    return partitions, sizes


def parse_topic_meta_info(
    topic_metas: Iterable[str],
    brokers: Mapping[int, BrokerInfo],
    *,
    max_partitions: int = DEFAULT_MAX_PARTITIONS,
    max_total_partitions: int = DEFAULT_MAX_TOTAL_PARTITIONS,
) -> list[tuple[Partition, bool]]:
    """Client-balance ``topic#brokerId:storeNum:partNum:statusId`` -> [(partition, subscribable)].

    The same caps as :func:`parse_topic_info`; malformed numbers raise DecodeError.
    """
    result: list[tuple[Partition, bool]] = []
    budget = PartitionBudget(max_partitions, max_total_partitions, meta=True)
    for text in topic_metas:
        segs = text.split("#")
        if len(segs) < 2 or not segs[0]:
            raise DecodeError(f"bad topicMetaInfo {text!r}")
        topic = segs[0]
        count = 0
        start = len(result)
        for item in segs[1].split(","):
            if not item:
                continue
            fields = item.split(":")
            if len(fields) != 4:
                raise DecodeError(f"bad topicMetaInfo item {item!r}")
            try:
                bid, stores, parts, status = (int(x) for x in fields)
            except ValueError as exc:
                raise DecodeError(f"bad topicMetaInfo item {item!r} in {text!r}") from exc
            broker = brokers.get(bid)
            if broker is None:
                continue
            count += budget.check(topic, parts, stores, count, start, result)
            for s in range(stores if parts > 0 else 0):
                for i in range(parts):
                    p = Partition(bid, broker.host, broker.port, topic, s * META_STORE_INS_BASE + i)
                    result.append((p, status == 1))
    return result


def parse_partition(text: str) -> Partition:
    """Partition string ``brokerId:host:port#topic:partitionId`` (§4.3, §4.4)."""
    segs = text.split("#")
    if len(segs) != 2:
        raise DecodeError(f"bad partition string {text!r}")
    broker = parse_broker_info(segs[0])
    tp = segs[1].rsplit(":", 1)
    if len(tp) != 2 or not tp[0]:
        raise DecodeError(f"bad partition string {text!r}")
    try:
        pid = int(tp[1])
    except ValueError as exc:
        raise DecodeError(f"bad partition id in {text!r}") from exc
    return Partition(broker.broker_id, broker.host, broker.port, tp[0], pid)


def parse_subscribe_info(text: str) -> SubscribeInfo:
    """``consumerId@group#brokerId:host:port#topic:partitionId``."""
    segs = text.split("#")
    if len(segs) != 3:
        raise DecodeError(f"bad subscribeInfo {text!r}")
    cg = segs[0].split("@")
    if len(cg) != 2:
        raise DecodeError(f"bad subscribeInfo {text!r}")
    return SubscribeInfo(cg[0], cg[1], parse_partition(segs[1] + "#" + segs[2]))


# ----------------------------------------------------------------------------------------------------
# hot path: send request / response, getMessage response


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
