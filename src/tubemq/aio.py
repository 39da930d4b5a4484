"""asyncio twins of the public clients: ``await producer.send(...)``, ``async for msg in consumer``."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Producer": "tubemq.producer.aio",
    "Consumer": "tubemq.consumer.aio",
    "BoundConsumer": "tubemq.consumer.aio",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tubemq.aio' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


__all__ = list(_LAZY)
