"""Net layer: asyncio connections (serial matching, timeouts, back-pressure), pool, master fail-over."""

from __future__ import annotations

from .connection import Connection, split_address, unwrap_response
from .invoker import MasterInvoker, normalize_master_list
from .loop import LoopThread
from .pool import AddressHealth, ConnectionPool, PoolSettings

__all__ = [
    "AddressHealth",
    "Connection",
    "ConnectionPool",
    "LoopThread",
    "MasterInvoker",
    "normalize_master_list",
    "PoolSettings",
    "split_address",
    "unwrap_response",
]
