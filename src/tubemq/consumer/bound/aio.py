"""``tubemq.aio.BoundConsumer`` (``AsyncBoundConsumer``): client-side balance and bound offsets on asyncio.

A thin handle on :class:`~tubemq.consumer.bound.core.BoundCore` (which holds all the logic), so that a
consumer dropped without ``close()`` can be garbage-collected and closed by its finalizer: the
engine's running tasks keep the engine alive, not this handle. :class:`tubemq.BoundConsumer` runs the
same class on the shared loop thread.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ...codec import Message, Partition
from ...config import ConsumerConfig
from ...net.loop import close_when_forgotten
from ...types import Batch
from .core import BoundCore
from .session import DEFAULT_FETCH_TIMEOUT, PartitionPosition, PartitionRef
from .time_search import offset_for_time

__all__ = ["AsyncBoundConsumer"]


class AsyncBoundConsumer:
    """asyncio bound consumer: ``async with tubemq.aio.BoundConsumer(master, group, topics) as bc``; the
    methods of :class:`tubemq.BoundConsumer`, as coroutines."""

    def __init__(
        self,
        master: str | list[str] | None = None,
        group: str | None = None,
        topics: Iterable[str] | Mapping[str, Iterable[str]] = (),
        *,
        config: ConsumerConfig | None = None,
        source_count: int = 0,
        node_id: int = 0,
        **options: Any,
    ) -> None:
        self.config = ConsumerConfig.build(master, group, topics if topics else None, config=config, **options)
        self._core = BoundCore(self.config, source_count=source_count, node_id=node_id)
        self.client_id: str = self._core.client_id
        self.session = self._core.session  # the master session and the partition table, for inspection
        self.table = self._core.table
        #: set by a blocking facade before ``start()``: a forgotten client's finalizer calls it after closing
        self.release_loop: Callable[[], None] | None = None
        self._finalizer: Any = None

    @property
    def core(self) -> BoundCore:
        """The engine (for the blocking facade, tests and debugging)."""
        return self._core

    @property
    def closed(self) -> bool:
        return self._core.closing

    def metrics(self) -> dict[str, Any]:
        """Counters, fetch latency, master and per-broker health (docs/guide/metrics.md).
        Call it from the consumer's loop."""
        return self._core.metrics()

    def attached(self) -> list[Partition]:
        """The partitions currently attached (registered at their brokers)."""
        return self._core.attached()

    async def start(self) -> AsyncBoundConsumer:
        """Register with the master (V2). Once started, a consumer dropped without ``close()`` (or
        still open at interpreter exit) is closed by its finalizer: it detaches its partitions and
        leaves the group instead of heartbeating on."""
        await self._core.start()
        if self._finalizer is None:
            self._finalizer = close_when_forgotten(self, self._core.close, self.release_loop)
        return self

    async def close(self) -> None:
        """Unregister every attached partition (committing confirmed batches), then close to the master."""
        if self._finalizer is not None:
            self._finalizer.detach()
        await self._core.close()

    async def __aenter__(self) -> AsyncBoundConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def partitions(self, topic: str | None = None) -> list[Partition]:
        return await self._core.partitions(topic)

    async def attach(self, partition: PartitionRef, offset: int | None = None) -> PartitionPosition:
        return await self._core.attach(partition, offset)

    async def detach(self, partition: PartitionRef, commit: bool = False) -> None:
        await self._core.detach(partition, commit)

    async def offsets(self, partition: PartitionRef) -> PartitionPosition:
        return await self._core.offsets(partition)

    async def fetch(self, partition: PartitionRef, timeout: float = DEFAULT_FETCH_TIMEOUT) -> Batch | None:
        return await self._core.fetch(partition, timeout)

    async def confirm(self, batch: Batch, consumed: bool = True) -> bool:
        return await self._core.confirm(batch, consumed)

    def read_range(self, partition: PartitionRef, start: int, end: int | None = None, *,
                   max_messages: int | None = None, timeout: float = 10.0) -> AsyncIterator[Message]:
        return self._core.read_range(partition, start, end, max_messages=max_messages, timeout=timeout)

    def read_range_batches(self, partition: PartitionRef, start: int, end: int | None = None, *,
                           max_messages: int | None = None,
                           timeout: float = 10.0) -> AsyncGenerator[Batch, None]:
        return self._core.read_range_batches(partition, start, end, max_messages=max_messages, timeout=timeout)


    async def offset_for_time(self, partition: PartitionRef, when: Any, *, timeout: float = 5.0) -> int:
        """The first index offset whose message's ``msgTime`` is of ``when``'s minute or later (a
        ``datetime``, naive = local, or epoch ms), found with bound reads: works on a real TubeMQ broker,
        which has no time lookup, when producers set ``msg_time``. One minute precision; moves this
        consumer's group position there (see :mod:`tubemq.consumer.bound.time_search`)."""
        ms = int(when.timestamp() * 1000) if hasattr(when, "timestamp") else int(when)
        return await offset_for_time(self, partition, ms, timeout=timeout)


# one text per method: the engine's
for _name in ("partitions", "attach", "detach", "offsets", "fetch", "confirm", "read_range", "read_range_batches"):
    getattr(AsyncBoundConsumer, _name).__doc__ = getattr(BoundCore, _name).__doc__
del _name
