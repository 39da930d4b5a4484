"""Fixtures of the command line tests: an embedded server the ``tubemq`` subprocesses talk to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: Short balance rounds (assignments arrive quickly); the real 30 s client timeouts, because the CLI
#: clients heartbeat at their own (2 s consumer / 13 s producer) periods.
CLI_SERVER: dict[str, Any] = {"balance_period_ms": 200}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path / "tubemq-data", **CLI_SERVER) as c:
        yield c
