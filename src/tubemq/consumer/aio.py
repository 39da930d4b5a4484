"""``tubemq.aio.Consumer``: the server-balanced consumer, the one implementation behind both APIs.

Runs in the caller's event loop; :class:`tubemq.Consumer` runs it on the shared loop thread and only
forwards. Iteration, the push listener (with its poll-failure logging and retry), pause/resume,
closing and the finalizer of a forgotten consumer all live here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._tasks import wait_for
from ..admin.aio import AdminClient as AsyncAdminClient
from ..codec import Message, Partition
from ..config import ConsumerConfig
from ..errors import ClientClosedError, TubeMQError
from ..net.loop import close_when_forgotten, with_operation
from ..types import Batch
from .core import ConsumerCore, Hook
from .iteration import Iteration
from .positions import PartitionRef, partition_key

log = logging.getLogger("tubemq.consumer")

__all__ = ["BoundConsumer", "Consumer"]

#: ``await runner(listener, items, closing)``: call ``listener`` on each of ``items`` elsewhere (the
#: blocking API's dispatcher thread), stopping once ``closing()``; True if all were called
Runner = Callable[[Callable[[Any], Any], list[Any], Callable[[], bool]], Awaitable[bool]]
#: pause between polls of a paused or failing push listener (seconds)
_LISTENER_IDLE = 0.05
_POLL_RETRY = 0.2


class Consumer:
    """``async with tubemq.aio.Consumer(master, group=, topics=) as c: async for msg in c: ...``

    Same arguments and semantics as :class:`tubemq.Consumer`; hooks and listeners may be plain or
    ``async`` callables (plain ones run on the loop, so keep them short).
    """

    def __init__(
        self,
        master: str | list[str] | None = None,
        group: str | None = None,
        topics: Any = None,
        *,
        consume_from: str | None = None,
        config: ConsumerConfig | None = None,
        on_partitions_assigned: Hook | None = None,
        on_partitions_revoked: Hook | None = None,
        on_error: Callable[[TubeMQError], Any] | None = None,
        on_partitions_lost: Hook | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        """``on_error(exc)`` is told when a broker stops answering (its partitions are released and
        fetched again once it answers); it runs on the event loop, so it must return quickly.

        ``on_partitions_lost(partitions)`` is told of partitions taken away without a clean revoke
        (their broker died or stopped answering, or it no longer holds them for this consumer); without
        it they go to ``on_partitions_revoked``, as in Kafka. Either way every partition the consumer
        stops holding is reported once, and the master hears of the loss only after the hook returned."""
        self.config = ConsumerConfig.build(master, group, topics, consume_from=consume_from, config=config,
                                           **options)
        self._core = ConsumerCore(self.config, on_partitions_assigned=on_partitions_assigned,
                                  on_partitions_revoked=on_partitions_revoked, on_error=on_error,
                                  on_partitions_lost=on_partitions_lost)
        self.client_id: str = self._core.client_id
        #: where ``async for`` / the blocking iterator stand (shared: a break leaves the rest for the next loop)
        self.iteration = Iteration()
        self._listener_task: asyncio.Task[None] | None = None
        self._listener_runner: Any = None
        #: set by a blocking facade before ``start()``: a forgotten client's finalizer calls it after closing
        self.release_loop: Callable[[], None] | None = None
        self._finalizer: Any = None

    @property
    def core(self) -> ConsumerCore:
        """The consumer's loop-side state and its engine (``core.engine``): what the drivers of the
        blocking API call."""
        return self._core

    @property
    def closed(self) -> bool:
        return self._core.closing

    def assignment(self) -> list[Partition]:
        """Partitions currently registered by this consumer."""
        return list(self._core.assignment())

    def metrics(self) -> dict[str, Any]:
        """A plain-dict snapshot: counters, gauges, fetch-latency percentiles, master and per-broker
        health (keys listed in docs/guide/metrics.md). Call it from the consumer's loop."""
        return self._core.metrics.snapshot()

    async def start(self) -> Consumer:
        """Register with the master (``async with`` calls it; the first ``poll`` too).

        Once started, a consumer dropped without ``close()``, or still open at interpreter exit, is
        closed by its finalizer: it unregisters its partitions instead of holding them until the
        master's heartbeat timeout.
        """
        try:
            await self._core.start()
        except TubeMQError as exc:
            raise with_operation(exc, f"consumer start (register with master {','.join(self.config.masters)})")  # noqa: B904 - cause set
        if self._finalizer is None:
            self._finalizer = close_when_forgotten(self, self._core.close, self.release_loop)
        return self

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ pull
    async def poll(self, timeout: float | None = 1.0) -> Batch | None:
        """The next batch of messages, or None when none arrived within ``timeout`` seconds (or the
        consumer was closed meanwhile); ClientClosedError once closed."""
        if self._core.closing:
            raise ClientClosedError("consumer is closed")
        if not self._core.started:
            await self.start()
        try:
            return await self._core.poll(timeout)
        except ClientClosedError:
            if self._core.closing:
                return None
            raise

    async def confirm(self, batch: Batch, consumed: bool = True) -> bool:
        """Commit (``consumed=True``) or roll back ``batch``. True only when the broker acknowledged
        it (with ``confirm_in_local``: when it was taken locally, the commit riding on the next fetch);
        False when the partition moved meanwhile or the outcome is unknown (broker gone, no answer in
        time): the batch may then be delivered again."""
        if self._core.closing:
            return False
        return await self._core.confirm(batch, consumed)

    # ------------------------------------------------------------------ iteration
    def __aiter__(self) -> AsyncIterator[Message]:
        """``async for msg in consumer``: the semantics of :meth:`__anext__` (each batch confirmed
        once iterated to its end), as an async generator: no coroutine per message."""
        return self._messages()

    async def _messages(self) -> AsyncIterator[Message]:
        it = self.iteration
        while True:
            msgs = it.messages
            if msgs is not None:
                for msg in msgs:  # shared with __anext__: a break leaves the rest for the next loop
                    yield msg
            if await self.next_batch() is None:
                return

    async def __anext__(self) -> Message:
        it = self.iteration
        msg = it.next_message()
        while msg is None:
            if await self.next_batch() is None:
                raise StopAsyncIteration
            msg = it.next_message()
        return msg

    async def next_batch(self) -> Batch | None:
        """Iteration step: confirm the batch iterated to its end, then wait for the next one.

        Each batch is confirmed (locally: the commit rides on the partition's next fetch) once all its
        messages were iterated; breaking out of the loop leaves it unconfirmed (re-delivered later).
        None ends the iteration: closed, or ``iter_timeout_ms`` without a message.
        """
        done = self.iteration.finish()
        core = self._core
        if done is not None and not core.closing:
            core.confirm_local(done, True)
        limit = self.config.iter_timeout_ms / 1000.0
        deadline = time.monotonic() + limit if limit > 0 else None
        while not core.closing:
            wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                return None
            batch = await self.poll(wait)
            if batch is not None:
                self.iteration.begin(batch)
                return batch
        return None

    # ------------------------------------------------------------------ push
    def subscribe(self, listener: Callable[[Any], Any], *, batch: bool = False,
                  rollback_on_error: bool = False, runner: Runner | None = None) -> None:
        """Push mode: call ``listener(message)`` (or ``listener(batch)`` with ``batch=True``) for
        everything fetched, from a task of the running loop; ``listener`` may be a coroutine function.

        After the listener returns the batch is confirmed; if it raises, the error is logged and the
        batch is confirmed anyway (Java default) unless ``rollback_on_error`` asks for re-delivery. A
        failing poll is logged and retried. ``runner`` (the blocking API passes its
        dispatcher thread) runs the listener calls of one batch elsewhere.
        """
        if self._core.closing:
            raise ClientClosedError("consumer is closed")
        if self._listener_task is not None:
            raise RuntimeError("a listener is already subscribed")
        self._listener_runner = runner
        self._listener_task = asyncio.get_running_loop().create_task(
            self._dispatch(listener, batch, rollback_on_error, runner), name=f"tubemq-listener-{self.config.group}")

    async def _dispatch(self, listener: Callable[[Any], Any], per_batch: bool, rollback_on_error: bool,
                        runner: Runner | None) -> None:
        core = self._core
        while not core.closing:
            if core.paused:
                await asyncio.sleep(_LISTENER_IDLE)
                continue
            try:
                if not core.started:
                    await self.start()
                b = await core.poll(_POLL_RETRY)
            except ClientClosedError:
                return
            except Exception:
                log.exception("push consumer %s: poll failed; retrying", core.client_id)
                await asyncio.sleep(_POLL_RETRY)
                continue
            if b is None:
                continue
            items = [b] if per_batch else b.messages
            try:
                if runner is None:
                    ok = await self._call_each(listener, items)
                else:
                    ok = await runner(listener, items, self._closing)
            except Exception:
                log.exception("push consumer listener raised on %r", b)
                ok = not rollback_on_error
            if core.closing:
                return  # close rolls back whatever was not confirmed
            try:
                await core.confirm(b, ok, local=True)
            except ClientClosedError:
                return

    async def _call_each(self, listener: Callable[[Any], Any], items: list[Any]) -> bool:
        """The listener on this loop (awaited when it is a coroutine function); False if closed midway."""
        for item in items:
            if self._core.closing:
                return False
            res = listener(item)
            if inspect.isawaitable(res):
                await res
        return True

    def _closing(self) -> bool:
        return self._core.closing

    def pause(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> None:
        """Without arguments: stop fetching and stop calling the listener until :meth:`resume`. With
        ``partitions`` (Partition objects or keys): stop fetching only those, until ``resume(partitions)``;
        a batch of them fetched before the pause is rolled back, not delivered, and fetched again after
        the resume."""
        self._core.pause(partitions)

    def resume(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> None:
        """Undo :meth:`pause`: ``resume()`` the whole-consumer pause, ``resume(partitions)`` those."""
        self._core.resume(partitions)

    def paused_partitions(self) -> frozenset[str]:
        """Keys of the partitions paused with ``pause(partitions)``."""
        return self._core.paused_partitions()

    # ------------------------------------------------------------------ positions
    async def seek(self, partition: PartitionRef, offset: int) -> int:
        """Consume an assigned ``partition`` from index ``offset`` on; returns the offset stored.

        TubeMQ semantics (docs/guide/consumer-offsets.md): the broker clamps ``offset`` into the
        partition's [min, max] and stores it as the group's offset at once (no separate commit). A batch
        of the partition not confirmed yet is rolled back (its ``confirm`` answers False) and the
        messages an iteration had not yielded yet are dropped. BadRequestError if it is not assigned.
        """
        await self._ensure_started()
        moved = await self._core.seek(partition, offset)
        self._cut_iteration({partition_key(partition)})
        return moved

    async def seek_to_beginning(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> dict[str, int]:
        """:meth:`seek` to the min offset of each of ``partitions`` (default: all assigned ones);
        returns partition key -> offset stored."""
        await self._ensure_started()
        moved = await self._core.seek_to_beginning(partitions)
        self._cut_iteration(set(moved))
        return moved

    async def seek_to_end(self, partitions: Iterable[PartitionRef] | PartitionRef | None = None) -> dict[str, int]:
        """:meth:`seek` to the max offset (past the last message) of each of ``partitions`` (default:
        all assigned ones); returns partition key -> offset stored."""
        await self._ensure_started()
        moved = await self._core.seek_to_end(partitions)
        self._cut_iteration(set(moved))
        return moved

    async def _ensure_started(self) -> None:
        if self._core.closing:
            raise ClientClosedError("consumer is closed")
        if not self._core.started:
            await self.start()

    def _cut_iteration(self, keys: set[str]) -> None:
        """The batch being iterated, if of a moved partition, yields nothing more (old position)."""
        self.iteration.cut(keys)

    @property
    def paused(self) -> bool:
        return self._core.paused

    # ------------------------------------------------------------------ close
    async def close(self, timeout: float | None = None, *, inside_listener: bool = False) -> None:
        """Unregister all partitions, close the master session, stop the listener. Idempotent.

        Waits for a running listener call up to ``timeout`` (default ``shutdown_wait_ms``), except
        when called from inside it (from the listener's task, or ``inside_listener``: a runner's
        listener call is the caller); once it returns no listener or hook is called any more.
        """
        core = self._core
        if self._finalizer is not None:
            self._finalizer.detach()
        task = self._listener_task
        if task is not None:
            core.closing = True
            inside = task is asyncio.current_task() or inside_listener
            if not inside:
                wait = self.config.shutdown_wait_ms / 1000.0 if timeout is None else timeout
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                    await wait_for(asyncio.shield(task), wait)
                if not task.done():
                    log.warning("push listener still running after %.1f s; closing anyway", wait)
            if task is not asyncio.current_task():
                task.cancel()
            stop = getattr(self._listener_runner, "stop", None)
            if stop is not None:
                stop()
        if core.started:
            await core.close()
        else:
            core.closing = core.closed = True

    async def offsets_for_times(self, topic: str, when: Any, *, admin_url: str) -> list[Any]:
        """First index offset at or after ``when`` per partition (``tubemq.admin``: the RPC protocol
        has no time lookup, the master's web API at ``admin_url`` has)."""
        admin = AsyncAdminClient(admin_url, timeout=self.config.rpc_timeout_ms / 1000.0)
        return list(await admin.offsets_for_times(topic, when))

    def __repr__(self) -> str:
        state = "closed" if self._core.closing else "open"
        return f"<tubemq.aio.Consumer {self.config.group} {sorted(self.config.topics)} {state}>"


from .bound.aio import AsyncBoundConsumer as BoundConsumer  # noqa: E402 - re-export at the end: bound imports core

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..config import ConsumerOptions
