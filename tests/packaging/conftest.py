"""The sdist, built once per session from a copy of this checkout; see _pkgtools.py for the environments."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from _pkgtools import IGNORE, REPO, SOURCE_ITEMS, run


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
