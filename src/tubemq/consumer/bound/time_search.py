"""The offset of a time on any broker, from the messages' own time: a binary search with bound reads.

A real TubeMQ broker has no time lookup (the embedded server's ``admin_query_offset_by_time`` is its
own). What a message can carry is the time its producer gave it: ``msgTime`` (``$msgTime$``, minute
precision, ``yyyyMMddHHmm``). Reading the first message at or after an index offset tells that time,
so a binary search over the partition's index entries finds the first offset whose message is of the
minute of ``when`` or later, in about log2(entries) reads of one batch each.

Precision and limits: one minute (messages of ``when``'s minute that came before it are included,
never one after it is left out); the times must not go backwards along the partition (one producer
clock, or clocks in step); messages without a ``msgTime`` make the search fail with ``ConfigError``.
The search reads through the bound consumer's own group, whose committed offset it moves.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ...errors import ConfigError
from ...protocol.constants import INDEX_ENTRY_SIZE

__all__ = ["minute_of", "offset_for_time"]

#: bound on the reads of one search (2**62 index bytes need fewer)
_MAX_PROBES = 64


def minute_of(msg_time: str | None) -> int | None:
    """Epoch milliseconds of a ``yyyyMMddHHmm`` message time (local time), None when absent or malformed."""
    if not msg_time or len(msg_time) != 12 or not msg_time.isascii() or not msg_time.isdigit():
        return None
    try:
        return int(_dt.datetime.strptime(msg_time, "%Y%m%d%H%M").timestamp() * 1000)
    except ValueError:
        return None


async def offset_for_time(consumer: Any, partition: Any, when_ms: int, *, timeout: float = 5.0) -> int:
    """The first index offset of ``partition`` whose next message has a ``msgTime`` minute at or after
    ``when_ms``'s minute; when there is none, an offset after the partition's last message (nothing of
    the partition is stored at or after it). ``consumer`` is an attached
    ``tubemq.aio.BoundConsumer``; its group's position ends on the answer."""
    target = when_ms // 60_000 * 60_000
    first = await consumer.attach(partition, 0)  # clamped by the broker to its min
    lo, hi = first.current // INDEX_ENTRY_SIZE, max(first.current, first.max) // INDEX_ENTRY_SIZE
    for _ in range(_MAX_PROBES):
        if lo >= hi:
            break
        mid = (lo + hi) // 2
        stamp = await _first_time(consumer, partition, mid * INDEX_ENTRY_SIZE, timeout)
        if stamp is None or stamp >= target:
            hi = mid
        else:
            lo = mid + 1
    offset = lo * INDEX_ENTRY_SIZE
    await consumer.attach(partition, offset)
    return offset


async def _first_time(consumer: Any, partition: Any, offset: int, timeout: float) -> int | None:
    """The msgTime minute of the first message at or after ``offset`` (None: no message there)."""
    await consumer.attach(partition, offset)
    batch = await consumer.fetch(partition, timeout)
    if batch is None or not batch.messages:
        return None
    msg = batch.messages[0]
    stamp = minute_of(msg.msg_time)
    if stamp is None:
        raise ConfigError("msg_time", f"message {msg.message_id} of {partition} has no msgTime "
                          f"({msg.msg_time!r}): a time search needs producers that set msg_time")
    return stamp
