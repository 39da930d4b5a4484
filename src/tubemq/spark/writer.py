"""Batch and streaming writers: ``df.write.format("tubemq")`` / ``df.writeStream.format("tubemq")``.

Each Spark task sends its rows through one ``tubemq.Producer`` (opened inside ``write``, so no
socket is ever pickled), waits until the brokers acknowledged every message, and only then returns
its commit message (rows, bytes, per-topic counts). A failed send fails the task with a message
naming the topic and the cause.

Delivery is at-least-once: a retried task or a re-run micro-batch sends its rows again. With
``stampAttributes=true`` every message carries ``sparkQuery`` (the streaming query id, or a
per-write id for batch writes), ``sparkBatch`` (micro-batch id, ``-1`` for batch writes),
``sparkTask`` (the Spark partition index) and ``sparkSeq`` (the row's position in the task), so a
reader can drop duplicates with the key (sparkQuery, sparkBatch, sparkTask, sparkSeq) as long as
the DataFrame produces the same rows in the same order when recomputed.

Only append is supported: TubeMQ is a log, there is nothing to overwrite.
"""

from __future__ import annotations

import collections
import concurrent.futures
import datetime as _dt
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from ..errors import InLongMsgError, TubeMQError
from ._compat import TubeMQSparkError
from .inlong import MAX_OPEN_CONTAINERS, dt_micros, inlong_records
from .options import WriteOptions
from .schema import format_msg_time, rows_for_send

log = logging.getLogger("tubemq.spark.writer")

STAMP_QUERY = "sparkQuery"
STAMP_BATCH = "sparkBatch"
STAMP_TASK = "sparkTask"
STAMP_SEQ = "sparkSeq"

#: Spark local properties set on the tasks of a streaming micro-batch.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass
class TubeMQCommitMessage(WriterCommitMessage):
    """What one task wrote (picklable; summed up on the driver)."""

    partition: int
    rows: int
    bytes: int
    topics: dict[str, int] = field(default_factory=dict)


#: Unacknowledged messages per write task. A message's RPC timeout runs from its send_async call, so a
#: deeper queue only makes messages wait (and expire, on a slow broker: a queue longer than the broker's rate
#: times the timeout outlives it) without sending any faster; a plain pipelined loop peaks well below this.
WRITE_WINDOW = 8192


class _Acks:
    """Futures of sent messages, checked in order without per-message callbacks.

    The producer's futures are cheap as long as nobody registers a callback or blocks on them, so
    completed ones are harvested from the head of a deque; the deque is bounded (``limit``) by
    waiting on its oldest future, which also bounds the task's memory.
    """

    def __init__(self, task: int, limit: int) -> None:
        self.task = task
        self.limit = limit
        self.futures: collections.deque[Any] = collections.deque()
        self.acked = 0

    def add(self, future: Any) -> None:
        futures = self.futures
        futures.append(future)
        if len(futures) >= self.limit:
            self.harvest()
            while len(futures) >= self.limit:
                self._check(futures.popleft(), None)

    def harvest(self) -> None:
        futures = self.futures
        while futures and futures[0].done():
            self._check(futures.popleft(), None)

    def drain(self, deadline: float) -> None:
        """Check every remaining future (after ``flush``), waiting until ``deadline`` at most."""
        while self.futures:
            self._check(self.futures.popleft(), max(0.0, deadline - time.monotonic()))

    def _check(self, future: Any, timeout: float | None) -> None:
        try:
            exc = future.exception(timeout)
        except concurrent.futures.TimeoutError:
            raise TubeMQSparkError(
                f"messages of Spark partition {self.task} were not acknowledged in time (flushTimeoutMs)"
            ) from None
        if exc is not None:
            raise TubeMQSparkError(
                f"a message of Spark partition {self.task} was not stored by TubeMQ: {type(exc).__name__}: {exc}"
            ) from exc
        self.acked += 1


def _task_identity(write_id: str) -> tuple[str, str, int]:
    """(query id, batch id, task partition) of the running task; batch writes use ``write_id``."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return write_id, "-1", 0
    query = ctx.getLocalProperty(_QUERY_ID_PROPERTY) or write_id
    batch = ctx.getLocalProperty(_BATCH_ID_PROPERTY) or "-1"
    return query, batch, ctx.partitionId()


def write_batches(
    opts: WriteOptions, used: dict[str, str], write_id: str, batches: Iterator[Any]
) -> TubeMQCommitMessage:
    """Send every row of ``batches``; return after all are acknowledged (executor side)."""
    if opts.value_format == "inlongmsg":
        return _write_inlong_batches(opts, used, write_id, batches)
    from .. import Producer

    query, batch_id, task = _task_identity(write_id)
    rows = size = 0
    topics: dict[str, int] = {}
    try:
        producer = Producer(opts.master, **dict(opts.client_options))
    except TubeMQError as exc:
        raise TubeMQSparkError(
            f"opening a producer on master {opts.master} failed: {type(exc).__name__}: {exc}"
        ) from exc
    acks = _Acks(task, min(WRITE_WINDOW, int(getattr(producer.config, "max_pending", WRITE_WINDOW))))
    try:
        send = producer.send_async
        stamp = opts.stamp_attributes
        for batch in batches:
            for topic, value, attrs, stream_id, key, msg_time in rows_for_send(
                batch, used, opts.topic, opts.msg_time_zone
            ):
                if value is None:
                    raise TubeMQSparkError(
                        f"row {rows} of Spark partition {task} has a null 'value'; TubeMQ messages need a body"
                    )
                if not topic:
                    raise TubeMQSparkError(
                        f"row {rows} of Spark partition {task} has a null 'topic' and no 'topic' option is set"
                    )
                if stamp:
                    attrs = dict(attrs) if attrs else {}
                    attrs[STAMP_QUERY] = query
                    attrs[STAMP_BATCH] = batch_id
                    attrs[STAMP_TASK] = str(task)
                    attrs[STAMP_SEQ] = str(rows)
                try:
                    future = send(
                        topic, value, attributes=attrs, stream_id=stream_id, msg_time=msg_time, key=key
                    )
                except (TubeMQError, ValueError, TypeError) as exc:
                    raise TubeMQSparkError(
                        f"sending row {rows} of Spark partition {task} to topic {topic!r} failed: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                acks.add(future)
                rows += 1
                size += len(value)
                topics[topic] = topics.get(topic, 0) + 1
            acks.harvest()  # fail fast: a broken send stops the task at the next batch
        deadline = time.monotonic() + opts.flush_timeout_ms / 1000.0
        pending = producer.flush(timeout=opts.flush_timeout_ms / 1000.0)
        acks.drain(deadline)
        if pending or acks.acked != rows:
            raise TubeMQSparkError(
                f"only {acks.acked} of {rows} messages of Spark partition {task} were acknowledged "
                f"within flushTimeoutMs={opts.flush_timeout_ms}"
            )
    finally:
        close_quietly(producer, log)
    return TubeMQCommitMessage(partition=task, rows=rows, bytes=size, topics=topics)


def close_quietly(producer: Any, logger: logging.Logger) -> None:
    """Close a task's producer after the outcome is known: a failure to close is only logged."""
    try:
        producer.close()
    except Exception as exc:  # noqa: BLE001 - closing is best effort; the outcome is already known
        logger.warning("closing the producer failed: %s", exc)


def _summary(messages: list[Any]) -> str:
    done = [m for m in messages if isinstance(m, TubeMQCommitMessage)]
    rows = sum(m.rows for m in done)
    size = sum(m.bytes for m in done)
    return f"{rows} rows, {size} bytes from {len(done)} of {len(messages)} tasks"


class _TaskWriter:
    """What the batch and the stream writer share: the options, the used columns, one id per write."""

    def __init__(self, opts: WriteOptions, used: dict[str, str]) -> None:
        self.opts = opts
        self.used = used
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> TubeMQCommitMessage:
        return write_batches(self.opts, self.used, self.write_id, iterator)


class TubeMQBatchWriter(_TaskWriter, DataSourceArrowWriter):
    """``df.write.format("tubemq").mode("append")``."""

    def commit(self, messages: list[Any]) -> None:  # type: ignore[override]
        log.info("write %s committed: %s", self.write_id, _summary(messages))

    def abort(self, messages: list[Any]) -> None:  # type: ignore[override]
        log.warning(
            "write %s aborted after %s; messages already sent stay in TubeMQ (at-least-once)",
            self.write_id,
            _summary(messages),
        )


class TubeMQStreamWriter(_TaskWriter, DataSourceStreamArrowWriter):
    """``df.writeStream.format("tubemq")`` (append output mode)."""

    def commit(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]  # noqa: N803
        log.info("micro-batch %d committed: %s", batchId, _summary(messages))

    def abort(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]  # noqa: N803
        log.warning(
            "micro-batch %d aborted after %s; messages already sent stay in TubeMQ (at-least-once)",
            batchId,
            _summary(messages),
        )


def _write_inlong_batches(opts: WriteOptions, used: dict[str, str], write_id: str, batches: Iterator[Any]
                          ) -> TubeMQCommitMessage:
    """Pack the rows of ``batches`` into containers and send them; return after all are acknowledged."""
    from .. import Producer
    from ..inlongmsg import InLongMsgBuilder, parse_attr

    query, batch_id, task = _task_identity(write_id)
    try:
        producer = Producer(opts.master, **dict(opts.client_options))
    except TubeMQError as exc:
        raise TubeMQSparkError(f"opening a producer on master {opts.master} failed: {type(exc).__name__}: {exc}"
                               ) from exc
    acks = _Acks(task, max(1024, 2 * int(getattr(producer.config, "max_pending", 65536))))
    open_: dict[tuple[str, str], InLongMsgBuilder] = {}
    rows = size = sent = 0
    topics: dict[str, int] = {}

    def send(topic: str, attr: str, builder: InLongMsgBuilder) -> None:
        nonlocal size, sent
        data = builder.build()
        kv = parse_attr(attr)
        dt = dt_micros(kv.get("dt"))
        msg_time = None
        if dt is not None:
            msg_time = format_msg_time(_dt.datetime.fromtimestamp(dt / 1e6, _dt.timezone.utc), opts.msg_time_zone)
        stamp = None
        if opts.stamp_attributes:
            stamp = {STAMP_QUERY: query, STAMP_BATCH: batch_id, STAMP_TASK: str(task), STAMP_SEQ: str(sent)}
        try:
            future = producer.send_async(topic, data, attributes=stamp, stream_id=kv.get("streamId") or None,
                                         msg_time=msg_time)
        except (TubeMQError, ValueError, TypeError) as exc:
            raise TubeMQSparkError(f"sending an InLong container of Spark partition {task} to topic {topic!r} "
                                   f"failed: {type(exc).__name__}: {exc}") from exc
        acks.add(future)
        size += len(data)
        sent += 1

    try:
        for batch in batches:
            for topic, body, attr in inlong_records(batch, used, opts.topic):
                if body is None:
                    raise TubeMQSparkError(f"row {rows} of Spark partition {task} has a null body")
                if not topic:
                    raise TubeMQSparkError(f"row {rows} of Spark partition {task} has a null 'topic' and no "
                                           "'topic' option is set")
                key = (topic, attr)
                builder = open_.get(key)
                if builder is None:
                    if len(open_) >= MAX_OPEN_CONTAINERS:
                        old = next(iter(open_))
                        send(*old, open_.pop(old))
                    builder = open_[key] = InLongMsgBuilder(1, compress=opts.compress, capacity=opts.capacity)
                if not builder.add(attr, body):
                    send(topic, attr, open_.pop(key))
                rows += 1
                topics[topic] = topics.get(topic, 0) + 1
            acks.harvest()
        for (topic, attr), builder in list(open_.items()):
            send(topic, attr, builder)
        open_.clear()
        deadline = time.monotonic() + opts.flush_timeout_ms / 1000.0
        pending = producer.flush(timeout=opts.flush_timeout_ms / 1000.0)
        acks.drain(deadline)
        if pending or acks.acked != sent:
            raise TubeMQSparkError(f"only {acks.acked} of {sent} InLong containers of Spark partition {task} "
                                   f"were acknowledged within flushTimeoutMs={opts.flush_timeout_ms}")
    except InLongMsgError as exc:  # snappy support missing
        raise TubeMQSparkError(f"Spark partition {task}: {exc}") from exc
    except ValueError as exc:  # an attribute map that cannot be an InLong attribute string
        raise TubeMQSparkError(f"row {rows} of Spark partition {task}: {exc}") from exc
    finally:
        close_quietly(producer, log)
    return TubeMQCommitMessage(partition=task, rows=rows, bytes=size, topics=topics)
