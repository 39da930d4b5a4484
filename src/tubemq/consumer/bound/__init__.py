"""Client-side balance and bound consumption, laid out like the producer: :mod:`.session` (the master
session and shared types), :mod:`.core` (``BoundCore``, the engine), :mod:`.aio` (``AsyncBoundConsumer``
= ``tubemq.aio.BoundConsumer``, which only forwards to the engine). The blocking facade is :class:`tubemq.sync.bound.BoundConsumer`.
"""

from __future__ import annotations

from .aio import AsyncBoundConsumer
from .session import PartitionPosition

__all__ = ["AsyncBoundConsumer", "PartitionPosition"]
