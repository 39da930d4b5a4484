"""Streaming reader: ``spark.readStream.format("tubemq")``.

Offsets in the checkpoint: ``{"topic": {"brokerId:partitionId": offset}}`` (next offset to read).
Nothing is committed on the brokers for the query to work: a restart resumes from the checkpoint
alone. With ``commitOffsetsToGroup=<group>`` each finished micro-batch's end offsets are also set
as that group's committed offsets (best effort), so TubeMQ's lag dashboards can follow the query.

* ``latestOffset`` honours the engine's read limit: ``ReadMaxRows(maxOffsetsPerTrigger)`` by
  default when the option is set (messages, shared in proportion to each store's backlog, see
  :func:`tubemq.spark.offsets.rate_limit`), ``ReadAllAvailable`` otherwise or when the engine
  asks for everything.
* ``Trigger.AvailableNow`` is supported: ``prepareForTriggerAvailableNow`` records the latest
  offsets, later batches never go past them (still split by ``maxOffsetsPerTrigger``), and
  partitions that appear afterwards wait for the next run.
* New partitions (more partitions or a new broker) start at their earliest offset.
* A partition that is temporarily missing from the master's metadata (broker offline) keeps its
  offset and is read again once it is back.

The reader object lives in a long-running Python process on the driver; it keeps one consumer
open there for offset look-ups (never pickled: ``__getstate__`` drops it). The ``read`` side runs
in executor processes and opens its own consumer per task (see :mod:`tubemq.spark.reader`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ._client import bounds, close_quietly, discover, new_group, open_consumer
from ._compat import TubeMQSparkError
from .offsets import EARLIEST, LATEST, Flat, flatten, nest, parse_partition_key, rate_limit
from .options import STARTING_OFFSETS, ReadOptions, starting_for
from .reader import TubeMQInputPartition, read_partition, split_ranges

log = logging.getLogger("tubemq.spark.stream")

TP = tuple[str, str]


class TubeMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control and Trigger.AvailableNow."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._consumer: Any = None
        self._commit_consumer: Any = None
        self._parts: dict[TP, Any] = {}
        self._target: Flat | None = None
        self._latest: Flat | None = None
        self._new_starts: Flat = {}

    # -- pickling: the driver-side consumers never travel

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_consumer"] = None
        state["_commit_consumer"] = None
        state["_parts"] = {}
        return state

    # -- driver-side metadata

    def _driver(self) -> Any:
        if self._consumer is None:
            self._consumer = open_consumer(self.opts, new_group(self.opts.group_prefix, "driver"))
        return self._consumer

    def _snapshot(self) -> dict[TP, tuple[int, int]]:
        """(earliest, latest) of every reachable partition now; unreachable ones are left out.

        The driver's consumer lives as long as the query; if its session broke (master restart,
        expired membership...), one more attempt is made with a fresh consumer.
        """
        try:
            return self._snapshot_once()
        except TubeMQSparkError as exc:
            log.warning("offset lookup failed, retrying with a new consumer: %s", exc)
            self._drop_driver()
            return self._snapshot_once()

    def _snapshot_once(self) -> dict[TP, tuple[int, int]]:
        consumer = self._driver()
        try:
            self._parts = discover(consumer, self.opts, strict=False)
        except TubeMQSparkError:
            self._drop_driver()
            raise
        snap: dict[TP, tuple[int, int]] = {}
        failed: list[str] = []
        for tp, partition in sorted(self._parts.items()):
            try:
                snap[tp] = bounds(consumer, partition, self.opts)
            except TubeMQSparkError as exc:
                failed.append(f"{tp[0]}/{tp[1]}: {exc}")
        if failed:
            log.warning(
                "offsets of %d partition(s) unavailable this round: %s", len(failed), "; ".join(failed)
            )
            if not snap:
                self._drop_driver()
                raise TubeMQSparkError("cannot read the offsets of any partition: " + "; ".join(failed))
        return snap

    def _drop_driver(self) -> None:
        close_quietly(self._consumer, "the driver consumer")
        self._consumer = None

    # -- DataSourceStreamReader

    def initialOffset(self) -> dict:
        snap = self._snapshot()
        spec = starting_for(self.opts, streaming=True)
        flat: Flat = {}
        if self.opts.starting_timestamp is not None:
            from . import timestamps

            flat = timestamps.resolve(self.opts, self.opts.starting_timestamp, snap, ending=False)
        for (topic, key), (lo, hi) in snap.items():
            if (topic, key) in flat:
                continue
            if spec == "earliest":
                value = lo
            elif spec == "latest":
                value = hi
            else:
                value = spec.get(topic, {}).get(key, EARLIEST)  # type: ignore[union-attr]
                value = lo if value == EARLIEST else hi if value == LATEST else value
                if value < lo:
                    msg = f"{STARTING_OFFSETS} {value} of {topic}/{key} is below the earliest available offset {lo}"
                    if self.opts.fail_on_data_loss:
                        raise TubeMQSparkError(
                            msg + "; set failOnDataLoss=false to start from the earliest offset"
                        )
                    log.warning("%s; starting there", msg)
                    value = lo
                if value > hi:
                    raise TubeMQSparkError(
                        f"{STARTING_OFFSETS} {value} of {topic}/{key} is beyond the latest offset {hi}"
                    )
            flat[(topic, key)] = value
        log.info("initial offsets: %s", nest(flat))
        return nest(flat)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[override]
        begin = _flat(start)
        snap = self._snapshot()
        starts: Flat = dict(begin)
        latest: Flat = {}
        for tp, (lo, hi) in snap.items():
            if tp not in starts:
                if self._target is not None and tp not in self._target:
                    continue  # appeared after prepareForTriggerAvailableNow: next run
                starts[tp] = self._new_starts.setdefault(tp, lo)
                log.info("new partition %s/%s: reading from its earliest offset %d", tp[0], tp[1], lo)
            cap = hi if self._target is None else min(hi, self._target.get(tp, hi))
            latest[tp] = max(cap, starts[tp])
        self._latest = {tp: hi for tp, (_, hi) in snap.items()}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(starts, latest, int(limit.max_rows))
        elif isinstance(limit, ReadAllAvailable):
            end = dict(starts)
            end.update(latest)
        else:
            raise TubeMQSparkError(f"read limit {limit!r} is not supported by the tubemq source")
        return nest(end)

    def reportLatestOffset(self) -> dict | None:
        return nest(self._latest) if self._latest is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: hi for tp, (_, hi) in self._snapshot().items()}
        log.info("Trigger.AvailableNow: reading up to %s", nest(self._target))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = _flat(start), _flat(end)
        out: list[InputPartition] = []
        for (topic, key), hi in sorted(finish.items()):
            lo = begin.get((topic, key))
            if lo is None:
                lo = self._new_starts.get((topic, key))
            if lo is None:  # a new partition after a restart: earliest, looked up again
                lo = self._earliest(topic, key)
            if hi < lo:
                raise TubeMQSparkError(f"end offset {hi} of {topic}/{key} is before its start {lo}")
            if hi > lo:
                b, p = parse_partition_key(key)
                out.append(TubeMQInputPartition(topic, b, p, lo, hi))
        out = list(split_ranges(out, self.opts.min_partitions))  # type: ignore[arg-type]
        missing = sorted(set(begin) - set(finish))
        if missing:
            msg = f"partitions {missing} are no longer read (removed from the query's topics?)"
            if self.opts.fail_on_data_loss:
                raise TubeMQSparkError(msg + "; set failOnDataLoss=false to ignore")
            log.warning("%s", msg)
        return out

    def _earliest(self, topic: str, key: str) -> int:
        if (topic, key) not in self._parts:
            self._snapshot()
        partition = self._parts.get((topic, key))
        if partition is None:
            raise TubeMQSparkError(f"partition {key} of topic {topic!r} is not available to plan a batch")
        return bounds(self._driver(), partition, self.opts)[0]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, TubeMQInputPartition):
            return iter(())
        return read_partition(self.opts, self.schema, partition)

    def commit(self, end: dict) -> None:
        finished = _flat(end)
        for tp in list(self._new_starts):
            if tp in finished:
                del self._new_starts[tp]
        if self.opts.commit_group:
            self._commit_to_group(finished)

    def _commit_to_group(self, finished: Flat) -> None:
        """Best effort: the query does not depend on it, so failures are logged, not raised."""
        group = self.opts.commit_group
        if group is None:
            return
        try:
            if self._commit_consumer is None:
                self._commit_consumer = open_consumer(self.opts, group)
            consumer = self._commit_consumer
            if not self._parts:
                self._parts = discover(self._driver(), self.opts, strict=False)
            for tp, offset in sorted(finished.items()):
                partition = self._parts.get(tp)
                if partition is None:
                    continue
                consumer.attach(partition, offset)
                consumer.detach(partition, commit=True)
        except Exception as exc:  # noqa: BLE001 - dashboards only; never fail the query for it
            log.warning("committing offsets to group %r failed: %s", group, exc)
            close_quietly(self._commit_consumer, "the commit consumer")
            self._commit_consumer = None

    def stop(self) -> None:
        self._drop_driver()
        close_quietly(self._commit_consumer, "the commit consumer")
        self._commit_consumer = None


def _flat(offsets: Any) -> Flat:
    try:
        return flatten(offsets or {})
    except ValueError as exc:
        raise TubeMQSparkError(
            f"bad offsets in the checkpoint (not written by the tubemq source?): {exc}"
        ) from None
