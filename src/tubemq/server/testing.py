"""Helpers for running the embedded cluster inside test suites (ours and users').

The real master balances every 60 s and expires clients after 30 s; tests want group changes to settle
in a fraction of that time. ``FAST_TIMERS`` holds those shortened settings::

    from tubemq.server import EmbeddedCluster
    from tubemq.server.testing import FAST_TIMERS

    with EmbeddedCluster(data_dir=tmp_path, **FAST_TIMERS) as cluster:
        cluster.create_topic("t", partitions=3)

Only the balance period is short. The client expiries stay at ``CLIENT_EXPIRY_FACTOR`` times the client's
default heartbeat period: TubeMQ's master answers carry no heartbeat-period hint, so a client built with
default settings heartbeats every 13 s whatever the server's timers, and a shorter expiry would time its
member out between two heartbeats (a churn of 410 "Duplicated Register" answers). A suite whose clients
heartbeat faster may lower the expiries with them (``FAST_CLIENT_TIMERS``).
"""

from __future__ import annotations

import math
from typing import Any

from ..protocol.constants import HEARTBEAT_PERIOD_MS

#: Client expiries are at least this many default heartbeat periods (a late or lost heartbeat is not fatal).
CLIENT_EXPIRY_FACTOR = 2.5

_CLIENT_EXPIRY_MS = math.ceil(CLIENT_EXPIRY_FACTOR * HEARTBEAT_PERIOD_MS)

#: Server settings that keep integration tests fast with default-settings clients (real defaults: 60 s
#: balance, 30 s expiries; here 200 ms balance, expiries of 2.5 default client heartbeat periods).
FAST_TIMERS: dict[str, Any] = {
    "balance_period_ms": 200,
    "consumer_heartbeat_timeout_ms": _CLIENT_EXPIRY_MS,
    "producer_heartbeat_timeout_ms": _CLIENT_EXPIRY_MS,
    "consumer_reg_timeout_ms": _CLIENT_EXPIRY_MS,
}

#: ``FAST_TIMERS`` with 6 s expiries, for suites whose clients set ``heartbeat_period_ms`` of 2400 ms
#: or less: a client that goes away silently is expired sooner.
FAST_CLIENT_TIMERS: dict[str, Any] = {
    **FAST_TIMERS,
    "consumer_heartbeat_timeout_ms": 6000,
    "producer_heartbeat_timeout_ms": 6000,
    "consumer_reg_timeout_ms": 6000,
}
