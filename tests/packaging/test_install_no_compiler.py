"""No C compiler: installing the sdist still works, with the pure-Python codec and one clear warning."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _pkgtools import clean_env, make_venv, pip, run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(sys.platform == "win32", reason="MSVC builds ignore CC, so a failing compiler cannot be set"),
]

WARNING = "tubemq's C extensions could not be built; the pure-Python codec is used instead"
INSTALL = ("install", "-v", "--no-index", "--no-build-isolation", "--no-deps", "--ignore-installed")


def test_sdist_installs_without_a_compiler(sdist: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    r = pip(python, *INSTALL, sdist, CC="false", CXX="false")
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    assert log.count(WARNING) == 1, log[-4000:]
    assert "TUBEMQ_NO_EXTENSIONS=1" in log and "TUBEMQ_REQUIRE_EXTENSIONS=1" in log
    r = run([python, "-c", "import tubemq, tubemq.codec as c; print(c.implementation); print(tubemq.__file__)"],
            cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    impl, where = r.stdout.split()
    assert impl == "python"
    assert Path(where).resolve().is_relative_to((tmp_path / "venv").resolve())


def test_required_extensions_make_it_an_error(source_tree: Path, tmp_path: Path) -> None:
    """CI and cibuildwheel set TUBEMQ_REQUIRE_EXTENSIONS=1: there a broken compiler fails the build."""
    build = ["setup.py", "-q", "build_ext", "-b", tmp_path / "lib", "-t", tmp_path / "tmp"]
    r = run([sys.executable, *build], cwd=source_tree, timeout=300,
            env=clean_env(CC="false", CXX="false", TUBEMQ_REQUIRE_EXTENSIONS="1"))
    assert r.returncode != 0
    assert WARNING not in r.stdout + r.stderr
    assert "false" in r.stderr  # the compiler's own error is shown
