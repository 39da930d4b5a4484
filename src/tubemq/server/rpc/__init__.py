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

Layout: the envelope and body parsing with Java's error texts are in ``rpc/envelope.py``; one client
connection (decode, dispatch, bounds) in ``rpc/connection.py``; this module is the listener, the
request pipeline (``RpcServer.process``) and the handler contract (``RpcContext``, ``BatchEnd``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl as _ssl
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from google.protobuf.message import Message

from ... import codec
from ..._tasks import wait_for
from ...protocol import constants as C
from .. import wire
from ..auth import FailureThrottle
from ..config import ServerConfig
from .connection import _Connection
from .context import BatchEnd, Handler, HandlerResult, RpcContext
from .envelope import (
    _FATAL_HANDLE,
    _FATAL_READ,
    BROKER_METHODS,
    ENVELOPE_ALLOWANCE,
    MASTER_METHODS,
    PB_INVALID_END_TAG,
    PB_INVALID_TAG,
    PB_INVALID_WIRE_TYPE,
    PB_MALFORMED_VARINT,
    PB_MISSING,
    PB_NEGATIVE_SIZE,
    PB_TRUNCATED,
    REQUEST_TYPES,
    RpcException,
    _fast_envelope,
    _JavaParseError,
    _served_service_types,
    frame_limit_for,
    java_parse_error,
    parse_request_message,
    rewrite_exception_name,
)

log = logging.getLogger("tubemq.server.rpc")

E_CERTIFICATE_FAILURE = int(C.ErrorCode.CERTIFICATE_FAILURE)

#: A connection idle this long (no complete request) may be evicted when the connection cap is reached.
EVICT_MIN_IDLE_S = 1.0
#: Seconds a client gets to complete its TLS handshake (asyncio's default is 60).
TLS_HANDSHAKE_TIMEOUT_S = 10.0
#: Seconds between two sweeps for idle / muted connections, at most.
SWEEP_PERIOD_S = 1.0
#: Seconds a limit warning stays quiet after it was logged (a flood logs one line, not thousands).
_LOG_QUIET_S = 5.0


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

    Bounds beyond the real server's (so that idle or muted peers cannot hold connections for ever): a connection with no complete request for
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
        on_batch_end: BatchEnd | None = None,
        idle_timeout_s: float = 300.0,
        muted_close_s: float = 10.0,
        frame_limit: Callable[[], int] | None = None,
        partial_frames_budget: int = 256 * 1024 * 1024,
        max_bad_tokens: int = 3,
        bad_credential_delay_max_s: float | None = None,
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
        self.throttle: FailureThrottle | None = None
        if not MASTER_METHODS.isdisjoint(self.handlers):
            throttle = FailureThrottle(bad_credential_delay_max_s)
            self.throttle = throttle if throttle.enabled else None
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
                await wait_for(self._server.wait_closed(), 5)
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

    def process(self, conn: _Connection, serial: int, payload: bytes) -> bytes | None:
        """Handle one request frame; returns the answer frame, or None (no answer now / ever)."""
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
        conn.start_async(ctx, result)
        return None

    def replace_answers(
        self, out: list[bytes], replaced: Mapping[int, tuple[RpcContext, HandlerResult | RpcException]]
    ) -> list[bytes]:
        """The answers of one read with those the batch-end hook replaced (matched by serial); an
        RpcException replacement becomes an exception answer."""
        result = []
        for frame in out:
            item = replaced.get(int.from_bytes(frame[4:8], "big"))
            if item is None:
                result.append(frame)
                continue
            ctx, new = item
            answer = self._answer_rpc_exception(ctx, new) if isinstance(new, RpcException) else self._answer(ctx, new)
            if answer is not None:
                result.append(answer)
        return result

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


__all__ = [
    "BROKER_METHODS", "ENVELOPE_ALLOWANCE", "MASTER_METHODS", "PB_INVALID_END_TAG", "PB_INVALID_TAG",
    "PB_INVALID_WIRE_TYPE", "PB_MALFORMED_VARINT", "PB_MISSING", "PB_NEGATIVE_SIZE", "PB_TRUNCATED",
    "REQUEST_TYPES", "BatchEnd", "Handler", "HandlerResult", "RpcContext", "RpcException", "RpcServer",
    "frame_limit_for", "java_parse_error", "parse_request_message", "rewrite_exception_name", "rpc_options",
]
