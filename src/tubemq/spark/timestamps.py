"""Offsets of a time for the Spark source: ``startingTimestamp``, ``startingOffsetsByTimestamp``,
``endingTimestamp``, ``endingOffsetsByTimestamp``.

The brokers know when each index entry was appended; the master's web API (``adminUrl``) asks them
(:meth:`tubemq.admin.AdminClient.offsets_for_times`) for the first entry at or after a time, per
partition. Like Kafka, a starting time after a partition's last message is an error unless
``startingOffsetsByTimestampStrategy=latest``; an ending time after it means the partition's latest
offset. The look-up runs on the driver at planning time only.

A real TubeMQ broker has no such look-up (it answers "Unsupported method": a
:class:`~tubemq.errors.NoTimeLookupError`). On exactly that error the offsets come instead from a
search over each partition's messages by their producer-given ``msgTime``
(:meth:`tubemq.BoundConsumer.offset_for_time`, through the read options' master): one minute
precision (a time means the first message of its minute), and producers must set ``msg_time``. The
search moves its group's position on every partition it probes, and a partition is held by one
consumer of a group at a time, so it runs in a planning group of its own
(``<groupIdPrefix>-timesearch-<random>``), never one a driver or task consumer is registered in.
UNCERTAIN: this fallback was tested against the embedded server answering as a real broker, not
against a real broker.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import NoTimeLookupError, TubeMQError
from ._client import close_quietly, new_group, open_consumer, with_retries
from ._compat import TubeMQSparkError
from .offsets import Flat, TimestampSpec, parse_partition_key, partition_key
from .options import (
    ENDING_OFFSETS_BY_TIMESTAMP,
    ENDING_TIMESTAMP,
    STARTING_BY_TIMESTAMP_STRATEGY,
    STARTING_OFFSETS_BY_TIMESTAMP,
    STARTING_TIMESTAMP,
    ReadOptions,
)

TP = tuple[str, str]
log = logging.getLogger("tubemq.spark.timestamps")


def _wanted(spec: TimestampSpec, topic: str, key: str) -> int | None:
    if isinstance(spec, int):
        return spec
    parts = spec.get(topic)
    if parts is None:
        return None
    _b, p = parse_partition_key(key)
    return parts.get(key, parts.get(f"*:{p}"))


def resolve(
    opts: ReadOptions, spec: TimestampSpec, limits: Mapping[TP, tuple[int, int]], *, ending: bool
) -> Flat:
    """{(topic, "b:p"): offset} for the partitions ``spec`` names (all of them for one timestamp)."""
    from ..admin import AdminClient

    if opts.admin_url is None:  # parse_read_options requires it with any timestamp option
        raise TubeMQSparkError("timestamp options need adminUrl")
    option = (ENDING_TIMESTAMP if isinstance(spec, int) else ENDING_OFFSETS_BY_TIMESTAMP) if ending else (
        STARTING_TIMESTAMP if isinstance(spec, int) else STARTING_OFFSETS_BY_TIMESTAMP)
    wanted: dict[str, dict[int, list[str]]] = {}  # topic -> timestamp -> partition keys
    for topic, key in limits:
        ts = _wanted(spec, topic, key)
        if ts is not None:
            wanted.setdefault(topic, {}).setdefault(ts, []).append(key)
    admin = AdminClient(opts.admin_url, timeout=max(opts.poll_timeout_ms / 1000.0, 5.0))
    search = _MsgTimeSearch(opts, option, sorted(wanted))
    out: Flat = {}
    try:
        for topic, by_ts in sorted(wanted.items()):
            for ts, keys in sorted(by_ts.items()):
                found = _lookup(admin, search, option, topic, ts, keys)
                for key in keys:
                    lo, hi = limits[(topic, key)]
                    offset = found.get(key)
                    if offset is None:
                        raise TubeMQSparkError(f"{option}: broker answered no offset for {topic}/{key} at {ts}")
                    offset = min(max(offset, lo), hi)
                    if offset >= hi and not ending and opts.timestamp_strategy == "error":
                        raise TubeMQSparkError(
                            f"{option}: {topic}/{key} has no message at or after {ts} (latest offset {hi}); "
                            f"set {STARTING_BY_TIMESTAMP_STRATEGY}=latest to start there instead"
                        )
                    out[(topic, key)] = offset
    finally:
        search.close()
    return out


def _lookup(admin: Any, search: _MsgTimeSearch, option: str, topic: str, ts: int, keys: list[str]) -> dict[str, int]:
    """{"b:p": offset} of ``topic`` at ``ts``: the brokers' look-up, else (a real broker) the msgTime search."""
    if not search.active:
        try:
            return {f"{t.broker_id}:{t.partition_id}": t.offset for t in admin.offsets_for_times(topic, ts)}
        except NoTimeLookupError as exc:
            log.info("%s: %s; searching the messages' msgTime instead (one minute precision)", option, exc.message)
            search.active = True
        except TubeMQError as exc:
            raise TubeMQSparkError(f"{option}: cannot look up offsets of {topic!r} at {ts} through "
                                   f"{admin.url}: {exc}") from exc
    return search.offsets(topic, ts, keys)


class _MsgTimeSearch:
    """The fallback for brokers without a time look-up: one bound consumer of a private planning group,
    opened on first use, searching each partition's ``msgTime`` (see the module docstring)."""

    def __init__(self, opts: ReadOptions, option: str, topics: list[str]) -> None:
        self.opts, self.option, self.topics = opts, option, topics
        self.active = False
        self._consumer: Any = None
        self._parts: dict[tuple[str, str], Any] = {}

    def offsets(self, topic: str, ts: int, keys: list[str]) -> dict[str, int]:
        opts = self.opts
        if self._consumer is None:
            self._consumer = open_consumer(opts, new_group(opts.group_prefix, "timesearch"), self.topics)
            for t in self.topics:
                parts = with_retries(f"listing partitions of topic {t!r} on master {opts.master}",
                                     lambda t=t: list(self._consumer.partitions(t)),  # type: ignore[misc]
                                     opts.num_retries, opts.retry_interval_ms)
                self._parts.update(((t, partition_key(p.broker_id, p.partition_id)), p) for p in parts)
        timeout = max(opts.poll_timeout_ms / 1000.0, 5.0)
        out: dict[str, int] = {}
        for key in keys:
            part = self._parts.get((topic, key))
            if part is None:
                continue  # reported by the caller as no offset
            out[key] = with_retries(
                f"{self.option}: searching the msgTime of {topic}/{key} for {ts} on master {opts.master}",
                lambda p=part: int(self._consumer.offset_for_time(p, ts, timeout=timeout)),  # type: ignore[misc]
                opts.num_retries, opts.retry_interval_ms)
        return out

    def close(self) -> None:
        close_quietly(self._consumer, "the time-search consumer")
        self._consumer = None
