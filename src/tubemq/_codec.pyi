"""Type stubs for the compiled codec; mypy checks them against tubemq._protocols.CodecModule."""

from collections.abc import Iterable, Mapping
from typing import Any, Final

from typing_extensions import Buffer

from ._codec_py import BrokerInfo as BrokerInfo
from ._codec_py import GetMessageResult as GetMessageResult
from ._codec_py import Partition as Partition
from ._codec_py import RawMessage as RawMessage
from ._codec_py import Request as Request
from ._codec_py import Response as Response
from ._codec_py import SendResponse as SendResponse
from ._codec_py import SubscribeInfo as SubscribeInfo

implementation: Final[str]

BEGIN_TOKEN: Final[int]
MAX_BLOCK_SIZE: Final[int]
MAX_LIST_SIZE: Final[int]
DEFAULT_MAX_FRAME_SIZE: Final[int]
DEFAULT_MAX_PARTITIONS: Final[int]
DEFAULT_MAX_TOTAL_PARTITIONS: Final[int]
DEFAULT_BROKER_PORT: Final[int]
META_STORE_INS_BASE: Final[int]
INDEX_ENTRY_SIZE: Final[int]
TOKEN_MSG_TYPE: Final[str]
TOKEN_MSG_TIME: Final[str]

TopicPartition = Partition

class Message:
    topic: str
    data: bytes
    attributes: dict[str, str]
    stream_id: str | None
    msg_time: str | None
    message_id: int
    flag: int
    partition: Partition | None
    offset: int
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
    ) -> None: ...
    @property
    def value(self) -> bytes: ...
    def __eq__(self, other: object) -> bool: ...
    def __ne__(self, other: object) -> bool: ...
    __hash__: None  # type: ignore[assignment]

class FrameDecoder:
    max_frame_size: int
    max_blocks: int
    def __init__(self, max_frame_size: int = ..., max_blocks: int = ...) -> None: ...
    @property
    def failed(self) -> bool: ...
    @property
    def buffered(self) -> int: ...
    def feed(self, data: Buffer) -> list[tuple[int, bytes]]: ...

def crc32(data: Buffer) -> int: ...
def ip_to_int(ip: str) -> int: ...
def java_hash(text: str) -> int: ...
def encode_frame(serial: int, payload: Buffer) -> bytes: ...
def encode_request(
    serial: int, service_type: int, method: int, body: Buffer, *, timeout_ms: int, protocol_ver: int = 3
) -> bytes: ...
def decode_request(payload: Buffer) -> Request: ...
def encode_response(serial: int, method: int, body: Buffer, *, protocol_ver: int = 3) -> bytes: ...
def encode_error_response(
    serial: int, exception_name: str, message: str, *, status: int = 1, protocol_ver: int | None = 3
) -> bytes: ...
def decode_response(payload: Buffer) -> Response: ...
def encode_attributes(attributes: Mapping[str, Any] | None) -> str: ...
def decode_attributes(text: str | None) -> dict[str, str]: ...
def put_system_header(previous: str | None, msg_type: str | None, msg_time: str | None) -> str: ...
def encode_payload(data: Buffer, attributes: str | Mapping[str, Any] | None) -> bytes: ...
def payload_flag(attributes: str | Mapping[str, Any] | None) -> int: ...
def decode_payload(data: Buffer, flag: int) -> tuple[dict[str, str], bytes]: ...
def parse_broker_info(text: str, default_port: int = ...) -> BrokerInfo: ...
def parse_topic_info(
    topic_infos: Iterable[str],
    brokers: Mapping[int, BrokerInfo],
    *,
    max_partitions: int = ...,
    max_total_partitions: int = ...,
) -> tuple[list[Partition], dict[str, int]]: ...
def parse_topic_meta_info(
    topic_metas: Iterable[str],
    brokers: Mapping[int, BrokerInfo],
    *,
    max_partitions: int = ...,
    max_total_partitions: int = ...,
) -> list[tuple[Partition, bool]]: ...
def parse_partition(text: str) -> Partition: ...
def parse_subscribe_info(text: str) -> SubscribeInfo: ...
def encode_send_request(
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
def decode_send_response(body: Buffer) -> SendResponse: ...
def decode_message(
    raw: RawMessage, topic: str, partition: Partition | None = None, offset: int = -1
) -> Message | None: ...
def decode_get_message_response(
    body: Buffer, topic: str, partition: Partition | None = None, verify: bool = True
) -> GetMessageResult: ...
def encode_transfered_message(message_id: int, checksum: int, payload: Buffer, flag: int) -> bytes: ...
def wrap_repeated(field: int, encoded_messages: Iterable[Buffer]) -> bytes: ...
