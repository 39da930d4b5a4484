"""The public data types, in one home: what a send returns, what a consumer hands out.

The codec builds ``Message``, ``Partition`` and ``BrokerInfo`` (compiled types in the Cython codec,
plain classes in its pure-Python twin); they are re-exported here so that user code, type hints and
the docs name one module. ``tubemq`` re-exports every name below.
"""

from __future__ import annotations

from .codec import BrokerInfo, Message, Partition

# --- producer types -----------------------------------------------------------------------------------
from .producer.core import SendResult  # noqa: E402  (moves here with the producer split)

# --- consumer types -----------------------------------------------------------------------------------
from .consumer.fetch import Batch  # noqa: E402  (moves here with the consumer split)

__all__ = ["Batch", "BrokerInfo", "Message", "Partition", "SendResult"]
