"""Public, stable codec facade (DESIGN.md): the Cython core, or its pure-Python twin.

``TUBEMQ_NO_EXTENSIONS=1`` forces the twin; otherwise the compiled ``tubemq._codec`` is used when it
imports. ``implementation`` says which one is live ("cython" or "python").
"""

from __future__ import annotations

import os

if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
    from . import _codec_py as _impl
else:
    try:
        from . import _codec as _impl  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - exercised when the extension was not built
        from . import _codec_py as _impl

implementation: str = _impl.implementation

BEGIN_TOKEN = _impl.BEGIN_TOKEN
MAX_BLOCK_SIZE = _impl.MAX_BLOCK_SIZE
MAX_LIST_SIZE = _impl.MAX_LIST_SIZE
DEFAULT_MAX_FRAME_SIZE = _impl.DEFAULT_MAX_FRAME_SIZE
INDEX_ENTRY_SIZE = _impl.INDEX_ENTRY_SIZE

BrokerInfo = _impl.BrokerInfo
Partition = _impl.Partition
TopicPartition = _impl.TopicPartition
SubscribeInfo = _impl.SubscribeInfo
Response = _impl.Response
Request = _impl.Request
SendResponse = _impl.SendResponse
RawMessage = _impl.RawMessage
GetMessageResult = _impl.GetMessageResult
Message = _impl.Message
FrameDecoder = _impl.FrameDecoder

encode_frame = _impl.encode_frame
encode_request = _impl.encode_request
decode_request = _impl.decode_request
encode_response = _impl.encode_response
encode_error_response = _impl.encode_error_response
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
decode_message = _impl.decode_message
decode_get_message_response = _impl.decode_get_message_response
encode_transfered_message = _impl.encode_transfered_message
wrap_repeated = _impl.wrap_repeated

__all__ = [n for n in dir() if not n.startswith("_")]
