"""The broker's consumer registrations and their in-flight reads: the sessions part's state.

One record per (group, topic, partition id): who holds it, its filters and query priority, when it was
last seen, and the index bytes read but not yet committed (DefaultOffsetManager's tmpOffset delta).
The handlers and the admin views read and change them only through this interface, so that who owns a
partition and how much of it is in flight can never disagree.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

log = logging.getLogger("tubemq.server.broker")

Key = tuple[str, str, int]  # (group, topic, partition id)


class Registration:
    """One consumer's hold on one partition of this broker."""

    __slots__ = ("consumer_id", "filters", "qry_priority_id", "last_seen", "last_data_rd")

    def __init__(self, consumer_id: str, filters: frozenset[int] | None, qry_priority_id: int) -> None:
        self.consumer_id = consumer_id
        self.filters = filters
        self.qry_priority_id = qry_priority_id
        self.last_seen = time.monotonic()
        self.last_data_rd = 0  # ConsumerNodeInfo.lastDataRdOffset: data offset after the last file read


class Registrations:
    """Registrations by key, their in-flight deltas, and the expiry of idle ones."""

    def __init__(self, timeout_s: float) -> None:
        #: a registration idle longer than this is stale (consumer_reg_timeout_ms)
        self.timeout_s = timeout_s
        self._regs: dict[Key, Registration] = {}
        self._inflight: dict[Key, int] = {}

    # ---- registrations

    def get(self, key: Key) -> Registration | None:
        return self._regs.get(key)

    def put(self, key: Key, reg: Registration) -> None:
        self._regs[key] = reg

    def remove(self, key: Key) -> int:
        """Forget the registration and return its in-flight delta (0 if none)."""
        self._regs.pop(key, None)
        return self._inflight.pop(key, 0)

    def is_stale(self, reg: Registration, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - reg.last_seen > self.timeout_s

    def items(self) -> Iterator[tuple[Key, Registration]]:
        return iter(list(self._regs.items()))

    def groups(self) -> set[str]:
        """Groups holding at least one registration."""
        return {k[0] for k in self._regs}

    def partitions(self, group: str) -> set[tuple[str, int]]:
        """(topic, partition id) held by ``group``."""
        return {(k[1], k[2]) for k in self._regs if k[0] == group}

    # ---- in-flight reads

    def inflight(self, key: Key) -> int:
        return self._inflight.get(key, 0)

    def set_inflight(self, key: Key, value: int) -> None:
        self._inflight[key] = value

    def clear_inflight(self, key: Key) -> None:
        """Drop the delta entirely (an offset set from outside the read cycle)."""
        self._inflight.pop(key, None)

    # ---- lifecycle

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self._regs if k[1] == topic]:
            self.remove(key)

    def clear(self) -> None:
        self._regs.clear()
        self._inflight.clear()

    def expire(self) -> int:
        """Drop registrations idle longer than the timeout, rolling back their in-flight reads."""
        now = time.monotonic()
        expired = [k for k, r in self._regs.items() if self.is_stale(r, now)]
        for key in expired:
            reg = self._regs.pop(key)
            self._inflight.pop(key, None)
            log.info("registration of %s on %s:%s:%d expired", reg.consumer_id, *key)
        return len(expired)
