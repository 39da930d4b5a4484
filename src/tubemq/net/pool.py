"""Connection pool: one :class:`Connection` per ``host:port`` (Java's NettyClientFactory, §1.1).

Why shared by default: the Java client keeps one connection per remote address for the whole process
(its "single session factory"), so N producers to one broker cost one socket. Here the unit of
sharing is the event loop (connections belong to a loop); the sync clients all run on the shared
:class:`~tubemq.net.loop.LoopThread`, so in practice it is one pool per process. A client may ask
for a private pool instead (``pool="private"``), and TLS clients always get their own pool (their
SSL settings are theirs).

Health tracking: consecutive connect failures per address give an exponential back-off
(``base * 2**n``, capped, with "equal jitter": a random wait in [d/2, d], so clients that lost the
same broker at the same moment do not all reconnect in the same instant); :meth:`get` fails fast while an address is backing off so callers (the
master fail-over, the producer's broker choice) move on instead of hanging. Idle connections (no
read for ``idle_timeout`` seconds, nothing in flight) are closed like Java's 300 s read-idle rule and
reopened lazily on the next :meth:`get`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import ssl as _ssl
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import NotTubeMQPortError, TubeMQConnectionError
from ..protocol.constants import CONNECT_READ_IDLE_MS
from .connection import DEFAULT_MAX_FRAME_SIZE, DEFAULT_MAX_INFLIGHT, Connection

log = logging.getLogger("tubemq.net.pool")


def jittered(delay: float, rand: Any = random.random) -> float:
    """``delay`` spread over [delay/2, delay] ("equal jitter"): never longer than the un-jittered wait
    (callers' bounds hold), never shorter than half of it (no hammering), and reconnects of many
    clients that failed together are spread out."""
    return delay * (0.5 + 0.5 * rand())


@dataclass(frozen=True)
class PoolSettings:
    """How a pool opens and keeps its connections: one value, so a client builds it once, a pool takes
    it whole and the shared pools of a loop are told apart by it."""

    ssl: _ssl.SSLContext | None = None
    connect_timeout: float = 3.0
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    #: no read for this long and nothing in flight: the connection is closed (0 = never)
    idle_timeout: float = CONNECT_READ_IDLE_MS / 1000.0
    #: the wait after n consecutive failures: ``backoff_base * 2**(n-1)``, at most ``backoff_max``, jittered
    backoff_base: float = 0.05
    backoff_max: float = 2.0

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures."""
        return jittered(min(self.backoff_max, self.backoff_base * 2 ** (failures - 1)))


@dataclass
class AddressHealth:
    """Connect history of one address (what :meth:`ConnectionPool.stats` reports)."""

    failures: int = 0  # consecutive failed connects (drives the back-off); reset by a success
    last_error: str = ""
    retry_at: float = 0.0  # monotonic time before which get() fails fast
    connects: int = 0  # successful connects; every one after the first is a reconnect
    connect_failures: int = 0  # failed connects, in total
    disconnects: int = 0  # connections lost (peer closed, I/O error, bad frame), not closed by us
    bytes_sent: int = 0  # wire bytes of connections already closed (the open one adds its own)
    bytes_received: int = 0


class ConnectionPool:
    """One connection per address, opened on demand; see the module docstring."""

    _shared: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[PoolSettings, ConnectionPool]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, settings: PoolSettings | None = None) -> None:
        self.settings = settings if settings is not None else PoolSettings()
        self.closed = False
        self._conns: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Future[Connection]] = {}
        self._health: dict[str, AddressHealth] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._refs = 1
        self._shared_loop: asyncio.AbstractEventLoop | None = None
        #: ``listener(address, reason)`` for every connection the peer closed (or that broke), not one
        #: closed here: a consumer learns at once that a broker holding its partitions went away
        self.disconnect_listeners: list[Callable[[str, str], None]] = []
        #: ``probe(address)``: True when a client's own sockets (not this pool's) got an answer from
        #: ``address``; asked only when a connection is lost before any answer (see :meth:`answered`)
        self.answer_probes: list[Callable[[str], bool]] = []

    # ------------------------------------------------------------------ sharing

    @classmethod
    def acquire_shared(cls, settings: PoolSettings | None = None) -> ConnectionPool:
        """The pool shared by every client of the running loop with the same connection settings
        (ref-counted; ``close()`` releases the reference)."""
        loop = asyncio.get_running_loop()
        key = settings if settings is not None else PoolSettings()
        pools = cls._shared.setdefault(loop, {})
        pool = pools.get(key)
        if pool is None or pool.closed:
            pool = cls(key)
            pool._shared_loop = loop
            pools[key] = pool
        else:
            pool._refs += 1
        return pool

    # ------------------------------------------------------------------ access

    def health(self, address: str) -> AddressHealth:
        return self._health.setdefault(address, AddressHealth())

    def is_backing_off(self, address: str) -> bool:
        h = self._health.get(address)
        return h is not None and h.retry_at > time.monotonic()

    def backoff_left(self, address: str) -> float:
        """Seconds until ``address`` may be connected again (0 when it may now)."""
        h = self._health.get(address)
        return max(0.0, h.retry_at - time.monotonic()) if h is not None else 0.0

    def answered(self, address: str) -> bool:
        """True when ``address`` ever answered this process: on an earlier connection of this pool,
        the open one, or a client's own socket (:attr:`answer_probes`)."""
        h = self._health.get(address)
        if h is not None and h.bytes_received:
            return True
        conn = self._conns.get(address)
        if conn is not None and conn.bytes_received:
            return True
        for probe in list(self.answer_probes):
            try:
                if probe(address):
                    return True
            except Exception:  # a probe must not break the close of a connection
                log.exception("answer probe failed for %s", address)
        return False

    def connected(self, address: str) -> Connection | None:
        """The open connection to ``address`` if there is one (no I/O)."""
        conn = self._conns.get(address)
        return conn if conn is not None and not conn.closed else None

    async def get(self, address: str) -> Connection:
        """The open connection to ``address``, connecting (once, shared by concurrent callers) if needed."""
        conn = self._conns.get(address)
        if conn is not None and not conn.closed:
            return conn
        if self.closed:
            raise TubeMQConnectionError("connection pool is closed")
        opening = self._opening.get(address)
        if opening is None:
            h = self.health(address)
            wait = h.retry_at - time.monotonic()
            if wait > 0:
                raise TubeMQConnectionError(
                    f"{address}: backing off {wait:.2f} s after {h.failures} failed connects ({h.last_error})"
                )
            opening = asyncio.get_running_loop().create_future()
            self._opening[address] = opening
            asyncio.get_running_loop().create_task(self._open(address, opening))
        try:
            return await asyncio.shield(opening)
        finally:
            del opening  # a failed future -> its exception -> this frame -> the future: no cycle

    async def _open(self, address: str, fut: asyncio.Future[Connection]) -> None:
        h = self.health(address)
        s = self.settings
        try:
            conn = await Connection.open(
                address,
                ssl=s.ssl,
                connect_timeout=s.connect_timeout,
                max_inflight=s.max_inflight,
                max_frame_size=s.max_frame_size,
            )
        except BaseException as exc:  # noqa: BLE001 - everything must reach the waiters
            self.mark_failure(address, str(exc))
            h.connect_failures += 1
            log.info("connect to %s failed (%d in a row): %s", address, h.failures, exc)
            self._opening.pop(address, None)
            if not fut.done():
                err = (exc if isinstance(exc, (TubeMQConnectionError, NotTubeMQPortError))
                       else TubeMQConnectionError(f"{address}: {exc}"))
                fut.set_exception(err)
                fut.exception()  # mark retrieved: nobody may be waiting any more
                del err
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            # the exception's traceback keeps this frame: drop the future (which holds the exception)
            # so no exception -> frame -> future -> exception cycle outlives the failure
            del fut
            return
        self._opening.pop(address, None)
        if self.closed:
            await conn.close()
            if not fut.done():
                fut.set_exception(TubeMQConnectionError("connection pool is closed"))
                fut.exception()
            return
        h.failures = 0
        h.retry_at = 0.0
        h.connects += 1
        self._conns[address] = conn
        conn.on_close.append(self._forget)
        conn.answered_before = functools.partial(self.answered, address)
        if self._reaper is None and s.idle_timeout > 0:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        if h.connects > 1:
            log.info("reconnected to %s (connection #%d)", address, h.connects)
        else:
            log.debug("connected to %s", address)
        if not fut.done():
            fut.set_result(conn)

    def _forget(self, conn: Connection) -> None:
        h = self.health(conn.address)
        h.bytes_sent += conn.bytes_sent
        h.bytes_received += conn.bytes_received
        current = self._conns.get(conn.address) is conn
        if current:
            del self._conns[conn.address]
        if not conn.closed_locally:
            h.disconnects += 1
            log.info("%s (%d request(s) in flight failed)", conn.close_reason, conn.failed_on_close)
            if current and not self.closed:
                for listener in list(self.disconnect_listeners):
                    try:
                        listener(conn.address, conn.close_reason)
                    except Exception:  # a listener must not break the pool
                        log.exception("disconnect listener failed for %s", conn.address)

    def stats(self, address: str) -> dict[str, Any]:
        """Health of ``address`` as plain values (metrics snapshots; no I/O).

        Connections are shared by the clients of a pool, so these figures are per connection, not
        per client.
        """
        h = self._health.get(address) or AddressHealth()
        conn = self.connected(address)
        wait = h.retry_at - time.monotonic()
        return {
            "connected": conn is not None,
            "in_flight": conn.inflight if conn is not None else 0,
            "backing_off": wait > 0,
            "backoff_s": round(wait, 3) if wait > 0 else 0.0,
            "connects": h.connects,
            "reconnects": max(0, h.connects - 1),
            "connect_failures": h.connect_failures,
            "consecutive_connect_failures": h.failures,
            "disconnects": h.disconnects,
            "bytes_sent": h.bytes_sent + (conn.bytes_sent if conn is not None else 0),
            "bytes_received": h.bytes_received + (conn.bytes_received if conn is not None else 0),
            "last_error": h.last_error,
        }

    def flush_all(self) -> None:
        """Write every connection's queued frames now (see :meth:`Connection.flush_now`)."""
        for conn in self._conns.values():
            conn.flush_now()

    def mark_failure(self, address: str, error: str) -> None:
        """Count a failure seen by a caller on an established connection (affects the back-off)."""
        h = self.health(address)
        h.failures += 1
        h.last_error = error
        h.retry_at = time.monotonic() + self.settings.backoff(h.failures)

    async def discard(self, address: str) -> None:
        """Close the connection to ``address`` (e.g. after a StandbyException)."""
        conn = self._conns.pop(address, None)
        if conn is not None:
            await conn.close()

    async def _reap(self) -> None:
        idle_timeout = self.settings.idle_timeout
        period = max(0.05, min(30.0, idle_timeout / 4))
        while not self.closed:
            await asyncio.sleep(period)
            now = time.monotonic()
            for conn in list(self._conns.values()):
                if conn.inflight == 0 and now - conn.last_activity > idle_timeout:
                    log.debug("closing idle connection to %s", conn.address)
                    await conn.close()

    async def close(self) -> None:
        """Release this reference; the last one closes every connection."""
        if self.closed:
            return
        self._refs -= 1
        if self._refs > 0:
            return
        self.closed = True
        if self._shared_loop is not None:
            pools = self._shared.get(self._shared_loop, {})
            if pools.get(self.settings) is self:
                del pools[self.settings]
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()

    def __len__(self) -> int:
        return sum(1 for c in self._conns.values() if not c.closed)


__all__ = ["AddressHealth", "ConnectionPool", "PoolSettings"]
