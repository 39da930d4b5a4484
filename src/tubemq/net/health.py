"""Connection health of one client for metrics snapshots: its master and its brokers.

Why here: producer and consumer report the same shape (``snapshot()["master"]``,
``snapshot()["brokers"]``, ``counters["net.reconnects"]``...) from the pool's per-address history
(:meth:`~tubemq.net.pool.ConnectionPool.stats`); the client only says which brokers are its own and
what it knows about them beyond the connection (send failures, shielding, partitions...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..metrics import Metrics
from .pool import ConnectionPool

#: ``address -> broker id`` of the brokers a client uses right now
BrokerAddresses = Callable[[], Mapping[str, int]]
#: client-specific fields of one broker's entry: ``extra(address, broker_id)``
BrokerExtra = Callable[[str, int], Mapping[str, Any]]
#: figures of connections outside the pool (e.g. blocking senders' own), added to the pool's: ``io(address)``
ExtraIO = Callable[[str], Mapping[str, int]]

#: pool figures summed over the client's addresses into ``net.<name>`` counters
NET_COUNTERS = ("reconnects", "connect_failures", "disconnects", "bytes_sent", "bytes_received")


class SessionHealth:
    """Registers the ``master`` / ``brokers`` sections and the ``net.*`` counters of one client.

    ``session`` is a :class:`~tubemq.client.session.MasterSessionBase`. The pool is remembered once
    seen, so a snapshot taken after ``close()`` still reports the connection history.
    """

    def __init__(self, metrics: Metrics, session: Any, brokers: BrokerAddresses,
                 extra: BrokerExtra | None = None, io: ExtraIO | None = None) -> None:
        self.session = session
        self.brokers = brokers
        self.extra = extra
        self.io = io
        self._pool: ConnectionPool | None = None
        for key in NET_COUNTERS:
            metrics.register_counter(f"net.{key}", self._summer(key))
        metrics.add_section("master", self.master)
        metrics.add_section("brokers", self.broker_table)

    def remember_pool(self) -> None:
        """Call once the session started: keeps the pool for snapshots taken after close()."""
        _ = self.pool

    @property
    def pool(self) -> ConnectionPool | None:
        p = self.session._pool
        if p is not None:
            self._pool = p
        return self._pool

    def _addresses(self) -> list[str]:
        invoker = self.session.invoker
        masters = list(invoker.addresses) if invoker is not None else []
        return list(dict.fromkeys(masters + list(self.brokers())))

    def _summer(self, key: str) -> Callable[[], int]:
        return lambda: self._total(key)

    def _total(self, key: str) -> int:
        pool = self.pool
        if pool is None:
            return 0
        io = self.io
        return sum(pool.stats(a)[key] + (io(a).get(key, 0) if io is not None else 0) for a in self._addresses())

    def master(self) -> dict[str, Any]:
        """The current master's address, whether the client is registered, the connection's health."""
        session = self.session
        address = session.current_master
        out: dict[str, Any] = {"address": address, "registered": bool(session.registered and not session.closed)}
        pool = self.pool
        if pool is not None and address:
            out.update(pool.stats(address))
        return out

    def broker_table(self) -> dict[str, Any]:
        """``{address: {"broker_id", connection health..., client-specific fields...}}`` by address."""
        pool = self.pool
        out: dict[str, Any] = {}
        for address, broker_id in sorted(self.brokers().items()):
            entry: dict[str, Any] = {"broker_id": broker_id}
            if pool is not None:
                entry.update(pool.stats(address))
            if self.io is not None:
                for key, n in self.io(address).items():
                    entry[key] = entry.get(key, 0) + n
            if self.extra is not None:
                entry.update(self.extra(address, broker_id))
            out[address] = entry
        return out


__all__ = ["NET_COUNTERS", "SessionHealth"]
