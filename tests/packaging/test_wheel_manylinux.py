"""The wheel as cibuildwheel makes it on Linux: built from the sdist, ``auditwheel repair``ed to a manylinux
tag, no generated C inside, the codec compiled and stripped, and it imports from a clean environment.
(test_release_jobs.py runs the configured cibuildwheel test command against the same wheel.)"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from _pkgtools import make_clean_venv, pip, run, runtime_requirements

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux wheels are built on Linux"),
]


def _stripped(so: Path) -> bool:
    """No static symbol table and no DWARF: what ``strip`` / ``-Wl,-s`` leave."""
    from elftools.elf.elffile import ELFFile

    with so.open("rb") as f:
        elf = ELFFile(f)
        names = {s.name for s in elf.iter_sections()}
        exported = {s.name for s in elf.get_section_by_name(".dynsym").iter_symbols()}
    assert any(n.startswith("PyInit_") for n in exported), f"{so.name} exports no PyInit_"
    return ".symtab" not in names and not any(n.startswith(".debug_") for n in names)


def test_manylinux_wheel_installs_and_runs(repaired_wheel: Path, tmp_path: Path) -> None:
    assert "manylinux" in repaired_wheel.name, repaired_wheel.name
    with zipfile.ZipFile(repaired_wheel) as z:
        names = z.namelist()
        (eps,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = z.read(eps).decode()
    assert "[pytest11]\ntubemq = tubemq.pytest_plugin" in entry_points, entry_points  # the pytest plugin
    assert not any(n.endswith(".c") for n in names), "the wheel carries generated C"
    # Cython and C sources nothing imports stay in the sdist; the .pxd (for cimport) and the stubs ship
    sources = [n for n in names if n.endswith((".pyx", ".pxi", ".c", ".h", ".html"))]
    assert not sources, f"the wheel carries build sources: {sources}"
    for needed in ("tubemq/codec/compiled.pxd", "tubemq/codec/compiled.pyi", "tubemq/codec/_inlongmsg.pyi",
                   "tubemq/_bridge/_plain.pyi", "tubemq/producer/_steps.pyi", "tubemq/protocol/RPC_pb2.pyi"):
        assert needed in names, f"the wheel lacks {needed}"
    assert any(n.startswith("tubemq/codec/compiled.") and n.endswith(".so") for n in names), names
    assert "tubemq/py.typed" in names

    python = make_clean_venv(tmp_path / "venv", runtime_requirements())
    r = pip(python, "install", "--no-index", "--no-deps", repaired_wheel)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    r = run([python, "-c", "import tubemq, tubemq.codec as c, tubemq.codec.compiled as x; "
             "print(c.implementation); print(tubemq.__file__); print(x.__file__)"], cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    impl, where, so = r.stdout.split()
    assert impl == "cython"
    venv = (tmp_path / "venv").resolve()
    assert Path(where).resolve().is_relative_to(venv) and Path(so).resolve().is_relative_to(venv)
    assert _stripped(Path(so)), f"{so} is not stripped"
    # the environment is clean: what the parent has beyond the wheel's dependencies stays out of sight
    r = run([python, "-c", "import importlib.util as u; print([m for m in ('Cython', 'pytest', 'yaml', 'google.protobuf') "
             "if u.find_spec(m.split('.')[0]) and u.find_spec(m)])"], cwd=tmp_path, timeout=120)
    assert r.stdout.strip() == "['google.protobuf']", r.stdout + r.stderr
