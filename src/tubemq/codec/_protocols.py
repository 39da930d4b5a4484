"""The codec contract, typed once: what ``tubemq.codec.compiled`` (Cython) and ``tubemq.codec.python`` both provide.

aiokafka's ``record/_protocols.py`` is the model: the compiled core and the pure-Python twin are
checked by mypy against these Protocols (``tubemq.codec`` assigns the live module to a
:class:`CodecModule` variable, and ``compiled.pyi`` and the twin must both fit it). Behaviour is pinned
by tests/codec (every test runs on both) and the parity fuzz in tests/reliability.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from . import python as _t  # the NamedTuple result types, shared by both codecs


class MessageProtocol(Protocol):
    """A consumed (or to-be-sent) message: ``tubemq.codec.compiled.Message`` and ``tubemq.codec.python.Message``."""

    topic: str
    data: bytes
    attributes: dict[str, str]
    stream_id: str | None
    msg_time: str | None
    message_id: int
    flag: int
    partition: _t.Partition | None
    #: None on a consumed message (no per-message offset in the protocol: use the batch's offsets)
    offset: int | None

    @property
    def value(self) -> bytes: ...


class FrameDecoderProtocol(Protocol):
    """Streaming frame decoder: bytes cut anywhere in, ``(serial, payload)`` out; FrameError is final."""

    max_frame_size: int
    max_blocks: int

    @property
    def failed(self) -> bool: ...

    @property
    def buffered(self) -> int: ...

    def feed(self, data: Buffer) -> list[tuple[int, bytes]]: ...


class CodecModule(Protocol):
    """Everything both codec modules export (constants, result types and functions)."""

    implementation: str
    BEGIN_TOKEN: int
    MAX_BLOCK_SIZE: int
    MAX_LIST_SIZE: int
    DEFAULT_MAX_FRAME_SIZE: int
    DEFAULT_MAX_PARTITIONS: int
    DEFAULT_MAX_TOTAL_PARTITIONS: int

    @property
    def BrokerInfo(self) -> type[_t.BrokerInfo]: ...
    @property
    def Partition(self) -> type[_t.Partition]: ...
    @property
    def SubscribeInfo(self) -> type[_t.SubscribeInfo]: ...
    @property
    def Response(self) -> type[_t.Response]: ...
    @property
    def Request(self) -> type[_t.Request]: ...
    @property
    def SendResponse(self) -> type[_t.SendResponse]: ...
    @property
    def RawMessage(self) -> type[_t.RawMessage]: ...
    @property
    def GetMessageResult(self) -> type[_t.GetMessageResult]: ...
    @property
    def Message(self) -> type[MessageProtocol]: ...
    @property
    def FrameDecoder(self) -> type[FrameDecoderProtocol]: ...

    def crc32(self, data: Buffer) -> int: ...
    def ip_to_int(self, ip: str) -> int: ...
    def java_hash(self, text: str) -> int: ...
    def encode_frame(self, serial: int, payload: Buffer) -> bytes: ...
    def encode_request(
        self, serial: int, service_type: int, method: int, body: Buffer, *, timeout_ms: int, protocol_ver: int = 3
    ) -> bytes: ...
    def decode_request(self, payload: Buffer) -> _t.Request: ...
    def encode_response(self, serial: int, method: int, body: Buffer, *, protocol_ver: int = 3) -> bytes: ...
    def encode_error_response(
        self, serial: int, exception_name: str, message: str, *, status: int = 1, protocol_ver: int | None = 3
    ) -> bytes: ...
    def decode_response(self, payload: Any) -> _t.Response: ...  # Any: callers pass Optional-typed frames
    def encode_attributes(self, attributes: Mapping[str, Any] | None) -> str: ...
    def decode_attributes(self, text: str | None) -> dict[str, str]: ...
    def put_system_header(self, previous: str | None, msg_type: str | None, msg_time: str | None) -> str: ...
    def encode_payload(self, data: Buffer, attributes: str | Mapping[str, Any] | None) -> bytes: ...
    def payload_flag(self, attributes: str | Mapping[str, Any] | None) -> int: ...
    def decode_payload(self, data: Buffer, flag: int) -> tuple[dict[str, str], bytes]: ...
    def parse_broker_info(self, text: str, default_port: int = ...) -> _t.BrokerInfo: ...
    def parse_topic_info(
        self,
        topic_infos: Iterable[str],
        brokers: Mapping[int, _t.BrokerInfo],
        *,
        max_partitions: int = ...,
        max_total_partitions: int = ...,
    ) -> tuple[list[_t.Partition], dict[str, int]]: ...
    def parse_topic_meta_info(
        self,
        topic_metas: Iterable[str],
        brokers: Mapping[int, _t.BrokerInfo],
        *,
        max_partitions: int = ...,
        max_total_partitions: int = ...,
    ) -> list[tuple[_t.Partition, bool]]: ...
    def parse_partition(self, text: str) -> _t.Partition: ...
    def parse_subscribe_info(self, text: str) -> _t.SubscribeInfo: ...
    def encode_send_request(
        self,
        serial: int,
        client_id: str,
        topic: str,
        partition_id: int,
        data: Buffer,
        flag: int,
        sent_addr: int,
        visit_token: int,
        *,
        msg_type: str | None = None,
        msg_time: str | None = None,
        auth_token: str | None = None,
        checksum: int = -1,
        timeout_ms: int = 10000,
        service_type: int = 3,
        protocol_ver: int = 3,
    ) -> bytes: ...
    def decode_send_response(self, body: Buffer) -> _t.SendResponse: ...
    def decode_send_result(self, payload: Buffer, result_type: Any, topic: Any, partition: Any, key: Any) -> Any: ...
    def decode_message(
        self, raw: _t.RawMessage, topic: str, partition: _t.Partition | None = None, offset: int | None = -1
    ) -> Any: ...
    def decode_get_message_response(
        self, body: Buffer, topic: str, partition: _t.Partition | None = None, verify: bool = True
    ) -> _t.GetMessageResult: ...
    def encode_transfered_message(self, message_id: int, checksum: int, payload: Buffer, flag: int) -> bytes: ...
    def wrap_repeated(self, field: int, encoded_messages: Iterable[Buffer]) -> bytes: ...
