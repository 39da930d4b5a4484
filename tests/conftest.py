"""Shared test fixtures.

* The run fails when the compiled codec did not load, unless TUBEMQ_NO_EXTENSIONS=1 (aiokafka style).
* ``cluster``: a fresh embedded TubeMQ cluster (master + broker) on 127.0.0.1 with short balance
  periods, in a temporary data directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tubemq import codec
from tubemq.server.testing import FAST_TIMERS

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
#: A checkout or an unpacked sdist: src/, tools/ and README.md lie beside tests/. The cibuildwheel test run
#: copies only tests/ and pyproject.toml, so tests marked ``source_tree`` are skipped there.
SOURCE_TREE = (Path(__file__).resolve().parents[1] / "src" / "tubemq").is_dir()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "source_tree: reads files of a source checkout (tools/, README.md, src/); skipped without one"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SOURCE_TREE:
        return
    skip = pytest.mark.skip(reason="needs a source checkout (src/, tools/, README.md); this run has tests/ only")
    for item in items:
        if item.get_closest_marker("source_tree") is not None:
            item.add_marker(skip)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not NO_EXT and codec.implementation != "cython":
        raise pytest.UsageError(
            "tubemq._codec (the Cython extension) did not load; build it with `pip install -e .` "
            "or run with TUBEMQ_NO_EXTENSIONS=1 to test the pure-Python twin only"
        )


FAST_SERVER = FAST_TIMERS  # kept for older imports


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[Any]:
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path / "tubemq-data", **FAST_SERVER) as c:
        yield c
