"""Type stubs for the compiled codec; mypy checks them against tubemq._protocols.CodecModule.

Every function and class has exactly the twin's signature (the twin is the reference implementation),
so the stub re-exports those: the two cdef classes (``Message``, ``FrameDecoder``) are typed by the
twin's definitions, as ``tubemq.codec`` types them; tests/codec/test_parity.py holds the two to one
behaviour.
"""

from typing import Final

from ._codec_py import BEGIN_TOKEN as BEGIN_TOKEN
from ._codec_py import DEFAULT_BROKER_PORT as DEFAULT_BROKER_PORT
from ._codec_py import DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE
from ._codec_py import DEFAULT_MAX_PARTITIONS as DEFAULT_MAX_PARTITIONS
from ._codec_py import DEFAULT_MAX_TOTAL_PARTITIONS as DEFAULT_MAX_TOTAL_PARTITIONS
from ._codec_py import INDEX_ENTRY_SIZE as INDEX_ENTRY_SIZE
from ._codec_py import MAX_BLOCK_SIZE as MAX_BLOCK_SIZE
from ._codec_py import MAX_LIST_SIZE as MAX_LIST_SIZE
from ._codec_py import META_STORE_INS_BASE as META_STORE_INS_BASE
from ._codec_py import TOKEN_MSG_TIME as TOKEN_MSG_TIME
from ._codec_py import TOKEN_MSG_TYPE as TOKEN_MSG_TYPE
from ._codec_py import BrokerInfo as BrokerInfo
from ._codec_py import FrameDecoder as FrameDecoder
from ._codec_py import GetMessageResult as GetMessageResult
from ._codec_py import Message as Message
from ._codec_py import Partition as Partition
from ._codec_py import RawMessage as RawMessage
from ._codec_py import Request as Request
from ._codec_py import Response as Response
from ._codec_py import SendResponse as SendResponse
from ._codec_py import SubscribeInfo as SubscribeInfo
from ._codec_py import crc32 as crc32
from ._codec_py import decode_attributes as decode_attributes
from ._codec_py import decode_get_message_response as decode_get_message_response
from ._codec_py import decode_message as decode_message
from ._codec_py import decode_payload as decode_payload
from ._codec_py import decode_request as decode_request
from ._codec_py import decode_response as decode_response
from ._codec_py import decode_send_response as decode_send_response
from ._codec_py import decode_send_result as decode_send_result
from ._codec_py import encode_attributes as encode_attributes
from ._codec_py import encode_error_response as encode_error_response
from ._codec_py import encode_frame as encode_frame
from ._codec_py import encode_payload as encode_payload
from ._codec_py import encode_request as encode_request
from ._codec_py import encode_response as encode_response
from ._codec_py import encode_send_request as encode_send_request
from ._codec_py import encode_transfered_message as encode_transfered_message
from ._codec_py import ip_to_int as ip_to_int
from ._codec_py import java_hash as java_hash
from ._codec_py import parse_broker_info as parse_broker_info
from ._codec_py import parse_partition as parse_partition
from ._codec_py import parse_subscribe_info as parse_subscribe_info
from ._codec_py import parse_topic_info as parse_topic_info
from ._codec_py import parse_topic_meta_info as parse_topic_meta_info
from ._codec_py import payload_flag as payload_flag
from ._codec_py import put_system_header as put_system_header
from ._codec_py import wrap_repeated as wrap_repeated

implementation: Final[str]
#: the build took Message straight from Cython's freelist (tests/codec/test_build.py)
MESSAGE_FREELIST_FAST_PATH: Final[bool]
BUILT_WITH_CYTHON: Final[tuple[int, int, int]]
MESSAGE_FREELIST_CYTHON_RANGE: Final[tuple[tuple[int, int, int], tuple[int, int, int]]]

TopicPartition = Partition

