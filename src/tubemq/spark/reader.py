"""Batch reader and the per-partition read task shared with the streaming reader.

One Spark partition per TubeMQ partition with data in ``[start, end)``. The task reads that range
through ``BoundConsumer.read_range``, which is deterministic (same start and end => same
messages), so a retried task returns the same rows.

Ranges and shared stores: a partition's range is delimited by broker index offsets. When the
partition has its own store, the consumer's per-message offsets are the exact index offsets and
``[start, end)`` is exact. When sibling partitions share the store (TubeMQ's default layout), a
message's exact index offset is only known at fetch boundaries: ``Message.offset`` (fetch start +
28 * position in the fetch) is a lower bound of it. A message whose true offset is below ``end``
always has ``Message.offset < end`` and is read; a message just past ``end`` fetched together with
it can also show ``Message.offset < end`` and then be read by this range *and* by the next one
that starts at ``end``. So consecutive ranges lose nothing and may repeat a few messages at their
boundary: at-least-once. ``(partition, message_id)`` identifies a message for deduplication.

A transient failure in the middle of a range is retried (``fetchOffset.numRetries``) by reading
again from just after the last returned message, skipping messages already returned (recognised
by ``message_id``), so the task still returns each message of its range once and in order.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..errors import TubeMQError
from ._client import (
    all_bounds,
    close_quietly,
    describe,
    discover,
    is_retryable,
    new_group,
    open_consumer,
    with_retries,
)
from ._compat import TubeMQSparkError
from .offsets import EARLIEST, ENTRY_SIZE, LATEST, partition_key
from .options import ENDING_OFFSETS, STARTING_OFFSETS, ReadOptions, starting_for
from .schema import ArrowBuilder, arrow_schema_for

log = logging.getLogger("tubemq.spark.reader")

#: How many recently returned message ids a resumed read remembers to skip re-read messages
#: (a resume re-reads at most one fetch, which the broker caps at 1 MiB).
_RESUME_WINDOW = 1 << 16


class TubeMQInputPartition(InputPartition):
    """One Spark task: ``[start, end)`` of one TubeMQ partition (picklable, no sockets)."""

    def __init__(self, topic: str, broker_id: int, partition_id: int, start: int, end: int) -> None:
        super().__init__((topic, partition_key(broker_id, partition_id), start, end))
        self.topic = topic
        self.broker_id = broker_id
        self.partition_id = partition_id
        self.start = start
        self.end = end

    @property
    def key(self) -> str:
        return partition_key(self.broker_id, self.partition_id)

    def __repr__(self) -> str:
        return f"TubeMQInputPartition({self.topic}:{self.key} [{self.start}, {self.end}))"


def plan_batch_ranges(opts: ReadOptions) -> list[TubeMQInputPartition]:
    """Resolve ``startingOffsets``/``endingOffsets`` against the brokers: the batch's task list."""
    consumer = open_consumer(opts, new_group(opts.group_prefix, "plan"))
    try:
        parts = discover(consumer, opts, strict=True)
        limits = all_bounds(consumer, parts, opts)
    finally:
        close_quietly(consumer, "the planning consumer")
    starting = starting_for(opts, streaming=False)
    ranges = []
    for (topic, key), (lo, hi) in sorted(limits.items()):
        start = _resolve(STARTING_OFFSETS, starting, topic, key, lo, hi, default=EARLIEST)
        end = _resolve(ENDING_OFFSETS, opts.ending, topic, key, lo, hi, default=LATEST)
        where = describe(topic, key, start, end)
        if start < lo:
            msg = f"{STARTING_OFFSETS} {start} of {topic}/{key} is below the earliest available offset {lo} (data expired)"
            if opts.fail_on_data_loss:
                raise TubeMQSparkError(
                    msg + "; set failOnDataLoss=false to read from the earliest offset instead"
                )
            log.warning("%s; reading from %d", msg, lo)
            start = lo
        if end > hi:
            raise TubeMQSparkError(
                f"{ENDING_OFFSETS} {end} of {topic}/{key} is beyond the latest offset {hi}"
            )
        if start > end:
            raise TubeMQSparkError(f"{where}: {STARTING_OFFSETS} is after {ENDING_OFFSETS}")
        if end > start:
            p = parts[(topic, key)]
            ranges.append(TubeMQInputPartition(topic, p.broker_id, p.partition_id, start, end))
    return ranges


def _resolve(option: str, spec: Any, topic: str, key: str, lo: int, hi: int, *, default: int) -> int:
    if spec == "earliest":
        return lo
    if spec == "latest":
        return hi
    value = spec.get(topic, {}).get(key, default) if isinstance(spec, dict) else default
    if value == EARLIEST:
        return lo
    if value == LATEST:
        return hi
    return int(value)


class TubeMQBatchReader(DataSourceReader):
    """``spark.read.format("tubemq")``: plans once on the driver, reads on executors."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        return list(plan_batch_ranges(self.opts))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, TubeMQInputPartition):
            return iter(())  # Spark's placeholder partition when the plan found no data
        return read_partition(self.opts, self.schema, partition)


def read_partition(opts: ReadOptions, schema: StructType, part: TubeMQInputPartition) -> Iterator[Any]:
    """The rows of ``part`` as Arrow record batches (executor side; opens and closes its own consumer)."""
    builder = ArrowBuilder(arrow_schema_for(schema), opts.include_attributes, opts.msg_time_zone)
    where = describe(part.topic, part.key, part.start, part.end)
    recent: collections.deque[int] = collections.deque(maxlen=_RESUME_WINDOW)
    recent_set: set[int] = set()
    resume_from = part.start
    skipping = False
    failures = 0
    while True:
        consumer = None
        try:
            consumer = open_consumer(
                opts,
                new_group(opts.group_prefix, "read"),
                [part.topic]
                if not opts.stream_ids
                else {part.topic: list(opts.stream_ids.get(part.topic, ()))},
            )
            partition = _find_partition(consumer, opts, part)
            if partition is None:
                return
            start = _check_loss(consumer, partition, opts, part, resume_from, where)
            if start >= part.end:
                break
            timeout = opts.poll_timeout_ms / 1000.0
            for msg in consumer.read_range(partition, start, part.end, timeout=timeout):
                if skipping:
                    if msg.message_id in recent_set:
                        continue
                    skipping = False
                builder.add(msg)
                if len(recent) == recent.maxlen:
                    recent_set.discard(recent[0])
                recent.append(msg.message_id)
                recent_set.add(msg.message_id)
                resume_from = msg.offset + ENTRY_SIZE
                if len(builder) >= opts.arrow_batch_size:
                    yield builder.flush(part.topic, part.broker_id, part.partition_id)
            break
        except TubeMQSparkError:
            raise
        except TubeMQError as exc:
            if failures >= opts.num_retries or not is_retryable(exc):
                raise TubeMQSparkError(
                    f"reading {where} from master {opts.master} failed"
                    f"{f' after {failures + 1} attempts' if failures else ''}: {type(exc).__name__}: {exc}"
                ) from exc
            failures += 1
            skipping = bool(recent)
            log.warning(
                "reading %s failed (attempt %d), resuming at offset %d: %s", where, failures, resume_from, exc
            )
            time.sleep(opts.retry_interval_ms / 1000.0)
        finally:
            close_quietly(consumer, "the read consumer")
    if len(builder):
        yield builder.flush(part.topic, part.broker_id, part.partition_id)


def _find_partition(consumer: Any, opts: ReadOptions, part: TubeMQInputPartition) -> Any:
    parts = with_retries(
        f"listing partitions of topic {part.topic!r} on master {opts.master}",
        lambda: list(consumer.partitions(part.topic)),
        opts.num_retries,
        opts.retry_interval_ms,
    )
    for p in parts:
        if p.broker_id == part.broker_id and p.partition_id == part.partition_id:
            return p
    msg = f"partition {part.key} of topic {part.topic!r} is gone (topic deleted or broker offline)"
    if opts.fail_on_data_loss:
        raise TubeMQSparkError(
            msg + f"; cannot read {describe(part.topic, part.key, part.start, part.end)}. "
            "Set failOnDataLoss=false to skip it"
        )
    log.warning("%s; skipping its offsets [%d, %d)", msg, part.start, part.end)
    return None


def _check_loss(
    consumer: Any, partition: Any, opts: ReadOptions, part: TubeMQInputPartition, start: int, where: str
) -> int:
    """The offset to read from: ``start``, or the earliest available one if data expired (when allowed)."""
    from ._client import bounds

    lo, hi = bounds(consumer, partition, opts)
    if start < lo:
        msg = f"{where}: offsets [{start}, {min(lo, part.end)}) expired before they were read (earliest is now {lo})"
        if opts.fail_on_data_loss:
            raise TubeMQSparkError(msg + "; set failOnDataLoss=false to continue without them")
        log.warning("%s; continuing from %d", msg, lo)
        start = lo
    if hi < part.end:
        msg = f"{where}: the broker's latest offset is now {hi}, below the end of the range (store truncated)"
        if opts.fail_on_data_loss:
            raise TubeMQSparkError(msg + "; set failOnDataLoss=false to read what is left")
        log.warning("%s; reading up to %d", msg, hi)
    return start
