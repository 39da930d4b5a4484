"""Batch reader: ``spark.read.format("tubemq")``.

Planning (on the driver) resolves ``startingOffsets``/``endingOffsets`` against the brokers into
one Spark partition per TubeMQ partition with data in ``[start, end)``; reading happens on the
executors (:mod:`tubemq.spark.task`), exactly and deterministically, so a retried task returns the
same rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ._client import (
    all_bounds,
    close_quietly,
    describe,
    discover,
    new_group,
    open_consumer,
)
from ._compat import TubeMQSparkError
from .offsets import EARLIEST, ENTRY_SIZE, LATEST, Flat, partition_key
from .options import ENDING_OFFSETS, STARTING_OFFSETS, ReadOptions, starting_for
from .task import read_partition

log = logging.getLogger("tubemq.spark.reader")


@dataclass(eq=False, repr=False)
class TubeMQInputPartition(InputPartition):
    """One Spark task: ``[start, end)`` of one TubeMQ partition (picklable, no sockets)."""

    topic: str
    broker_id: int
    partition_id: int
    start: int
    end: int

    def __post_init__(self) -> None:
        super().__init__((self.topic, self.key, self.start, self.end))

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
    start_at: Flat = {}
    end_at: Flat = {}
    if opts.starting_timestamp is not None or opts.ending_timestamp is not None:
        from . import timestamps

        if opts.starting_timestamp is not None:
            start_at = timestamps.resolve(opts, opts.starting_timestamp, limits, ending=False)
        if opts.ending_timestamp is not None:
            end_at = timestamps.resolve(opts, opts.ending_timestamp, limits, ending=True)
    ranges = []
    for (topic, key), (lo, hi) in sorted(limits.items()):
        start = start_at.get((topic, key))
        if start is None:
            start = _resolve(STARTING_OFFSETS, starting, topic, key, lo, hi, default=EARLIEST)
        end = end_at.get((topic, key))
        if end is None:
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
    return split_ranges(ranges, opts.min_partitions)


def split_ranges(ranges: list[TubeMQInputPartition], min_partitions: int | None) -> list[TubeMQInputPartition]:
    """``minPartitions``: cut the ranges into at least that many tasks, like Kafka's source: each
    range gets pieces in proportion to its size (index entries), at entry boundaries. Consecutive
    pieces of one partition read exactly its messages once (see :mod:`tubemq.spark.offsets`)."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    sizes = [(r.end - r.start) // ENTRY_SIZE for r in ranges]
    total = sum(sizes)
    if total <= len(ranges):
        return ranges
    out: list[TubeMQInputPartition] = []
    for r, entries in zip(ranges, sizes, strict=True):
        pieces = max(1, min(entries, round(min_partitions * entries / total)))
        step, extra = divmod(entries, pieces)
        start = r.start
        for i in range(pieces):
            end = start + (step + (1 if i < extra else 0)) * ENTRY_SIZE
            out.append(TubeMQInputPartition(r.topic, r.broker_id, r.partition_id, start, end))
            start = end
    return out


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
