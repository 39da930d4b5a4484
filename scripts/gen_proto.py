"""Regenerate tubemq/protocol/*_pb2.py(i) from proto/*.proto (needs grpcio-tools).

Usage: python scripts/gen_proto.py [OUT_DIR]   (default: src/tubemq/protocol)
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROTOS = ["RPC.proto", "MasterService.proto", "BrokerService.proto"]


def generate(out_dir: pathlib.Path) -> None:
    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    args = ["protoc", f"-I{ROOT / 'proto'}", f"--python_out={out_dir}", f"--pyi_out={out_dir}"]
    args += [str(ROOT / "proto" / p) for p in PROTOS]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src" / "tubemq" / "protocol")
