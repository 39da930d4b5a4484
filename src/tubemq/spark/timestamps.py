"""Offsets of a time for the Spark source: ``startingTimestamp``, ``startingOffsetsByTimestamp``,
``endingTimestamp``, ``endingOffsetsByTimestamp``.

The brokers know when each index entry was appended; the master's web API (``adminUrl``) asks them
(:meth:`tubemq.admin.AdminClient.offsets_for_times`) for the first entry at or after a time, per
partition. Like Kafka, a starting time after a partition's last message is an error unless
``startingOffsetsByTimestampStrategy=latest``; an ending time after it means the partition's latest
offset. The look-up runs on the driver at planning time only.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import TubeMQError
from ._compat import TubeMQSparkError
from .offsets import Flat, TimestampSpec, parse_partition_key
from .options import (
    ENDING_OFFSETS_BY_TIMESTAMP,
    ENDING_TIMESTAMP,
    STARTING_BY_TIMESTAMP_STRATEGY,
    STARTING_OFFSETS_BY_TIMESTAMP,
    STARTING_TIMESTAMP,
    ReadOptions,
)

TP = tuple[str, str]


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
    out: Flat = {}
    for topic, by_ts in sorted(wanted.items()):
        for ts, keys in sorted(by_ts.items()):
            try:
                found = {f"{t.broker_id}:{t.partition_id}": t.offset for t in admin.offsets_for_times(topic, ts)}
            except TubeMQError as exc:
                raise TubeMQSparkError(f"{option}: cannot look up offsets of {topic!r} at {ts} through "
                                       f"{admin.url}: {exc}") from exc
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
    return out
