"""TubeMQ consumers: ``Consumer`` (server-side balancing), ``BoundConsumer`` (client-side balance and
bound offsets, the base of the Spark source), their asyncio twins in :mod:`tubemq.aio`, and the
``Batch`` / ``PartitionState`` types they expose.
"""

from __future__ import annotations

from ..config import ConsumerConfig
from .bound import BoundConsumer, PartitionPosition
from .fetch import Batch
from .rebalance import PartitionState
from .sync import Consumer

__all__ = ["Batch", "BoundConsumer", "Consumer", "ConsumerConfig", "PartitionPosition", "PartitionState"]
