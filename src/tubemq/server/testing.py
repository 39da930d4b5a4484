"""Helpers for running the embedded cluster inside test suites (ours and users').

The real master balances every 60 s and expires clients after 30 s; tests want the same behaviour in
a fraction of that time. ``FAST_TIMERS`` holds those shortened settings::

    from tubemq.server import EmbeddedCluster
    from tubemq.server.testing import FAST_TIMERS

    with EmbeddedCluster(data_dir=tmp_path, **FAST_TIMERS) as cluster:
        cluster.create_topic("t", partitions=3)
"""

from __future__ import annotations

from typing import Any

#: Server settings that keep integration tests fast (real defaults: 60 s balance, 30 s expiries).
FAST_TIMERS: dict[str, Any] = {
    "balance_period_ms": 200,
    "consumer_heartbeat_timeout_ms": 6000,
    "producer_heartbeat_timeout_ms": 6000,
    "consumer_reg_timeout_ms": 6000,
}
