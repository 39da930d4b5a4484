"""The executor side of a read: one Spark task reads ``[start, end)`` of one TubeMQ partition.

Ranges are read with ``read_range`` of the asyncio ``tubemq.aio.BoundConsumer``, which is exact
and deterministic: it returns the messages stored at index offsets ``[start, end)``, cutting the
last fetch at the first message stored at or after ``end`` (found by probing the partition at
``end``), also when sibling partitions share the store. So a retried task returns the same rows and
consecutive ranges neither lose nor repeat messages.

The consumer runs on a private event-loop thread of the task: the Spark-facing generator takes the
range one fetched batch at a time (``read_range_batches``: one cross-thread call per broker fetch,
not per message) and the next batch is fetched while Spark consumes the current one. The loop keeps
running between batches, so the consumer's broker heartbeats keep its registration alive however
slow the downstream is.

``read_range`` ends as soon as the position reaches the end of the range -- also when the rest of the
range holds only sibling partitions' index entries -- and returns early only when no data arrived for
``pollTimeoutMs`` (the broker kept answering "no data" or asked the client to back off): the
committed offset of the task's private group then says the range is not complete and the task
fails. A transport failure in the middle of a range is retried (``fetchOffset.numRetries``) with a
new consumer from just after the last returned message, skipping messages already returned (by
``message_id``), so each message is returned once.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import operator
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from pyspark.sql.types import StructType

from ..errors import ConfigError, TubeMQError
from ._client import describe, new_group
from ._compat import TubeMQSparkError
from .options import ReadOptions
from .schema import ArrowBuilder, arrow_schema_for

log = logging.getLogger("tubemq.spark.task")

_MESSAGE_ID = operator.attrgetter("message_id")

#: Message ids remembered to skip re-read messages after a mid-range reconnect (a resume re-reads
#: at most part of one fetch, which the broker caps at 1 MiB).
_RESUME_WINDOW = 1 << 16


class _Loop:
    """A private asyncio loop on a daemon thread (the task's consumer lives there)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=main, name="tubemq-spark-read", daemon=True)
        self.thread.start()
        started.wait(30)

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Any, timeout: float) -> Any:
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TubeMQSparkError(f"the TubeMQ client did not answer within {timeout:g} s") from None

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            if not self.thread.is_alive():
                self.loop.close()


async def _next_batch(agen: AsyncIterator[Any]) -> Any | None:
    """The next fetched batch of ``agen`` (a non-empty ``Batch``), or None when the range is done."""
    try:
        return await agen.__anext__()  # type: ignore[no-any-return]
    except StopAsyncIteration:
        return None


class _Session:
    """One attempt: an asyncio ``BoundConsumer`` in a private group on a private loop."""

    def __init__(self, opts: ReadOptions, topic: str) -> None:
        self.opts = opts
        self.loop = _Loop()
        self.consumer: Any = None
        # every blocking wait is bounded: a client call may take a few RPC timeouts at most
        rpc_ms = int(opts.client_options.get("rpc_timeout_ms", 10000))
        self.call_timeout = (opts.poll_timeout_ms + 6 * rpc_ms) / 1000.0
        topics: Any = [topic]
        if opts.stream_ids:
            topics = {topic: list(opts.stream_ids.get(topic, ()))}

        async def open_consumer() -> Any:
            from .. import aio

            consumer = aio.BoundConsumer(
                opts.master, new_group(opts.group_prefix, "read"), topics, **dict(opts.client_options)
            )
            await consumer.start()
            return consumer

        try:
            self.consumer = self.loop.run(open_consumer(), self.call_timeout)
        except BaseException:
            self.loop.stop()
            raise

    def run(self, coro: Any) -> Any:
        return self.loop.run(coro, self.call_timeout)

    def wait(self, fut: concurrent.futures.Future[Any]) -> Any:
        """The result of a submitted call, bounded like :meth:`run`."""
        try:
            return fut.result(self.call_timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TubeMQSparkError(f"the TubeMQ client did not answer within {self.call_timeout:g} s") from None

    def close(self) -> None:
        try:
            if self.consumer is not None:
                self.loop.run(self.consumer.close(), self.call_timeout)
        except Exception as exc:  # noqa: BLE001 - closing is best effort; the broker expires the rest
            log.warning("closing the read consumer failed: %s", exc)
        finally:
            self.loop.stop()


class _Dedup:
    """Recently returned messages, to drop re-read ones after a mid-range reconnect.

    Free per message: the fetched lists themselves are kept (until they cover ``_RESUME_WINDOW``
    messages) and their ids are only collected when a resume needs them.
    """

    def __init__(self) -> None:
        self.chunks: collections.deque[Sequence[Any]] = collections.deque()
        self.kept = 0
        self.ids: set[int] = set()
        self.skipping = False

    def remember(self, msgs: Sequence[Any]) -> None:
        self.chunks.append(msgs)
        self.kept += len(msgs)
        while len(self.chunks) > 1 and self.kept - len(self.chunks[0]) >= _RESUME_WINDOW:
            self.kept -= len(self.chunks.popleft())

    def resume(self) -> None:
        """A reconnect will re-read from an estimated offset: skip what was already returned."""
        self.ids = {mid for chunk in self.chunks for mid in map(_MESSAGE_ID, chunk)}
        self.skipping = bool(self.ids)

    def fresh(self, msgs: Sequence[Any]) -> Sequence[Any]:
        """``msgs`` minus the re-read ones at their head (only while skipping)."""
        if not self.skipping:
            return msgs
        i = 0
        while i < len(msgs) and msgs[i].message_id in self.ids:
            i += 1
        if i < len(msgs):
            self.skipping = False
            self.ids = set()
        return msgs[i:]


class _Progress:
    """Where the task stands: every message stored before ``cur`` has been returned.

    ``cur`` is exact: after each fetched batch it is the batch's ``next_offset`` (the broker's committed
    offset of the task's private group), and after a completed ``read_range`` the range's end. A resumed
    read still skips already returned ids, for a batch that failed before its rows were handed over.
    """

    def __init__(self, start: int) -> None:
        self.cur = start


def read_partition(opts: ReadOptions, schema: StructType, part: Any) -> Iterator[Any]:
    """The rows of ``part`` (a ``TubeMQInputPartition``) as Arrow record batches."""
    builder: Any
    if opts.value_format == "inlongmsg":
        from .inlong import InLongArrowBuilder

        builder = InLongArrowBuilder(arrow_schema_for(schema))
    else:
        builder = ArrowBuilder(arrow_schema_for(schema), opts.msg_time_zone)
    where = describe(part.topic, part.key, part.start, part.end)
    dedup = _Dedup()
    progress = _Progress(part.start)
    failures = 0
    while True:
        session: _Session | None = None
        try:
            session = _Session(opts, part.topic)
            partition = _find_partition(session, opts, part)
            if partition is None:
                return
            progress.cur, stop = _check_loss(session, partition, opts, part, progress.cur, where)
            yield from _read(session, partition, opts, part, stop, builder, dedup, progress, where)
            break
        except TubeMQSparkError:
            raise
        except TubeMQError as exc:
            # any client failure gets a fresh consumer: connection drops, timeouts, but also a
            # registration the broker lost (411 after a broker restart) or a dropped partition
            if failures >= opts.num_retries or isinstance(exc, ConfigError):
                attempts = f" after {failures + 1} attempts" if failures else ""
                raise TubeMQSparkError(
                    f"reading {where} from master {opts.master} failed{attempts}: {type(exc).__name__}: {exc}"
                ) from exc
            failures += 1
            dedup.resume()
            log.warning(
                "reading %s failed (attempt %d), resuming at offset %d: %s",
                where,
                failures,
                progress.cur,
                exc,
            )
            time.sleep(opts.retry_interval_ms / 1000.0)
        finally:
            if session is not None:
                session.close()
    if len(builder):
        yield builder.flush(part.topic, part.broker_id, part.partition_id)


def _read(
    session: _Session,
    partition: Any,
    opts: ReadOptions,
    part: Any,
    stop: int,
    builder: ArrowBuilder,
    dedup: _Dedup,
    progress: _Progress,
    where: str,
) -> Iterator[Any]:
    """Full Arrow batches until ``[progress.cur, stop)`` is read."""
    consumer = session.consumer
    chunk = opts.arrow_batch_size
    agen = consumer.read_range_batches(partition, progress.cur, stop, timeout=opts.poll_timeout_ms / 1000.0)
    pending = session.loop.submit(_next_batch(agen))
    try:
        while True:
            batch = session.wait(pending)
            if batch is None:
                break
            pending = session.loop.submit(_next_batch(agen))  # prefetch while Spark works
            fetched_at = batch.start_offset
            if batch.next_offset >= 0:
                progress.cur = batch.next_offset  # exact: everything stored before it is in this batch or earlier
            msgs = dedup.fresh(batch.messages)
            if not msgs:
                continue
            dedup.remember(msgs)
            room = chunk - len(builder)
            builder.extend(msgs[:room], fetched_at)
            if len(builder) >= chunk:
                yield builder.flush(part.topic, part.broker_id, part.partition_id)
                rest = msgs[room:]
                while rest:
                    builder.extend(rest[:chunk], fetched_at)
                    rest = rest[chunk:]
                    if len(builder) >= chunk:
                        yield builder.flush(part.topic, part.broker_id, part.partition_id)
    finally:
        if not pending.done():  # closed early by Spark: stop the prefetch before closing the range
            pending.cancel()
            with contextlib.suppress(Exception):
                pending.result(session.call_timeout)
        with contextlib.suppress(Exception):
            session.run(agen.aclose())
    # the read ended: complete, or no data for pollTimeoutMs (our private group's offset tells which)
    position = session.run(consumer.offsets(partition))
    if position.current < stop:
        raise TubeMQSparkError(
            f"reading {where}: no progress at offset {position.current} for pollTimeoutMs={opts.poll_timeout_ms} "
            f"(the broker's latest offset is {position.max})"
        )
    progress.cur = stop


def _find_partition(session: _Session, opts: ReadOptions, part: Any) -> Any:
    parts = session.run(session.consumer.partitions(part.topic))
    for p in parts:
        if p.broker_id == part.broker_id and p.partition_id == part.partition_id:
            return p
    msg = f"partition {part.key} of topic {part.topic!r} is gone (topic deleted or broker offline)"
    if opts.fail_on_data_loss:
        raise TubeMQSparkError(
            f"{msg}; cannot read {describe(part.topic, part.key, part.start, part.end)}. "
            "Set failOnDataLoss=false to skip it"
        )
    log.warning("%s; skipping its offsets [%d, %d)", msg, part.start, part.end)
    return None


def _check_loss(
    session: _Session, partition: Any, opts: ReadOptions, part: Any, start: int, where: str
) -> tuple[int, int]:
    """(offset to read from, offset to stop at): the range, minus data expired or truncated away."""
    pos = session.run(session.consumer.attach(partition, 0))  # the broker clamps 0 up to its min
    lo, hi = pos.current, pos.max
    stop = part.end
    if start < lo:
        msg = f"{where}: offsets [{start}, {min(lo, part.end)}) expired before they were read (earliest is now {lo})"
        _data_lost(opts, msg, "continue without them", "%s; continuing from %d", lo)
        start = lo
    if hi < stop:
        msg = f"{where}: the broker's latest offset is now {hi}, below the end of the range (store truncated)"
        _data_lost(opts, msg, "read what is left", "%s; reading up to %d", hi)
        stop = hi
    return start, stop


def _data_lost(opts: ReadOptions, msg: str, instead: str, warning: str, offset: int) -> None:
    """failOnDataLoss: raise saying how to go on without the lost data, else log that it goes on."""
    if opts.fail_on_data_loss:
        raise TubeMQSparkError(msg + f"; set failOnDataLoss=false to {instead}")
    log.warning(warning, msg, offset)


__all__ = ["read_partition"]
