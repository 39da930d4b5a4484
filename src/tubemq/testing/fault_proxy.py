"""``FaultProxy``: a TCP proxy on 127.0.0.1 that injects network faults, for tests without root.

Why: the faults that hurt clients (a link that drops every packet, connections reset, a peer that
vanishes without a FIN, a slow or thin link) normally need ``iptables``/``tc`` and root. Put between
a client and a server, this proxy produces each of them on demand from the test's own thread, the
way Toxiproxy is used with Kafka::

    with FaultProxy("127.0.0.1", broker_port) as proxy:
        client = connect(proxy.address)
        proxy.blackhole()   # nothing forwarded, connections kept open
        ...
        proxy.heal()        # traffic flows again on the same connections

Faults (one at a time; each call replaces the previous one, ``heal()`` ends it):

* ``delay(ms)``: every chunk is forwarded ``ms`` later (latency, both directions);
* ``bandwidth(bytes_per_s)``: each direction forwards at most that rate;
* ``blackhole()``: connections are accepted and kept, nothing is forwarded either way (like dropped
  packets: on ``heal()`` what was held back flows, as TCP retransmission would deliver it);
* ``reset()``: every open connection is reset (RST) and every new one is reset on arrival;
* ``half_open()``: the server side of every open connection is closed (the server sees EOF) while the
  client side stays open and silent: the server forgot the connection, the client does not know;
  new connections work;
* ``vanish()``: the peer disappears without a FIN: like ``blackhole()``, but on ``heal()`` the
  connections that lived through it are reset, as a host that comes back answers stale connections.

Bounded: at most ``max_connections`` connections (more are reset on arrival) and at most
``buffer_bytes`` held per direction of a connection (reading pauses when full, so a blackholed sender
fills its own socket buffers, not this process). The proxy runs an asyncio loop on its own daemon
thread; every method is safe to call from any thread and returns once the fault is in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .._tasks import cancel_and_wait, wait_for
from ..net.loop import LoopThread

log = logging.getLogger("tubemq.testing.proxy")

T = TypeVar("T")

#: modes (``FaultProxy.mode``)
NORMAL, DELAY, BANDWIDTH, BLACKHOLE, RESET, HALF_OPEN, VANISH = (
    "normal", "delay", "bandwidth", "blackhole", "reset", "half_open", "vanish")
_CHUNK = 64 * 1024
_CALL_TIMEOUT_S = 10.0


def _rst(writer: asyncio.StreamWriter | None) -> None:
    """Close with a TCP RST (SO_LINGER 0), not a FIN."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Pipe:
    """One direction of a link: a reader task fills a bounded queue, a writer task drains it."""

    def __init__(self, proxy: FaultProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.queue: deque[tuple[float, bytes]] = deque()
        self.queued = 0
        self.room = asyncio.Event()
        self.room.set()
        self.ready = asyncio.Event()
        self.eof = False
        self.muted = False  # half-open: drop what arrives, write nothing

    async def read_loop(self) -> None:
        while True:
            await self.room.wait()
            data = await self.reader.read(_CHUNK)
            if not data:
                self.eof = True
                self.ready.set()
                return
            if self.muted:
                continue
            self.queue.append((time.monotonic(), data))
            self.queued += len(data)
            if self.queued >= self.proxy.buffer_bytes:
                self.room.clear()
            self.ready.set()

    async def write_loop(self) -> None:
        proxy = self.proxy
        while True:
            await self.ready.wait()
            await proxy._flowing.wait()
            if not self.queue:
                if self.eof:
                    if not self.muted:
                        with contextlib.suppress(OSError, RuntimeError):
                            self.writer.write_eof()
                    return
                self.ready.clear()
                continue
            at, data = self.queue[0]
            if proxy._delay > 0:
                wait = at + proxy._delay - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue  # the mode may have changed meanwhile
            if proxy._rate > 0:
                # a piece of at most 1/20 s of the rate, so a thin link still trickles steadily
                piece = data[: max(1, int(proxy._rate / 20))]
                await asyncio.sleep(len(piece) / proxy._rate)
            else:
                piece = data
            await proxy._flowing.wait()
            if not self.queue or self.queue[0][1] is not data:
                continue
            if len(piece) < len(data):
                self.queue[0] = (at, data[len(piece):])
            else:
                self.queue.popleft()
            data = piece
            self.queued -= len(data)
            if self.queued < proxy.buffer_bytes:
                self.room.set()
            if self.muted:
                continue
            self.writer.write(data)
            await self.writer.drain()
            proxy.bytes_forwarded += len(data)


class _Link:
    """A client connection and its upstream connection, pumped both ways."""

    def __init__(self, proxy: FaultProxy, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.c_reader, self.c_writer = c_reader, c_writer
        self.s_writer: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.up: _Pipe | None = None
        self.down: _Pipe | None = None
        self.vanished = False  # lived through a vanish(): reset on heal()
        self.closed = False

    async def run(self) -> None:
        proxy = self.proxy
        try:
            s_reader, s_writer = await wait_for(
                asyncio.open_connection(proxy.target_host, proxy.target_port), _CALL_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as exc:
            log.info("proxy %s: upstream %s:%d unreachable (%s): resetting the client",
                     proxy.address, proxy.target_host, proxy.target_port, exc)
            self.abort()
            return
        self.s_writer = s_writer
        if self.closed:  # reset while connecting
            _rst(s_writer)
            return
        self.up = _Pipe(proxy, self.c_reader, s_writer)
        self.down = _Pipe(proxy, s_reader, self.c_writer)
        self.tasks = [asyncio.ensure_future(f()) for f in
                      (self.up.read_loop, self.up.write_loop, self.down.read_loop, self.down.write_loop)]
        try:
            done, _ = await asyncio.wait(self.tasks, return_when=asyncio.FIRST_EXCEPTION)
            if all(t.done() and not t.cancelled() and t.exception() is None for t in self.tasks):
                self.close()  # both sides finished cleanly
            elif any(not t.cancelled() and t.exception() is not None for t in done):
                self.abort()  # one side broke: the other sees a reset, as across a real router
            else:
                await asyncio.wait(self.tasks)
        finally:
            self.close()

    def half_open(self) -> None:
        """Close the server side (it sees EOF); the client side stays open and hears nothing more."""
        if self.up is None or self.down is None or self.s_writer is None:
            return
        self.up.muted = self.down.muted = True
        self.up.queue.clear()
        self.down.queue.clear()
        self.up.room.set()
        for task in self.tasks[2:]:  # the server's direction
            task.cancel()
        with contextlib.suppress(OSError, RuntimeError):
            self.s_writer.close()

    def abort(self) -> None:
        """Reset both sides at once."""
        self.closed = True
        _rst(self.c_writer)
        _rst(self.s_writer)
        for task in self.tasks:
            task.cancel()
        self.proxy._links.discard(self)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in (self.c_writer, self.s_writer):
            if w is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    w.close()
        for task in self.tasks:
            task.cancel()
        self.proxy._links.discard(self)


class FaultProxy:
    """A fault-injecting TCP proxy to ``target_host:target_port``; see the module docstring."""

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0,
                 max_connections: int = 256, buffer_bytes: int = 256 * 1024) -> None:
        if not 0 < target_port <= 65535:
            raise ValueError(f"target_port must be 1..65535, got {target_port!r}")
        if max_connections < 1 or buffer_bytes < 1:
            raise ValueError("max_connections and buffer_bytes must be positive")
        self.target_host = target_host
        self.target_port = target_port
        self.host = host
        self.port = port
        self.max_connections = max_connections
        self.buffer_bytes = buffer_bytes
        self.mode = NORMAL
        #: connections accepted, reset on arrival (reset mode or over max_connections), bytes forwarded
        self.accepted = 0
        self.refused = 0
        self.bytes_forwarded = 0
        self._delay = 0.0
        self._rate = 0.0
        self._links: set[_Link] = set()
        self._link_tasks: set[asyncio.Task[None]] = set()
        self._thread: LoopThread | None = None
        self._server: asyncio.Server | None = None
        #: clear while nothing may be forwarded (blackhole, vanish); binds to the proxy's loop on first use
        self._flowing = asyncio.Event()
        self._flowing.set()

    @classmethod
    def to(cls, address: str, **kwargs: Any) -> FaultProxy:
        """A started proxy to ``"host:port"``."""
        host, _, port = address.rpartition(":")
        return cls(host, int(port), **kwargs).start()

    # ---- lifecycle

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> FaultProxy:
        if self._thread is not None:
            return self
        self._thread = LoopThread(f"tubemq-fault-proxy-{self.target_port}")
        try:
            self._call(self._listen())
        except BaseException:
            self._stop_loop()
            raise
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("proxy %s -> %s:%d", self.address, self.target_host, self.target_port)

    def close(self) -> None:
        """Stop listening, reset every connection, stop the thread. Idempotent."""
        if self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._close())
        self._stop_loop()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.abort()
        await cancel_and_wait(list(self._link_tasks))
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await wait_for(self._server.wait_closed(), 2)
            self._server = None

    def _stop_loop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.stop()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._thread is None:
            coro.close()
            raise RuntimeError("the fault proxy is not running")
        return self._thread.run(coro, _CALL_TIMEOUT_S)

    def _apply(self, fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()

        return self._call(call())

    # ---- addresses and counters

    @property
    def address(self) -> str:
        """``"127.0.0.1:PORT"``: where clients connect instead of the target."""
        return f"{self.host}:{self.port}"

    @property
    def connections(self) -> int:
        """Connections open through the proxy right now."""
        return len(self._links)

    # ---- faults

    def heal(self) -> None:
        """End the fault: traffic flows again (connections that lived through ``vanish()`` are reset)."""
        def do() -> None:
            if self.mode == VANISH:
                for link in [x for x in self._links if x.vanished]:
                    link.abort()
            self._set(NORMAL)
            self._flowing.set()

        self._apply(do)

    def delay(self, ms: float) -> None:
        """Forward every chunk ``ms`` milliseconds after it arrived (both directions)."""
        if ms < 0:
            raise ValueError("delay must be >= 0 ms")
        self._apply(lambda: self._set(DELAY, delay=ms / 1000.0))

    def bandwidth(self, bytes_per_s: int) -> None:
        """Forward at most ``bytes_per_s`` per direction of each connection."""
        if bytes_per_s <= 0:
            raise ValueError("bandwidth must be > 0 bytes/s")
        self._apply(lambda: self._set(BANDWIDTH, rate=float(bytes_per_s)))

    def blackhole(self) -> None:
        """Keep connections (and accept new ones) but forward nothing until ``heal()``."""
        self._apply(lambda: self._hold(BLACKHOLE))

    def vanish(self) -> None:
        """The peer disappears without a FIN: nothing forwarded; ``heal()`` resets those connections."""
        self._apply(lambda: self._hold(VANISH))

    def reset(self) -> None:
        """Reset every open connection, and every new one on arrival until ``heal()``."""
        def do() -> None:
            self._set(RESET)
            self._flowing.set()
            for link in list(self._links):
                link.abort()

        self._apply(do)

    def half_open(self) -> None:
        """Close the server side of every open connection; their client sides stay open and silent."""
        def do() -> None:
            self._set(HALF_OPEN)
            self._flowing.set()
            for link in list(self._links):
                link.half_open()

        self._apply(do)

    def _set(self, mode: str, *, delay: float = 0.0, rate: float = 0.0) -> None:
        self.mode, self._delay, self._rate = mode, delay, rate
        if mode not in (BLACKHOLE, VANISH):
            self._flowing.set()
        log.info("proxy %s: %s", self.address, mode)

    def _hold(self, mode: str) -> None:
        self._set(mode)
        self._flowing.clear()
        if mode == VANISH:
            for link in self._links:
                link.vanished = True

    # ---- connections

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == RESET or len(self._links) >= self.max_connections:
            self.refused += 1
            _rst(writer)
            return
        self.accepted += 1
        link = _Link(self, reader, writer)
        link.vanished = self.mode == VANISH
        self._links.add(link)
        task = asyncio.current_task()
        if task is not None:
            self._link_tasks.add(task)
        try:
            await link.run()
        except asyncio.CancelledError:
            link.abort()
            raise
        except Exception:  # noqa: BLE001 - one broken link never stops the proxy
            log.exception("proxy %s: link failed", self.address)
            link.abort()
        finally:
            if task is not None:
                self._link_tasks.discard(task)


__all__ = ["FaultProxy"]
