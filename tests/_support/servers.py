"""Fast timers for the embedded server and the clients, and one way to start an embedded cluster.

Tests that are not about timing run the server with ``FAST_SERVER`` (balance rounds of 200 ms, client
expiries of 6 s instead of 60 s / 30 s) and the clients with ``FAST_CLIENT`` (heartbeats every 200 ms),
so a consumer group gets its partitions in well under a second instead of a balance period plus a
heartbeat. Every cluster binds 127.0.0.1 on ports the OS picks (port 0) and keeps its data in the test's
own temporary directory, so tests can run in parallel workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tubemq.server.testing import FAST_CLIENT_TIMERS

#: server timers (tubemq.server.testing.FAST_CLIENT_TIMERS: our clients heartbeat every 200 ms)
FAST_SERVER: dict[str, Any] = dict(FAST_CLIENT_TIMERS)

#: client timers that keep integration tests fast (consumer and producer options)
FAST_CLIENT: dict[str, Any] = {
    "heartbeat_period_ms": 200,
    "msg_not_found_wait_ms": 20,
    "register_retry_wait_ms": 100,
    "rebalance_confirm_wait_ms": 1000,
    "heartbeat_fail_wait_ms": 300,
    "shutdown_wait_ms": 2000,
    "rpc_timeout_ms": 3000,
    "connect_timeout_ms": 1000,
}


@contextmanager
def embedded_cluster(data_dir: Path, **options: Any) -> Iterator[Any]:
    """A running ``EmbeddedCluster`` in ``data_dir`` with ``FAST_SERVER`` timers (``options`` override)."""
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=data_dir, **{**FAST_SERVER, **options}) as cluster:
        yield cluster
