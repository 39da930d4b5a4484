"""The codec and the client on the oldest protobuf that pyproject.toml allows.

The suite itself runs on the newest protobuf (the test extra's); this test puts the floor of the
``protobuf>=X,<N`` requirement into a clean environment, in front of everything else, and runs the codec
suite and a cross-section of the client suites (wire encoding, producer, consumer, end to end against the
embedded server) there. The full client suites run on both ends in CI (.github/workflows/protobuf.yml).
Needs the package index once (pip's cache keeps the wheel); without it the test is skipped, saying so.
"""

from __future__ import annotations

import re
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from _pkgtools import REPO, clean_env, make_venv, run

import tubemq

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: Quick files that drive every protobuf message the client sends or reads.
SUITES = [
    "tests/codec",
    "tests/net/test_connection.py",
    "tests/producer/test_producer.py",
    "tests/consumer/test_wire_shapes.py",
    "tests/consumer/test_bound_server_e2e.py",
]


def oldest_protobuf() -> str:
    """The floor of pyproject's protobuf requirement (``protobuf>=4.21.6,<8; python_version < '3.14'`` -> ``4.21.6``)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    m = re.search(r'"protobuf>=([0-9.]+),<\d+[";]', text)  # the first is the lowest floor
    assert m, "pyproject.toml: no protobuf>=X,<N requirement"
    return m.group(1)


def test_codec_and_client_suites_on_the_oldest_protobuf(tmp_path: Path) -> None:
    version = oldest_protobuf()
    python = make_venv(tmp_path / "venv")
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(tmp_path / "venv"),
                                                       "platbase": str(tmp_path / "venv")}))
    r = run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", purelib,
             f"protobuf=={version}"], timeout=300)
    if r.returncode != 0:
        pytest.skip(f"protobuf {version} could not be installed (no package index?): {r.stderr.strip()[-300:]}")
    # tubemq as this session imports it (installed or a checkout's src with the built extension), and
    # nothing else of that folder: an installed tubemq sits in a site-packages with a newer protobuf
    only = tmp_path / "tubemq-only"
    only.mkdir()
    (only / "tubemq").symlink_to(Path(tubemq.__file__).resolve().parent, target_is_directory=True)
    env = clean_env(PYTHONPATH=str(only))
    r = run([python, "-c", "import google.protobuf as g, tubemq.codec as c; print(g.__version__, c.implementation)"],
            timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [version, "cython"], r.stdout
    started = time.monotonic()
    r = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES], timeout=800, env=env, cwd=REPO)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    print(f"protobuf {version}: {lines[-1] if lines else ''} ({time.monotonic() - started:.1f} s)")
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
