"""The committed protobuf modules are what scripts/gen_proto.py generates from proto/*.proto.

With the pinned generator (grpcio-tools GENERATOR) installed the files must match byte for byte; with any
other grpcio-tools the descriptors each module registers and the names its stub declares must match (so a
.proto edit without regeneration is caught either way), and the committed gencode must still load on the
oldest protobuf that pyproject.toml allows.
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re
from types import ModuleType

import pytest
from google.protobuf import descriptor_pb2

ROOT = pathlib.Path(__file__).resolve().parents[1]
GENERATED = ROOT / "src" / "tubemq" / "protocol"
NAMES = ["RPC_pb2.py", "RPC_pb2.pyi", "MasterService_pb2.py", "MasterService_pb2.pyi", "BrokerService_pb2.py",
         "BrokerService_pb2.pyi"]

pytestmark = pytest.mark.source_tree


def _load_gen_proto() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _file_descriptor(py: pathlib.Path) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto a generated module adds to the pool."""
    m = re.search(r"AddSerializedFile\((b'.*?')\)\n", py.read_text(encoding="utf-8"), re.S)
    assert m, f"{py.name}: no AddSerializedFile call"
    return descriptor_pb2.FileDescriptorProto.FromString(ast.literal_eval(m.group(1)))


def _stub_names(pyi: pathlib.Path) -> set[str]:
    """Classes and field-number constants a stub declares (their order and typing imports vary by protoc)."""
    text = pyi.read_text(encoding="utf-8")
    return set(re.findall(r"^\s*class (\w+)\(", text, re.M)) | set(re.findall(r"(\w+_FIELD_NUMBER):", text))


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, bool]:
    """Freshly generated modules, and whether the pinned generator made them."""
    pytest.importorskip("grpc_tools", reason="grpcio-tools (test extra) regenerates the modules")
    gen = _load_gen_proto()
    out = tmp_path_factory.mktemp("proto")
    gen.generate(out, any_generator=True)
    return out, gen.generator_version() == gen.GENERATOR


def test_generated_modules_are_fresh(fresh: tuple[pathlib.Path, bool]) -> None:
    out, pinned = fresh
    extra = sorted(p.name for p in out.iterdir() if p.name not in NAMES)
    assert extra == [], f"gen_proto.py generated files the test does not know: {extra}"
    hint = "run `python scripts/gen_proto.py` with the pinned grpcio-tools (see its docstring)"
    for name in NAMES:
        if pinned:
            assert (out / name).read_bytes() == (GENERATED / name).read_bytes(), f"{name} is stale: {hint}"
        elif name.endswith(".py"):
            assert _file_descriptor(out / name) == _file_descriptor(GENERATED / name), f"{name} is stale: {hint}"
        else:
            assert _stub_names(out / name) == _stub_names(GENERATED / name), f"{name} is stale: {hint}"


def test_gencode_loads_on_the_oldest_allowed_protobuf() -> None:
    """New gencode pins a minimum runtime (ValidateProtobufRuntimeVersion); ours must not ask for more than
    pyproject's lower bound, or `pip install tubemq` next to an older protobuf imports and then fails."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    # the first requirement is the lowest floor (a later one, with a marker, is for newer Pythons)
    m = re.search(r'"protobuf>=(\d+)\.(\d+)(?:\.\d+)?,<(\d+)[";]', text)
    assert m, "pyproject.toml: protobuf requirement not found"
    floor = (int(m.group(1)), int(m.group(2)))
    for name in NAMES:
        if not name.endswith(".py"):
            continue
        code = (GENERATED / name).read_text(encoding="utf-8")
        v = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),", code)
        if v:
            assert (int(v.group(1)), int(v.group(2))) <= floor, f"{name} needs protobuf {v.group(1)}.{v.group(2)}"
