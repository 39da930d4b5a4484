"""The public data types, in one home: what a send returns, what a consumer hands out.

The codec builds ``Message``, ``Partition`` and ``BrokerInfo`` (compiled types in the Cython codec,
plain classes in its pure-Python twin); they are re-exported here so that user code, type hints and
the docs name one module. ``tubemq`` re-exports every name below.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, overload

# --- codec types --------------------------------------------------------------------------------------
# Built by the wire codec, which sits below everything else and so defines them: compiled in
# tubemq.codec.compiled (Message a cdef class with a freelist; Partition and BrokerInfo the twin's NamedTuples,
# one class per name in the process) or in the pure-Python twin tubemq.codec.python (Message a __slots__
# class). Both have the same names, fields, defaults and methods; tests/codec/test_types.py holds them
# to that.
#
# Message(topic, data, attributes=None, stream_id=None, msg_time=None, message_id=0, flag=0,
#         partition=None, offset=-1)
#     A consumed (or to-be-sent) message. ``data`` the body bytes (``value`` the same), ``attributes``
#     the ``k=v`` attributes as a dict (``{}`` when none), ``stream_id`` / ``msg_time`` the system
#     attributes ``$msgType$`` / ``$msgTime$``, ``message_id`` the broker's id, ``flag`` the wire flag,
#     ``partition`` the Partition it was read from, ``offset`` its position in that partition (the
#     fetch's start offset + 28 x its index: strictly increasing). ``inlongmsg()`` decodes ``data`` as
#     an InLong container. Compared field by field; not hashable.
# Partition(broker_id, host, port, topic, partition_id)
#     A topic partition on a broker (a NamedTuple). ``key`` is ``"broker_id:topic:partition_id"``,
#     ``address`` ``"host:port"``, ``str()`` the wire partition string ``"bid:host:port#topic:pid"``.
# BrokerInfo(broker_id, host, port)
#     One broker (a NamedTuple). ``address`` is ``"host:port"``, ``str()`` ``"bid:host:port"``.
from .codec import BrokerInfo, Message, Partition

# --- producer types -----------------------------------------------------------------------------------


class SendResult(NamedTuple):
    """What the broker stored: where (topic, partition) and under which id/offset/time.

    ``partition`` is a :class:`Partition` (broker_id, host, port, topic, partition_id); ``key`` is the
    routing key the message was sent with (None without one).
    """

    topic: str
    partition: Partition
    message_id: int
    append_time: int
    append_offset: int
    key: Any = None

    @property
    def partition_id(self) -> int:
        return self.partition.partition_id

    @property
    def broker_id(self) -> int:
        return self.partition.broker_id


# --- consumer types -----------------------------------------------------------------------------------


class Batch(Sequence[Message]):
    """The messages of one getMessage answer for one partition (a read-only sequence of them).

    ``start_offset`` is the broker offset the read started at, ``max_offset`` the partition's max
    offset at that time; ``next_offset`` is the group's committed offset after the confirm: from the
    commit RPC's answer, or (``confirm_in_local``, where the commit rides on the partition's next
    fetch) from that fetch's answer, so it is −1 until the partition's next batch is fetched (and stays
    −1 if a seek, a revoke or a lost answer came first). Iterating yields :class:`~tubemq.Message`.

    These are the exact positions: a consumed message has no offset of its own (``offset`` None),
    because the broker's answer carries none and a partition's index entries interleave with its
    store siblings'. ``seek(batch.partition, batch.start_offset)`` reads this batch again;
    ``seek(batch.partition, batch.next_offset)`` goes on right after it. The protocol has no way to
    seek to one message inside a batch.
    """

    __slots__ = (
        "partition",
        "messages",
        "start_offset",
        "max_offset",
        "next_offset",
        "fetched_at",
        "requested_at",
        "delivered",
        "held",
        "confirmed",
        "release_delay",
        "_slot",
        "_booking",
    )

    def __init__(
        self,
        partition: Partition,
        messages: list[Message],
        start_offset: int,
        max_offset: int,
        *,
        slot: Any = None,
        booking: int = 0,
        release_delay: float = 0.0,
    ) -> None:
        self.partition = partition
        self.messages = messages
        self.start_offset = start_offset
        self.max_offset = max_offset
        self.next_offset = -1
        self.fetched_at = time.monotonic()
        #: when the getMessage request that fetched it was written (monotonic s): tracing spans start there
        self.requested_at = self.fetched_at
        self.delivered = False
        #: polled ahead for a blocking iterator and not yet taken by it: exempt from the confirm timeout
        self.held = False
        self.confirmed = False
        self.release_delay = release_delay
        self._slot = slot
        self._booking = booking

    @property
    def topic(self) -> str:
        return self.partition.topic

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        """``batch[0]``, ``batch[-1]``, ``batch[2:5]`` (a list): a batch reads like the list it wraps."""
        return self.messages[index]

    def __bool__(self) -> bool:
        return True  # an (unusual) empty batch is still a batch to confirm

    def __repr__(self) -> str:
        return (
            f"Batch(partition={self.partition.key!r}, messages={len(self.messages)}, "
            f"start_offset={self.start_offset}, max_offset={self.max_offset}, confirmed={self.confirmed})"
        )

__all__ = ["Batch", "BrokerInfo", "Message", "Partition", "SendResult"]
