"""Public, stable codec facade (DESIGN.md): the Cython core, or its pure-Python twin.

``TUBEMQ_NO_EXTENSIONS=1`` forces the twin; otherwise the compiled ``tubemq.codec.compiled`` is used when it
imports. ``implementation`` says which one is live ("cython" or "python"). Both implementations
conform to :class:`tubemq.codec._protocols.CodecModule`, which types every function here. Importing this
module loads neither protobuf nor asyncio.

Server-side encoders (decode a request, encode responses and stored messages) live in
:mod:`tubemq.server.wire`, over the same implementation.
"""

from __future__ import annotations

import os as _os
from typing import TYPE_CHECKING

from ._protocols import CodecModule

if _os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
    from . import python as _loaded
else:
    try:
        from . import compiled as _loaded  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - exercised when the extension was not built
        from . import python as _loaded

#: The live implementation, typed by the shared contract.
_impl: CodecModule = _loaded

implementation: str = _impl.implementation

BEGIN_TOKEN: int = _impl.BEGIN_TOKEN
MAX_BLOCK_SIZE: int = _impl.MAX_BLOCK_SIZE
DEFAULT_MAX_FRAME_SIZE: int = _impl.DEFAULT_MAX_FRAME_SIZE
DEFAULT_MAX_PARTITIONS: int = _impl.DEFAULT_MAX_PARTITIONS
DEFAULT_MAX_TOTAL_PARTITIONS: int = _impl.DEFAULT_MAX_TOTAL_PARTITIONS

if TYPE_CHECKING:
    # both implementations must fit the contract (mypy checks the compiled one through compiled.pyi)
    from . import compiled as _compiled
    from . import python as _twin

    _compiled_fits: CodecModule = _compiled
    _twin_fits: CodecModule = _twin

    # the classes as types (the twin's definitions are the contract's; the compiled ones match them)
    from .python import (
        BrokerInfo,
        FrameDecoder,
        GetMessageResult,
        Message,
        Partition,
        RawMessage,
        Request,
        Response,
        SendResponse,
        SubscribeInfo,
    )
else:
    BrokerInfo = _impl.BrokerInfo
    Partition = _impl.Partition
    SubscribeInfo = _impl.SubscribeInfo
    Response = _impl.Response
    SendResponse = _impl.SendResponse
    RawMessage = _impl.RawMessage
    GetMessageResult = _impl.GetMessageResult
    Message = _impl.Message
    FrameDecoder = _impl.FrameDecoder
    Request = _impl.Request

#: DESIGN.md's name for a partition of a topic.
TopicPartition = Partition

encode_frame = _impl.encode_frame
encode_request = _impl.encode_request
decode_response = _impl.decode_response
encode_attributes = _impl.encode_attributes
decode_attributes = _impl.decode_attributes
put_system_header = _impl.put_system_header
encode_payload = _impl.encode_payload
payload_flag = _impl.payload_flag
decode_payload = _impl.decode_payload
crc32 = _impl.crc32
ip_to_int = _impl.ip_to_int
java_hash = _impl.java_hash
parse_broker_info = _impl.parse_broker_info
parse_topic_info = _impl.parse_topic_info
parse_topic_meta_info = _impl.parse_topic_meta_info
parse_partition = _impl.parse_partition
parse_subscribe_info = _impl.parse_subscribe_info
encode_send_request = _impl.encode_send_request
decode_send_response = _impl.decode_send_response
decode_send_result = _impl.decode_send_result
decode_message = _impl.decode_message
decode_get_message_response = _impl.decode_get_message_response

__all__ = [
    # framing and envelopes
    "BEGIN_TOKEN",
    "MAX_BLOCK_SIZE",
    "DEFAULT_MAX_FRAME_SIZE",
    "FrameDecoder",
    "encode_frame",
    "encode_request",
    "decode_response",
    "Response",
    # messages and payloads
    "Message",
    "RawMessage",
    "encode_attributes",
    "decode_attributes",
    "put_system_header",
    "encode_payload",
    "payload_flag",
    "decode_payload",
    "decode_message",
    "crc32",
    "ip_to_int",
    "java_hash",
    # metadata strings
    "BrokerInfo",
    "Partition",
    "TopicPartition",
    "SubscribeInfo",
    "DEFAULT_MAX_PARTITIONS",
    "DEFAULT_MAX_TOTAL_PARTITIONS",
    "parse_broker_info",
    "parse_topic_info",
    "parse_topic_meta_info",
    "parse_partition",
    "parse_subscribe_info",
    # producer / consumer hot path
    "SendResponse",
    "GetMessageResult",
    "encode_send_request",
    "decode_send_response",
    "decode_send_result",
    "decode_get_message_response",
    "implementation",
]
