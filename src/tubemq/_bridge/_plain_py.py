"""The pure-Python twin of :mod:`tubemq._bridge._plain`: the blocking channel's write and read loops and
the blocking send's common case.

Same functions, classes and contract as the compiled module (read its docstring); used when the
extensions are not built or ``TUBEMQ_NO_EXTENSIONS=1``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import codec
from ..errors import DecodeError, FrameError
from ..protocol.constants import MAX_MAX_MSG_SIZE
from ..types import SendResult

implementation = "python"

#: send() flags: MSG_NOSIGNAL where it exists (Linux); elsewhere SIGPIPE is not raised by sockets
#: (macOS sets SO_NOSIGPIPE) or does not exist (Windows)
SEND_FLAGS: int = getattr(socket, "MSG_NOSIGNAL", 0)
#: a channel idle longer than this is checked for a peer that closed it before it is written to (s)
STALE_CHECK_AFTER = 0.001

_monotonic = time.monotonic
_get_ident = threading.get_ident
_send_result = codec.decode_send_result


def write_frame(channel: Any, frame: bytes, timeout: float, now: float) -> OSError | None:
    """Write ``frame`` whole on ``channel`` (a :class:`~tubemq._bridge.channel.BlockingChannel`) within
    ``timeout``; the OSError when it was not (wholly) written: then the broker cannot have stored it."""
    try:
        if timeout != channel.timeout:
            channel.set_timeout(timeout)
        channel.sock.sendall(frame, SEND_FLAGS)
    except OSError as exc:
        return exc
    channel.last_used = now
    channel.bytes_sent += len(frame)
    return None


def read_answer(channel: Any, serial: int, timeout: float, now: float) -> bytes | BaseException:
    """The payload of the answer to ``serial`` on ``channel``, or the typed error that ended the wait
    (the channel's own: timed out, lost, malformed); bounded by ``timeout`` from ``now``. Answers of
    other serials (late ones) are dropped."""
    deadline = now + timeout
    sock = channel.sock
    buf = channel.buf
    view = channel.view
    decoder = channel.decoder
    if timeout != channel.timeout:
        channel.set_timeout(timeout)
    while True:
        try:
            got = sock.recv_into(buf)
        except (BlockingIOError, TimeoutError):
            return channel.timed_out(serial, timeout)  # type: ignore[no-any-return]
        except OSError as exc:
            return channel.lost(exc)  # type: ignore[no-any-return]
        if not got:
            return channel.lost(None)  # type: ignore[no-any-return]
        channel.bytes_received += got
        try:
            frames = decoder.feed(view[:got])
        except FrameError as exc:
            return channel.malformed(bytes(view[:got]), exc)  # type: ignore[no-any-return]
        for answer in frames:
            if answer[0] == serial:
                return answer[1]  # type: ignore[no-any-return]
        left = deadline - _monotonic()
        if left <= 0:
            return channel.timed_out(serial, timeout)  # type: ignore[no-any-return]
        if left < channel.timeout:
            channel.set_timeout(left)


class Leg:
    """One partition of a route and this thread's channel to its broker."""

    __slots__ = ("broker_id", "channel", "part", "partition_id")

    def __init__(self, part: Any, channel: Any) -> None:
        self.part = part
        self.channel = channel
        self.partition_id: int = part.partition_id
        self.broker_id: int = part.broker_id


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

    def __init__(self, engine: Any, local: threading.local, loop_ident: int, rpc_timeout: float,
                 build_route: Callable[..., Any], fresh_channel: Callable[..., Any], resume: Callable[..., Any],
                 abandon: Callable[..., Any], key_index: Callable[[Any, int], int]) -> None:
        self.engine = engine
        self.session = engine.session
        self.quality = engine.quality
        self.local = local
        self.loop_ident = loop_ident
        self.rpc_timeout = rpc_timeout
        self.build_route = build_route
        self.fresh_channel = fresh_channel
        self.resume = resume
        self.abandon = abandon
        self.key_index = key_index

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
        route: PlainRoute | None = lane.routes.get(topic)
        if route is None or route.gen != self.session.route_gen:
            route = self.build_route(lane, topic)
            if route is None:
                return None
        if n > route.max_size or self.quality.until:
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
        if channel.closed or now - channel.last_used >= STALE_CHECK_AFTER:
            # a channel dropped since the route was built, or idle: checked, replaced, route rebuilt
            if channel.closed or self.fresh_channel(lane, leg.part, now) is not channel:
                route = self.build_route(lane, topic)
                if route is None:
                    return None
                leg = route.legs[i if i < route.n else 0]
                channel = leg.channel
                if channel.closed:
                    return None
        engine = self.engine
        if not engine.admit_now():
            return None  # full or closed: the general route waits or refuses
        name = route.topic
        payload: Any = None
        error: BaseException | None = None
        try:
            channel.serial = serial = (channel.serial + 1) & 0xFFFFFFFF
            error = write_frame(channel, engine.plain_frame(serial, name, leg.partition_id, data), self.rpc_timeout,
                                now)
            if error is None:
                payload = read_answer(channel, serial, self.rpc_timeout, now)
                if type(payload) is bytes:
                    try:
                        result = _send_result(payload, SendResult, name, leg.part, key)
                    except DecodeError:
                        result = None
                    if result is not None:
                        engine.settle_plain(leg.broker_id, n, now)
                        return result  # type: ignore[no-any-return]
                else:
                    error = payload
                    payload = None
                unsent = False
            else:
                unsent = True
        except BaseException as exc:
            self.abandon(lane, channel, engine.plain_job(name, data, key, leg.part, now, True), exc)
            raise
        # a refusal, a malformed answer, an error, or nothing written: the general steps from here
        job = engine.plain_job(name, data, key, leg.part, now, not unsent)
        return self.resume(lane, job, channel, payload, error, unsent)  # type: ignore[no-any-return]


__all__ = ["SEND_FLAGS", "STALE_CHECK_AFTER", "Leg", "PlainRoute", "PlainSender", "read_answer", "write_frame"]
