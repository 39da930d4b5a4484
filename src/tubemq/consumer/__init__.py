"""TubeMQ consumers: ``Consumer`` (server-side balancing), ``BoundConsumer`` (client-side balance and
bound offsets, the base of the Spark source), their asyncio twins in :mod:`tubemq.aio`, and the
``Batch`` type they hand out (defined in :mod:`tubemq.types`).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..config import ConsumerConfig
from ..types import Batch
from .bound import BoundConsumer, PartitionPosition
from .partitions import PartitionState as _PartitionState
from .sync import Consumer

__all__ = ["Batch", "BoundConsumer", "Consumer", "ConsumerConfig", "PartitionPosition"]


def __getattr__(name: str) -> Any:
    """``tubemq.consumer.PartitionState`` (internal, was exported by mistake): still there for one
    release, with a DeprecationWarning."""
    if name == "PartitionState":
        warnings.warn("tubemq.consumer.PartitionState is internal and leaves the public API in the next "
                      "release; import it from tubemq.consumer.partitions if you must", DeprecationWarning,
                      stacklevel=2)
        return _PartitionState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
