"""TubeMQ consumers: ``Consumer`` (server-side balancing), ``BoundConsumer`` (client-side balance and
bound offsets, the base of the Spark source), their asyncio twins in :mod:`tubemq.aio`, and the
``Batch`` / ``PartitionState`` types they expose.
"""

from __future__ import annotations

import importlib
from typing import Any

from .config import ConsumerConfig
from .fetch import Batch
from .rebalance import PartitionState
from .sync import Consumer

_LAZY = {"BoundConsumer": "tubemq.consumer.bound", "PartitionPosition": "tubemq.consumer.bound"}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tubemq.consumer' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


__all__ = ["Batch", "BoundConsumer", "Consumer", "ConsumerConfig", "PartitionPosition", "PartitionState"]
