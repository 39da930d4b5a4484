"""Helpers of the packaging tests: clean virtual environments and offline pip.

The environments have no pip and no packages of their own: a ``.pth`` file puts this interpreter's
site-packages (setuptools, Cython, protobuf, pytest) *after* the new environment's own, so what gets
installed there is tubemq alone, from the sdist or the wheel, and it shadows any tubemq of the parent.
pip runs with ``--no-index --no-build-isolation --no-deps``: nothing is downloaded.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: What the sdist is made of (MANIFEST.in decides what goes in); build leftovers stay behind.
SOURCE_ITEMS = ["src", "proto", "scripts", "tools", "tests", "docs", "examples", ".ci", "setup.py", "pyproject.toml",
                "MANIFEST.in", "README.md", "LICENSE"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "build", "dist", "*.egg-info", ".hypothesis",
                                ".pytest_cache", ".benchmarks", "spark-warehouse", "metastore_db")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for child processes: none of this checkout's paths or codec switches."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TUBEMQ_NO_EXTENSIONS", "TUBEMQ_REQUIRE_EXTENSIONS", "TUBEMQ_DEBUG_BUILD",
                        "PIP_REQUIRE_VIRTUALENV", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def run(args: Sequence[str | Path], *, timeout: float, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env or clean_env())


def make_venv(path: Path) -> Path:
    """A virtual environment without pip that sees this interpreter's packages after its own; its python."""
    r = run([sys.executable, "-m", "venv", "--without-pip", path], timeout=120)
    assert r.returncode == 0, r.stderr
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(path), "platbase": str(path)}))
    purelib.mkdir(parents=True, exist_ok=True)
    parent = [*site.getsitepackages(), site.getusersitepackages()]
    (purelib / "_tubemq_test_parent.pth").write_text("\n".join(parent) + "\n", encoding="utf-8")
    return path / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def pip(python: Path, *args: str | Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    """``pip`` (this interpreter's, through the .pth) acting on the environment of ``python``, offline."""
    return run([python, "-m", "pip", *args], timeout=timeout, cwd=python.parent, env=clean_env(**env))


#: What a "clean" environment must not see of this interpreter's packages: the job under test installs
#: tubemq itself, and the sdist job checks that Cython is absent (the sdist builds from its shipped C).
HIDDEN = re.compile(r"^(cython|pyximport|tubemq|pyspark_tubemq|__editable__)", re.IGNORECASE)


def make_clean_venv(path: Path, farm: Path) -> Path:
    """Like :func:`make_venv`, but the parent's packages are seen through ``farm``, a folder of symlinks
    that leaves out Cython and any installed tubemq (:data:`HIDDEN`); its python."""
    python = make_venv(path)
    if not farm.is_dir():
        farm.mkdir(parents=True)
        for parent in site.getsitepackages():
            root = Path(parent)
            if not root.is_dir():
                continue
            for entry in root.iterdir():
                if not HIDDEN.match(entry.name) and not entry.name.endswith(".pth") and entry.name != "__pycache__":
                    link = farm / entry.name
                    if not link.exists():
                        link.symlink_to(entry, target_is_directory=entry.is_dir())
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(path), "platbase": str(path)}))
    (purelib / "_tubemq_test_parent.pth").write_text(f"{farm}\n", encoding="utf-8")
    return python


def missing_distributions(python: Path, names: Sequence[str]) -> list[str]:
    """The names among ``names`` (requirement strings) that ``python`` has no distribution for."""
    code = ("import importlib.metadata as m, re, sys\n"
            "for n in sys.argv[1:]:\n"
            "    try: m.distribution(re.split(r'[<>=!~;\\[ ]', n, maxsplit=1)[0])\n"
            "    except m.PackageNotFoundError: print(n)\n")
    r = run([python, "-c", code, *names], timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()
