"""Broker registrations this member let go of without the broker hearing it, released once it answers.

Why: a member drops partitions locally when their broker stops answering (connections reset, a
blackhole, the broker unhealthy) or when an unregister fails, and the master soon gives them to
another member. The broker still holds this member's registration (a broker never ties one to a
connection; it expires it after ``consumerRegTimeoutMs``, 30 s), so the other member's register is
refused with 410 "Duplicated Register ... has been registered by <this member>" until then: a group
took 20-40 s to resume after a 10 s fault. Here every such registration is unregistered (opType 32,
``readStatus`` 1: an unconfirmed batch is rolled back, nothing acknowledged is skipped) as soon as the
broker answers again: attempts repeat with a short capped back-off, which is also how this member
notices the broker is back.

A registration of this member's own that it gets again first needs no release: the broker replaces
a registration made by the same consumer id (BrokerServiceServer: a register whose consumer id
equals the holder's takes the partition over), so :meth:`OrphanRegistrations.taken_back` forgets it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..errors import TubeMQError
from .brokers import BrokerClient
from .partitions import PartitionSlot, PartitionTable

log = logging.getLogger("tubemq.consumer.orphans")

__all__ = ["OrphanRegistrations"]

#: first and longest wait between release attempts on a broker that does not answer (s)
RETRY_FIRST_S = 0.2
RETRY_CAP_S = 1.0
#: rollback: the unconfirmed batch of a partition let go without a confirm is delivered again
_ROLL_BACK = 1


class OrphanRegistrations:
    """Partition key -> the slot whose broker registration may outlive this member's hold on it."""

    def __init__(self, table: PartitionTable, brokers: BrokerClient, give_up_after_s: float) -> None:
        self.table = table
        self.brokers = brokers
        #: after this long the broker has expired the registration itself: stop asking
        self.give_up_after_s = give_up_after_s
        self._pending: dict[str, tuple[PartitionSlot, float]] = {}
        self._wake = asyncio.Event()
        self.released = 0  # registrations released after the broker came back (metrics)

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, slot: PartitionSlot) -> None:
        """``slot`` was let go without a successful unregister: release it at its broker."""
        self._pending.setdefault(slot.key, (slot, time.monotonic()))
        self._wake.set()

    def taken_back(self, key: str) -> None:
        """This member registers ``key`` again (the broker replaces its old registration)."""
        self._pending.pop(key, None)

    async def run(self, closing: Callable[[], bool]) -> None:
        """Until ``closing()``: release what is pending, per broker, retrying while it does not answer."""
        wait = RETRY_FIRST_S
        while not closing():
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                wait = RETRY_FIRST_S
                continue
            answered = await self.release_once()
            if self._pending:
                wait = RETRY_FIRST_S if answered else min(RETRY_CAP_S, wait * 2)
                await asyncio.sleep(wait)

    async def release_once(self) -> bool:
        """One attempt for every pending registration; True when some broker answered."""
        now = time.monotonic()
        by_broker: dict[str, list[PartitionSlot]] = {}
        for key, (slot, since) in list(self._pending.items()):
            if key in self.table:  # ours again (registering or registered): nothing to release
                del self._pending[key]
            elif now - since > self.give_up_after_s:
                del self._pending[key]
                log.info("partition %s: the broker has expired our old registration by now", key)
            else:
                by_broker.setdefault(slot.partition.address, []).append(slot)
        if not by_broker:
            return False
        results = await asyncio.gather(*(self._release(a, s) for a, s in by_broker.items()))
        return any(results)

    async def _release(self, address: str, slots: list[PartitionSlot]) -> bool:
        answered = False
        for slot in slots:
            if slot.key in self.table or self._pending.get(slot.key, (None,))[0] is not slot:
                continue  # taken back (or re-added) while an earlier release of this broker ran
            try:
                await self.brokers.unregister(slot, _ROLL_BACK)
            except asyncio.CancelledError:
                raise
            except TubeMQError as exc:
                log.debug("partition %s: release at %s not answered yet (%s)", slot.key, address, exc)
                return answered  # the broker does not answer: the others wait for the next round
            answered = True
            if self._pending.get(slot.key, (None,))[0] is slot:
                del self._pending[slot.key]
                self.released += 1
                log.info("partition %s: our registration at %s released (the broker answers again)",
                         slot.key, address)
        return answered
