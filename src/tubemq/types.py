"""The public data types, in one home: what a send returns, what a consumer hands out.

The codec builds ``Message``, ``Partition`` and ``BrokerInfo`` (compiled types in the Cython codec,
plain classes in its pure-Python twin); they are re-exported here so that user code, type hints and
the docs name one module. ``tubemq`` re-exports every name below.
"""

from __future__ import annotations

from typing import Any, NamedTuple

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
from .consumer.fetch import Batch  # noqa: E402  (moves here with the consumer split)

__all__ = ["Batch", "BrokerInfo", "Message", "Partition", "SendResult"]
