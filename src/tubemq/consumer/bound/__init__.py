"""Client-side balance and bound consumption, laid out like the producer: :mod:`.core` (master session
and shared types), :mod:`.aio` (``AsyncBoundConsumer`` = ``tubemq.aio.BoundConsumer``, the one
implementation) and :mod:`.sync` (``BoundConsumer``, its blocking facade).
"""

from __future__ import annotations

from .aio import AsyncBoundConsumer
from .core import PartitionPosition
from .sync import BoundConsumer

__all__ = ["AsyncBoundConsumer", "BoundConsumer", "PartitionPosition"]
