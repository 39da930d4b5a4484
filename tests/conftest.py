"""Shared test fixtures.

* The run fails when the compiled codec did not load, unless TUBEMQ_NO_EXTENSIONS=1 (aiokafka style).
* ``cluster``: a fresh embedded TubeMQ cluster (master + broker) on 127.0.0.1 with short balance
  periods, in a temporary data directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tubemq import codec
from tubemq.server.testing import FAST_TIMERS

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")


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
