"""One RPC client connection of the embedded servers: decode, dispatch, answer, stay bounded.

Frames of one TCP read are handled in one pass and answered with a single write after the server's
batch-end hook (the broker writes its appends to the OS there, so no answer precedes its data). A
connection pauses reading when its answers back up, when it has too many requests in flight, or
while its source waits out a bad-credential delay (``RpcServer.throttle``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import TYPE_CHECKING

from ... import codec
from ...errors import FrameError
from .envelope import _has_zero_list_header

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from .context import ConnectionOwner, HandlerResult, RpcContext

log = logging.getLogger("tubemq.server.rpc")


class _Connection(asyncio.Protocol):
    """One client connection: decode, dispatch, answer; pauses reading when its bounds are reached."""

    def __init__(self, server: ConnectionOwner) -> None:
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
        out: list[bytes] = []
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
                out.append(answer)
            if self.closed:
                break  # too many bad tokens: the rest of this read is not processed
        if server.on_batch_end is not None:
            try:
                replaced = server.on_batch_end()
            except Exception:
                log.exception("%s: batch-end hook failed", server.name)
                out = []  # never acknowledge what may not have reached the store
            else:
                if replaced:
                    out = server.replace_answers(out, replaced)
        if out and self.transport is not None and not self.closed:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))

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
