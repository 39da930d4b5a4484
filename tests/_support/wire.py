"""The protobuf classes of every RPC by method id, written out here (not taken from the library) so the
tests decode what the servers and clients send with a table of their own."""

from __future__ import annotations

from typing import Any

from tubemq.protocol import broker_pb, master_pb

#: method -> (request class, response class)
MESSAGES: dict[int, tuple[Any, Any]] = {
    1: (master_pb.RegisterRequestP2M, master_pb.RegisterResponseM2P),
    2: (master_pb.HeartRequestP2M, master_pb.HeartResponseM2P),
    3: (master_pb.CloseRequestP2M, master_pb.CloseResponseM2P),
    4: (master_pb.RegisterRequestC2M, master_pb.RegisterResponseM2C),
    5: (master_pb.HeartRequestC2M, master_pb.HeartResponseM2C),
    6: (master_pb.CloseRequestC2M, master_pb.CloseResponseM2C),
    13: (broker_pb.SendMessageRequestP2B, broker_pb.SendMessageResponseB2P),
    15: (broker_pb.RegisterRequestC2B, broker_pb.RegisterResponseB2C),
    16: (broker_pb.HeartBeatRequestC2B, broker_pb.HeartBeatResponseB2C),
    17: (broker_pb.GetMessageRequestC2B, broker_pb.GetMessageResponseB2C),
    18: (broker_pb.CommitOffsetRequestC2B, broker_pb.CommitOffsetResponseB2C),
    20: (master_pb.RegisterRequestC2MV2, master_pb.RegisterResponseM2CV2),
    21: (master_pb.HeartRequestC2MV2, master_pb.HeartResponseM2CV2),
    22: (master_pb.GetPartMetaRequestC2M, master_pb.GetPartMetaResponseM2C),
}


def response_class(method: int) -> Any:
    """The response message class of ``method``."""
    return MESSAGES[method][1]
