"""``tubemq.Consumer``: the blocking facade over :class:`tubemq.aio.Consumer`.

The asyncio consumer runs on the shared event-loop thread (:class:`~tubemq._bridge.Portal`) and
implements everything; this class only forwards. Rebalance hooks given as plain functions run on a
worker thread (so they may call this consumer's blocking methods); a push listener runs on one
dispatcher thread per consumer (:class:`~tubemq._bridge.listener.ListenerRunner`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from .._bridge import Facade, blocking, to_thread
from .._bridge.consumer import DirectFeed
from .._bridge.feed import BatchFeed
from .._bridge.listener import ListenerRunner
from ..admin import AdminClient
from ..codec import Message, Partition
from ..config import ConsumerConfig
from ..consumer import aio
from ..consumer.core import ConsumerCore, Hook
from ..consumer.positions import PartitionRef
from ..errors import ClientClosedError, TubeMQError
from ..types import Batch

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..config import ConsumerOptions

__all__ = ["Consumer"]


class _Messages(itertools.chain):  # type: ignore[type-arg]
    """What ``iter(consumer)`` returns: ``itertools.chain`` over the batches' messages (each list
    walked in C, no Python frame per message), plus a generator's ``close()``: end the iteration now,
    as a ``break`` does (the current batch stays unconfirmed, the fetching goes back to the loop)."""

    __slots__ = ("_batches",)
    _batches: Generator[Iterator[Message], None, None]

    @classmethod
    def over(cls, batches: Generator[Iterator[Message], None, None]) -> _Messages:
        self = cast(_Messages, cls.from_iterable(batches))
        self._batches = batches
        return self

    def close(self) -> None:
        self._batches.close()


class Consumer(Facade[aio.Consumer]):
    """A server-balanced TubeMQ consumer (docs/PROTOCOL.md §5.2).

    ``Consumer("host:8715", group="g", topics=["t"] or {"t": {"stream-1"}}, consume_from="earliest")``;
    any :class:`~tubemq.ConsumerConfig` field may be passed as a keyword, or
    ``config=ConsumerConfig(...)``. Three ways to consume:

    * ``for msg in consumer`` — each batch is confirmed (committed) once all its messages were
      iterated; breaking out of the loop leaves the current batch unconfirmed (re-delivered later);
    * ``batch = consumer.poll(timeout)`` + ``consumer.confirm(batch, consumed=True)``;
    * ``consumer.subscribe(listener)`` — push mode on a dispatcher thread, with ``pause()`` /
      ``resume()``.
    """

    def __init__(self, master: str | list[str] | None = None, group: str | None = None, topics: Any = None, *,
                 consume_from: str | None = None, config: ConsumerConfig | None = None,
                 on_partitions_assigned: Hook | None = None, on_partitions_revoked: Hook | None = None,
                 on_error: Callable[[TubeMQError], Any] | None = None,
                 on_partitions_lost: Hook | None = None, **options: Unpack[ConsumerOptions]) -> None:
        assigned, revoked = to_thread(on_partitions_assigned), to_thread(on_partitions_revoked)
        lost = to_thread(on_partitions_lost)
        self._open(lambda: aio.Consumer(master, group, topics, consume_from=consume_from, config=config,
                                        on_partitions_assigned=assigned, on_partitions_revoked=revoked,
                                        on_error=on_error, on_partitions_lost=lost, **options),
                   aio.Consumer.close)
        self.config: ConsumerConfig = self._aio.config
        self._runner: ListenerRunner | None = None

    @property
    def _core(self) -> ConsumerCore:
        """The engine (for tests and debugging)."""
        return self._aio.core

    def assignment(self) -> list[Partition]:
        """Partitions currently registered by this consumer."""
        return self._portal.call(self._aio.assignment)

    # ------------------------------------------------------------------ pull
    poll = blocking(aio.Consumer.poll)

    def confirm(self, batch: Batch, consumed: bool = True) -> bool:
        """Commit (``consumed=True``) or roll back ``batch``; False if the partition moved meanwhile."""
        if self._portal.released:
            return False
        return self._portal.run(self._aio.confirm(batch, consumed))

    def __iter__(self) -> Iterator[Message]:
        """``for msg in consumer``: same semantics as :meth:`__next__` (each batch confirmed once
        iterated to its end; a ``break`` leaves the current batch unconfirmed), but a generator that
        fetches on the iterating thread (:class:`~tubemq._bridge.consumer.DirectFeed`; with TLS, or
        while another iterator of this consumer runs, fed by a :class:`BatchFeed`): one loop-thread
        hop per batch and no Python frame per message: ``itertools.chain`` walks each batch's list
        in C and asks :meth:`_batches` for the next batch only at a batch's end."""
        return _Messages.over(self._batches())

    def _batches(self) -> Generator[Iterator[Message], None, None]:
        """The message iterators of the batches :meth:`__iter__` walks, the one :meth:`__next__`
        shares first; asked for the next, it confirms the batch just walked."""
        a = self._aio
        it, core = a.iteration, a.core
        feed: DirectFeed | BatchFeed | None = None
        limit = self.config.iter_timeout_ms / 1000.0
        try:
            while True:
                msgs = it.messages
                if msgs is not None:
                    yield msgs
                if self._portal.released:
                    return
                if feed is None:
                    if core.closing:
                        return
                    if not core.started:
                        self._portal.run(a.start())
                    feed = DirectFeed(self._portal.lt, a)
                    if not feed.start():  # TLS, or another iterator of this consumer fetches so
                        feed = BatchFeed(self._portal.lt, a)
                done = it.finish()
                try:
                    batch = feed.next_batch(done, limit if limit > 0 else None)
                except ClientClosedError:
                    return  # closed (from another thread) while waiting: the loop ends, as for BatchFeed
                if batch is None:
                    return
                it.begin(batch)
        finally:
            if feed is not None:
                feed.stop()

    def __next__(self) -> Message:
        """Messages of :meth:`tubemq.aio.Consumer.next_batch`, one loop-thread hop per batch."""
        it = self._aio.iteration
        msg = it.next_message()
        while msg is None:
            if self._portal.released or self._portal.run(self._aio.next_batch()) is None:
                raise StopIteration
            msg = it.next_message()
        return msg

    # ------------------------------------------------------------------ push
    def subscribe(self, listener: Callable[[Any], Any], *, batch: bool = False,
                  rollback_on_error: bool = False) -> None:
        """Push mode: call ``listener(message)`` (or ``listener(batch)`` with ``batch=True``) for
        everything fetched, on a dispatcher thread. After the listener returns the batch is confirmed;
        if it raises, the error is logged and the batch is confirmed anyway (Java default) unless
        ``rollback_on_error`` asks for re-delivery. A failing poll is logged and retried."""
        runner = ListenerRunner(f"tubemq-consumer-{self.config.group}")
        # known before the first call: a listener that closes its consumer at once must be seen as inside
        previous, self._runner = self._runner, runner
        try:
            self._portal.call(functools.partial(self._aio.subscribe, listener, batch=batch,
                                                rollback_on_error=rollback_on_error, runner=runner))
        except BaseException:
            self._runner = previous
            runner.stop()
            raise

    def pause(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> None:
        """Stop fetching and stop calling the listener until :meth:`resume`; with ``partitions``,
        stop fetching only those (see :meth:`tubemq.aio.Consumer.pause`)."""
        self._portal.call(self._aio.pause, partitions)

    def resume(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> None:
        self._portal.call(self._aio.resume, partitions)

    @property
    def paused(self) -> bool:
        return self._aio.paused

    # ------------------------------------------------------------------ close
    def close(self, timeout: float | None = None) -> None:
        """Unregister all partitions, close the master session, stop every thread. Idempotent.

        Safe from any thread, including from inside a listener or a rebalance hook; once it returns
        no listener or hook is called any more.
        """
        cfg = self.config
        wait = timeout if timeout is not None else cfg.shutdown_wait_ms / 1000.0 + 5.0
        inside = self._runner is not None and self._runner.calling_thread()
        self._portal.close(self._aio.close(timeout, inside_listener=inside),
                           timeout=wait + cfg.rpc_timeout_ms / 1000.0 * 2)

    def offsets_for_times(self, topic: str, when: Any, *, admin_url: str) -> list[Any]:
        """First index offset at or after ``when`` per partition, through the web API at ``admin_url``."""
        return list(AdminClient(admin_url, timeout=self.config.rpc_timeout_ms / 1000.0).offsets_for_times(topic, when))

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<tubemq.Consumer {self.config.group} {sorted(self.config.topics)} {state}>"

    # ------------------------------------------------------------------ positions
    seek = blocking(aio.Consumer.seek)
    seek_to_beginning = blocking(aio.Consumer.seek_to_beginning)
    seek_to_end = blocking(aio.Consumer.seek_to_end)

    def paused_partitions(self) -> frozenset[str]:
        return self._portal.call(self._aio.paused_partitions)
