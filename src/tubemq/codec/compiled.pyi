"""Type stubs for the compiled codec; mypy checks them against tubemq.codec._protocols.CodecModule.

Every function and class has exactly the twin's signature (the twin is the reference implementation),
so the stub re-exports those: the two cdef classes (``Message``, ``FrameDecoder``) are typed by the
twin's definitions, as ``tubemq.codec`` types them; tests/codec/test_parity.py holds the two to one
behaviour.
"""

from typing import Final

from .python import BEGIN_TOKEN as BEGIN_TOKEN
from .python import DEFAULT_BROKER_PORT as DEFAULT_BROKER_PORT
from .python import DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE
from .python import DEFAULT_MAX_PARTITIONS as DEFAULT_MAX_PARTITIONS
from .python import DEFAULT_MAX_TOTAL_PARTITIONS as DEFAULT_MAX_TOTAL_PARTITIONS
from .python import INDEX_ENTRY_SIZE as INDEX_ENTRY_SIZE
from .python import MAX_BLOCK_SIZE as MAX_BLOCK_SIZE
from .python import MAX_LIST_SIZE as MAX_LIST_SIZE
from .python import META_STORE_INS_BASE as META_STORE_INS_BASE
from .python import TOKEN_MSG_TIME as TOKEN_MSG_TIME
from .python import TOKEN_MSG_TYPE as TOKEN_MSG_TYPE
from .python import BrokerInfo as BrokerInfo
from .python import FrameDecoder as FrameDecoder
from .python import GetMessageResult as GetMessageResult
from .python import Message as Message
from .python import Partition as Partition
from .python import RawMessage as RawMessage
from .python import Request as Request
from .python import Response as Response
from .python import SendResponse as SendResponse
from .python import SubscribeInfo as SubscribeInfo
from .python import crc32 as crc32
from .python import decode_attributes as decode_attributes
from .python import decode_get_message_response as decode_get_message_response
from .python import decode_message as decode_message
from .python import decode_payload as decode_payload
from .python import decode_request as decode_request
from .python import decode_response as decode_response
from .python import decode_send_response as decode_send_response
from .python import decode_send_result as decode_send_result
from .python import encode_attributes as encode_attributes
from .python import encode_error_response as encode_error_response
from .python import encode_frame as encode_frame
from .python import encode_payload as encode_payload
from .python import encode_request as encode_request
from .python import encode_response as encode_response
from .python import encode_send_request as encode_send_request
from .python import encode_transfered_message as encode_transfered_message
from .python import ip_to_int as ip_to_int
from .python import java_hash as java_hash
from .python import parse_broker_info as parse_broker_info
from .python import parse_partition as parse_partition
from .python import parse_subscribe_info as parse_subscribe_info
from .python import parse_topic_info as parse_topic_info
from .python import parse_topic_meta_info as parse_topic_meta_info
from .python import payload_flag as payload_flag
from .python import put_system_header as put_system_header
from .python import wrap_repeated as wrap_repeated

implementation: Final[str]
#: the build took Message straight from Cython's freelist (tests/codec/test_build.py)
MESSAGE_FREELIST_FAST_PATH: Final[bool]
BUILT_WITH_CYTHON: Final[tuple[int, int, int]]
MESSAGE_FREELIST_CYTHON_RANGE: Final[tuple[tuple[int, int, int], tuple[int, int, int]]]

TopicPartition = Partition

