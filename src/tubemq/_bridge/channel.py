"""A blocking socket to one broker, owned by one application thread: the blocking send's round trip.

Why: a blocking ``Producer.send`` that goes through the event loop pays two thread hand-offs per
message (wake the loop to write, wake the caller with the answer). Here the calling thread writes the
frame and reads the answer itself, on a plain blocking socket (``TCP_NODELAY``), registered under the
producer's own client id and tokens, as the Java client's blocking ``sendMessage`` does on its
connection. Timeouts are the kernel's (``SO_RCVTIMEO`` / ``SO_SNDTIMEO`` set once per socket, so a
``recv`` is one system call, not a ``poll`` plus a ``recv`` as with ``socket.settimeout``), and a
deadline checked between reads bounds a peer that drips bytes.

Writes use ``socket.sendall`` (``MSG_NOSIGNAL`` where the platform has it, so a dead peer gives
EPIPE, never SIGPIPE). A failed ``sendall`` handed the kernel less than the whole frame, so the
broker cannot have stored the message: :class:`Unsent` tells the caller it may take another route.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys
import time

from .. import codec
from ..errors import ConnectionLostError, FrameError, TubeMQConnectionError, TubeMQError, TubeMQTimeoutError
from ..net.connection import DEFAULT_MAX_FRAME_SIZE, foreign_protocol, split_address

if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
    from . import _plain_py as plain
else:
    try:
        from . import _plain as plain  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - exercised when the extension was not built
        from . import _plain_py as plain  # type: ignore[no-redef]

_write = plain.write_frame
_read = plain.read_answer

_HAS_DONTWAIT = hasattr(socket, "MSG_DONTWAIT")
_PEEK_FLAGS: int = int(socket.MSG_PEEK) | int(getattr(socket, "MSG_DONTWAIT", 0))
#: a channel idle longer than this is checked for a peer that closed it before it is written to (s)
STALE_CHECK_AFTER = plain.STALE_CHECK_AFTER
_READ_SIZE = 64 * 1024
SERIAL_MASK = 0xFFFFFFFF


class Unsent(Exception):
    """The frame was not (wholly) written: the broker cannot have stored the message."""


def _timeval(seconds: float) -> bytes:
    if sys.platform == "win32":
        return struct.pack("I", max(1, int(seconds * 1000)))
    sec = int(seconds)
    return struct.pack("ll", sec, max(1 if sec == 0 else 0, int((seconds - sec) * 1e6)))


class BlockingChannel:
    """One thread's blocking connection to one broker; see the module docstring.

    Not thread-safe by design: only its owner thread calls :meth:`round_trip`; :meth:`abort` (any
    thread) only shuts the socket down, which makes a blocked read in the owner return at once.
    """

    __slots__ = ("__weakref__", "address", "buf", "bytes_received", "bytes_sent", "closed", "decoder", "last_used",
                 "serial", "sock", "timeout", "view")

    def __init__(self, address: str, connect_timeout: float, timeout: float,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, read_size: int = _READ_SIZE) -> None:
        """``read_size``: bytes one ``recv`` may take (large answers, e.g. getMessage, want more)."""
        host, port = split_address(address)
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            raise TubeMQConnectionError(f"connect to {address} failed: {exc}") from exc
        try:
            sock.settimeout(None)  # blocking: the kernel timeouts below bound each call
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if hasattr(socket, "SO_NOSIGPIPE"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_NOSIGPIPE, 1)
            self.sock = sock
            self.timeout = 0.0  # the socket's kernel timeouts now (s)
            self.set_timeout(timeout)
        except OSError as exc:
            sock.close()
            raise TubeMQConnectionError(f"{address}: socket setup failed: {exc}") from exc
        self.address = address
        self.decoder = codec.FrameDecoder(max_frame_size)
        self.serial = 0  # the last request serial used (owner thread only)
        self.buf = bytearray(read_size)
        self.view = memoryview(self.buf)
        self.closed = False
        self.last_used = time.monotonic()
        # wire bytes (for metrics): written by the owner thread only, read by snapshots
        self.bytes_sent = 0
        self.bytes_received = 0

    def set_timeout(self, seconds: float) -> None:
        """The kernel's read and write timeouts of the socket (owner thread)."""
        if seconds != self.timeout:
            tv = _timeval(seconds)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
            self.timeout = seconds

    def stale(self) -> bool:
        """True when the peer closed the connection (or sent something nobody asked for) while it was
        idle: writing to it would only give an error after the fact. One system call: callers ask
        only after ``STALE_CHECK_AFTER`` idle seconds."""
        sock = self.sock
        try:
            if not _HAS_DONTWAIT:  # Windows: ask select first
                readable, _, _ = select.select([sock], [], [], 0)
                if not readable:
                    return False
            sock.recv(1, _PEEK_FLAGS)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return True  # EOF, or unexpected bytes: either way not a channel to use

    def round_trip(self, frame_for: object, job: object, timeout: float) -> bytes:
        """Write ``frame_for(serial, job)`` and return the answer's payload (see :meth:`exchange`)."""
        self.serial = serial = (self.serial + 1) & SERIAL_MASK
        return self.exchange(frame_for(serial, job), serial, timeout, time.monotonic())  # type: ignore[operator]

    def exchange(self, frame: bytes, serial: int, timeout: float, now: float) -> bytes:
        """Write ``frame`` (request ``serial``, the caller took it from :attr:`serial`) and return the
        answer's payload (its serial matched); ``now`` is the caller's ``time.monotonic()``.

        Raises :class:`Unsent` (nothing stored; the channel is dead), TubeMQTimeoutError (no answer
        within ``timeout``) or ConnectionLostError (the connection broke after the write: the outcome
        is unknown). After any of them the channel must be closed.
        """
        self.write(frame, timeout, now)
        return self.read(serial, timeout, now)

    def write(self, frame: bytes, timeout: float, now: float) -> None:
        """The first half of :meth:`exchange`: write ``frame`` (raises :class:`Unsent`). The answer
        is read later with :meth:`read`; at most one request may wait on a channel (an answer of
        another serial is dropped)."""
        error = _write(self, frame, timeout, now)
        if error is not None:
            raise Unsent(f"{self.address}: write failed: {error}") from error

    def read(self, serial: int, timeout: float, now: float) -> bytes:
        """The second half of :meth:`exchange`: the payload of the answer to ``serial``, waited for
        at most ``timeout`` seconds from ``now`` (``time.monotonic()``). Answers to earlier requests
        that timed out are late and dropped."""
        got = _read(self, serial, timeout, now)
        if isinstance(got, BaseException):
            raise got
        return got

    # the errors of a read (made by the read loop, tubemq._bridge._plain)

    def timed_out(self, serial: int, timeout: float) -> TubeMQTimeoutError:
        return TubeMQTimeoutError(f"{self.address}: no answer to request serial {serial} within {timeout:.1f} s")

    def lost(self, exc: OSError | None) -> ConnectionLostError:
        """``exc``: the read's error; None: the peer closed the connection."""
        if exc is None:
            return ConnectionLostError(f"{self.address}: connection closed by the peer")
        lost = ConnectionLostError(f"{self.address}: connection lost: {exc}")
        lost.__cause__ = exc
        return lost

    def malformed(self, data: bytes, exc: FrameError) -> TubeMQError:
        """Bytes that are no TubeMQ frame: another protocol's answer (named), or a broken stream."""
        foreign = foreign_protocol(self.address, data)
        if foreign is not None:
            return foreign
        bad = ConnectionLostError(f"{self.address}: malformed frame from peer: {exc}")
        bad.__cause__ = exc
        return bad

    def abort(self) -> None:
        """Shut the socket down (any thread): a read blocked in the owner returns at once."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        """Owner thread: release the socket."""
        self.closed = True
        self.sock.close()

    def __repr__(self) -> str:
        return f"<BlockingChannel {self.address} {'closed' if self.closed else 'open'}>"


__all__ = ["BlockingChannel", "Unsent"]
