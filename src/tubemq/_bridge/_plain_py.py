"""The pure-Python twin of :mod:`tubemq._bridge._plain`: the blocking send's common case.

Same classes, same contract, same steps as the compiled module (read its docstring); used when the
extensions are not built or ``TUBEMQ_NO_EXTENSIONS=1``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import codec
from ..errors import DecodeError, FrameError
from ..protocol.constants import MAX_MAX_MSG_SIZE
from ..types import SendResult
from .channel import _SEND_FLAGS, _STALE_CHECK_AFTER, BlockingChannel

implementation = "python"

_monotonic = time.monotonic
_get_ident = threading.get_ident
_encode_send = codec.encode_send_request
_send_result = codec.decode_send_result


class Leg:
    """One partition of a route and this thread's channel to its broker, with the socket's bound
    methods and the channel's read buffers looked up once."""

    __slots__ = ("broker_id", "buf", "channel", "decoder", "part", "partition_id", "recv_into", "sendall", "view")

    def __init__(self, part: Any, channel: BlockingChannel) -> None:
        self.part = part
        self.channel = channel
        self.partition_id: int = part.partition_id
        self.broker_id: int = part.broker_id
        sock = channel.sock
        self.sendall = sock.sendall
        self.recv_into = sock.recv_into
        self.buf = channel._buf
        self.view = channel._view
        self.decoder = channel._decoder


class PlainRoute:
    """One thread's route for one topic: valid while ``gen`` equals the session's ``route_gen`` and
    none of its channels is closed. Round-robin over its legs with this thread's own counter."""

    __slots__ = ("gen", "legs", "max_size", "n", "rr", "topic")

    def __init__(self, topic: str, gen: int, legs: Iterable[Leg], max_size: int, start: int) -> None:
        self.topic = topic
        self.gen = gen
        self.legs = tuple(legs)
        self.n = len(self.legs)
        if not self.n:
            raise ValueError("a route needs at least one partition")
        self.max_size = max_size
        self.rr = start % self.n


class PlainSender:
    """The blocking send of one producer (see :mod:`tubemq._bridge._plain`)."""

    def __init__(self, bridge: Any, key_index: Callable[[Any, int], int]) -> None:
        core = bridge.core
        self.core = core
        self.session = core.session
        self.quality = core.quality
        self.buffer = bridge.buffer
        self.local = bridge._local
        self.loop_ident = bridge._loop_ident or 0
        self.rpc_timeout: float = bridge._rpc_timeout
        lock = core._ext_lock
        if bridge.buffer._lock is not lock:
            raise ValueError("the send buffer and the producer core must share one lock")
        self.lock = lock
        self.build_route = bridge._plain_route
        self.fresh_channel = bridge._channel_for
        self.resume = bridge._resume_plain
        self.abandon = bridge._abandon_plain
        self.key_index = key_index
        self.client_id: str = core.client_id
        self.sent_addr: int = core.sent_addr
        self.timeout_ms: int = core.timeout_ms
        # messages sent and acknowledged here, and their bytes (under the shared lock; see figures())
        self.n_sent = 0
        self.n_bytes = 0
        self.n_acked = 0

    def send(self, topic: str, data: bytes, key: Any) -> SendResult | None:
        """The SendResult of a plain send done here, or None when it is not that case (nothing was
        taken or written: the general route sends it). Raises the typed failure of a send it made."""
        if type(data) is not bytes or type(topic) is not str:
            return None
        if _get_ident() == self.loop_ident:
            return None  # (send() refuses it there)
        n = len(data)
        if n <= 0 or n > MAX_MAX_MSG_SIZE:
            return None
        try:
            lane = self.local.lane
        except AttributeError:
            return None
        if lane.submitted != lane.finished:
            return None  # this thread's send_async messages must not be overtaken
        session = self.session
        route: PlainRoute | None = lane.routes.get(topic)
        if route is None or route.gen != session.route_gen:
            route = self.build_route(lane, topic)
            if route is None:
                return None
        if n > route.max_size or self.quality._until:
            return None
        if key is None:
            i = route.rr + 1
            if i >= route.n:
                i = 0
            route.rr = i
        else:
            try:
                i = self.key_index(key, route.n)
            except Exception:  # noqa: BLE001 - a bad key: the general route reports it
                return None
        leg = route.legs[i]
        channel = leg.channel
        now = _monotonic()
        if channel.closed or now - channel.last_used >= _STALE_CHECK_AFTER:
            # a channel dropped since the route was built, or idle: checked, replaced, route rebuilt
            if channel.closed or self.fresh_channel(lane, leg.part, now) is not channel:
                route = self.build_route(lane, topic)
                if route is None:
                    return None
                leg = route.legs[i if i < route.n else 0]
                channel = leg.channel
                if channel.closed:
                    return None
        # one lock round: a buffer slot and the count close() and flush() wait for
        core = self.core
        buffer = self.buffer
        with self.lock:
            if core.closed or buffer.closed or buffer._used >= buffer.max_pending:
                return None
            buffer._used += 1
            core._ext += 1
        payload: Any = None
        result: SendResult | None = None
        error: BaseException | None = None
        unsent = False
        try:
            channel.serial = serial = (channel.serial + 1) & 0xFFFFFFFF
            auth = session.auth_token
            frame = _encode_send(serial, self.client_id, route.topic, leg.partition_id, data, 0, self.sent_addr,
                                 session.visit_token, auth_token=auth if auth else None, timeout_ms=self.timeout_ms)
            try:
                if channel._timeout != self.rpc_timeout:
                    channel._set_timeout(self.rpc_timeout)
                leg.sendall(frame, _SEND_FLAGS)
            except OSError as exc:
                unsent = True
                error = exc
            if not unsent:
                channel.last_used = now
                channel.bytes_sent += len(frame)
                payload = self._read(leg, channel, serial, now)
                if isinstance(payload, BaseException):
                    error = payload
                    payload = None
                else:
                    try:
                        result = _send_result(payload, SendResult, route.topic, leg.part, key)
                    except DecodeError:
                        result = None
        except BaseException:
            self.abandon(lane, channel, n, now)
            raise
        if unsent:
            return self.resume(lane, leg.part, channel, route.topic, data, key, now, None, error, True)  # type: ignore[no-any-return]
        if result is None:  # a refusal, a malformed answer or an error: judged by the general steps
            return self.resume(lane, leg.part, channel, route.topic, data, key, now, payload, error, False)  # type: ignore[no-any-return]
        if self.quality._failures:
            self.quality.success(leg.broker_id)
        # one lock round: the slot back, the count down, the figures up
        waiter = None
        with self.lock:
            buffer._used -= 1
            if buffer._thread_waiters:
                buffer._cond.notify()
            if buffer._task_waiters:
                waiter = buffer._task_waiters.popleft()
            core._ext -= 1
            self.n_sent += 1
            self.n_bytes += n
            acked = self.n_acked = self.n_acked + 1
        if waiter is not None:
            buffer._wake(waiter)
        if acked & 7 == 1:  # one in 8, the first included
            core._latency.observe(_monotonic() - now)
        return result

    def figures(self) -> tuple[int, int, int]:
        """(messages sent, their bytes, messages acknowledged) by this route, for the producer's
        metrics (the general route counts its own in the core)."""
        with self.lock:
            return self.n_sent, self.n_bytes, self.n_acked

    def _read(self, leg: Leg, channel: BlockingChannel, serial: int, now: float) -> bytes | BaseException:
        """The payload of the answer to ``serial``, or the typed error that ended the wait (the
        channel's own messages); bounded by ``rpc_timeout`` from ``now``."""
        deadline = now + self.rpc_timeout
        view = leg.view
        while True:
            try:
                got = leg.recv_into(leg.buf)
            except (BlockingIOError, TimeoutError):
                return channel._timed_out(serial, self.rpc_timeout)
            except OSError as exc:
                return channel._lost(exc)
            if not got:
                return channel._lost(None)
            channel.bytes_received += got
            try:
                frames = leg.decoder.feed(view[:got])
            except FrameError as exc:
                return channel._malformed(bytes(view[:got]), exc)
            for answer in frames:
                if answer[0] == serial:
                    return answer[1]
            left = deadline - _monotonic()
            if left <= 0:
                return channel._timed_out(serial, self.rpc_timeout)
            if left < channel._timeout:
                channel._set_timeout(left)


__all__ = ["Leg", "PlainRoute", "PlainSender"]
