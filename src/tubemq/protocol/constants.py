"""Every wire constant of the TubeMQ protocol in one place (docs/PROTOCOL.md §1, §2, §4.0, §5, §6).

Nothing here does I/O; the codec, the client and the embedded server all import from this module so
that a number is written down exactly once.
"""

from __future__ import annotations

import enum

from ..errors import ErrorCode as ErrorCode

# ---- framing (§1)
BEGIN_TOKEN = 0xFF7FF4FE
MAX_BLOCK_SIZE = 8192
#: Java decoders reject list sizes above this ((20 MiB + 8 MiB) / 8192).
MAX_LIST_SIZE = 3584
MAX_FRAME_SIZE = MAX_LIST_SIZE * MAX_BLOCK_SIZE

# ---- envelope (§2)
RPC_FLAG_REQUEST = 0
RPC_FLAG_RESPONSE = 1
PROTOCOL_VERSION = 3  # org.apache.inlong.tubemq era; what the Java client and server send
PROTOCOL_VERSION_LEGACY = 1
PROTOCOL_VERSION_GO_CPP = 2
DEFAULT_RPC_TIMEOUT_MS = 10000
MIN_RPC_TIMEOUT_MS = 3000
MAX_RPC_TIMEOUT_MS = 600000


class ServiceType(enum.IntEnum):
    MASTER = 1
    BROKER_READ = 2
    BROKER_WRITE = 3
    BROKER_ADMIN = 4
    MASTER_ADMIN = 5


class Method(enum.IntEnum):
    MASTER_PRODUCER_REGISTER = 1
    MASTER_PRODUCER_HEARTBEAT = 2
    MASTER_PRODUCER_CLOSE = 3
    MASTER_CONSUMER_REGISTER = 4
    MASTER_CONSUMER_HEARTBEAT = 5
    MASTER_CONSUMER_CLOSE = 6
    MASTER_BROKER_REGISTER = 7
    MASTER_BROKER_HEARTBEAT = 8
    MASTER_BROKER_CLOSE = 9
    BROKER_PRODUCER_REGISTER = 11
    BROKER_PRODUCER_HEARTBEAT = 12
    BROKER_PRODUCER_SEND_MESSAGE = 13
    BROKER_PRODUCER_CLOSE = 14
    BROKER_CONSUMER_REGISTER = 15
    BROKER_CONSUMER_HEARTBEAT = 16
    BROKER_CONSUMER_GET_MESSAGE = 17
    BROKER_CONSUMER_COMMIT = 18
    BROKER_CONSUMER_CLOSE = 19
    MASTER_CONSUMER_REGISTER_V2 = 20
    MASTER_CONSUMER_HEARTBEAT_V2 = 21
    MASTER_CONSUMER_GET_PART_META = 22


#: (serviceType -> accepted method ids), PbEnDecoder.isValidServiceTypeAndMethod (§2.3).
SERVICE_METHOD_WHITELIST: dict[int, frozenset[int]] = {
    1: frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21, 22}),
    2: frozenset({11, 12, 13, 14, 15, 16, 17, 18, 19}),
    3: frozenset({11, 12, 13, 14}),
}


class ResponseStatus(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    FATAL = 2


# Java exception class names the server puts in RspExceptionBody (§2.6.2), protocolVer 3 spelling.
JAVA_PREFIX = "org.apache.inlong.tubemq."
EXC_STANDBY = JAVA_PREFIX + "corerpc.exception.StandbyException"
EXC_SERVICE_STOPPING = JAVA_PREFIX + "corerpc.exception.ServiceStoppingException"
EXC_SERVER_NOT_READY = JAVA_PREFIX + "corerpc.exception.ServerNotReadyException"
EXC_INVOCATION_TARGET = "java.lang.reflect.InvocationTargetException"
EXC_JAVA_EXCEPTION = "java.lang.Exception"
EXC_INVALID_PROTOBUF = "com.google.protobuf.InvalidProtocolBufferException"
#: protocolVer -> replacement of JAVA_PREFIX (MixUtils.replaceClassNamePrefix, §2.4).
JAVA_PREFIX_BY_VERSION = {1: "com.tencent.tubemq.", 2: "com.apache.tubemq."}

# ---- separators (§4.0, TokenConstants.java)
SEGMENT_SEP = "#"
ATTR_SEP = ":"
GROUP_SEP = "@"
ARRAY_SEP = ","
EQ = "="
LOG_SEG_SEP = ";"
HYPHEN = "-"
BLANK = " "
SLASH = "/"
TOKEN_MSG_TYPE = "$msgType$"
TOKEN_MSG_TIME = "$msgTime$"

# ---- ports and limits (§1.1, §4, §5.7)
DEFAULT_MASTER_PORT = 8715
DEFAULT_MASTER_TLS_PORT = 8716
DEFAULT_BROKER_PORT = 8123
DEFAULT_BROKER_TLS_PORT = 8124
DEFAULT_MASTER_WEB_PORT = 8080
META_STORE_INS_BASE = 10000
INDEX_ENTRY_SIZE = 28
META_MAX_CLIENT_ID_LENGTH = 1024
META_MAX_CLIENT_HOSTNAME_LENGTH = 256
META_MAX_GROUPNAME_LENGTH = 1024
META_MAX_TOPICNAME_LENGTH = 64
META_MAX_BOOKED_TOPIC_COUNT = 1024
META_MAX_MESSAGE_HEADER_SIZE = 10240
DEFAULT_MAX_MSG_SIZE = 1024 * 1024
MIN_MAX_MSG_SIZE = 1024 * 1024
MAX_MAX_MSG_SIZE = 20 * 1024 * 1024
MAX_TRANSFER_SIZE = 512 * 1024
OFFSET_HISTORY_TOPIC = "__offset_history__"
META_VALUE_UNDEFINED = -2

# ---- timers (§5.7), milliseconds
HEARTBEAT_PERIOD_MS = 13000
HEARTBEAT_PERIOD_AFTER_FAIL_MS = 60000
MAX_HEARTBEAT_RETRY_TIMES = 5
MAX_REGISTER_RETRY_TIMES = 5
REGISTER_FAIL_WAIT_MS = 1000
MAX_SUBSCRIBE_REPORT_INTERVAL_TIMES = 6
MSG_NOT_FOUND_WAIT_MS = 400
CONNECT_TIMEOUT_MS = 3000
CONNECT_READ_IDLE_MS = 300000
REB_CONFIRM_WAIT_MS = 3000
PULL_PROTECT_CONFIRM_MS = 60000
SHUTDOWN_REBALANCE_WAIT_MS = 10000
UNAVAILABLE_FORBIDDEN_MS = 50000
CONSUMER_HEARTBEAT_TIMEOUT_MS = 30000
PRODUCER_HEARTBEAT_TIMEOUT_MS = 30000
CONSUMER_REG_TIMEOUT_MS = 30000
BALANCE_PERIOD_MS = 60000
VISIT_TOKEN_VALID_MS = 300000
AUTH_TIMESTAMP_VALID_MS = 20000

# ---- broker registration op types and read status (§3.7, §5.2.6)
MSG_OPTYPE_REGISTER = 31
MSG_OPTYPE_UNREGISTER = 32
READ_STATUS_NORMAL = 0  # CONSUME_MODEL_READ_NORMAL: new group starts at the min offset
READ_STATUS_FROM_MAX = 1  # CONSUME_MODEL_READ_FROM_MAX: new group starts at the max offset
READ_STATUS_FROM_MAX_ALWAYS = 2


class ConsumePosition(enum.IntEnum):
    """Client-side consume position (ConsumePosition.java); values are the Java codes."""

    LATEST = 0
    EARLIEST = -1
    MAX_ALWAYS = 1


class EventType(enum.IntEnum):
    CONNECT = 1
    DISCONNECT = 2
    REPORT = 3
    REFRESH = 4
    STOP_REBALANCE = 5
    ONLY_CONNECT = 10
    ONLY_DISCONNECT = 20
    UNKNOWN = -1


class EventStatus(enum.IntEnum):
    TODO = 0
    PROCESSING = 1
    DONE = 2
    UNKNOWN = -1
    FAILED = -2


# ---- message flag bits (§4.6)
FLAG_HAS_ATTRIBUTES = 0x1

# ---- storage record (§4.9)
STORE_DATA_TOKEN = 0x02C998B8
STORE_DATA_HEADER_LEN = 48


# ErrorCode (TErrCodeConstants, §6.1) is imported above from tubemq.errors, where tools/generate_errors.py
# writes it from tools/errcodes.txt.

#: getMessage results that mean "nothing to consume right now" (TErrCodeConstants.IGNORE_ERROR_SET).
IGNORE_ERROR_SET = frozenset({400, 404, 405, 406, 407, 408})
