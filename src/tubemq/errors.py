"""Typed exceptions. Every failure the library raises derives from :class:`TubeMQError`.

Server answers carrying an error code become :class:`ServerError` subclasses (``.code`` and the
server's ``.message``); :func:`error_for_code` maps every code of docs/PROTOCOL.md §6.1 to its class, so
callers can catch by meaning (``except PartitionOccupiedError``) or by number (``e.code == 410``).
"""

from __future__ import annotations

from .protocol.constants import ErrorCode


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

    def __init__(self, code: int | None = None, message: str = "") -> None:
        self.code = int(code if code is not None else self.default_code)
        self.message = message
        try:
            name = ErrorCode(self.code).name
        except ValueError:
            name = "UNKNOWN"
        super().__init__(f"[{self.code} {name}] {message}")


class MovedError(ServerError):
    default_code = ErrorCode.MOVED
    retryable = True


class BadRequestError(ServerError):
    default_code = ErrorCode.BAD_REQUEST


class UnauthorizedError(ServerError):
    """Commit on a partition this consumer does not hold (401)."""

    default_code = ErrorCode.UNAUTHORIZED


class ForbiddenError(ServerError):
    """Unknown or closed topic, partition out of range, checksum mismatch (403)."""

    default_code = ErrorCode.FORBIDDEN


class NotFoundError(ServerError):
    """No message at the requested offset (404): nothing to consume right now."""

    default_code = ErrorCode.NOT_FOUND
    retryable = True


class PartitionOccupiedError(ServerError):
    default_code = ErrorCode.PARTITION_OCCUPIED


class NotRegisteredError(ServerError):
    """HB_NO_NODE (411): the server does not know this client/registration (any more)."""

    default_code = ErrorCode.HB_NO_NODE


class DuplicatePartitionError(ServerError):
    default_code = ErrorCode.DUPLICATE_PARTITION


class AuthenticationError(ServerError):
    default_code = ErrorCode.CERTIFICATE_FAILURE


class ServerOverflowError(ServerError):
    default_code = ErrorCode.SERVER_RECEIVE_OVERFLOW
    retryable = True


class InconsistentGroupError(ServerError):
    """A group member disagrees with the group (424-430)."""

    default_code = ErrorCode.CLIENT_INCONSISTENT_TOPICSET


class TopicNotDeployedError(ServerError):
    default_code = ErrorCode.TOPIC_NOT_DEPLOYED


class ConsumeForbiddenError(ServerError):
    default_code = ErrorCode.CONSUME_GROUP_FORBIDDEN


class SpeedLimitError(ServerError):
    default_code = ErrorCode.SERVER_CONSUME_SPEED_LIMIT
    retryable = True


class InternalServerError(ServerError):
    default_code = ErrorCode.INTERNAL_SERVER_ERROR
    retryable = True


class ServiceUnavailableError(ServerError):
    default_code = ErrorCode.SERVICE_UNAVAILABLE
    retryable = True


# ---- local (client-produced) codes of §6.1


class ClientError(ServerError):
    """A local failure that reuses a TubeMQ code number (44x, 40x pull results, 421, 422)."""


class MessageTooLargeError(ClientError):
    default_code = ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH


class TopicNotPublishedError(ClientError):
    """No partition is available for the topic (443/444)."""

    default_code = ErrorCode.PARAMETER_MSG_TOPIC_NO_PARTITION


class NoPartitionError(ClientError):
    default_code = ErrorCode.NO_PARTITION_ASSIGNED


_BY_CODE: dict[int, type[ServerError]] = {
    301: MovedError,
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: NoPartitionError,
    406: NoPartitionError,
    407: NoPartitionError,
    408: NoPartitionError,
    410: PartitionOccupiedError,
    411: NotRegisteredError,
    412: DuplicatePartitionError,
    415: AuthenticationError,
    419: ServerOverflowError,
    421: ClientError,
    422: ClientError,
    424: InconsistentGroupError,
    425: InconsistentGroupError,
    426: InconsistentGroupError,
    427: InconsistentGroupError,
    428: InconsistentGroupError,
    429: InconsistentGroupError,
    430: InconsistentGroupError,
    431: TopicNotDeployedError,
    440: ClientError,
    441: ClientError,
    442: ClientError,
    443: TopicNotPublishedError,
    444: TopicNotPublishedError,
    445: MessageTooLargeError,
    450: ConsumeForbiddenError,
    452: SpeedLimitError,
    455: ConsumeForbiddenError,
    500: InternalServerError,
    503: ServiceUnavailableError,
    510: InternalServerError,
}


def error_for_code(code: int, message: str = "") -> ServerError:
    """The exception instance for a TubeMQ error code (unknown codes give a plain ServerError)."""
    cls = _BY_CODE.get(int(code), ServerError)
    return cls(code, message)


def remote_error(exception_name: str, message: str, status: int) -> RemoteError:
    """The exception for an RspExceptionBody; StandbyException is recognised by substring (§2.6.3)."""
    cls = StandbyError if "StandbyException" in exception_name else RemoteError
    return cls(exception_name, message, status)


__all__ = [name for name in dir() if name[0].isupper() and name.endswith("Error")] + [
    "error_for_code",
    "remote_error",
]


class InvalidMessageError(ClientError, ValueError):
    """A message refused locally before any I/O (blank topic 441, empty body 442, bad attributes 400)."""

    default_code = ErrorCode.BAD_REQUEST


__all__.append("InvalidMessageError")


class NotTubeMQPortError(FrameError):
    """The peer speaks another protocol (an HTTP server, a TLS port for a plaintext client): the
    address is wrong, so retrying it cannot help."""


__all__.append("NotTubeMQPortError")
