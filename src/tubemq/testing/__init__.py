"""Test utilities for suites that run against the embedded server (ours and users').

* :class:`FaultProxy`: a fault-injecting TCP proxy on 127.0.0.1 (delay, bandwidth, blackhole, reset,
  half-open, a peer that vanishes), no root needed;
* :func:`proxy_cluster`: a ``FaultProxy`` in front of an ``EmbeddedCluster``'s master and each of its
  brokers, the brokers advertised through theirs, so every byte a client exchanges passes a proxy
  (the pytest plugin's ``tubemq_proxies`` fixture);
* ``FAST_TIMERS``: the server settings that keep integration tests fast (``tubemq.server.testing``).

docs/guide/testing.md shows them in use.
"""

from __future__ import annotations

from ..server.testing import FAST_TIMERS
from .cluster_proxies import ClusterProxies, proxy_cluster
from .fault_proxy import FaultProxy

__all__ = ["FAST_TIMERS", "ClusterProxies", "FaultProxy", "proxy_cluster"]
