"""The consumer engines and their asyncio classes: server-side balancing (:mod:`.core`, :mod:`.engine`,
:mod:`.aio`) and client-side balance / bound offsets (:mod:`.bound`). The blocking facades
(``tubemq.Consumer``, ``tubemq.BoundConsumer``) live in :mod:`tubemq.sync`, above the bridge.
"""

from __future__ import annotations

from ..config import ConsumerConfig
from ..types import Batch
from .bound import PartitionPosition

__all__ = ["Batch", "ConsumerConfig", "PartitionPosition"]

