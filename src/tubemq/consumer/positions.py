"""Moving an assigned partition's consume position: ``seek``, ``seek_to_beginning``, ``seek_to_end``.

TubeMQ keeps a group's offsets at the broker, and the one request a consumer has to move one is the
partition's registration (``RegisterRequestC2B`` opType 31): with ``currOffset`` the broker moves the
group's offset there, clamped into the partition's [min, max]; with ``readStatus`` 2 it moves it to max;
either way it clears the partition's in-flight fetch (docs/PROTOCOL.md §5.2.6). So a seek here is a
re-registration of a partition this consumer already holds, and unlike Kafka's local seek it is stored
at once: it is the group's committed offset from then on (docs/guide/consumer-offsets.md).

Why a module of its own: the seek has to own the partition while it talks to the broker (no fetch of it
may run meanwhile), which takes the partition table, the broker client and the fetch pipeline's batch
bookkeeping together; keeping it apart keeps :mod:`.core` about the consumer's lifecycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from ..codec import Partition, parse_partition
from ..errors import BadRequestError, DecodeError, TubeMQTimeoutError, error_for_code
from ..protocol.constants import READ_STATUS_FROM_MAX_ALWAYS, READ_STATUS_NORMAL, ErrorCode
from .brokers import BrokerClient
from .partitions import PartitionSlot, PartitionState, PartitionTable

log = logging.getLogger("tubemq.consumer.positions")

__all__ = ["PartitionRef", "owned_slot", "partition_key", "partition_keys", "reposition"]

PartitionRef = Partition | str
#: register answers meaning the broker no longer holds the partition for us
_LOST_CODES = frozenset({ErrorCode.HB_NO_NODE, ErrorCode.DUPLICATE_PARTITION, ErrorCode.CERTIFICATE_FAILURE,
                         ErrorCode.PARTITION_OCCUPIED})
#: how often a seek looks whether the partition's running fetch answered
_SETTLE_POLL = 0.005


def partition_key(ref: PartitionRef) -> str:
    """``brokerId:topic:partitionId`` for a Partition, a partition key or a partition string."""
    if isinstance(ref, Partition):
        return ref.key
    if not isinstance(ref, str):
        raise TypeError(f"a partition is a Partition or a partition key string, got {type(ref).__name__}")
    if ref.count(":") == 2 and "#" not in ref:
        return ref
    try:
        return parse_partition(ref).key
    except DecodeError as exc:
        raise BadRequestError(ErrorCode.BAD_REQUEST, f"not a partition: {ref!r} ({exc})") from exc


def partition_keys(refs: Iterable[PartitionRef] | PartitionRef) -> list[str]:
    """Keys of ``refs`` (one partition or an iterable of them), in order, without duplicates."""
    if isinstance(refs, (Partition, str)):
        refs = [refs]
    return list(dict.fromkeys(partition_key(r) for r in refs))


def owned_slot(table: PartitionTable, key: str) -> PartitionSlot:
    """The slot of an assigned partition; BadRequestError (like Kafka's IllegalStateException) if not."""
    slot = table.get(key)
    if slot is None or not slot.registered or slot.revoke_requested:
        owned = ", ".join(sorted(s.key for s in table.registered())) or "none"
        raise BadRequestError(ErrorCode.BAD_REQUEST,
                              f"partition {key} is not assigned to this consumer (assigned: {owned})")
    return slot


async def _take(table: PartitionTable, slot: PartitionSlot, deadline: float) -> int:
    """Own ``slot`` for the seek (OWNED -> FETCHING): an unconfirmed batch of it is rolled back and cut
    short, a running fetch is waited for. Returns the booking to finish with."""
    while True:
        if not slot.registered or slot.revoke_requested:
            raise BadRequestError(ErrorCode.BAD_REQUEST, f"partition {slot.key} was revoked during the seek")
        if slot.state is PartitionState.IN_FLIGHT:
            batch = slot.batch
            table.confirm(slot, slot.booking, False)  # rolled back: its confirm() now answers False
            if batch is not None and (batch.held or not batch.delivered):
                # not shown to the application yet (buffered, or polled ahead for an iterator): the
                # messages of the old position must not come out after the seek
                batch.messages.clear()
        if table.acquire_slot(slot):
            return slot.booking
        if time.monotonic() > deadline:
            raise TubeMQTimeoutError(f"seek on {slot.key}: the partition's running fetch did not answer in time")
        await asyncio.sleep(_SETTLE_POLL)


async def reposition(table: PartitionTable, brokers: BrokerClient, slot: PartitionSlot, *,
                     offset: int | None, to_end: bool, timeout: float) -> int:
    """Move ``slot``'s group offset (``offset``, or the max with ``to_end``); returns where it now is.

    The partition is fetched again from there at once. The broker clamps ``offset`` into [min, max].
    """
    booking = await _take(table, slot, time.monotonic() + timeout)
    slot.unresolved = None  # the register drops the broker's pending commit: nothing tells that offset
    read_status = READ_STATUS_FROM_MAX_ALWAYS if to_end else READ_STATUS_NORMAL
    try:
        out = await brokers.register(slot, read_status, None if to_end else offset)
    except BaseException:
        # unknown outcome: the partition stays ours; its next fetch says where it stands
        table.fetch_done(slot, booking, consumed=False)
        raise
    if not out.success:
        table.fetch_done(slot, booking, consumed=False)
        if out.code in _LOST_CODES and slot.registered:
            table.drop(slot, f"seek: register [{out.code}] {out.message}")
        raise error_for_code(out.code, f"seek on {slot.key}: {out.message}")
    slot.curr_offset = out.curr_offset
    if out.max_offset >= 0:
        slot.max_offset = out.max_offset
    table.fetch_done(slot, booking, consumed=False)  # OWNED again, fetchable at once
    log.info("partition %s: position moved to %d (max %d)", slot.key, out.curr_offset, out.max_offset)
    return out.curr_offset
