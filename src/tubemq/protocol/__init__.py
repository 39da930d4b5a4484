"""Protocol layer: generated protobuf modules (from ``proto/``), constants and envelope helpers.

Regenerate the modules with ``python scripts/gen_proto.py`` (grpcio-tools); ``tests/test_proto_fresh.py``
fails when they are stale.
"""

from __future__ import annotations

from . import BrokerService_pb2 as broker_pb
from . import MasterService_pb2 as master_pb
from . import RPC_pb2 as rpc_pb
from .constants import ErrorCode, EventStatus, EventType, Method, ResponseStatus, ServiceType

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
