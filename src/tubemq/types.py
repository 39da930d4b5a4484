"""The public data types, in one home: what a send returns, what a consumer hands out.

The codec builds ``Message``, ``Partition`` and ``BrokerInfo`` (compiled types in the Cython codec,
plain classes in its pure-Python twin); they are re-exported here so that user code, type hints and
the docs name one module. ``tubemq`` re-exports every name below.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# --- codec types --------------------------------------------------------------------------------------
# Built by the wire codec, which sits below everything else and so defines them: compiled in
# tubemq._codec (Message a cdef class with a freelist; Partition and BrokerInfo the twin's NamedTuples,
# one class per name in the process) or in the pure-Python twin tubemq._codec_py (Message a __slots__
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
from .consumer.fetch import Batch  # noqa: E402  (moves here with the consumer split)

__all__ = ["Batch", "BrokerInfo", "Message", "Partition", "SendResult"]
