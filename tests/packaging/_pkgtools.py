"""Helpers of the packaging tests: clean virtual environments and offline pip.

The environments have no pip and no packages of their own: a ``.pth`` file puts this interpreter's
site-packages (setuptools, Cython, protobuf, pytest) *after* the new environment's own, so what gets
installed there is tubemq alone, from the sdist or the wheel, and it shadows any tubemq of the parent.
pip runs with ``--no-index --no-build-isolation --no-deps``: nothing is downloaded.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: each worker builds its own
    fcntl = None  # type: ignore[assignment]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10: the test extra brings tomli
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]

#: What the sdist is made of (MANIFEST.in decides what goes in); build leftovers stay behind.
SOURCE_ITEMS = ["src", "proto", "scripts", "tools", "tests", "docs", "examples", ".ci", "setup.py", "pyproject.toml",
                "MANIFEST.in", "README.md", "CHANGELOG.md", "LICENSE"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "build", "dist", "*.egg-info", ".hypothesis",
                                ".pytest_cache", ".benchmarks", "spark-warehouse", "metastore_db")


def pyproject() -> dict[str, Any]:
    """This checkout's pyproject.toml."""
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def runtime_requirements() -> list[str]:
    """``[project] dependencies``: what pip installs along with the wheel or the sdist."""
    return list(pyproject()["project"]["dependencies"])


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


def shared_build(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(folder)`` once per run, its result shared by every xdist worker: the first worker to ask
    builds under a lock in the run's common temporary folder, the others wait and reuse it (a build is a
    minute of C compiling on a loaded machine). A failed build is retried by the next worker that asks,
    so each reports the failure. Without xdist (or without ``fcntl``) it is a plain per-session build."""
    if "PYTEST_XDIST_WORKER" not in os.environ or fcntl is None:
        return build(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    root.mkdir(exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "built"
        if done.exists():
            return Path(done.read_text(encoding="utf-8"))
        work = root / f"by-{os.environ['PYTEST_XDIST_WORKER']}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        result = build(work)
        done.write_text(str(result), encoding="utf-8")
        return result



def _closure(requirements: Sequence[str]) -> tuple[list[importlib.metadata.Distribution], list[str]]:
    """The installed distributions ``requirements`` need, dependencies included (as pip would install
    them), and the requirements this interpreter does not have."""
    dists: dict[str, importlib.metadata.Distribution] = {}
    missing: list[str] = []
    stack = [Requirement(r) for r in requirements]
    while stack:
        req = stack.pop()
        key = canonicalize_name(req.name)
        if key in dists:
            continue
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(str(req))
            continue
        dists[key] = dist
        for spec in dist.requires or []:
            dep = Requirement(spec)
            extras = [""] + sorted(req.extras)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                stack.append(dep)
    return list(dists.values()), missing


def make_clean_venv(path: Path, requirements: Sequence[str]) -> Path:
    """A venv that sees, of this interpreter's packages, only what ``requirements`` and pip need (their
    dependencies included): what a CI job that pip-installed those names would have. Offline stand-in
    for ``python -m venv X && X/bin/python -m pip install <requirements>``; its python.

    Fails naming the requirements this interpreter lacks (the test extra must bring them)."""
    dists, missing = _closure([*requirements, "pip"])
    assert not missing, f"not installed here, so a clean environment cannot have them: {missing}"
    python = make_venv(path)
    farm = path / "parent-packages"
    farm.mkdir()
    for dist in dists:
        root = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not Path(str(f)).is_absolute()}
        for top in tops:
            entry = root / top
            if top in ("..", "__pycache__") or top.endswith(".pth") or not entry.exists():
                continue
            link = farm / top
            if not link.exists():
                link.symlink_to(entry, target_is_directory=entry.is_dir())
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(path), "platbase": str(path)}))
    (purelib / "_tubemq_test_parent.pth").write_text(f"{farm}\n", encoding="utf-8")
    return python
