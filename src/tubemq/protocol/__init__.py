"""Protocol layer: generated protobuf modules (from ``proto/``), constants and envelope helpers.

Regenerate the modules with ``python scripts/gen_proto.py`` (grpcio-tools); ``tests/test_proto_fresh.py``
fails when they are stale. The protobuf modules load on first use (``from tubemq.protocol import
broker_pb``), so ``tubemq.protocol.constants`` and everything that only needs numbers stay free of
protobuf's import cost.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .constants import ErrorCode, EventStatus, EventType, Method, ResponseStatus, ServiceType

if TYPE_CHECKING:
    from . import BrokerService_pb2 as broker_pb
    from . import MasterService_pb2 as master_pb
    from . import RPC_pb2 as rpc_pb

_LAZY = {"broker_pb": ".BrokerService_pb2", "master_pb": ".MasterService_pb2", "rpc_pb": ".RPC_pb2"}


def __getattr__(name: str) -> Any:
    """Import a protobuf module the first time it is asked for, then keep it as a plain attribute."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(target, __name__)
    globals()[name] = module
    return module


__all__ = [
    "ErrorCode",
    "EventStatus",
    "EventType",
    "Method",
    "ResponseStatus",
    "ServiceType",
    "broker_pb",
    "master_pb",
    "rpc_pb",
]
