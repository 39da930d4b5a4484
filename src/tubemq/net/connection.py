"""One multiplexed TCP (or TLS) connection to a master or broker (docs/PROTOCOL.md §1, §2).

Why a custom asyncio Protocol instead of streams: the hot send path must cost one syscall per *batch*
of pipelined requests and no task per request. Frames queued during one event-loop iteration are
joined and written once (``call_soon`` flush); responses are matched to requests by serial number;
one timer per connection sweeps expired requests instead of one ``wait_for`` per call.

Bounded everywhere: at most ``max_inflight`` requests await an answer (callers beyond that wait for a
slot: back-pressure instead of buffering), the transport's write buffer pauses writers when it is
above its high-water mark, and the frame decoder rejects frames above ``max_frame_size``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import socket
import ssl as _ssl
import time
from collections.abc import Callable
from typing import Any

from .. import codec
from .._tasks import wait_for, wake_all
from ..errors import (
    ConnectionLostError,
    FrameError,
    NotTubeMQPortError,
    TubeMQConnectionError,
    TubeMQError,
    TubeMQTimeoutError,
    remote_error,
)

log = logging.getLogger("tubemq.net.connection")

#: Default in-flight window per connection (requests awaiting an answer).
DEFAULT_MAX_INFLIGHT = 4096
#: Frames above this are refused by the decoder (Java: 3584 blocks of 8 KiB, §1.3).
DEFAULT_MAX_FRAME_SIZE = codec.DEFAULT_MAX_FRAME_SIZE
#: How often pending requests are checked for expiry (seconds).
_SWEEP_INTERVAL = 0.05
#: Bytes read per ``recv_into`` (one buffer per connection, reused for every read).
_READ_BUFFER_SIZE = 256 * 1024
#: Transport write-buffer high-water mark: writers wait above it.
_WRITE_HIGH_WATER = 4 * 1024 * 1024

_decode_response = codec.decode_response
#: Request serials are 32-bit on the wire (they wrap).
_SERIAL_MASK = 0xFFFFFFFF

#: ``callback(arg, payload, None)`` on an answer, ``callback(arg, None, exc)`` on timeout / loss.
ResponseCallback = Callable[[Any, "bytes | None", "BaseException | None"], None]


def _call(cb: ResponseCallback, arg: Any, payload: bytes | None, exc: BaseException | None) -> None:
    try:
        cb(arg, payload, exc)
    except Exception:  # a broken callback must not break the connection
        log.exception("response callback failed")


def foreign_protocol(address: str, first: bytes) -> NotTubeMQPortError | None:
    """The error for a peer that is not a TubeMQ RPC port, judged by the first bytes it sent.

    A TubeMQ answer starts with the begin token (first byte 0xFF), so an HTTP status line
    (``HTTP/``) or a TLS record (0x15 alert, 0x16 handshake) there is certain: failing at once
    beats waiting for a frame that never comes (the admin HTTP port is the likeliest mistake).
    """
    if not first:
        return None
    if b"HTTP/".startswith(first[:5]):
        line = first.split(b"\r\n", 1)[0][:64].decode("latin-1", "replace")
        return NotTubeMQPortError(
            f"{address}: the peer answered {line!r}: this looks like an HTTP port, not a TubeMQ "
            f"RPC port (the admin API? the master's RPC port is usually 8715)"
        )
    if first[0] in (0x15, 0x16):
        kind = "an alert" if first[0] == 0x15 else "a handshake"
        return NotTubeMQPortError(
            f"{address}: the peer answered with a TLS record ({kind}): it expects TLS; "
            f"connect with tls=True (and its CA) or use its plaintext port"
        )
    if first[:1] == b"<" or first[:1] == b"{":
        # an HTTP server that took our frame for an HTTP/0.9 request answers with a bare body
        return NotTubeMQPortError(
            f"{address}: the peer answered {first[:32]!r}: an HTML/JSON body, so an HTTP port, not a "
            f"TubeMQ RPC port (the admin API? the master's RPC port is usually 8715)"
        )
    return None


async def _open_tls(conn: Connection, loop: asyncio.AbstractEventLoop, host: str, port: int,
                    connect_timeout: float, kwargs: dict[str, Any]) -> None:
    """TCP connect, then the TLS handshake, each within ``connect_timeout``: a handshake that gets no
    answer (or a reset) after a TCP connect that worked is a plaintext port, said as such instead of
    "connect timed out" (and not retried: NotTubeMQPortError)."""
    address = conn.address
    try:
        infos = await wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), connect_timeout)
        family, kind, proto, _, addr = infos[0]
        sock = socket.socket(family, kind, proto)
    except asyncio.TimeoutError as exc:
        raise TubeMQConnectionError(f"resolving {address} timed out after {connect_timeout:g} s") from exc
    except (OSError, IndexError) as exc:
        raise TubeMQConnectionError(f"connect to {address} failed: {exc}") from exc
    try:
        sock.setblocking(False)
        try:
            await wait_for(loop.sock_connect(sock, addr), connect_timeout)
        except asyncio.TimeoutError as exc:
            raise TubeMQConnectionError(f"connect to {address} timed out after {connect_timeout:g} s") from exc
        except OSError as exc:
            raise TubeMQConnectionError(f"connect to {address} failed: {exc}") from exc
        try:
            await wait_for(
                loop.create_connection(lambda: _Protocol(conn), sock=sock, ssl_handshake_timeout=connect_timeout,
                                       **kwargs),
                connect_timeout + 0.5,
            )
        except (asyncio.TimeoutError, ConnectionError, _ssl.SSLError, OSError) as exc:
            if isinstance(exc, _ssl.SSLCertVerificationError):
                raise TubeMQConnectionError(f"TLS to {address}: certificate not trusted: {exc}") from exc
            silent = isinstance(exc, (asyncio.TimeoutError, ConnectionAbortedError))  # asyncio's handshake timeout
            what = (f"got no answer in {connect_timeout:g} s" if silent
                    else f"failed ({type(exc).__name__}: {exc})")
            raise NotTubeMQPortError(
                f"{address}: the TCP connect worked but the TLS handshake {what}: the peer does not speak "
                f"TLS there (a plaintext TubeMQ port? connect with tls=False, or use its TLS port)"
            ) from exc
    except BaseException:
        sock.close()
        raise


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` -> (host, port) with a typed error for malformed input."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TubeMQConnectionError(f"bad address {address!r}: expected host:port")
    return host.strip("[]"), int(port)


def unwrap_response(payload: bytes) -> bytes:
    """Response payload -> RspResponseBody.data, or the RemoteError/StandbyError the server sent."""
    rsp = _decode_response(payload)
    if rsp.status == 0:
        return rsp.body
    raise remote_error(rsp.exception_name, rsp.message, rsp.status)


class _Protocol(asyncio.BufferedProtocol):
    """Thin adapter: asyncio callbacks -> Connection methods.

    Buffered (``recv_into`` one preallocated buffer) rather than ``data_received``: the plain
    protocol makes the transport ``recv(256 KiB)``, which allocates a fresh 256 KiB bytes object per
    read (an mmap, an mremap and a munmap syscall each time), a large share of
    the cost of one small answer in a blocking ``send()``. Here each read copies out just its bytes.
    """

    __slots__ = ("buf", "conn", "view")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.buf = bytearray(_READ_BUFFER_SIZE)
        self.view = memoryview(self.buf)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn._made(transport)  # type: ignore[arg-type]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        if self.conn is not None:
            # the decoder copies what it keeps, so it reads the buffer in place: a bytes copy of a
            # large read (a 512 KiB getMessage answer) costs an mmap, page faults and a munmap
            self.conn._data(self.view[:nbytes])

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        # break transport -> protocol -> connection at once: a dead connection's buffers (a partial
        # frame can be 28 MiB) must not wait for the cycle collector
        self.conn = None  # type: ignore[assignment]
        self.view.release()
        self.buf = self.view = None  # type: ignore[assignment]
        if conn is not None:
            conn._lost(exc)

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn._paused = True

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn._resume()


#: Added to errors that look like a plaintext client on a TLS port (a TLS record, or a close before any answer).
_TLS_HINT = " (if the server serves TLS on this port, connect with tls=True)"


class Connection:
    """A request/response multiplexer over one socket; see the module docstring.

    Create with :meth:`open`. ``call`` / ``call_frame`` return ``RspResponseBody.data`` on success and
    raise RemoteError/StandbyError (server exception), TubeMQTimeoutError, ConnectionLostError (the
    connection dropped with the request in flight) or TubeMQConnectionError (closed before sending).

    Observability: ``bytes_sent`` / ``bytes_received`` count wire bytes, ``inflight`` the requests
    awaiting an answer, ``closed_locally`` tells a :meth:`close` from a lost connection.
    """

    def __init__(
        self,
        address: str,
        *,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        if max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        self.address = address
        self.max_inflight = max_inflight
        self.closed = False
        self.last_activity = time.monotonic()
        self.on_close: list[Callable[[Connection], Any]] = []
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._max_frame_size = max_frame_size
        self._decoder = codec.FrameDecoder(max_frame_size)
        self._serials = itertools.count(1)  # loop thread only
        # serial -> (future or None, deadline, callback or None, callback arg)
        self._pending: dict[int, tuple[asyncio.Future[bytes] | None, float, ResponseCallback | None, Any]] = {}
        self._wbuf: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._paused = False
        self._resume_waiters: list[asyncio.Future[None]] = []
        self._close_exc: TubeMQError | None = None
        # observability: wire bytes (counted per write batch / per read, not per request) and why it closed
        self.bytes_sent = 0
        self.bytes_received = 0
        self.closed_locally = False
        self.close_reason = ""
        self.failed_on_close = 0  # requests still pending when it closed (failed with the close reason)
        self.tls = False
        #: ``answered_before()``: True when this address answered before on another connection or
        #: socket (set by the pool): then a close before any answer here is a peer that went away (a
        #: server restart), not a TLS port, and gets no TLS hint
        self.answered_before: Callable[[], bool] | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    async def open(
        cls,
        address: str,
        *,
        ssl: _ssl.SSLContext | None = None,
        connect_timeout: float = 3.0,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        server_hostname: str | None = None,
    ) -> Connection:
        """Connect to ``host:port`` (TCP_NODELAY is asyncio's default for TCP)."""
        host, port = split_address(address)
        conn = cls(address, max_inflight=max_inflight, max_frame_size=max_frame_size)
        conn.tls = ssl is not None
        loop = asyncio.get_running_loop()
        kwargs: dict[str, Any] = {}
        if ssl is not None:
            kwargs["ssl"] = ssl
            kwargs["server_hostname"] = server_hostname if server_hostname is not None else host
        if ssl is not None:
            await _open_tls(conn, loop, host, port, connect_timeout, kwargs)
            return conn
        try:
            await wait_for(
                loop.create_connection(lambda: _Protocol(conn), host, port, **kwargs), connect_timeout
            )
        except asyncio.TimeoutError as exc:
            raise TubeMQConnectionError(f"connect to {address} timed out after {connect_timeout:g} s") from exc
        except OSError as exc:
            raise TubeMQConnectionError(f"connect to {address} failed: {exc}") from exc
        return conn

    # ------------------------------------------------------------------ protocol callbacks

    def _made(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)

    def _data(self, data: bytes | memoryview) -> None:
        """Bytes read; ``data`` is only valid during this call (the protocol's read buffer)."""
        if self.closed:
            return
        self.last_activity = time.monotonic()
        first = self.bytes_received == 0
        self.bytes_received += len(data)
        if first:
            data = bytes(data)
            foreign = foreign_protocol(self.address, data)
            if foreign is not None:
                log.warning("closing %s", foreign)
                self._shutdown(foreign)
                return
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing %s: %s", self.address, exc)
            hint = _TLS_HINT if not self.tls and self.bytes_received == len(data) and data[1:2] == b"\x03" else ""
            self._shutdown(ConnectionLostError(f"{self.address}: malformed frame from peer: {exc}{hint}"))
            return
        pending = self._pending
        for serial, payload in frames:
            entry = pending.pop(serial, None)
            if entry is None:
                log.debug("%s: response for unknown serial %d ignored (late or duplicate)", self.address, serial)
                continue
            fut, _, cb, arg = entry
            if cb is not None:
                try:
                    cb(arg, payload, None)
                except Exception:  # a broken callback must not break the connection
                    log.exception("response callback failed")
            elif not fut.done():  # type: ignore[union-attr]
                fut.set_result(payload)  # type: ignore[union-attr]
        if self._slot_waiters:
            self._wake_slots()

    def _lost(self, exc: Exception | None) -> None:
        reason = f"{self.address}: connection lost" + (f": {exc}" if exc else "")
        if not self.tls and self.bytes_sent and not self.bytes_received:
            reason += " before any answer"
            if self.answered_before is None or not self.answered_before():
                reason += _TLS_HINT  # what a TLS-only TubeMQ port does to plaintext
        self._shutdown(ConnectionLostError(reason))

    def _resume(self) -> None:
        self._paused = False
        waiters, self._resume_waiters = self._resume_waiters, []
        wake_all(waiters)

    # ------------------------------------------------------------------ requests

    @property
    def inflight(self) -> int:
        return len(self._pending)

    @property
    def has_capacity(self) -> bool:
        """True when a request can be started without waiting (window and write buffer)."""
        return not self.closed and not self._paused and len(self._pending) < self.max_inflight

    async def wait_capacity(self, timeout: float | None = None) -> None:
        """Wait until :attr:`has_capacity` (or raise if the connection closes meanwhile).

        ``timeout`` (seconds) bounds the wait with TubeMQTimeoutError: a peer that stopped reading
        (a stalled broker keeps its socket open, so nothing else ends the wait) must not hang callers.
        """
        if timeout is None:
            await self._wait_capacity()
            return
        try:
            await wait_for(self._wait_capacity(), max(0.0, timeout))
        except asyncio.TimeoutError:
            if self.closed:
                raise self._closed_error() from None
            raise TubeMQTimeoutError(
                f"{self.address}: no room to send within {timeout:.1f} s "
                f"({len(self._pending)} in flight, write buffer {'full' if self._paused else 'ok'})"
            ) from None

    @property
    def read_idle(self) -> float:
        """Seconds since bytes were last received on this connection."""
        return time.monotonic() - self.last_activity

    async def _wait_capacity(self) -> None:
        while True:
            if self.closed:
                raise self._closed_error()
            if self._paused:
                w: asyncio.Future[None] = self._loop.create_future()
                self._resume_waiters.append(w)
                await w
                continue
            if len(self._pending) < self.max_inflight:
                return
            s: asyncio.Future[None] = self._loop.create_future()
            self._slot_waiters.append(s)
            try:
                await s
            except asyncio.CancelledError:
                if s.done() and not s.cancelled():
                    self._wake_slots()  # pass the slot on
                raise

    def _wake_slots(self) -> None:
        free = self.max_inflight - len(self._pending)
        waiters = self._slot_waiters
        while free > 0 and waiters:
            w = waiters.popleft()
            if not w.done():
                w.set_result(None)
                free -= 1

    def start_call(self, build: Callable[[int], bytes], timeout_ms: int) -> asyncio.Future[bytes]:
        """Queue ``build(serial)`` now and return the future of the raw response payload.

        No capacity check: callers use :attr:`has_capacity` / :meth:`wait_capacity` first (the hot
        path does, to avoid a coroutine per request).
        """
        if self.closed:
            raise self._closed_error()
        serial = next(self._serials) & _SERIAL_MASK
        frame = build(serial)
        fut: asyncio.Future[bytes] = self._loop.create_future()
        self._pending[serial] = (fut, time.monotonic() + timeout_ms / 1000.0, None, None)
        self._wbuf.append(frame)
        if self._flush_handle is None:
            self._flush_handle = self._loop.call_soon(self._flush)
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(_SWEEP_INTERVAL, self._sweep)
        return fut

    def start_call_cb(self, build: Callable[[int, Any], bytes], arg: Any, timeout_ms: int,
                      callback: ResponseCallback, *, flush: bool = True, write: bool = False) -> None:
        """Queue ``build(serial, arg)``; ``callback(arg, payload, None)`` on the answer or
        ``callback(arg, None, exc)`` on timeout / connection loss, called straight from the read path.

        The hot path: no future, no extra loop iteration and no per-request closure (``build`` and
        ``callback`` are long-lived callables, ``arg`` carries the request's state).
        ``flush=False``: the caller promises :meth:`flush_now` in this same callback (it queues a
        batch and writes it at once), so no flush is scheduled; a scheduled-then-cancelled handle
        would still cost the loop an extra ``epoll`` round before it can sleep. ``write=True``: write
        it now, with whatever is queued before it (one request awaited alone: no loop round first).
        """
        if self.closed:
            raise self._closed_error()
        serial = next(self._serials) & _SERIAL_MASK
        frame = build(serial, arg)
        self._pending[serial] = (None, time.monotonic() + timeout_ms / 1000.0, callback, arg)
        if write and not self._wbuf and self._transport is not None:  # nothing queued before it: straight out
            self.bytes_sent += len(frame)
            try:
                self._transport.write(frame)
            except Exception as exc:  # transport already closing
                self._shutdown(ConnectionLostError(f"{self.address}: write failed: {exc}"))
            flush = False
        else:
            self._wbuf.append(frame)
            if write:
                if self._flush_handle is not None:
                    self._flush_handle.cancel()
                    self._flush_handle = None
                self._write_queued()
                flush = False
        if flush and self._flush_handle is None:
            self._flush_handle = self._loop.call_soon(self._flush)
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(_SWEEP_INTERVAL, self._sweep)

    async def call_frame(self, build: Callable[[int], bytes], *, timeout_ms: int) -> bytes:
        """Send the frame ``build(serial)`` returns; wait for the answer (hot path of §2)."""
        if not self.has_capacity:
            await self.wait_capacity(timeout_ms / 1000.0)
        fut = self.start_call(build, timeout_ms)
        try:
            payload = await fut
        finally:
            # a failed future holds its exception, whose traceback holds this frame: without this
            # the cycle (and the connection it names) outlives the failure until the cycle collector
            del fut
        return unwrap_response(payload)

    async def call(self, service_type: int, method: int, body: bytes, *, timeout_ms: int) -> bytes:
        """One RPC with an already-serialised request message; returns RspResponseBody.data."""
        if timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive (the server never answers otherwise, §2.7)")

        def build(serial: int) -> bytes:
            return codec.encode_request(serial, service_type, method, body, timeout_ms=timeout_ms)

        return await self.call_frame(build, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ internals

    def flush_now(self) -> None:
        """Write the queued frames now instead of at the end of this loop iteration (a caller that
        just queued a batch saves an event-loop round)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush()
        elif self._wbuf:
            self._write_queued()

    def _flush(self) -> None:
        self._flush_handle = None
        self._write_queued()

    def _write_queued(self) -> None:
        """Write the queued frames as one transport write (loop thread)."""
        buf = self._wbuf
        if not buf or self._transport is None or self.closed:
            return
        self._wbuf = []
        data = buf[0] if len(buf) == 1 else b"".join(buf)
        self.bytes_sent += len(data)
        try:
            self._transport.write(data)
        except Exception as exc:  # transport already closing
            self._shutdown(ConnectionLostError(f"{self.address}: write failed: {exc}"))

    def _sweep(self) -> None:
        self._sweeper = None
        if self.closed or not self._pending:
            return
        now = time.monotonic()
        expired = [s for s, entry in self._pending.items() if entry[1] <= now]
        for serial in expired:
            entry = self._pending.pop(serial, None)
            if entry is None:
                continue
            fut, _, cb, arg = entry
            exc = TubeMQTimeoutError(f"{self.address}: no answer to request serial {serial} in time")
            if cb is not None:
                _call(cb, arg, None, exc)
            elif not fut.done():  # type: ignore[union-attr]
                fut.set_exception(exc)  # type: ignore[union-attr]
        if expired and self._slot_waiters:
            self._wake_slots()
        if self._pending:
            self._sweeper = self._loop.call_later(_SWEEP_INTERVAL, self._sweep)

    def _closed_error(self) -> TubeMQError:
        return self._close_exc or TubeMQConnectionError(f"{self.address}: connection is closed")

    def _shutdown(self, exc: TubeMQError) -> None:
        """Fail everything pending with ``exc``, drop the transport, run on_close callbacks once."""
        if self.closed:
            return
        self.closed = True
        transport, self._transport = self._transport, None
        pending, self._pending = self._pending, {}
        self._close_exc = exc if isinstance(exc, NotTubeMQPortError) else TubeMQConnectionError(
            f"{self.address}: connection is closed")
        if transport is not None:
            transport.abort() if isinstance(exc, (ConnectionLostError, FrameError)) else transport.close()
        # free a partially received frame now (up to max_frame_size), not when the cycle collector runs
        self._decoder = codec.FrameDecoder(self._max_frame_size)
        self.close_reason = str(exc)
        self.failed_on_close = len(pending)
        for fut, _, cb, arg in pending.values():
            if cb is not None:
                _call(cb, arg, None, exc)
            elif not fut.done():  # type: ignore[union-attr]
                fut.set_exception(exc)  # type: ignore[union-attr]
        self._wbuf = []
        wake_all(list(self._slot_waiters) + self._resume_waiters)  # they re-check and raise the closed error
        self._slot_waiters.clear()
        self._resume_waiters = []
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for hook in self.on_close:
            try:
                hook(self)
            except Exception:  # a callback must not break closing
                log.exception("on_close callback failed for %s", self.address)

    async def close(self) -> None:
        """Close now; requests still pending fail with ConnectionLostError."""
        if self.closed:
            return
        self.closed_locally = True
        if self._wbuf and self._transport is not None:
            self._write_queued()
        self._shutdown(ConnectionLostError(f"{self.address}: connection closed locally"))
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"open, {len(self._pending)} in flight"
        return f"<Connection {self.address} {state}>"


__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_INFLIGHT",
    "Connection",
    "ResponseCallback",
    "split_address",
    "unwrap_response",
]
