"""The Spark source's use of the public client API (``tubemq.BoundConsumer`` / ``tubemq.Producer``).

Consumer groups: TubeMQ lets only one consumer of a group hold a partition at a time (a second
registration gets 410 until the first is released or expires), and a crashed Spark task cannot
release its registration. So the source never shares a group between two live consumers: the
driver's offset lookups and every read task use their own group ``<groupIdPrefix>-<role>-<random>``.
Reading never depends on a group's committed offset (every read attaches at an explicit offset),
so these groups carry no state worth keeping; only ``commitOffsetsToGroup`` names a durable group.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import (
    ConfigError,
    ServerError,
    TopicNotDeployedError,
    TopicNotPublishedError,
    TubeMQConnectionError,
    TubeMQError,
    TubeMQTimeoutError,
)
from ._compat import TubeMQSparkError
from .offsets import partition_key
from .options import ASSIGN, SUBSCRIBE, ReadOptions, WriteOptions, assign_matches

if TYPE_CHECKING:  # pragma: no cover
    from ..codec import Partition

log = logging.getLogger("tubemq.spark")

T = TypeVar("T")
TP = tuple[str, str]


def new_group(prefix: str, role: str) -> str:
    """A fresh consumer group name: never shared by two live consumers (see module docstring)."""
    return f"{prefix}-{role}-{uuid.uuid4().hex[:16]}"


def is_retryable(exc: BaseException) -> bool:
    """Transport failures, timeouts and server codes TubeMQ marks retryable."""
    if isinstance(exc, (TubeMQConnectionError, TubeMQTimeoutError, ConnectionError, TimeoutError)):
        return True
    return isinstance(exc, ServerError) and bool(getattr(exc, "retryable", False))


def with_retries(what: str, fn: Callable[[], T], retries: int, interval_ms: int) -> T:
    """Run ``fn``; retry retryable failures ``retries`` times; fail with a message saying what failed."""
    attempt = 0
    while True:
        try:
            return fn()
        except TubeMQError as exc:
            if attempt >= retries or not is_retryable(exc):
                suffix = f" after {attempt + 1} attempts" if attempt else ""
                raise TubeMQSparkError(f"{what} failed{suffix}: {type(exc).__name__}: {exc}") from exc
            attempt += 1
            log.warning("%s failed (attempt %d of %d), retrying: %s", what, attempt, retries + 1, exc)
            time.sleep(interval_ms / 1000.0)


def open_consumer(opts: ReadOptions, group: str, topics: Any = None) -> Any:
    """A ``tubemq.BoundConsumer`` for ``opts`` (the caller closes it)."""
    from .. import BoundConsumer

    def build() -> Any:
        try:
            return BoundConsumer(
                opts.master,
                group,
                topics if topics is not None else opts.topic_filters(),
                **dict(opts.client_options),
            )
        except TopicNotDeployedError as exc:
            option = ASSIGN if opts.assign is not None else SUBSCRIBE
            raise ConfigError(
                option,
                f"topic(s) {', '.join(opts.topics)} not deployed on master {opts.master}: {exc.message}",
            ) from exc

    return with_retries(
        f"connecting to TubeMQ master {opts.master} (group {group})",
        build,
        opts.num_retries,
        opts.retry_interval_ms,
    )


def check_publishable(opts: WriteOptions) -> None:
    """On the driver, when the write is planned: a ``topic`` that cannot be written fails the query there,
    with one message naming it, instead of in every task (where the cause ends a long executor log)."""
    if opts.topic is None:
        return  # the rows' topic column: checked per message by the tasks
    from .. import Producer

    try:
        with Producer(opts.master, **dict(opts.client_options)) as producer:
            producer.publish(opts.topic)
    except TopicNotPublishedError as exc:
        raise ConfigError("topic", f"{opts.topic!r} cannot be written on master {opts.master}: {exc.message} "
                          f"(create it first, e.g. `tubemq topic create {opts.topic}`)") from None


def discover(consumer: Any, opts: ReadOptions, *, strict: bool) -> dict[TP, Partition]:
    """Subscribable partitions of the read topics (filtered by ``assign``), by (topic, "bid:pid").

    ``strict`` (batch planning): a topic without partitions or an ``assign`` entry that matches none
    is a :class:`ConfigError` naming the option; a streaming query only logs it (partitions may come).
    """
    found: dict[TP, Partition] = {}
    for topic in opts.topics:
        parts = with_retries(
            f"listing partitions of topic {topic!r} on master {opts.master}",
            lambda topic=topic: list(consumer.partitions(topic)),  # type: ignore[misc]
            opts.num_retries,
            opts.retry_interval_ms,
        )
        chosen = [p for p in parts if assign_matches(opts.assign, topic, p.broker_id, p.partition_id)]
        if not chosen:
            msg = (
                f"topic {topic!r} has no subscribable partitions on master {opts.master} "
                "(does it exist and accept subscription?)"
            )
            if opts.assign is not None and parts:
                msg = f"none of the assigned partitions {list(opts.assign[topic])} of topic {topic!r} exists"
            if strict:
                raise ConfigError(ASSIGN if opts.assign is not None else SUBSCRIBE, msg)
            log.warning("%s", msg)
        for p in chosen:
            found[(topic, partition_key(p.broker_id, p.partition_id))] = p
        if strict and opts.assign is not None:
            have = {partition_key(p.broker_id, p.partition_id) for p in chosen}
            pids = {str(p.partition_id) for p in chosen}
            for key in opts.assign.get(topic, ()):
                b, pid = key.split(":")
                if (b == "*" and pid not in pids) or (b != "*" and key not in have):
                    raise ConfigError(
                        ASSIGN, f"partition {key} of topic {topic!r} does not exist or is not subscribable"
                    )
    return found


def bounds(consumer: Any, partition: Partition, opts: ReadOptions) -> tuple[int, int]:
    """(earliest, latest) offsets of ``partition``: the broker's min and max index offsets now.

    The broker reports no min offset, but clamps a bootstrap offset into [min, max]: attaching at
    0 answers with ``current`` = min (and ``max``). The driver's private group has no other use for
    its position, so moving it is harmless.
    """

    def query() -> tuple[int, int]:
        pos = consumer.attach(partition, 0)
        return int(pos.current), int(pos.max)

    return with_retries(
        f"reading the offsets of {partition} from master {opts.master}",
        query,
        opts.num_retries,
        opts.retry_interval_ms,
    )


def all_bounds(consumer: Any, parts: dict[TP, Partition], opts: ReadOptions) -> dict[TP, tuple[int, int]]:
    return {tp: bounds(consumer, p, opts) for tp, p in sorted(parts.items())}


def close_quietly(client: Any, what: str) -> None:
    """Close a client; a failure here must not hide the real outcome, so it is only logged."""
    if client is None:
        return
    try:
        client.close()
    except Exception as exc:  # noqa: BLE001 - closing is best effort by design
        log.warning("closing %s failed: %s", what, exc)


def describe(topic: str, key: str, start: int, end: int) -> str:
    return f"topic {topic!r} partition {key} offsets [{start}, {end})"
