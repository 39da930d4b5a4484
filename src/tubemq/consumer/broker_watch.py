"""How the server-balanced consumer reacts to its brokers' connections: :class:`BrokerWatch`.

Why apart from the core: these are the signals of a network fault or a dead broker, and each has one
reaction. A broker that closes our connection while it holds our partitions is gone (a SIGKILL's
kernel and ``EmbeddedCluster.stop_broker`` both send the FIN or RST): the partitions are lost at once,
whether or not a fetch was in flight. A broker that answers again after failing means the network is
probably back: the master heartbeat comes forward. A connection of an unhealthy broker that keeps
failing is replaced (it may have stalled after the first was). Registrations let go of without the
broker hearing it are released once it answers (:mod:`.orphans`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..protocol.constants import CONSUMER_REG_TIMEOUT_MS
from .brokers import BrokerClient
from .orphans import OrphanRegistrations
from .partitions import PartitionSlot, PartitionTable
from .rebalance import RebalanceWorker

__all__ = ["BrokerWatch"]


class BrokerWatch:
    """The reactions above; ``closing()`` True stops all of them."""

    def __init__(self, table: PartitionTable, session: Any, brokers: BrokerClient, worker: RebalanceWorker,
                 closing: Callable[[], bool]) -> None:
        self.table = table
        self.session = session
        assert brokers.health is not None
        self.health = health = brokers.health
        #: a broker forgets a registration after consumerRegTimeoutMs: twice that, and it surely did
        self.orphans = OrphanRegistrations(table, brokers, 2 * CONSUMER_REG_TIMEOUT_MS / 1000.0)
        self.closing = closing
        self._tasks: set[asyncio.Task[None]] = set()
        health.on_healthy = self.healthy
        health.on_still_failing = self.discard_connection
        worker.on_unreleased = self.unreleased

    def start(self) -> None:
        """Listen to the session's pool (once it exists)."""
        self.session.pool.disconnect_listeners.append(self.disconnected)

    def stop(self) -> None:
        listeners = self.session.pool.disconnect_listeners
        if self.disconnected in listeners:
            listeners.remove(self.disconnected)

    def disconnected(self, address: str, reason: str) -> None:
        """A connection was closed by its peer: a broker holding our partitions died or restarted."""
        if self.closing() or not any(s.partition.address == address for s in self.table.registered()):
            return
        self.health.gone(address, reason)

    def healthy(self, address: str) -> None:
        """A broker answers again after failing: the master probably does too."""
        if not self.closing():
            self.session.trigger_heartbeat()

    def unreleased(self, slot: PartitionSlot) -> None:
        """``slot`` was given up without a successful unregister."""
        if not self.closing():
            self.orphans.add(slot)

    def discard_connection(self, address: str) -> None:
        """Close the pooled connection to ``address`` (a stalled stream can never deliver again)."""
        if self.closing():
            return
        task = asyncio.get_running_loop().create_task(self.session.pool.discard(address))
        self._tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._tasks.discard)
