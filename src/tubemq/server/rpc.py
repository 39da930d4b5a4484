"""RPC server plumbing shared by the embedded master and broker (docs/PROTOCOL.md §1, §2; captures s6a/b/d).

Why an asyncio ``Protocol`` and not streams: the broker's send path must stay lean (tens of thousands of
requests per second on one core), so frames of one TCP read are decoded, dispatched and answered in one
pass with a single ``transport.write``. Handlers may return their answer directly (no task is created)
or return an awaitable (a task per request, for slow paths such as fsync-before-ack).

Fidelity rules reproduced from the real Java server (captures win over the spec):

* bad begin token / bad list size: no answer, no close, the rest of the current read is discarded;
  list size 0 makes every later frame on that connection unanswered (captures README item 5);
* envelope parse failure: FATAL ``IPC server unable to read call parameters:<msg>``;
* unknown method id: FATAL ``java.lang.Exception`` ``IPC server handle request error :Unsupported
  method ID :<m>``; body missing required fields / malformed: FATAL InvalidProtocolBufferException
  ``IPC server handle request error :<msg>`` with protobuf-java's texts;
* (serviceType, method) outside the whitelist: ERROR ``java.lang.Exception`` (``Service Type is
  invalid!`` / ``Unsupported method <m>in service type <s>!``); whitelisted but not served here:
  ERROR ``No service <s> found on the server``;
* timeouts (§2.7): absent/0 => processed, never answered; negative or expired => dropped;
* handler exceptions other than RpcException: ERROR InvocationTargetException with "" message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl as _ssl
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Union

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError as PbDecodeError
from google.protobuf.message import Message

from .. import codec
from ..errors import FrameError
from ..protocol import broker_pb, master_pb
from ..protocol import constants as C
from . import wire
from .auth import FailureThrottle
from .config import ServerConfig

log = logging.getLogger("tubemq.server.rpc")

E_CERTIFICATE_FAILURE = int(C.ErrorCode.CERTIFICATE_FAILURE)

#: What a handler may return: a protobuf message, pre-serialized response bytes, or an awaitable of those.
HandlerResult = Union[Message, bytes, bytearray, memoryview]  # noqa: UP007 - runtime alias on 3.10


class AfterBatch:
    """A handler answer decided after the batch-end hook: a send is acknowledged only once the hook
    wrote its data to the store (``resolve`` runs then and returns the answer to write)."""

    __slots__ = ()

    def resolve(self) -> HandlerResult:
        raise NotImplementedError


Handler = Callable[[Any, "RpcContext"], Union[HandlerResult, AfterBatch, Awaitable[HandlerResult]]]  # noqa: UP007

#: method id -> request protobuf class (PbEnDecoder.pbDecode, §2.3). Methods 7-9 (broker -> master) have
#: no message types in our .proto files, so like 11/12/14/19 they decode as "Unsupported method ID".
REQUEST_TYPES: dict[int, type[Message]] = {
    1: master_pb.RegisterRequestP2M,
    2: master_pb.HeartRequestP2M,
    3: master_pb.CloseRequestP2M,
    4: master_pb.RegisterRequestC2M,
    5: master_pb.HeartRequestC2M,
    6: master_pb.CloseRequestC2M,
    13: broker_pb.SendMessageRequestP2B,
    15: broker_pb.RegisterRequestC2B,
    16: broker_pb.HeartBeatRequestC2B,
    17: broker_pb.GetMessageRequestC2B,
    18: broker_pb.CommitOffsetRequestC2B,
    20: master_pb.RegisterRequestC2MV2,
    21: master_pb.HeartRequestC2MV2,
    22: master_pb.GetPartMetaRequestC2M,
}

MASTER_METHODS = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21, 22})
BROKER_METHODS = frozenset({11, 12, 13, 14, 15, 16, 17, 18, 19})

_FATAL_READ = "IPC server unable to read call parameters:"
_FATAL_HANDLE = "IPC server handle request error :"

# protobuf-java (3.19) InvalidProtocolBufferException texts.
PB_TRUNCATED = (
    "While parsing a protocol message, the input ended unexpectedly in the middle of a field.  "
    "This could mean either that the input has been truncated or that an embedded message "
    "misreported its own length."
)
PB_NEGATIVE_SIZE = (
    "CodedInputStream encountered an embedded string or message which claimed to have negative size."
)
PB_MALFORMED_VARINT = "CodedInputStream encountered a malformed varint."
PB_INVALID_TAG = "Protocol message contained an invalid tag (zero)."
PB_INVALID_END_TAG = "Protocol message end-group tag did not match expected tag."
PB_INVALID_WIRE_TYPE = "Protocol message tag had invalid wire type."
PB_MISSING = "Message missing required fields: "


class RpcException(Exception):
    """Raised by handlers for an ERROR (status 1) or FATAL (status 2) RPC answer."""

    def __init__(self, exception_name: str, message: str = "", status: int = 1) -> None:
        super().__init__(f"{exception_name}: {message}")
        self.exception_name = exception_name
        self.message = message
        self.status = status


class RpcContext:
    """Per-request facts a handler may need (peer, port, TLS, timing)."""

    __slots__ = (
        "serial",
        "service_type",
        "protocol_ver",
        "method",
        "timeout_ms",
        "remote",
        "local_port",
        "tls",
        "received_at",
        "connection",
    )

    def __init__(
        self,
        serial: int,
        service_type: int,
        protocol_ver: int,
        method: int,
        timeout_ms: int,
        remote: str,
        local_port: int,
        tls: bool,
        received_at: float,
        connection: _Connection | None = None,
    ) -> None:
        self.serial = serial
        self.service_type = service_type
        self.protocol_ver = protocol_ver
        self.method = method
        self.timeout_ms = timeout_ms
        self.remote = remote
        self.local_port = local_port
        self.tls = tls
        self.received_at = received_at
        self.connection = connection

    @property
    def remote_host(self) -> str:
        return self.remote.rsplit(":", 1)[0]

    @property
    def token_verified(self) -> bool:
        """True once a request on this connection presented a valid visit token."""
        conn = self.connection
        return conn is not None and conn.token_verified

    def token_accepted(self) -> None:
        """A valid visit token arrived: token-less requests (getMessage, commit) may use the connection."""
        if self.connection is not None:
            self.connection.token_verified = True

    def token_refused(self) -> None:
        """A wrong visit token arrived: the connection is closed after ``max_bad_tokens`` of them."""
        if self.connection is not None:
            self.connection.bad_token()


def rewrite_exception_name(name: str, protocol_ver: int) -> str:
    """MixUtils.replaceClassNamePrefix (§2.4): only the org.apache.inlong.tubemq. prefix changes."""
    repl = C.JAVA_PREFIX_BY_VERSION.get(protocol_ver)
    if repl is not None and name.startswith(C.JAVA_PREFIX):
        return repl + name[len(C.JAVA_PREFIX) :]
    return name


# ----------------------------------------------------------------------------------------------------
# protobuf-java error emulation (only used on failure paths)


class _JavaParseError(Exception):
    pass


def _read_varint(buf: bytes, pos: int, end: int, limit: int = 10) -> tuple[int, int]:
    result = 0
    shift = 0
    for _ in range(limit):
        if pos >= end:
            raise _JavaParseError(PB_TRUNCATED)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise _JavaParseError(PB_MALFORMED_VARINT)


def _check_wire(buf: bytes, pos: int, end: int, descriptor: Any, end_group: int = 0) -> int:
    """Walk a protobuf message like CodedInputStream would; raise _JavaParseError with Java's text."""
    fields = descriptor.fields_by_number if descriptor is not None else {}
    while pos < end:
        tag, pos = _read_varint(buf, pos, end)
        tag &= 0xFFFFFFFF
        number, wt = tag >> 3, tag & 7
        if number == 0:
            raise _JavaParseError(PB_INVALID_TAG)
        if wt == 0:
            _, pos = _read_varint(buf, pos, end)
        elif wt == 1:
            if end - pos < 8:
                raise _JavaParseError(PB_TRUNCATED)
            pos += 8
        elif wt == 5:
            if end - pos < 4:
                raise _JavaParseError(PB_TRUNCATED)
            pos += 4
        elif wt == 2:
            n, pos = _read_varint(buf, pos, end)
            if n >= 1 << 63 or (n & 0xFFFFFFFF) >= 1 << 31:
                raise _JavaParseError(PB_NEGATIVE_SIZE)
            if end - pos < n:
                raise _JavaParseError(PB_TRUNCATED)
            fd = fields.get(number)
            if fd is not None and fd.type == FieldDescriptor.TYPE_MESSAGE:
                _check_wire(buf, pos, pos + n, fd.message_type)
            pos += n
        elif wt == 3:
            pos = _check_wire(buf, pos, end, None, end_group=number)
        elif wt == 4:
            if number != end_group:
                raise _JavaParseError(PB_INVALID_END_TAG)
            return pos
        else:
            raise _JavaParseError(PB_INVALID_WIRE_TYPE)
    if end_group:
        raise _JavaParseError(PB_TRUNCATED)
    return pos


def java_parse_error(data: bytes, message_type: type[Message]) -> str:
    """protobuf-java's exception text for ``data`` parsed as ``message_type`` ("" if it would parse)."""
    try:
        _check_wire(data, 0, len(data), message_type.DESCRIPTOR)
    except _JavaParseError as exc:
        return str(exc)
    msg = message_type()
    try:
        msg.MergeFromString(data)
    except PbDecodeError:
        return PB_TRUNCATED  # upb refused something our walker accepted; closest Java text
    if not msg.IsInitialized():
        return PB_MISSING + ", ".join(msg.FindInitializationErrors())
    return ""


def parse_request_message(method: int, data: bytes) -> Message:
    """Decode a request body like PbEnDecoder: raise _JavaParseError with Java's wording on failure."""
    cls = REQUEST_TYPES.get(method)
    if cls is None:
        raise _JavaParseError(f"Unsupported method ID :{method}")
    msg = cls()
    try:
        msg.MergeFromString(data)
    except PbDecodeError:
        raise _JavaParseError(java_parse_error(data, cls) or PB_TRUNCATED) from None
    if not msg.IsInitialized():
        raise _JavaParseError(PB_MISSING + ", ".join(msg.FindInitializationErrors()))
    return msg


_ENVELOPE = (
    ("RpcConnHeader", ((1, 0),)),  # (field, wire type) of required fields
    ("RequestHeader", ()),
    ("RequestBody", ((1, 0),)),
)


def _slow_envelope(payload: bytes) -> tuple[int, int, int, int | None, bytes]:
    """Envelope parse with Java's failure texts: (service_type, protocol_ver, method, timeout, body)."""
    from ..protocol import rpc_pb

    types = (rpc_pb.RpcConnHeader, rpc_pb.RequestHeader, rpc_pb.RequestBody)
    pos = 0
    end = len(payload)
    parsed: list[Message] = []
    for cls in types:
        n, pos = _read_varint(payload, pos, end)
        if n >= 1 << 31:
            raise _JavaParseError(PB_NEGATIVE_SIZE)
        if end - pos < n:
            raise _JavaParseError(PB_TRUNCATED)
        chunk = payload[pos : pos + n]
        pos += n
        err = java_parse_error(chunk, cls)
        if err:
            raise _JavaParseError(err)
        parsed.append(cls.FromString(chunk))
    header, body = parsed[1], parsed[2]
    return (
        header.serviceType if header.HasField("serviceType") else -1,
        header.protocolVer if header.HasField("protocolVer") else -1,
        body.method,
        body.timeout if body.HasField("timeout") else None,
        body.request,
    )


def _fast_envelope(payload: bytes) -> tuple[int, int, int, int | None, bytes]:
    """Hot path: the codec's envelope decoder; any failure is re-diagnosed by the slow path."""
    try:
        r = wire.decode_request(payload)
    except Exception:
        return _slow_envelope(payload)
    return r.service_type, r.protocol_ver, r.method, r.timeout, r.body


# ----------------------------------------------------------------------------------------------------
# server


def _served_service_types(methods: Collection[int]) -> frozenset[int]:
    types: set[int] = set()
    for m in methods:
        if m in MASTER_METHODS:
            types.add(int(C.ServiceType.MASTER))
        if m in BROKER_METHODS:
            types.update((int(C.ServiceType.BROKER_READ), int(C.ServiceType.BROKER_WRITE)))
    return frozenset(types)


#: Bytes of RPC envelope (headers, clientId, topic, msgType, msgTime, auth info) around a message body,
#: with room to spare.
ENVELOPE_ALLOWANCE = 64 * 1024
#: A connection idle this long (no complete request) may be evicted when the connection cap is reached.
EVICT_MIN_IDLE_S = 1.0
#: Seconds a client gets to complete its TLS handshake (asyncio's default is 60).
TLS_HANDSHAKE_TIMEOUT_S = 10.0
#: Seconds between two sweeps for idle / muted connections, at most.
SWEEP_PERIOD_S = 1.0
#: Seconds a limit warning stays quiet after it was logged (a flood logs one line, not thousands).
_LOG_QUIET_S = 5.0


def frame_limit_for(max_msg_size: int) -> int:
    """Largest incomplete request frame kept for topics of at most ``max_msg_size`` bytes per message.

    A legal send needs data (max + 10240 header allowance) plus the envelope; twice the data part is
    kept so that a message up to twice too large still reaches the broker and gets its real 400
    answer (``data length over max length``) instead of a closed connection.
    """
    return 2 * (max_msg_size + C.META_MAX_MESSAGE_HEADER_SIZE) + ENVELOPE_ALLOWANCE


def rpc_options(config: ServerConfig) -> dict[str, Any]:
    """The ``RpcServer`` keyword arguments a ``ServerConfig`` decides (one place for master and broker)."""
    return {
        "max_connections": config.max_connections,
        "max_inflight_per_connection": config.max_inflight_per_connection,
        "max_buffered_bytes_per_connection": config.max_buffered_bytes_per_connection,
        "idle_timeout_s": config.rpc_idle_timeout_ms / 1000.0,
        "muted_close_s": config.rpc_muted_close_ms / 1000.0,
        "partial_frames_budget": config.rpc_partial_frames_budget,
        "max_bad_tokens": config.max_bad_visit_tokens,
        "bad_credential_delay_max_s": config.bad_credential_delay_max_ms / 1000.0,
    }


class _RateLimitedLog:
    """One WARNING per quiet period for a repeating condition, with the count of what it skipped."""

    def __init__(self) -> None:
        self._last = -_LOG_QUIET_S
        self._skipped = 0

    def warning(self, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last < _LOG_QUIET_S:
            self._skipped += 1
            return
        if self._skipped:
            msg += " (%d similar events not logged)"
            args = (*args, self._skipped)
        self._last, self._skipped = now, 0
        log.warning(msg, *args)


class RpcServer:
    """A TubeMQ RPC listener: framing, envelope, whitelist, timeouts, bounded per-connection state.

    Bounds beyond the real server's (issue 11.7/11.8): a connection with no complete request for
    ``idle_timeout_s`` is closed (the real client closes its side after 300 s read-idle); a muted
    connection (list size 0, which Java leaves hanging) is closed after ``muted_close_s``; at the
    connection cap the longest-idle connection (idle >= 1 s) is evicted to make room, otherwise the
    new one is closed; an incomplete frame larger than ``frame_limit()`` (what the largest topic's
    messages can legally need) closes its connection, and when all incomplete frames together exceed
    ``partial_frames_budget`` the connections whose partial frames made no progress longest are closed.
    """

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        handlers: dict[int, Handler],
        *,
        ssl: _ssl.SSLContext | None = None,
        max_connections: int = 1024,
        max_inflight_per_connection: int = 1024,
        max_buffered_bytes_per_connection: int = 64 * 1024 * 1024,
        service_types: Collection[int] | None = None,
        on_batch_end: Callable[[], None] | None = None,
        idle_timeout_s: float = 300.0,
        muted_close_s: float = 10.0,
        frame_limit: Callable[[], int] | None = None,
        partial_frames_budget: int = 256 * 1024 * 1024,
        max_bad_tokens: int = 3,
        bad_credential_delay_max_s: float = 0.0,
    ) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.handlers = dict(handlers)
        self.ssl = ssl
        self.max_connections = max_connections
        self.max_inflight = max_inflight_per_connection
        self.max_buffered = max_buffered_bytes_per_connection
        self.max_frame = min(codec.DEFAULT_MAX_FRAME_SIZE, max_buffered_bytes_per_connection)
        self.service_types = (
            frozenset(service_types) if service_types is not None else _served_service_types(self.handlers)
        )
        #: Called after the frames of one read were handled and before their answers are written
        #: (the broker writes its append buffers to the OS here, so an answer never precedes its data).
        self.on_batch_end = on_batch_end
        self.idle_timeout_s = idle_timeout_s
        self.muted_close_s = muted_close_s
        self.partial_frames_budget = partial_frames_budget
        self.max_bad_tokens = max_bad_tokens
        #: per-source delay after repeated 415 answers of the master (bad passwords), None when off; the
        #: broker has its own rule for bad visit tokens (closing after max_bad_tokens)
        self.throttle = (
            FailureThrottle(bad_credential_delay_max_s)
            if bad_credential_delay_max_s > 0 and not MASTER_METHODS.isdisjoint(self.handlers)
            else None
        )
        self._frame_limit_fn = frame_limit
        self._frame_limit = (self.max_frame, -1.0)  # (value, monotonic time computed)
        #: bytes held in incomplete frames over all connections
        self.partial_bytes = 0
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._conns: set[_Connection] = set()
        self._limit_log = _RateLimitedLog()
        self.rejected_connections = 0
        self.evicted_connections = 0
        self.closed_idle = 0
        self.closed_oversize = 0

    @property
    def connections(self) -> int:
        return len(self._conns)

    def frame_limit(self) -> int:
        """Largest incomplete frame a connection may hold (recomputed at most once a second)."""
        if self._frame_limit_fn is None:
            return self.max_frame
        value, at = self._frame_limit
        now = time.monotonic()
        if now - at >= 1.0:
            value = min(self.max_frame, self._frame_limit_fn())
            self._frame_limit = (value, now)
        return value

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # a TLS handshake counts against no slot until it completes: keep half-open ones short
        tls_opts: dict[str, Any] = {"ssl_handshake_timeout": TLS_HANDSHAKE_TIMEOUT_S} if self.ssl else {}
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port, ssl=self.ssl, reuse_address=True, **tls_opts
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.ensure_future(self._sweep_loop())
        log.debug("%s listening on %s:%d%s", self.name, self.host, self.port, " (TLS)" if self.ssl else "")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except asyncio.TimeoutError:  # pragma: no cover - defensive
                log.warning("%s: listener did not close within 5 s", self.name)
            self._server = None

    # ---- connection bounds

    async def _sweep_loop(self) -> None:
        period = max(0.05, min(SWEEP_PERIOD_S, self.idle_timeout_s / 4, self.muted_close_s / 4))
        while True:
            await asyncio.sleep(period)
            self.sweep(time.monotonic())

    def sweep(self, now: float) -> int:
        """Close idle and long-muted connections; returns how many were closed."""
        idle = muted = 0
        for conn in list(self._conns):
            if conn.muted_at is not None and now - conn.muted_at >= self.muted_close_s:
                muted += 1
                conn.close(abort=True)
            elif now - conn.last_active >= self.idle_timeout_s and not conn.inflight:
                idle += 1
                conn.close(abort=True)
        if idle or muted:
            self.closed_idle += idle + muted
            log.info(
                "%s: closed %d idle connection(s) (no request for %g s) and %d muted one(s)",
                self.name, idle, self.idle_timeout_s, muted,
            )
        return idle + muted

    def admit(self, conn: _Connection) -> bool:
        """At the cap, evict the longest-idle connection (idle >= 1 s) for ``conn``, or refuse ``conn``."""
        if len(self._conns) < self.max_connections:
            return True
        victim = min(self._conns, key=_Connection.idle_key)
        now = time.monotonic()
        if victim.muted_at is not None or (now - victim.last_active >= EVICT_MIN_IDLE_S and not victim.inflight):
            self.evicted_connections += 1
            self._limit_log.warning(
                "%s: connection limit %d reached, closing %s (idle %.1f s) to admit %s",
                self.name, self.max_connections, victim.remote, now - victim.last_active, conn.remote,
            )
            victim.close(abort=True)
            return True
        self.rejected_connections += 1
        self._limit_log.warning(
            "%s: connection limit %d reached and no connection idle, refusing %s",
            self.name, self.max_connections, conn.remote,
        )
        return False

    def account_partial(self, conn: _Connection, held: int) -> None:
        """Track ``conn``'s incomplete frame; enforce the per-frame limit and the global budget."""
        self.partial_bytes += held - conn.partial
        conn.partial = held
        if held > self.frame_limit():
            self.closed_oversize += 1
            self._limit_log.warning(
                "%s: %s holds an incomplete frame of %d bytes, over the %d a legal request needs: closing it",
                self.name, conn.remote, held, self.frame_limit(),
            )
            conn.close(abort=True)
            return
        if self.partial_bytes <= self.partial_frames_budget:
            return
        # over budget: close the holders whose frames made no progress for longest (a stalled
        # hostile upload, not the one that is moving) until the budget is met again
        holders = sorted((c for c in self._conns if c.partial), key=lambda c: c.last_read)
        for victim in holders:
            if self.partial_bytes <= self.partial_frames_budget:
                break
            self.closed_oversize += 1
            self._limit_log.warning(
                "%s: incomplete frames hold %d bytes, over the budget of %d: closing %s (%d bytes)",
                self.name, self.partial_bytes, self.partial_frames_budget, victim.remote, victim.partial,
            )
            victim.close(abort=True)

    # ---- request processing

    def process(self, conn: _Connection, serial: int, payload: bytes) -> bytes | tuple[RpcContext, AfterBatch] | None:
        """Handle one request frame; returns the answer frame, None (no answer now / ever), or an answer
        to resolve after the batch-end hook."""
        received = time.monotonic()
        try:
            service_type, protocol_ver, method, timeout, body = _fast_envelope(payload)
        except _JavaParseError as exc:
            return wire.encode_error_response(
                serial, C.EXC_INVALID_PROTOBUF, _FATAL_READ + str(exc), status=2, protocol_ver=None
            )
        except Exception:  # defensive: never let a malformed frame break the connection
            log.exception("%s: envelope decode failed", self.name)
            return wire.encode_error_response(
                serial, C.EXC_INVALID_PROTOBUF, _FATAL_READ + PB_TRUNCATED, status=2, protocol_ver=None
            )
        try:
            request = parse_request_message(method, body)
        except _JavaParseError as exc:
            text = str(exc)
            name = C.EXC_JAVA_EXCEPTION if text.startswith("Unsupported method ID") else C.EXC_INVALID_PROTOBUF
            return wire.encode_error_response(serial, name, _FATAL_HANDLE + text, status=2, protocol_ver=None)
        timeout_ms = 0 if timeout is None else timeout
        # whitelist (PbEnDecoder.isValidServiceTypeAndMethod), then the service lookup
        allowed = C.SERVICE_METHOD_WHITELIST.get(service_type)
        if allowed is None:
            return self._answer_error(serial, received, timeout_ms, C.EXC_JAVA_EXCEPTION, "Service Type is invalid!")
        if method not in allowed:
            return self._answer_error(
                serial,
                received,
                timeout_ms,
                C.EXC_JAVA_EXCEPTION,
                f"Unsupported method {method}in service type {service_type}!",
            )
        if service_type not in self.service_types:
            return self._answer_error(
                serial, received, timeout_ms, C.EXC_JAVA_EXCEPTION, f"No service {service_type} found on the server"
            )
        handler = self.handlers.get(method)
        if handler is None:
            return self._answer_error(
                serial,
                received,
                timeout_ms,
                C.EXC_JAVA_EXCEPTION,
                f"No method {method} in service {service_type} found on the server",
            )
        # §2.7: a request older than its timeout (or with a negative one) is dropped unprocessed
        if int((time.monotonic() - received) * 1000) > timeout_ms:
            return None
        ctx = RpcContext(
            serial, service_type, protocol_ver, method, timeout_ms, conn.remote, self.port, conn.tls, received, conn
        )
        try:
            result = handler(request, ctx)
        except RpcException as exc:
            return self._answer_rpc_exception(ctx, exc)
        except Exception:
            log.exception("%s: handler for method %d failed", self.name, method)
            return self._answer_error(serial, received, timeout_ms, C.EXC_INVOCATION_TARGET, "")
        if isinstance(result, Message):
            if self.throttle is not None and getattr(result, "errCode", 0) == E_CERTIFICATE_FAILURE:
                self.throttle.failure(conn.host)
            return self._answer(ctx, result)
        if isinstance(result, (bytes, bytearray, memoryview)):
            return self._answer(ctx, result)
        if isinstance(result, AfterBatch):
            return ctx, result
        conn.start_async(ctx, result)
        return None

    def resolve_late(self, answer: bytes | tuple[RpcContext, AfterBatch]) -> bytes | None:
        """An answer frame of the batch, resolving those decided after the batch-end hook."""
        if type(answer) is not tuple:
            return answer  # type: ignore[return-value]
        ctx, late = answer
        try:
            return self._answer(ctx, late.resolve())
        except Exception:
            log.exception("%s: late answer for method %d failed", self.name, ctx.method)
            return self._answer_error(ctx.serial, ctx.received_at, ctx.timeout_ms, C.EXC_INVOCATION_TARGET, "")

    def _expired(self, received: float, timeout_ms: int) -> bool:
        return int((time.monotonic() - received) * 1000) >= timeout_ms

    def _answer(self, ctx: RpcContext, result: HandlerResult) -> bytes | None:
        if self._expired(ctx.received_at, ctx.timeout_ms):
            return None
        body = result.SerializeToString() if isinstance(result, Message) else result
        return wire.encode_response(ctx.serial, ctx.method, body)

    def _answer_error(
        self, serial: int, received: float, timeout_ms: int, name: str, message: str
    ) -> bytes | None:
        if self._expired(received, timeout_ms):
            return None
        return wire.encode_error_response(serial, name, message, status=1, protocol_ver=C.PROTOCOL_VERSION)

    def _answer_rpc_exception(self, ctx: RpcContext, exc: RpcException) -> bytes | None:
        if self._expired(ctx.received_at, ctx.timeout_ms):
            return None
        name = rewrite_exception_name(exc.exception_name, ctx.protocol_ver)
        fatal = exc.status == int(C.ResponseStatus.FATAL)
        return wire.encode_error_response(
            ctx.serial, name, exc.message, status=exc.status, protocol_ver=None if fatal else C.PROTOCOL_VERSION
        )

    async def finish_async(self, ctx: RpcContext, awaitable: Awaitable[HandlerResult]) -> bytes | None:
        try:
            result = await awaitable
        except RpcException as exc:
            return self._answer_rpc_exception(ctx, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: handler for method %d failed", self.name, ctx.method)
            return self._answer_error(ctx.serial, ctx.received_at, ctx.timeout_ms, C.EXC_INVOCATION_TARGET, "")
        return self._answer(ctx, result)


class _Connection(asyncio.Protocol):
    """One client connection: decode, dispatch, answer; pauses reading when its bounds are reached."""

    def __init__(self, server: RpcServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.decoder = codec.FrameDecoder(server.max_frame)
        self.remote = "?:0"
        self.tls = server.ssl is not None
        self.muted = False  # after a list-size-0 header: nothing on this connection is answered
        self.muted_at: float | None = None
        self.closed = False
        self.inflight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self._paused_write = False
        self._paused_inflight = False
        self._reading_paused = False
        now = time.monotonic()
        #: time of the last complete request (idle timeout, eviction) and of the last bytes read
        self.last_active = now
        self.last_read = now
        #: bytes of the incomplete frame, as accounted in server.partial_bytes
        self.partial = 0
        self.token_verified = False
        self.bad_tokens = 0
        self.host = "?"  # the source a bad-credential delay is kept for (address without the port)
        #: frames held while this connection's source waits out a bad-credential delay
        self._held: list[tuple[int, bytes]] = []
        self._paused_throttle = False

    def idle_key(self) -> tuple[int, float]:
        """Eviction order: muted connections first, then the longest idle."""
        return (0 if self.muted_at is not None else 1, self.last_active)

    def bad_token(self) -> None:
        self.bad_tokens += 1
        if self.bad_tokens >= self.server.max_bad_tokens:
            log.warning(
                "%s: %d invalid visit tokens from %s: closing the connection",
                self.server.name, self.bad_tokens, self.remote,
            )
            # answers already queued for this read are dropped with the connection
            self.close()

    # ---- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        server = self.server
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.remote = f"{peer[0]}:{peer[1]}"
            self.host = str(peer[0])
        if not server.admit(self):
            self.closed = True
            transport.abort()
            return
        server._conns.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not a TCP socket
                pass
        transport.set_write_buffer_limits(high=server.max_buffered // 2, low=server.max_buffered // 8)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release()
        for t in list(self.tasks):
            t.cancel()

    def _release(self) -> None:
        """Give back this connection's slot and partial-frame budget (at once, not at connection_lost)."""
        server = self.server
        server._conns.discard(self)
        if self.partial:
            server.partial_bytes -= self.partial
            self.partial = 0
        self.decoder = _SPENT_DECODER

    def pause_writing(self) -> None:
        self._paused_write = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._paused_write = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self.muted or self.closed:
            return
        server = self.server
        self.last_read = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except FrameError as exc:
            # Java: no answer, no close; the rest of this read is dropped and the next read starts a
            # fresh frame. A zero list size leaves the Java decoder waiting forever: mute the connection
            # (closed after server.muted_close_s, which Java never does).
            self.decoder = codec.FrameDecoder(server.max_frame)
            server.account_partial(self, 0)
            if "empty" in str(exc) or _has_zero_list_header(data):
                self.muted = True
                self.muted_at = self.last_read
            log.debug("%s: framing error from %s: %s", server.name, self.remote, exc)
            return
        held = self.decoder.buffered
        if held or self.partial:
            server.account_partial(self, held)
            if self.closed:
                return
        if not frames:
            return
        self.last_active = self.last_read
        if self._held:  # read before the pause took effect: queue behind the held frames
            self._held.extend(frames)
            return
        self._run(frames)

    def _run(self, frames: list[tuple[int, bytes]]) -> None:
        """Handle the frames of one read and write their answers together after the batch-end hook."""
        server = self.server
        throttle = server.throttle
        out: list[bytes | tuple[RpcContext, AfterBatch]] = []
        late = False
        for i, (serial, payload) in enumerate(frames):
            if throttle is not None and len(throttle) and throttle.wait(self.host) > 0:
                self._hold(frames[i:], throttle.wait(self.host))
                break
            try:
                answer = server.process(self, serial, payload)
            except Exception:  # pragma: no cover - process() catches everything it knows of
                log.exception("%s: unexpected failure handling a frame", server.name)
                answer = None
            if answer is not None:
                if type(answer) is tuple:
                    late = True
                out.append(answer)
            if self.closed:
                break  # too many bad tokens: the rest of this read is not processed
        if server.on_batch_end is not None:
            try:
                server.on_batch_end()
            except Exception:
                log.exception("%s: batch-end hook failed", server.name)
                out = []  # never acknowledge what may not have reached the store
        if late:
            out = [a for a in map(server.resolve_late, out) if a is not None]
        if out and self.transport is not None and not self.closed:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))  # type: ignore[arg-type]

    def _hold(self, frames: list[tuple[int, bytes]], wait: float) -> None:
        """The source keeps presenting bad credentials: handle these frames (and read more) later."""
        self._held = frames
        self._paused_throttle = True
        self._update_reading()
        asyncio.get_running_loop().call_later(wait, self._release_held)

    def _release_held(self) -> None:
        frames, self._held = self._held, []
        self._paused_throttle = False
        if self.closed:
            return
        self._update_reading()
        if frames:
            self._run(frames)

    # ---- async requests

    def start_async(self, ctx: RpcContext, awaitable: Awaitable[HandlerResult]) -> None:
        task = asyncio.ensure_future(self._run_async(ctx, awaitable))
        self.tasks.add(task)
        self.inflight += 1
        if self.inflight >= self.server.max_inflight:
            self._paused_inflight = True
            self._update_reading()

    async def _run_async(self, ctx: RpcContext, awaitable: Awaitable[HandlerResult]) -> None:
        try:
            answer = await self.server.finish_async(ctx, awaitable)
            if answer is not None and self.transport is not None and not self.closed:
                self.transport.write(answer)
        finally:
            self.inflight -= 1
            task = asyncio.current_task()
            if task is not None:
                self.tasks.discard(task)  # type: ignore[arg-type]
            if self._paused_inflight and self.inflight < self.server.max_inflight:
                self._paused_inflight = False
                self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        want_pause = self._paused_write or self._paused_inflight or self._paused_throttle
        if want_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not want_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def close(self, *, abort: bool = False) -> None:
        """Close (answers already written still go out) or, with ``abort``, drop at once (bounds)."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self._release()
            if abort:
                self.transport.abort()
            else:
                self.transport.close()


#: What a closed connection's decoder becomes: its buffer is freed at once, not at connection_lost.
_SPENT_DECODER = codec.FrameDecoder(1)


def _has_zero_list_header(data: bytes) -> bool:
    """True when ``data`` holds a frame header (token, serial) with list size 0."""
    token = codec.BEGIN_TOKEN.to_bytes(4, "big")
    start = data.find(token)
    while start >= 0:
        if len(data) >= start + 12 and data[start + 8 : start + 12] == b"\x00\x00\x00\x00":
            return True
        start = data.find(token, start + 1)
    return False
