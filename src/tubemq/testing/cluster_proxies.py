"""``proxy_cluster``: a :class:`FaultProxy` in front of an embedded cluster's master and every broker.

Why both: a client is given the master's address but learns the brokers' from the master's broker
list, so a proxy in front of the master alone leaves fetches and sends untouched. Each broker is
therefore advertised to clients through its own proxy (``EmbeddedCluster.advertise_broker``): clients
that connect to :attr:`ClusterProxies.master_address` pass a proxy for every byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .fault_proxy import FaultProxy

if TYPE_CHECKING:
    from ..server import EmbeddedCluster


class ClusterProxies:
    """The proxies of one cluster: ``master``, ``brokers`` (broker id -> proxy); fault methods on all."""

    def __init__(self, cluster: EmbeddedCluster, master: FaultProxy, brokers: dict[int, FaultProxy]) -> None:
        self.cluster = cluster
        self.master = master
        self.brokers = brokers

    def __iter__(self) -> Iterator[FaultProxy]:
        yield self.master
        yield from self.brokers.values()

    def __enter__(self) -> ClusterProxies:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def master_address(self) -> str:
        """What clients are given instead of the cluster's master address."""
        return self.master.address

    def _all(self, name: str, *args: Any) -> None:
        for proxy in self:
            getattr(proxy, name)(*args)

    def blackhole(self) -> None:
        self._all("blackhole")

    def reset(self) -> None:
        self._all("reset")

    def vanish(self) -> None:
        self._all("vanish")

    def half_open(self) -> None:
        self._all("half_open")

    def delay(self, ms: float) -> None:
        self._all("delay", ms)

    def bandwidth(self, bytes_per_s: int) -> None:
        self._all("bandwidth", bytes_per_s)

    def heal(self) -> None:
        self._all("heal")

    def close(self) -> None:
        """Advertise the brokers' own addresses again and stop every proxy."""
        for broker_id in self.brokers:
            if self.cluster.loop is not None:
                self.cluster.advertise_broker(broker_id, None)
        for proxy in self:
            proxy.close()


def proxy_cluster(cluster: EmbeddedCluster, **proxy_options: Any) -> ClusterProxies:
    """Start a proxy in front of the running ``cluster``'s master and each broker and advertise the
    broker proxies; ``proxy_options`` go to every :class:`FaultProxy`. Close it (or use ``with``)."""
    master = FaultProxy.to(cluster.master_address, **proxy_options)
    brokers: dict[int, FaultProxy] = {}
    try:
        for node in cluster.server.nodes:
            proxy = brokers[node.broker_id] = FaultProxy.to(node.address, **proxy_options)
            cluster.advertise_broker(node.broker_id, proxy.address)
    except BaseException:
        ClusterProxies(cluster, master, brokers).close()
        raise
    return ClusterProxies(cluster, master, brokers)


__all__ = ["ClusterProxies", "proxy_cluster"]
