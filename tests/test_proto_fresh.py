"""The committed protobuf modules are exactly what scripts/gen_proto.py generates from proto/*.proto."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GENERATED = ROOT / "src" / "tubemq" / "protocol"
NAMES = ["RPC_pb2.py", "RPC_pb2.pyi", "MasterService_pb2.py", "MasterService_pb2.pyi", "BrokerService_pb2.py",
         "BrokerService_pb2.pyi"]


def _load_gen_proto():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_modules_are_fresh(tmp_path: pathlib.Path) -> None:
    if not (ROOT / "proto").is_dir() or not (ROOT / "scripts" / "gen_proto.py").exists():
        pytest.skip("not a source checkout")
    pytest.importorskip("grpc_tools", reason="grpcio-tools (test extra) regenerates the modules")
    _load_gen_proto().generate(tmp_path)
    stale = [n for n in NAMES if (tmp_path / n).read_bytes() != (GENERATED / n).read_bytes()]
    assert not stale, f"stale generated modules {stale}: run `python scripts/gen_proto.py`"
    extra = sorted(p.name for p in tmp_path.iterdir() if p.name not in NAMES)
    assert extra == [], f"gen_proto.py generated files the test does not know: {extra}"
