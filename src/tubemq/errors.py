"""Typed exceptions. Every failure the library raises derives from :class:`TubeMQError`.

Server answers carrying an error code become :class:`ServerError` subclasses (``.code`` and the
server's ``.message``); :func:`error_for_code` maps every code of docs/PROTOCOL.md §6.1 to its class,
so callers can catch by meaning (``except PartitionOccupiedError``) or by number (``e.code == 410``).

This module imports nothing of the package (like httptools' ``parser/errors.py``), so the codec can
raise these without loading protobuf. ``ErrorCode``, the ``ServerError`` subclasses and the code
table are generated from ``tools/errcodes.txt`` by ``tools/generate_errors.py``.
"""

from __future__ import annotations

import enum
import errno
from typing import Any


# ---- BEGIN GENERATED error codes (tools/generate_errors.py from tools/errcodes.txt; do not edit)
class ErrorCode(enum.IntEnum):
    """TErrCodeConstants.java (docs/PROTOCOL.md §6.1): every code a TubeMQ client or server uses."""

    SUCCESS = 200  # wire: OK
    NOT_READY = 201  # wire: heartbeat success that says: skip the metadata update (never sent by current masters)
    MOVED = 301  # wire: requested index region already deleted (broker getMessage)
    BAD_REQUEST = 400  # wire+local: parameter or format error, invalid opType, inconsistent input
    UNAUTHORIZED = 401  # wire: commit on a partition not registered, or registered by another consumer
    CONNECT_RETURN_NULL = 402  # local: the RPC returned nothing (client-balance API)
    FORBIDDEN = 403  # wire: topic not found or closed, partition out of range, checksum mismatch
    NOT_FOUND = 404  # wire+local: no message available at the offset; locally: partition not found
    ALL_PARTITION_FROZEN = 405  # local: pull: all partitions frozen by the application
    NO_PARTITION_ASSIGNED = 406  # local: pull: no partition yet
    ALL_PARTITION_WAITING = 407  # local: pull: all partitions in delay timers
    ALL_PARTITION_INUSE = 408  # local: pull: all partitions fetched and unconfirmed
    PARTITION_OCCUPIED = 410  # wire: partition owned by another live consumer of the group
    HB_NO_NODE = 411  # wire: sender not registered, or its registration expired
    DUPLICATE_PARTITION = 412  # wire: partition owned by a different consumer
    CERTIFICATE_FAILURE = 415  # wire: authentication or visit-token failure
    SERVER_RECEIVE_OVERFLOW = 419  # wire: store could not accept the message (memory cache full)
    CLIENT_SHUTDOWN = 420  # local: client closed
    CLIENT_HIGH_FREQUENCY_REQUEST = 421  # local: client-balance: partition re-connect within 5 s
    PARTITION_UNSUBSCRIBABLE = 422  # local: client-balance: partition status 0
    PARTITION_UNPUBLISHABLE = 423  # unused: unused
    CLIENT_INCONSISTENT_CONSUMETYPE = 424  # wire: group members mix unbound, bound and client-balance
    CLIENT_INCONSISTENT_TOPICSET = 425  # wire: topic set differs from the group's
    CLIENT_INCONSISTENT_FILTERSET = 426  # wire: filter conditions differ
    CLIENT_INCONSISTENT_SESSIONKEY = 427  # wire: bound: sessionKey differs
    CLIENT_INCONSISTENT_SELECTBIG = 428  # wire: bound: selectBig differs
    CLIENT_INCONSISTENT_SOURCECOUNT = 429  # wire: bound / client-balance: sourceCount differs
    CLIENT_DUPLICATE_INDEXID = 430  # wire: client-balance: nodeId already used
    TOPIC_NOT_DEPLOYED = 431  # wire: subscribed topic does not exist
    PARAMETER_MSG_NULL = 440  # local: producer: no message
    PARAMETER_MSG_TOPIC_BLANK = 441  # local: producer: blank topic
    PARAMETER_MSG_BODY_EMPTY = 442  # local: producer: empty body
    PARAMETER_MSG_TOPIC_UNPUBLISHED = 443  # local: producer: topic not published
    PARAMETER_MSG_TOPIC_NO_PARTITION = 444  # local: producer: topic without a partition
    PARAMETER_MSG_OVER_MAX_LENGTH = 445  # local: producer: message above the maximum size
    CONSUME_GROUP_FORBIDDEN = 450  # wire: group not authorized for a topic with consume control
    SERVER_CONSUME_SPEED_LIMIT = 452  # wire: throttled; wait minLimitTime ms
    CONSUME_CONTENT_FORBIDDEN = 455  # wire: group must or must not use certain filters
    INTERNAL_SERVER_ERROR = 500  # wire+local: server exception or store error
    SERVICE_UNAVAILABLE = 503  # wire: read or write service stopped
    INTERNAL_SERVER_ERROR_MSGSET_NULL = 510  # unused: unused on the wire
    UNSPECIFIED_ABNORMAL = 599  # local: RPC exception (statistics)
# ---- END GENERATED error codes


class TubeMQError(Exception):
    """Root of every tubemq exception."""


# ---- wire / protocol


class ProtocolError(TubeMQError):
    """Bytes on the wire that do not follow the TubeMQ protocol."""


class FrameError(ProtocolError):
    """A frame with a bad begin token, a bad block list or a size over the cap.

    A decoder that raised it stays failed: the stream can no longer be trusted.
    """


class DecodeError(ProtocolError):
    """A payload or message that cannot be decoded (truncated protobuf, bad attribute header...)."""


class InLongMsgError(DecodeError):
    """A damaged InLongMsg (TDMsg) container, or snappy support missing (see :mod:`tubemq.inlongmsg`)."""


class RemoteError(TubeMQError):
    """The server answered the RPC with an exception (RspExceptionBody, status ERROR or FATAL)."""

    def __init__(self, exception_name: str, message: str = "", status: int = 1) -> None:
        self.exception_name = exception_name
        self.message = message
        self.status = status
        super().__init__(f"{exception_name}: {message}" if message else exception_name)

    @property
    def is_fatal(self) -> bool:
        return self.status == 2


class StandbyError(RemoteError):
    """The master is a standby (StandbyException): the client must move to the next master."""


# ---- transport


class TubeMQConnectionError(TubeMQError, ConnectionError):
    """A connection could not be opened or was lost; pending requests on it fail with this."""


class ConnectionLostError(TubeMQConnectionError):
    """The connection dropped while the request was in flight: its outcome is unknown."""


class TubeMQTimeoutError(TubeMQError, TimeoutError):
    """No answer within the request timeout (the outcome on the server is unknown)."""


# ---- client side


class ConfigError(TubeMQError, ValueError):
    """A bad configuration value; ``.field`` names the offending option."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class ClientClosedError(TubeMQError):
    """The producer or consumer was closed (local code 420)."""

    code = ErrorCode.CLIENT_SHUTDOWN


# ---- server error codes


class ServerError(TubeMQError):
    """An answer with ``success = false``; ``code`` is the TubeMQ error code, ``message`` its text."""

    default_code: int = ErrorCode.INTERNAL_SERVER_ERROR
    retryable: bool = False

    def __init_subclass__(cls, code: int | None = None, retryable: bool | None = None, **kwargs: Any) -> None:
        """``class XError(ServerError, code=..., retryable=True)``: the class's default code and whether
        an operation refused with it may be retried (both inherited when not given)."""
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.default_code = code
        if retryable is not None:
            cls.retryable = retryable

    def __init__(self, code: int | None = None, message: str = "") -> None:
        self.code = int(code if code is not None else self.default_code)
        self.message = message
        try:
            name = ErrorCode(self.code).name
        except ValueError:
            name = "UNKNOWN"
        super().__init__(f"[{self.code} {name}] {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from code and message (a Spark task's error crosses processes pickled)."""
        return type(self), (self.code, self.message), self.__dict__


class ClientError(ServerError):
    """A local failure that reuses a TubeMQ code number (44x, 40x pull results, 421, 422)."""


# ---- BEGIN GENERATED error classes (tools/generate_errors.py from tools/errcodes.txt; do not edit)
class MovedError(ServerError, code=ErrorCode.MOVED, retryable=True):
    """The requested index region was already deleted (301): move the read offset."""


class BadRequestError(ServerError, code=ErrorCode.BAD_REQUEST):
    """A request the server refused as malformed or inconsistent (400)."""


class UnauthorizedError(ServerError, code=ErrorCode.UNAUTHORIZED):
    """Commit on a partition this consumer does not hold (401)."""


class ForbiddenError(ServerError, code=ErrorCode.FORBIDDEN):
    """Unknown or closed topic, partition out of range, checksum mismatch (403)."""


class NotFoundError(ServerError, code=ErrorCode.NOT_FOUND, retryable=True):
    """No message at the requested offset (404): nothing to consume right now."""


class PartitionOccupiedError(ServerError, code=ErrorCode.PARTITION_OCCUPIED):
    """The partition is held by another live consumer of the group (410)."""


class NotRegisteredError(ServerError, code=ErrorCode.HB_NO_NODE):
    """HB_NO_NODE (411): the server does not know this client/registration (any more)."""


class DuplicatePartitionError(ServerError, code=ErrorCode.DUPLICATE_PARTITION):
    """The partition is owned by a different consumer (412)."""


class AuthenticationError(ServerError, code=ErrorCode.CERTIFICATE_FAILURE):
    """Authentication or visit-token failure (415)."""


class ServerOverflowError(ServerError, code=ErrorCode.SERVER_RECEIVE_OVERFLOW, retryable=True):
    """The broker's store could not accept the message (419): retry later."""


class InconsistentGroupError(ServerError, code=ErrorCode.CLIENT_INCONSISTENT_TOPICSET):
    """A group member disagrees with the group (424-430)."""


class TopicNotDeployedError(ServerError, code=ErrorCode.TOPIC_NOT_DEPLOYED):
    """A subscribed topic does not exist (431)."""


class ConsumeForbiddenError(ServerError, code=ErrorCode.CONSUME_GROUP_FORBIDDEN):
    """The group may not consume the topic, or must use other filters (450, 455)."""


class SpeedLimitError(ServerError, code=ErrorCode.SERVER_CONSUME_SPEED_LIMIT, retryable=True):
    """The broker throttles this consumer (452): wait ``minLimitTime`` ms."""


class InternalServerError(ServerError, code=ErrorCode.INTERNAL_SERVER_ERROR, retryable=True):
    """A server-side exception or store error (500, 510)."""


class ServiceUnavailableError(ServerError, code=ErrorCode.SERVICE_UNAVAILABLE, retryable=True):
    """The broker's read or write service is stopped (503)."""


class MessageTooLargeError(ClientError, code=ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH):
    """The message is above the topic's maximum size (445)."""


class TopicNotPublishedError(ClientError, code=ErrorCode.PARAMETER_MSG_TOPIC_NO_PARTITION):
    """No partition is available for the topic (443/444)."""


class NoPartitionError(ClientError, code=ErrorCode.NO_PARTITION_ASSIGNED):
    """Pull: no partition can be fetched now (405-408)."""


#: code -> exception class (codes absent here give a plain ServerError).
_BY_CODE: dict[int, type[ServerError]] = {
    ErrorCode.MOVED: MovedError,
    ErrorCode.BAD_REQUEST: BadRequestError,
    ErrorCode.UNAUTHORIZED: UnauthorizedError,
    ErrorCode.FORBIDDEN: ForbiddenError,
    ErrorCode.NOT_FOUND: NotFoundError,
    ErrorCode.ALL_PARTITION_FROZEN: NoPartitionError,
    ErrorCode.NO_PARTITION_ASSIGNED: NoPartitionError,
    ErrorCode.ALL_PARTITION_WAITING: NoPartitionError,
    ErrorCode.ALL_PARTITION_INUSE: NoPartitionError,
    ErrorCode.PARTITION_OCCUPIED: PartitionOccupiedError,
    ErrorCode.HB_NO_NODE: NotRegisteredError,
    ErrorCode.DUPLICATE_PARTITION: DuplicatePartitionError,
    ErrorCode.CERTIFICATE_FAILURE: AuthenticationError,
    ErrorCode.SERVER_RECEIVE_OVERFLOW: ServerOverflowError,
    ErrorCode.CLIENT_HIGH_FREQUENCY_REQUEST: ClientError,
    ErrorCode.PARTITION_UNSUBSCRIBABLE: ClientError,
    ErrorCode.CLIENT_INCONSISTENT_CONSUMETYPE: InconsistentGroupError,
    ErrorCode.CLIENT_INCONSISTENT_TOPICSET: InconsistentGroupError,
    ErrorCode.CLIENT_INCONSISTENT_FILTERSET: InconsistentGroupError,
    ErrorCode.CLIENT_INCONSISTENT_SESSIONKEY: InconsistentGroupError,
    ErrorCode.CLIENT_INCONSISTENT_SELECTBIG: InconsistentGroupError,
    ErrorCode.CLIENT_INCONSISTENT_SOURCECOUNT: InconsistentGroupError,
    ErrorCode.CLIENT_DUPLICATE_INDEXID: InconsistentGroupError,
    ErrorCode.TOPIC_NOT_DEPLOYED: TopicNotDeployedError,
    ErrorCode.PARAMETER_MSG_NULL: ClientError,
    ErrorCode.PARAMETER_MSG_TOPIC_BLANK: ClientError,
    ErrorCode.PARAMETER_MSG_BODY_EMPTY: ClientError,
    ErrorCode.PARAMETER_MSG_TOPIC_UNPUBLISHED: TopicNotPublishedError,
    ErrorCode.PARAMETER_MSG_TOPIC_NO_PARTITION: TopicNotPublishedError,
    ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH: MessageTooLargeError,
    ErrorCode.CONSUME_GROUP_FORBIDDEN: ConsumeForbiddenError,
    ErrorCode.SERVER_CONSUME_SPEED_LIMIT: SpeedLimitError,
    ErrorCode.CONSUME_CONTENT_FORBIDDEN: ConsumeForbiddenError,
    ErrorCode.INTERNAL_SERVER_ERROR: InternalServerError,
    ErrorCode.SERVICE_UNAVAILABLE: ServiceUnavailableError,
    ErrorCode.INTERNAL_SERVER_ERROR_MSGSET_NULL: InternalServerError,
}
# ---- END GENERATED error classes


class InvalidMessageError(ClientError, ValueError):
    """A message refused locally before any I/O (blank topic 441, empty body 442, bad attributes 400)."""

    default_code = ErrorCode.BAD_REQUEST


def error_for_code(code: int, message: str = "") -> ServerError:
    """The exception instance for a TubeMQ error code (unknown codes give a plain ServerError)."""
    cls = _BY_CODE.get(int(code), ServerError)
    return cls(code, message)


def remote_error(exception_name: str, message: str, status: int) -> RemoteError:
    """The exception for an RspExceptionBody; StandbyException is recognised by substring (§2.6.3)."""
    cls = StandbyError if "StandbyException" in exception_name else RemoteError
    return cls(exception_name, message, status)


__all__ = [
    "AdminError",
    "AdminRecordError",
    "AuthenticationError",
    "BadRequestError",
    "ClientClosedError",
    "ClientError",
    "ConfigError",
    "ConnectionLostError",
    "ConsumeForbiddenError",
    "DataDirLockedError",
    "DecodeError",
    "DuplicatePartitionError",
    "ErrorCode",
    "ForbiddenError",
    "FrameError",
    "InLongMsgError",
    "InconsistentGroupError",
    "InternalServerError",
    "InvalidMessageError",
    "MessageTooLargeError",
    "MovedError",
    "NoPartitionError",
    "NoTimeLookupError",
    "NotFoundError",
    "NotRegisteredError",
    "NotTubeMQPortError",
    "PartitionOccupiedError",
    "ProtocolError",
    "RemoteError",
    "SerializationError",
    "ServerBindError",
    "ServerError",
    "ServerOverflowError",
    "ServiceUnavailableError",
    "SpeedLimitError",
    "StandbyError",
    "TopicNotDeployedError",
    "TopicNotPublishedError",
    "TubeMQConnectionError",
    "TubeMQError",
    "TubeMQTimeoutError",
    "UnauthorizedError",
    "error_for_code",
    "remote_error",
]


class NotTubeMQPortError(FrameError):
    """The peer speaks another protocol (an HTTP server, a TLS port for a plaintext client): the
    address is wrong, so retrying it cannot help."""


class SerializationError(TubeMQError):
    """A ``value_serializer`` / ``key_serializer`` / ``value_deserializer`` failed (the cause is chained).

    ``.topic`` names the message's topic; on the consumer side ``.message`` is the undecoded message
    (its batch was rolled back, so nothing is lost).
    """

    def __init__(self, text: str, *, topic: str = "", message: object = None) -> None:
        super().__init__(text)
        self.topic = topic
        self.message = message


class ServerBindError(TubeMQError, OSError):
    """An embedded server listener could not bind its port (in use, not permitted, no such address).

    ``.role`` is ``"master"``, ``"broker"`` or ``"admin"``, ``.field`` the option that chose the port
    (``master_port``...), ``.host``/``.port`` the address; ``.errno`` is the OSError's, which is chained.
    Also an ``OSError``, which is what a failed bind raised before this class existed.
    """

    def __init__(self, role: str, field: str, host: str, port: int, cause: OSError) -> None:
        reason = cause.strerror or str(cause) or type(cause).__name__
        if cause.errno == errno.EADDRINUSE:
            reason = "address already in use (choose another port, or 0 for any free one)"
        super().__init__(cause.errno, f"{role} port {port} on {host}: {reason}")
        self.role = role
        self.field = field
        self.host = host
        self.port = port

    def __str__(self) -> str:
        return str(self.strerror)


class DataDirLockedError(TubeMQError):
    """Another live server process writes to this data directory (two would destroy its data).

    ``.path`` is the directory, ``.pid`` the holder's process id as it wrote it into the lock file
    (0 when it could not be read).
    """

    def __init__(self, path: str, pid: int) -> None:
        holder = f"pid {pid}" if pid > 0 else "pid unknown"
        super().__init__(f"data directory {path} is in use by another server ({holder}): stop it or "
                         "choose another data directory")
        self.path = path
        self.pid = pid


class AdminError(TubeMQError):
    """A TubeMQ master or broker web API refused a call (``result: false``).

    ``.code`` is the answer's ``errCode`` (or the HTTP status), ``.message`` its ``errMsg``, ``.method``
    the API method called (``admin_set_offset``...); the admin token is never part of any of them.
    """

    def __init__(self, code: int, message: str, method: str = "") -> None:
        self.code = code
        self.message = message
        self.method = method
        text = f"[{code}] {message}" if code else message
        super().__init__(f"{method}: {text}" if method else text)


class NoTimeLookupError(AdminError):
    """A broker has no time lookup (``admin_query_offset_by_time`` is the embedded server's own call;
    a real TubeMQ broker answers "Unsupported method"). Its own type so that callers can fall back to
    the search over the messages' ``msgTime`` (``BoundConsumer.offset_for_time``) on exactly this."""


class AdminRecordError(AdminError):
    """A master call that takes a list of records answered ``result: true`` with some records failed.

    A real master answers such calls (topic add / modify / delete / remove, broker online / offline /
    delete...) with one row per record, each with its own ``success`` and ``errCode`` (401 not found,
    402 exists, 403 unchanged, 404 uncleaned, 406 illegal status, 407 illegal change). ``.failed`` and
    ``.applied`` are those rows; ``.code`` is the first failed row's code, and the message names every
    failed record (``brokerId:topicName`` or ``broker N``). The records in ``.applied`` did change.
    """

    def __init__(self, method: str, failed: list[dict[str, Any]], applied: list[dict[str, Any]]) -> None:
        self.failed = failed
        self.applied = applied
        parts = [f"{record_label(r)}: [{r.get('errCode')}] {r.get('errInfo') or 'failed'}" for r in failed]
        text = "; ".join(parts)
        if applied:
            text += f" (applied on {', '.join(record_label(r) for r in applied)})"
        code = failed[0].get("errCode") if failed else -1
        self.code = code if isinstance(code, int) else -1
        self.message = text
        self.method = method
        TubeMQError.__init__(self, f"{method}: {text}")  # each record carries its own code


def record_label(row: dict[str, Any]) -> str:
    """How a per-record result names its record: ``1:topic``, ``topic`` or ``broker 3``."""
    topic = row.get("topicName")
    bid = row.get("brokerId")
    if topic:
        return f"{bid}:{topic}" if bid is not None else str(topic)
    return f"broker {bid}"
