"""The embedded broker: send, consumer register/unregister, heartbeat, getMessage, commit.

Answers follow the real broker (docs/PROTOCOL.md §5.3, §5.2.6, §7.3) and where they differ the captures
(s2, s3, s4, s5, s6a, s6c): error texts, validation order, which optional fields are present, the
three "no data" 404 answers, ``currOffset = -1`` on a successful unregister, partition ids checked
only by ``id % 10000`` (id 10000 on a one-store topic goes to a separate store index), checksum
verification, broker-side filters by Java ``hashCode(msgType)``. Where a read looks (files or the
memory cache) and where it stops follow the real MessageStore.getMessages, MsgFileStore.getMessages
and MsgMemStore.getMessages (``FetchHandlers._read``): captures s2, s3, s4, s5 and s6c are replayed with
every fetch matching (tests/server/test_capture_replay.py). Fresh messages stay in the memory cache
for ``cache_flush_interval_ms`` (the real memCacheFlushIntvl, 20 s) unless it fills up first.

The send and fetch handlers answer synchronously (no task per request) unless ``flush="always"``,
where a send waits for the group fsync that covers it.

The handlers are grouped by RPC family, one module each (like the master's): ``send`` (13),
``sessions`` (15, 16), ``fetch`` (17, 18), ``views`` (admin), with their opening checks in
``base.BrokerBase``. The state lives in parts that own it: ``registry.Registrations`` (who holds which
partition, the in-flight reads), ``catalog.Catalog`` (topics deployed here, partition stores),
``offsets.OffsetStore``, ``commits.CommitJournal`` (durable commit answers), ``durability.SendDurability``
(honest send acknowledgements, the fsync loop) and ``faults.FaultInjector`` (the test hook). This module
assembles them and runs the lifecycle and housekeeping.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ..._tasks import cancel_and_wait
from ...protocol import constants as C
from ..rpc import RpcContext
from .base import _int32
from .faults import FaultRecord
from .fetch import FetchHandlers
from .send import SendHandlers
from .sessions import SessionHandlers

log = logging.getLogger("tubemq.server.broker")


class Broker(SendHandlers, SessionHandlers, FetchHandlers):
    """Broker service handlers + consumer registrations and offsets (§5.3)."""

    # ---- wiring

    def handlers(self) -> dict[int, Callable[[Any, RpcContext], Any]]:
        return {
            int(C.Method.BROKER_PRODUCER_SEND_MESSAGE): self.send_message,
            int(C.Method.BROKER_CONSUMER_REGISTER): self.register,
            int(C.Method.BROKER_CONSUMER_HEARTBEAT): self.heartbeat,
            int(C.Method.BROKER_CONSUMER_GET_MESSAGE): self.get_message,
            int(C.Method.BROKER_CONSUMER_COMMIT): self.commit,
        }

    def flush_pending(self) -> dict[int, tuple[RpcContext, Any]] | None:
        """RPC batch-end hook: appends reach the OS before their acknowledgements are written; the
        acknowledgements of sends whose write failed are replaced by the error (419, with the cause)."""
        replaced = self.durability.flush()
        replaced.update(self.commits.flush())
        return replaced or None

    async def start(self) -> None:
        self._running = True
        self.durability.start()
        for topic in self.catalog.topics():
            for index in range(topic.num_stores):
                self.stores.get(topic.name, index)
        self._tasks = [
            asyncio.ensure_future(self._housekeeping_loop()),
            asyncio.ensure_future(self.durability.run()),
        ]

    async def stop(self) -> None:
        self._running = False
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        await self.commits.stop()
        self.durability.stop()
        self.offsets.save()
        self.offsets.close()
        self.stores.close()

    # ---- background work

    async def _housekeeping_loop(self) -> None:
        cache_age = self.config.cache_flush_interval_ms / 1000.0
        period = max(0.05, min(1.0, self.registrations.timeout_s / 4, cache_age / 4))
        last_retention = 0.0
        while self._running:
            await asyncio.sleep(period)
            try:
                self.expire_registrations()
                # MessageStore.flushMemCacheData: the memory cache timer (not the fsync timer)
                for store in list(self.stores.stores.values()):
                    store.flush_cache_older_than(cache_age)
                self.offsets.save()
                now = time.monotonic()
                if now - last_retention >= 1.0:
                    last_retention = now
                    self.stores.apply_retention(self.config.retention_ms, self.config.retention_bytes)
            except Exception:
                log.exception("broker housekeeping failed")


__all__ = ["Broker", "FaultRecord", "_int32"]
