"""The event loop's fetch driver: a few fetch workers moving the bytes of the engine's leases.

Why a pool of workers: one Python process cannot afford a thread per partition, but a few concurrent
getMessage calls (the Java client uses 3 fetch threads) hide the broker round trip while the
application works on the previous batch. What a fetch asks and what its answer means is the engine's
(:class:`~tubemq.consumer.engine.ConsumerEngine`); this module only waits for a ready partition and for
room in the delivery buffer, and does the round trips (:func:`round_trip`, also the bound consumer's).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ClientClosedError, TubeMQError
from ..protocol.constants import ServiceType
from ..types import Batch
from .engine import FETCH_METHOD, OPENING_METHOD, ConsumerEngine, Lease
from .fetch import OTHER_ERROR_WAIT

log = logging.getLogger("tubemq.consumer.fetch")

__all__ = ["FetchWorkers", "round_trip"]

GetConnection = Callable[[str], Awaitable[Any]]


async def round_trip(engine: ConsumerEngine, lease: Lease, get_connection: GetConnection,
                     timeout_ms: int) -> Batch | None:
    """The getMessage of ``lease`` on the event loop: on a pooled connection to its broker, opened first
    if the engine asks; the engine's judgement of the answer."""
    t0 = time.monotonic()
    try:
        conn = await get_connection(lease.address)
        if engine.needs_opening(conn):
            opened = await conn.call(ServiceType.BROKER_READ, OPENING_METHOD, engine.opening(lease.address),
                                     timeout_ms=timeout_ms)
            refused = engine.opened(conn, opened, None)
            if refused is not None:
                return engine.answer(lease, None, None, refused, t0)
        t0 = time.monotonic()
        data = await conn.call(ServiceType.BROKER_READ, FETCH_METHOD, lease.body, timeout_ms=timeout_ms)
    except (TubeMQError, OSError) as exc:
        return engine.answer(lease, None, None, exc, t0)
    return engine.answer(lease, conn, data, None, t0)


class FetchWorkers:
    """``concurrency`` tasks that take ready partitions, fetch them and buffer the batches."""

    def __init__(self, engine: ConsumerEngine, get_connection: GetConnection, *, concurrency: int = 3,
                 rpc_timeout_ms: int = 10000) -> None:
        self.engine = engine
        self.get_connection = get_connection
        self.concurrency = max(1, concurrency)
        self.rpc_timeout_ms = rpc_timeout_ms
        self.tasks: list[asyncio.Task[None]] = []
        #: cleared while another driver (a blocking iterator) does the fetching itself (:meth:`suspend`)
        self._gate: asyncio.Event | None = None
        self.suspended = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(self._worker(), name=f"tubemq-fetch-{i}") for i in range(self.concurrency)]

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks = []

    def stopped_unexpectedly(self) -> bool:
        return any(t.done() for t in self.tasks)

    def suspend(self) -> None:
        """The workers stop taking partitions (a fetch already running completes and its batch is
        buffered) until :meth:`resume`: a blocking iterator fetches on its own thread."""
        self.suspended = True
        if self._gate is None:
            self._gate = asyncio.Event()
        self._gate.clear()

    def resume(self) -> None:
        self.suspended = False
        if self._gate is not None:
            self._gate.set()

    async def _worker(self) -> None:
        engine = self.engine
        buffer, table = engine.buffer, engine.table
        while True:
            try:
                await buffer.reserve()
            except ClientClosedError:
                return
            gate = self._gate
            if self.suspended and gate is not None:
                buffer.unreserve()
                await gate.wait()
                continue
            try:
                slot = await table.acquire()
            except ClientClosedError:
                buffer.unreserve()
                return
            except BaseException:
                buffer.unreserve()
                raise
            if self.suspended:  # taken while waiting: give it back untouched, to the iterator's fetches
                table.fetch_done(slot, slot.booking, consumed=slot.last_consumed)
                buffer.unreserve()
                continue
            lease = engine.lease_slot(slot)
            kept = False
            try:
                batch = await round_trip(engine, lease, self.get_connection, self.rpc_timeout_ms)
                if batch is not None:
                    buffer.push(batch)
                    kept = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must not stop consumption: log, back off, carry on
                log.exception("partition %s: fetch failed unexpectedly", slot.key)
                engine.fetcher.last_error = exc if isinstance(exc, TubeMQError) else TubeMQError(str(exc))
                table.fetch_done(slot, lease.booking, consumed=False, delay=OTHER_ERROR_WAIT)
            finally:
                if not kept:
                    buffer.unreserve()
