"""``tubemq.BoundConsumer``: the blocking facade over :class:`~tubemq.consumer.bound.aio.AsyncBoundConsumer`.

Everything happens in the asyncio class on the shared loop thread (:class:`~tubemq._bridge.Portal`);
``read_range`` crosses threads once per fetched batch, not per message.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterable, Iterator, Mapping
from typing import Any

from .._bridge import Facade, blocking
from ..codec import Message, Partition
from ..config import ConsumerConfig
from ..consumer.bound.aio import AsyncBoundConsumer
from ..consumer.bound.core import BoundCore
from ..consumer.bound.session import PartitionRef
from ..types import Batch

__all__ = ["BoundConsumer"]


class BoundConsumer(Facade[AsyncBoundConsumer]):
    """Client-side balance / bound consumption (blocking). The Spark source is built on this.

    ``BoundConsumer(master, group, topics)`` registers a client-balance member of ``group`` (V2);
    ``partitions()`` lists the subscribable partitions; ``attach(p, offset)`` registers one at the
    broker (optionally at ``offset``) and returns its :class:`PartitionPosition`; ``fetch(p)`` reads one
    batch, ``confirm(batch)`` commits it and returns the new offset; ``read_range(p, start, end)``
    yields exactly the messages at offsets [start, end) (``read_range_batches``: the same, one list per
    broker fetch); ``offsets(p)`` reports the position without moving it; ``detach(p)`` releases the
    partition. Partitions may be given as ``Partition`` objects, partition keys
    ``"brokerId:topic:partitionId"`` or partition strings.
    """

    def __init__(self, master: str | list[str] | None = None, group: str | None = None,
                 topics: Iterable[str] | Mapping[str, Iterable[str]] = (), *, config: ConsumerConfig | None = None,
                 source_count: int = 0, node_id: int = 0, **options: Any) -> None:
        self._open(lambda: AsyncBoundConsumer(master, group, topics, config=config, source_count=source_count,
                                              node_id=node_id, **options), AsyncBoundConsumer.close)
        self.config: ConsumerConfig = self._aio.config

    @property
    def _core(self) -> BoundCore:
        """The engine (for tests and debugging)."""
        return self._aio.core

    partitions = blocking(AsyncBoundConsumer.partitions)
    attach = blocking(AsyncBoundConsumer.attach)
    fetch = blocking(AsyncBoundConsumer.fetch)
    confirm = blocking(AsyncBoundConsumer.confirm)
    offsets = blocking(AsyncBoundConsumer.offsets)
    detach = blocking(AsyncBoundConsumer.detach)
    offset_for_time = blocking(AsyncBoundConsumer.offset_for_time)

    def attached(self) -> list[Partition]:
        return self._portal.call(self._aio.attached)

    def read_range(self, partition: PartitionRef, start: int, end: int | None = None, *,
                   max_messages: int | None = None, timeout: float = 10.0) -> Iterator[Message]:
        """Blocking iterator over :meth:`AsyncBoundConsumer.read_range` (see there). Messages cross
        from the client's loop thread one fetched batch at a time and are yielded from it here."""
        with contextlib.closing(self.read_range_batches(
                partition, start, end, max_messages=max_messages, timeout=timeout)) as batches:
            for messages in batches:
                yield from messages

    def read_range_batches(self, partition: PartitionRef, start: int, end: int | None = None, *,
                           max_messages: int | None = None, timeout: float = 10.0) -> Generator[Batch, None, None]:
        """Blocking iterator over :meth:`AsyncBoundConsumer.read_range_batches`: one call into the
        client's loop thread per fetched batch."""
        yield from self._portal.iterate(self._aio.read_range_batches(
            partition, start, end, max_messages=max_messages, timeout=timeout))

    def close(self) -> None:
        """Unregister every attached partition, then close to the master (bounded: 3 RPC timeouts)."""
        self._portal.close(self._aio.close(), timeout=self.config.rpc_timeout_ms / 1000.0 * 3)
