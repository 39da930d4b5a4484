"""Client-side balance and bound consumption, laid out like the producer: :mod:`.session` (the master
session and shared types), :mod:`.core` (``BoundCore``, the engine), :mod:`.aio` (``AsyncBoundConsumer``
= ``tubemq.aio.BoundConsumer``) and :mod:`.sync` (``BoundConsumer``, the blocking facade); the last two
only forward to the engine.
"""

from __future__ import annotations

from .aio import AsyncBoundConsumer
from .session import PartitionPosition
from .sync import BoundConsumer

__all__ = ["AsyncBoundConsumer", "BoundConsumer", "PartitionPosition"]
