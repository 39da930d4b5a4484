"""The codec's public surface: an explicit ``__all__``, server-side encoders apart, no protobuf on import."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest

import tubemq.codec as codec
from tubemq.codec import python as _codec_py
from tubemq.server import wire

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
SERVER_SIDE = {"decode_request", "encode_response", "encode_error_response", "encode_transfered_message",
               "wrap_repeated", "Request"}


def _modules_after(statement: str, no_ext: bool) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    env.pop("TUBEMQ_NO_EXTENSIONS", None)
    if no_ext:
        env["TUBEMQ_NO_EXTENSIONS"] = "1"
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_all_is_explicit_and_small() -> None:
    names = codec.__all__
    assert len(names) == len(set(names))
    assert not {"os", "annotations", "_impl", "TYPE_CHECKING", "CodecModule"} & set(names)
    assert not SERVER_SIDE & set(names)
    assert len(names) <= 40
    for name in names:
        assert hasattr(codec, name), name


def test_star_import_gives_only_all() -> None:
    scope: dict[str, object] = {}
    exec("from tubemq.codec import *", scope)
    assert set(scope) - {"__builtins__"} == set(codec.__all__)


def test_every_public_name_exists_in_both_codecs(impl: ModuleType) -> None:
    for name in codec.__all__:
        if name == "TopicPartition":
            continue
        assert hasattr(impl, name), (impl.implementation, name)


def test_server_encoders_live_in_server_wire() -> None:
    assert set(wire.__all__) == SERVER_SIDE
    assert not [n for n in SERVER_SIDE - {"Request"} if hasattr(codec, n)], "the client codec keeps server encoders"
    assert wire.encode_response is codec._impl.encode_response
    frame = wire.encode_response(7, 13, b"x")
    ((serial, payload),) = codec.FrameDecoder().feed(frame)
    assert serial == 7 and codec.decode_response(payload).body == b"x"


def test_import_codec_loads_no_protobuf() -> None:
    for no_ext in (False, True):
        mods = _modules_after("import tubemq.codec", no_ext)
        assert "tubemq.codec" in mods
        assert not [m for m in mods if m.startswith("google")], no_ext
        assert "asyncio" not in mods
        assert "tubemq.protocol.BrokerService_pb2" not in mods


def test_errors_module_imports_nothing_of_the_package() -> None:
    mods = _modules_after("import tubemq.errors", False)
    # the root package reads its version from tubemq._version (one constant, importable by any layer)
    assert [m for m in mods if m.startswith("tubemq")] == ["tubemq", "tubemq._version", "tubemq.errors"]


def test_protocol_protobuf_modules_load_on_first_use() -> None:
    mods = _modules_after("from tubemq.protocol import constants", False)
    assert "google.protobuf" not in mods
    mods = _modules_after("from tubemq.protocol import broker_pb; broker_pb.SendMessageResponseB2P", False)
    assert "tubemq.protocol.BrokerService_pb2" in mods


def test_result_types_are_shared() -> None:
    assert codec.Partition is _codec_py.Partition
    assert codec.TopicPartition is codec.Partition


@pytest.mark.source_tree
def test_readme_documents_every_exported_name() -> None:
    """`from tubemq.codec import *` exports only what the codec guide (docs/guide/codec.md) names."""
    import re
    from pathlib import Path

    section = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "codec.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", section))
    assert set(codec.__all__) <= documented, sorted(set(codec.__all__) - documented)
