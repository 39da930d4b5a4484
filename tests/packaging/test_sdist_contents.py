"""The sdist is complete: it builds without Cython and carries everything the test suite reads."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from _pkgtools import REPO

pytestmark = pytest.mark.slow

#: Files the tests open relative to the repository root (tests/data through tests/_data.py).
REQUIRED = [
    "src/tubemq/codec/compiled.c",  # generated: an sdist must build without Cython
    "src/tubemq/codec/compiled.pyx",
    "src/tubemq/codec/_codec_send.pxi",  # included by compiled.pyx
    "src/tubemq/codec/_c/tq_message.h",  # included by the generated C
    "src/tubemq/codec/_inlongmsg.c",
    "src/tubemq/_bridge/_plain.c",  # the blocking send's compiled route, generated likewise
    "src/tubemq/_bridge/_plain.pyx",
    "src/tubemq/producer/_steps.c",  # the engine's compiled plain-send steps, generated likewise
    "src/tubemq/producer/_steps.pyx",
    "tests/_data.py",
    "tests/conftest.py",
    "tests/data/vectors.json",
    "tests/data/java_golden_frames.json",
    "tests/data/captures/README.md",
    "README.md",  # tests/cli/test_readme.py
    ".ci/run",  # tests/cli/test_readme.py
    "docs/PROTOCOL.md",  # tests/test_docs_refs.py
    "scripts/fix_protocol_refs.py",
    "scripts/gen_proto.py",  # tests/test_proto_fresh.py
    "tools/generate_errors.py",  # tests/codec/test_errors_table.py
    "tools/generate_wire_pxi.py",  # tests/codec/test_wire_fields.py
    "tools/errcodes.txt",
    "CHANGELOG.md",
    "proto/RPC.proto",
    "setup.py",
    "pyproject.toml",
]


def test_sdist_carries_the_tests_and_their_data(sdist: Path) -> None:
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    missing = [n for n in REQUIRED if n not in names]
    assert not missing, missing
    captures = sorted(p.name for p in (REPO / "tests" / "data" / "captures").glob("*.json"))
    assert captures and all(f"tests/data/captures/{c}" in names for c in captures)
    examples = sorted(p.name for p in (REPO / "examples").glob("*.py"))
    assert all(f"examples/{e}" in names for e in examples)  # tests/test_examples.py runs them
    assert not [n for n in names if n.endswith((".so", ".pyd", ".pyc"))], "build leftovers in the sdist"
