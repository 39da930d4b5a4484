"""Build protobuf messages (tubemq.protocol.*_pb) from the JSON field dicts of the golden vectors."""

from __future__ import annotations

from typing import Any

from _pbcompat import is_repeated
from google.protobuf.message import Message as PbMessage

from tubemq.protocol import broker_pb, master_pb, rpc_pb

#: The one generator expression the vectors use for large byte fields.
GENERATORS = {"bytes(i % 251 for i in range(20000))": lambda: bytes(i % 251 for i in range(20000))}


def pb_class(name: str) -> type[PbMessage]:
    """``RegisterRequestP2M`` or ``ClientMaster.RegisterRequestP2M`` -> the generated class."""
    short = name.rsplit(".", 1)[-1]
    for module in (broker_pb, master_pb, rpc_pb):
        cls = getattr(module, short, None)
        if cls is not None:
            return cls  # type: ignore[no-any-return]
    raise KeyError(name)


def _bytes(value: Any) -> bytes:
    if isinstance(value, dict):
        if "hex" in value:
            return bytes.fromhex(value["hex"])
        return GENERATORS[value["generator"]]()
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def fill(msg: PbMessage, fields: dict[str, Any]) -> PbMessage:
    """Set ``fields`` on ``msg``; None means "not set". Nested dicts become sub-messages."""
    desc = msg.DESCRIPTOR
    for key, value in fields.items():
        fd = desc.fields_by_name.get(key)
        if fd is None:
            raise KeyError(f"{desc.name} has no field {key!r}")
        if value is None:
            continue
        repeated = is_repeated(fd)
        if fd.type == fd.TYPE_MESSAGE:
            if repeated:
                for item in value:
                    fill(getattr(msg, key).add(), item)
            else:
                getattr(msg, key).SetInParent()
                fill(getattr(msg, key), value)
        elif fd.type == fd.TYPE_BYTES:
            if repeated:
                getattr(msg, key).extend(_bytes(v) for v in value)
            else:
                setattr(msg, key, _bytes(value))
        elif repeated:
            getattr(msg, key).extend(value)
        else:
            setattr(msg, key, value)
    return msg


def build(name: str, fields: dict[str, Any]) -> PbMessage:
    return fill(pb_class(name)(), fields)
