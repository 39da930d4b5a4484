"""Shared test fixtures.

* The run fails when the compiled codec did not load, unless TUBEMQ_NO_EXTENSIONS=1 selects the
  pure-Python twin (aiokafka style): ``TUBEMQ_NO_EXTENSIONS=1 python -m pytest -q tests/...``.
* ``cluster``: a fresh embedded TubeMQ cluster (master + broker) on 127.0.0.1 with short balance
  periods, in a temporary data directory.
* Parallel workers (pytest-xdist, ``-n 4 --dist loadgroup`` in pyproject): every test uses its own
  ports (0 = the OS picks) and its own tmp_path; tests that must share one worker get an
  ``xdist_group`` here (``SERIAL_GROUPS``).
Shared helpers (wait_for, fast timers, produce, platform guards) live in tests/_support.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import FAST_SERVER, embedded_cluster

from tubemq import codec

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not NO_EXT and codec.implementation != "cython":
        raise pytest.UsageError(
            "tubemq._codec (the Cython extension) did not load; build it with `pip install -e .` "
            "or run with TUBEMQ_NO_EXTENSIONS=1 to test the pure-Python twin only"
        )
    if NO_EXT and codec.implementation != "python":
        raise pytest.UsageError(f"TUBEMQ_NO_EXTENSIONS=1 but tubemq.codec runs {codec.implementation!r}")


__all__ = ["FAST_SERVER", "NO_EXT"]  # FAST_SERVER kept for older imports (tests/_support has it)

TESTS = Path(__file__).resolve().parent

#: Test files (relative to tests/, a folder ends with "/"; or "file::test_name_prefix") whose tests run on
#: one worker, one after the other, and why: the Spark tests share one JVM per worker (session fixtures),
#: so they go to one worker instead of starting a JVM on each (a JVM's start is most of a minute of CPU on
#: 2 cores); the Spark examples run in one child process with a JVM of its own (a module fixture), on
#: another worker.
SERIAL_GROUPS: dict[str, str] = {
    "spark/": "spark",
    "test_examples.py::test_spark": "spark-examples",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            rel = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
        except ValueError:
            continue
        where = f"{rel}::{item.name}"
        for prefix, group in SERIAL_GROUPS.items():
            if where.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))
                break


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[Any]:
    with embedded_cluster(tmp_path / "tubemq-data") as c:
        yield c
