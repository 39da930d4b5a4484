"""asyncio twins of the public clients: ``await producer.send(...)``, ``async for msg in consumer``.

Imported lazily (``import tubemq.aio`` loads no client code); type checkers see the real classes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .admin.aio import AdminClient
    from .consumer.aio import Consumer
    from .consumer.bound.aio import AsyncBoundConsumer as BoundConsumer
    from .producer.aio import Producer

_LAZY = {
    "Producer": ("tubemq.producer.aio", "Producer"),
    "Consumer": ("tubemq.consumer.aio", "Consumer"),
    "BoundConsumer": ("tubemq.consumer.bound.aio", "AsyncBoundConsumer"),
    "AdminClient": ("tubemq.admin.aio", "AdminClient"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'tubemq.aio' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


__all__ = ["AdminClient", "BoundConsumer", "Consumer", "Producer"]
