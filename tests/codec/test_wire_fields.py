"""Field numbers are named once (protocol/wire_fields.py), match the .proto files, and _wire.pxi follows them."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
from google.protobuf.descriptor import FieldDescriptor

from tubemq.protocol import broker_pb, constants, rpc_pb, wire_fields

ROOT = pathlib.Path(__file__).resolve().parents[2]
_LEN_TYPES = {FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE}


@pytest.mark.parametrize("name", sorted(wire_fields.SOURCES))
def test_field_matches_proto(name: str) -> None:
    message, field, wt = wire_fields.SOURCES[name]
    cls = getattr(rpc_pb, message, None) or getattr(broker_pb, message)
    desc = cls.DESCRIPTOR.fields_by_name[field]
    assert desc.number == getattr(wire_fields, name)
    assert (wt == wire_fields.WT_LEN) == (desc.type in _LEN_TYPES)


@pytest.mark.source_tree
def test_pxi_is_up_to_date() -> None:
    path = ROOT / "tools" / "generate_wire_pxi.py"
    spec = importlib.util.spec_from_file_location("_tool_generate_wire_pxi", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert module.TARGET.read_text(encoding="utf-8") == module.render(), "run python tools/generate_wire_pxi.py"
    assert f"C_METHOD_SEND_MESSAGE = {int(constants.Method.BROKER_PRODUCER_SEND_MESSAGE)}" in module.render()


@pytest.mark.source_tree
def test_no_bare_field_literals_in_the_decoders() -> None:
    """The decoders compare against named fields (``f.num == 1`` was how the two copies drifted)."""
    for rel in ("src/tubemq/codec/compiled.pyx", "src/tubemq/codec/python.py"):
        text = (ROOT / rel).read_text(encoding="utf-8")
        for bad in ("f.num == 1", "f == 1 and", "f.num == 4", "f == 4 and"):
            assert bad not in text, (rel, bad)
