"""Protobuf field numbers and wire types of the messages the codecs read and write by hand.

Both codecs use these names: the pure-Python twin imports this module, the Cython core includes
``_wire.pxi``, which ``tools/generate_wire_pxi.py`` writes from this module (a test fails when it is
stale). ``SOURCES`` ties every number to its ``.proto`` field; tests/codec/test_wire_fields.py checks
them against the generated protobuf descriptors, so a number is written down exactly once here.
"""

from __future__ import annotations

# ---- wire types (protobuf encoding)
WT_VARINT = 0
WT_I64 = 1
WT_LEN = 2
WT_I32 = 5

# ---- RpcConnHeader
CONN_FLAG = 1

# ---- RequestHeader
REQ_HDR_SERVICE_TYPE = 1
REQ_HDR_PROTOCOL_VER = 2

# ---- RequestBody
REQ_BODY_METHOD = 1
REQ_BODY_TIMEOUT = 2
REQ_BODY_REQUEST = 3

# ---- ResponseHeader
RSP_HDR_STATUS = 1
RSP_HDR_PROTOCOL_VER = 3

# ---- RspResponseBody
RSP_BODY_METHOD = 1
RSP_BODY_DATA = 2

# ---- RspExceptionBody
RSP_EXC_NAME = 1
RSP_EXC_MESSAGE = 2

# ---- TransferedMessage
TM_MESSAGE_ID = 1
TM_CHECKSUM = 2
TM_PAYLOAD = 3
TM_FLAG = 4

# ---- AuthorizedInfo
AUTH_VISIT_TOKEN = 1
AUTH_AUTH_TOKEN = 2

# ---- SendMessageRequestP2B
SEND_REQ_CLIENT_ID = 1
SEND_REQ_TOPIC = 2
SEND_REQ_PARTITION_ID = 3
SEND_REQ_DATA = 4
SEND_REQ_FLAG = 5
SEND_REQ_CHECKSUM = 6
SEND_REQ_SENT_ADDR = 7
SEND_REQ_MSG_TYPE = 8
SEND_REQ_MSG_TIME = 9
SEND_REQ_AUTH_INFO = 10

# ---- SendMessageResponseB2P
SEND_RSP_SUCCESS = 1
SEND_RSP_ERR_CODE = 2
SEND_RSP_ERR_MSG = 3
SEND_RSP_REQUIRE_AUTH = 4
SEND_RSP_MESSAGE_ID = 5
SEND_RSP_APPEND_TIME = 6
SEND_RSP_APPEND_OFFSET = 7

# ---- GetMessageResponseB2C
GET_RSP_SUCCESS = 1
GET_RSP_ERR_CODE = 2
GET_RSP_ERR_MSG = 3
GET_RSP_MESSAGES = 4
GET_RSP_CURR_OFFSET = 5
GET_RSP_MIN_LIMIT_TIME = 6
GET_RSP_ESC_FLOW_CTRL = 7
GET_RSP_CURR_DATA_DLT = 8
GET_RSP_REQUIRE_SLOW = 9
GET_RSP_MAX_OFFSET = 10

#: constant name -> (protobuf message, field name, wire type).
SOURCES: dict[str, tuple[str, str, int]] = {
    "CONN_FLAG": ("RpcConnHeader", "flag", WT_VARINT),
    "REQ_HDR_SERVICE_TYPE": ("RequestHeader", "serviceType", WT_VARINT),
    "REQ_HDR_PROTOCOL_VER": ("RequestHeader", "protocolVer", WT_VARINT),
    "REQ_BODY_METHOD": ("RequestBody", "method", WT_VARINT),
    "REQ_BODY_TIMEOUT": ("RequestBody", "timeout", WT_VARINT),
    "REQ_BODY_REQUEST": ("RequestBody", "request", WT_LEN),
    "RSP_HDR_STATUS": ("ResponseHeader", "status", WT_VARINT),
    "RSP_HDR_PROTOCOL_VER": ("ResponseHeader", "protocolVer", WT_VARINT),
    "RSP_BODY_METHOD": ("RspResponseBody", "method", WT_VARINT),
    "RSP_BODY_DATA": ("RspResponseBody", "data", WT_LEN),
    "RSP_EXC_NAME": ("RspExceptionBody", "exceptionName", WT_LEN),
    "RSP_EXC_MESSAGE": ("RspExceptionBody", "stackTrace", WT_LEN),
    "TM_MESSAGE_ID": ("TransferedMessage", "messageId", WT_VARINT),
    "TM_CHECKSUM": ("TransferedMessage", "checkSum", WT_VARINT),
    "TM_PAYLOAD": ("TransferedMessage", "payLoadData", WT_LEN),
    "TM_FLAG": ("TransferedMessage", "flag", WT_VARINT),
    "AUTH_VISIT_TOKEN": ("AuthorizedInfo", "visitAuthorizedToken", WT_VARINT),
    "AUTH_AUTH_TOKEN": ("AuthorizedInfo", "authAuthorizedToken", WT_LEN),
    "SEND_REQ_CLIENT_ID": ("SendMessageRequestP2B", "clientId", WT_LEN),
    "SEND_REQ_TOPIC": ("SendMessageRequestP2B", "topicName", WT_LEN),
    "SEND_REQ_PARTITION_ID": ("SendMessageRequestP2B", "partitionId", WT_VARINT),
    "SEND_REQ_DATA": ("SendMessageRequestP2B", "data", WT_LEN),
    "SEND_REQ_FLAG": ("SendMessageRequestP2B", "flag", WT_VARINT),
    "SEND_REQ_CHECKSUM": ("SendMessageRequestP2B", "checkSum", WT_VARINT),
    "SEND_REQ_SENT_ADDR": ("SendMessageRequestP2B", "sentAddr", WT_VARINT),
    "SEND_REQ_MSG_TYPE": ("SendMessageRequestP2B", "msgType", WT_LEN),
    "SEND_REQ_MSG_TIME": ("SendMessageRequestP2B", "msgTime", WT_LEN),
    "SEND_REQ_AUTH_INFO": ("SendMessageRequestP2B", "authInfo", WT_LEN),
    "SEND_RSP_SUCCESS": ("SendMessageResponseB2P", "success", WT_VARINT),
    "SEND_RSP_ERR_CODE": ("SendMessageResponseB2P", "errCode", WT_VARINT),
    "SEND_RSP_ERR_MSG": ("SendMessageResponseB2P", "errMsg", WT_LEN),
    "SEND_RSP_REQUIRE_AUTH": ("SendMessageResponseB2P", "requireAuth", WT_VARINT),
    "SEND_RSP_MESSAGE_ID": ("SendMessageResponseB2P", "messageId", WT_VARINT),
    "SEND_RSP_APPEND_TIME": ("SendMessageResponseB2P", "appendTime", WT_VARINT),
    "SEND_RSP_APPEND_OFFSET": ("SendMessageResponseB2P", "appendOffset", WT_VARINT),
    "GET_RSP_SUCCESS": ("GetMessageResponseB2C", "success", WT_VARINT),
    "GET_RSP_ERR_CODE": ("GetMessageResponseB2C", "errCode", WT_VARINT),
    "GET_RSP_ERR_MSG": ("GetMessageResponseB2C", "errMsg", WT_LEN),
    "GET_RSP_MESSAGES": ("GetMessageResponseB2C", "messages", WT_LEN),
    "GET_RSP_CURR_OFFSET": ("GetMessageResponseB2C", "currOffset", WT_VARINT),
    "GET_RSP_MIN_LIMIT_TIME": ("GetMessageResponseB2C", "minLimitTime", WT_VARINT),
    "GET_RSP_ESC_FLOW_CTRL": ("GetMessageResponseB2C", "escFlowCtrl", WT_VARINT),
    "GET_RSP_CURR_DATA_DLT": ("GetMessageResponseB2C", "currDataDlt", WT_VARINT),
    "GET_RSP_REQUIRE_SLOW": ("GetMessageResponseB2C", "requireSlow", WT_VARINT),
    "GET_RSP_MAX_OFFSET": ("GetMessageResponseB2C", "maxOffset", WT_VARINT),
}
