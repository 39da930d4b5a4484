"""The release jobs' own checks, run here as the CI runner would run them, so a red wheel or sdist job is
found before a tag is pushed.

* The wheel job: pyproject.toml's ``[tool.cibuildwheel]`` ``test-command``, read from the file (never copied),
  run from a folder holding only its ``test-sources``, against the ``auditwheel repair``ed manylinux wheel in
  a clean environment (no tubemq but the wheel's, no Cython, no source tree). The command runs as written,
  with one narrowing: its property-based tests (Hypothesis, the ``hypothesis`` marker: hundreds of random
  inputs through both codecs each) are deselected, since the main suite runs them on the same generated C.
  Every file of the command is still collected from the tests-only copy and every other test in it (golden
  vectors, Java frames, limits, memory) runs against the wheel's compiled codec, so the step's command is
  proven to work there.
* The sdist job: every ``run`` step of ``.github/workflows/wheels.yml``'s ``sdist`` job, line for line, in a
  copy of the checkout. Offline, the lines that would download are stood in for, each by the same effect
  (:func:`_offline`); a new downloading line makes the test fail until it is taught about it. Its
  ``pip install --no-build-isolation dist/*.tar.gz`` installs the wheel the session built from that same
  sdist in the same way (no Cython, compiled codec required), so the C is compiled once per run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _pkgtools import IGNORE, REPO, clean_env, make_clean_venv, pip, pyproject, run, runtime_requirements

yaml = pytest.importorskip("yaml", reason="pyyaml (test extra) reads the workflow")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the jobs' Linux legs are rehearsed here"),
]


def _cibuildwheel_linux() -> dict[str, Any]:
    """``[tool.cibuildwheel]`` with its ``linux`` overrides applied, as cibuildwheel reads it on Linux."""
    table = dict(pyproject()["tool"]["cibuildwheel"])
    table.update(table.pop("linux", {}))
    return table


def _summary(out: str) -> str:
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _assert_green(r: Any, what: str) -> None:
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{what} failed (exit {r.returncode}):\n{out[-6000:]}"
    summary = _summary(r.stdout)
    assert re.search(r"\d+ passed", summary) and "failed" not in summary and "error" not in summary, out[-3000:]


def test_cibuildwheel_test_command_passes_on_the_repaired_wheel(
    repaired_wheel: Path, tmp_path: Path
) -> None:
    conf = _cibuildwheel_linux()
    command, sources, requires = conf["test-command"], conf["test-sources"], conf.get("test-requires", [])
    venv = tmp_path / "venv"
    # what cibuildwheel's test venv holds: test-requires and the wheel's own dependencies, nothing else
    python = make_clean_venv(venv, [*requires, *runtime_requirements()])
    r = pip(python, "install", "--no-index", "--no-deps", repaired_wheel)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    shim = venv / "bin" / "pytest"  # the console script pip would have made for test-requires' pytest
    shim.write_text(f"#!{python}\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    shim.chmod(0o755)

    # cibuildwheel copies test-sources into an empty folder and runs the command there
    work = tmp_path / "test-cwd"
    work.mkdir()
    for item in sources:
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, work / item, ignore=IGNORE)
        else:
            shutil.copy2(src, work / item)
    assert sorted(p.name for p in work.iterdir()) == sorted(Path(s).parts[0] for s in sources)
    command = command.replace("{project}", str(REPO)).replace("{package}", str(REPO))
    env = clean_env(**{k: str(v) for k, v in conf.get("environment", {}).items()})
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["COLUMNS"] = "400"  # -ra's summary lines whole
    env["PYTEST_ADDOPTS"] = "-m 'not hypothesis'"  # the one narrowing (module docstring)
    started = time.monotonic()
    r = run(["sh", "-c", command], cwd=work, env=env, timeout=1000)
    print(f"cibuildwheel test-command: {_summary(r.stdout)} in {time.monotonic() - started:.1f} s")
    _assert_green(r, "the cibuildwheel test-command")
    # the only skips are the tests that read the source tree (pyproject's addopts has -ra: reasons listed)
    skips = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("needs a source checkout" in line for line in skips), "\n".join(skips)


def _sdist_steps() -> list[dict[str, Any]]:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "wheels.yml").read_text(encoding="utf-8"))
    steps = [s for s in workflow["jobs"]["sdist"]["steps"] if "run" in s]
    assert steps, "the sdist job has no run steps"
    return steps


#: A requirement list alone after ``pip install``: what needs the index (a path, a glob or an option does not).
_PIP_NAMES = re.compile(r'^(?P<py>\S+) -m pip install (?P<names>(?:[A-Za-z0-9_.\-\[\],<>=!~]+ ?)+)$')


#: The sdist job's install of its own sdist: pip builds the wheel, then installs it.
_INSTALL_SDIST = re.compile(r'^(?P<py>\S+) -m pip install --no-build-isolation dist/\*\.tar\.gz$')


def _offline(line: str, *, sdist: Path, wheel: Path, runner_temp: Path, venvs: set[str]) -> str:
    """The line as run here: itself, or, where it would download, a line with the same effect."""
    stripped = line.strip()
    if stripped == "python -m pip install build":
        return ": offline, the session sdist stands in for python -m build, same backend"
    if stripped == "python -m build --sdist":
        return f"mkdir -p dist && cp {shlex.quote(str(sdist))} dist/"
    m = re.fullmatch(r'python -m venv "?\$RUNNER_TEMP/(\w+)"?', stripped)
    if m:  # made by the pip line that follows, which says what it holds
        venvs.add(m.group(1))
        return ": venv made offline by the next pip line"
    m = _PIP_NAMES.match(stripped.replace('"', ""))
    if m and "/" not in m.group("names") and "*" not in m.group("names"):
        venv = re.fullmatch(r"\$RUNNER_TEMP/(\w+)/bin/python", m.group("py"))
        assert venv and venv.group(1) in venvs, f"teach _offline about: {stripped}"
        make_clean_venv(runner_temp / venv.group(1), m.group("names").split())
        return ": venv holding just these requirements and their dependencies, made offline"
    m = _INSTALL_SDIST.match(stripped)
    if m:  # the session's wheel was built from this sdist exactly so (conftest.sdist_wheel)
        return f"{m.group('py')} -m pip install --no-index --no-deps {shlex.quote(str(wheel))}"
    assert "pip install" not in stripped, f"teach _offline about: {stripped}"
    return line


def test_sdist_job_steps_pass(source_tree: Path, sdist: Path, sdist_wheel: Path, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(source_tree, checkout)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    venvs: set[str] = set()
    for step in _sdist_steps():
        script = "\n".join(_offline(line, sdist=sdist, wheel=sdist_wheel, runner_temp=runner_temp, venvs=venvs)
                           for line in step["run"].splitlines())
        # GitHub's Linux shells: `shell: bash` is bash -eo pipefail, the default is bash -e
        shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail"] if step.get("shell") == "bash" else ["bash", "-e"]
        env = clean_env(RUNNER_TEMP=str(runner_temp), PIP_NO_INDEX="1",
                        **{k: str(v) for k, v in step.get("env", {}).items()})
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        started = time.monotonic()
        r = run([*shell, "-c", script], cwd=checkout, env=env, timeout=1000)
        print(f"sdist job step {step.get('name')!r}: exit {r.returncode} in {time.monotonic() - started:.1f} s")
        assert r.returncode == 0, f"step {step.get('name')!r} failed:\n{(r.stdout + r.stderr)[-6000:]}"
        if "pytest" in step["run"]:
            _assert_green(r, f"step {step.get('name')!r}")
