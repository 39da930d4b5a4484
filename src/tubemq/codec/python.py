"""Pure-Python twin of :mod:`tubemq.codec.compiled` (same contract, selected with TUBEMQ_NO_EXTENSIONS=1).

Sans-IO: bytes in, bytes and small objects out. No sockets, no asyncio, no threads. It also carries a
tiny hand-written protobuf reader/writer for the hot flat messages (send request/response, getMessage
response) because the codec layer sits *below* the generated protobuf modules (DESIGN.md layers).

The code is in :mod:`tubemq.codec._twin`, one module per topic as the compiled codec's ``.pxi`` files
(``datatypes``, ``frame``, ``pbwire``, ``envelope``, ``payload``, ``meta``, ``send``); this module is the
twin's one namespace, the contract :class:`tubemq.codec._protocols.CodecModule` types. The attribute text
rules come from :mod:`tubemq.codec._text`, one source with the compiled codec.
"""

# ruff: noqa: F401  (every name below is re-exported: this module is the twin's namespace)

from __future__ import annotations

from ..protocol.constants import (
    BEGIN_TOKEN,
    DEFAULT_BROKER_PORT,
    INDEX_ENTRY_SIZE,
    MAX_BLOCK_SIZE,
    MAX_LIST_SIZE,
    META_STORE_INS_BASE,
    TOKEN_MSG_TIME,
    TOKEN_MSG_TYPE,
)
from ._text import encode_attributes, java_hash, put_system_header
from ._twin.datatypes import (
    BrokerInfo,
    GetMessageResult,
    Message,
    Partition,
    RawMessage,
    Request,
    Response,
    SendResponse,
    SubscribeInfo,
    TopicPartition,
    message_repr,
)
from ._twin.envelope import (
    decode_request,
    decode_response,
    encode_error_response,
    encode_request,
    encode_response,
)
from ._twin.frame import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode_frame
from ._twin.meta import (
    DEFAULT_MAX_PARTITIONS,
    DEFAULT_MAX_TOTAL_PARTITIONS,
    PartitionBudget,
    check_partition_count,
    parse_broker_info,
    parse_partition,
    parse_subscribe_info,
    parse_topic_info,
    parse_topic_meta_info,
    topic_info_entry,
)
from ._twin.payload import decode_attributes, decode_payload, encode_payload, payload_flag

# the protobuf writers (private), for tests that build hostile input with them
from ._twin.pbwire import _f_bytes, _f_varint, _varint
from ._twin.send import (
    crc32,
    decode_get_message_response,
    decode_message,
    decode_send_response,
    decode_send_result,
    encode_send_request,
    encode_transfered_message,
    ip_to_int,
    java_parse_long,
    wrap_repeated,
)

implementation = "python"
