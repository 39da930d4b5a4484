"""Embedded TubeMQ-compatible server: master + broker in one asyncio loop (``tubemq serve``).

``EmbeddedCluster`` runs it on a private thread for tests and scripts; ``EmbeddedServer`` is the
``async with`` twin for code that already runs an event loop.
"""

from __future__ import annotations

from typing import Any

from .config import ServerConfig
from .meta import TopicConf

__all__ = ["EmbeddedCluster", "EmbeddedServer", "ServerConfig", "TopicConf", "run_foreground"]


def __getattr__(name: str) -> Any:
    # cluster.py pulls in the master and broker; import them only when asked for
    if name == "EmbeddedCluster":
        from . import embedded_cluster

        return embedded_cluster.EmbeddedCluster
    if name in ("EmbeddedServer", "run_foreground"):
        from . import cluster

        return getattr(cluster, name)
    raise AttributeError(f"module 'tubemq.server' has no attribute {name!r}")
