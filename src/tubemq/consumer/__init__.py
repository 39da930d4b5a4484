"""The consumer engines and their asyncio classes: server-side balancing (:mod:`.core`, :mod:`.engine`,
:mod:`.aio`) and client-side balance / bound offsets (:mod:`.bound`). The blocking facades
(``tubemq.Consumer``, ``tubemq.BoundConsumer``) live in :mod:`tubemq.sync`, above the bridge.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..config import ConsumerConfig
from ..types import Batch
from .bound import PartitionPosition
from .partitions import PartitionState as _PartitionState

__all__ = ["Batch", "ConsumerConfig", "PartitionPosition"]


def __getattr__(name: str) -> Any:
    """``tubemq.consumer.PartitionState`` (internal, was exported by mistake): still there for one
    release, with a DeprecationWarning."""
    if name == "PartitionState":
        warnings.warn("tubemq.consumer.PartitionState is internal and leaves the public API in the next "
                      "release; import it from tubemq.consumer.partitions if you must", DeprecationWarning,
                      stacklevel=2)
        return _PartitionState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
