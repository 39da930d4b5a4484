"""Bad-broker shielding, after the Java client's ``DefaultBrokerRcvQltyStats``.

A broker that answered 503 (SERVICE_UNAVAILABLE) is skipped for ``unavailable_ms`` (Java 50 s).
A broker with ``failure_threshold`` consecutive send failures (timeouts, lost or refused
connections) is skipped for ``shield_ms``; after that it gets one probe: a success clears it, a
failure shields it again. The router falls back to shielded brokers when nothing else is left.
"""

from __future__ import annotations

import threading
import time


class BrokerQuality:
    """Per-broker failure counters and shield deadlines.

    Updated by the loop thread and by blocking sends on callers' threads: every change and every
    pruning read holds ``_lock``. ``failures`` (broker id -> consecutive failures) and ``until``
    (broker id -> end of its shield) may be read without it as hints on hot paths ("any broker
    failing?", "any shielded?"; the latter re-checked by :meth:`shielded`); only this class writes them.
    """

    def __init__(self, failure_threshold: int = 5, shield_ms: int = 30000, unavailable_ms: int = 50000) -> None:
        self.failure_threshold = failure_threshold
        self.shield_s = shield_ms / 1000.0
        self.unavailable_s = unavailable_ms / 1000.0
        self.failures: dict[int, int] = {}
        self.until: dict[int, float] = {}
        self.total_errors: dict[int, int] = {}  # for metrics: failed requests since start, per broker
        self._lock = threading.Lock()

    def success(self, broker_id: int) -> None:
        if self.failures:
            with self._lock:
                self.failures.pop(broker_id, None)

    def refused(self, broker_id: int) -> None:
        """An error answer (counted for metrics only: the broker is up, it said no)."""
        with self._lock:
            self.total_errors[broker_id] = self.total_errors.get(broker_id, 0) + 1

    def failure(self, broker_id: int) -> None:
        with self._lock:
            self.total_errors[broker_id] = self.total_errors.get(broker_id, 0) + 1
            n = self.failures.get(broker_id, 0) + 1
            self.failures[broker_id] = n
            if n >= self.failure_threshold:
                self.until[broker_id] = time.monotonic() + self.shield_s
                self.failures[broker_id] = self.failure_threshold - 1  # one probe after the shield
                # (a later failure re-shields at once, a success clears the counter)

    def unavailable(self, broker_id: int) -> None:
        with self._lock:
            self.until[broker_id] = max(self.until.get(broker_id, 0.0), time.monotonic() + self.unavailable_s)

    def shielded(self) -> set[int]:
        """Broker ids to skip right now."""
        if not self.until:
            return set()
        now = time.monotonic()
        with self._lock:
            expired = [b for b, t in self.until.items() if t <= now]
            for b in expired:
                del self.until[b]
            return set(self.until)

    def is_shielded(self, broker_id: int) -> bool:
        with self._lock:
            t = self.until.get(broker_id)
        return t is not None and t > time.monotonic()

    def snapshot(self) -> tuple[dict[int, int], dict[int, int], set[int]]:
        """(total errors, consecutive failures, shielded ids) as copies, for metrics."""
        with self._lock:
            return dict(self.total_errors), dict(self.failures), set(self.until)


__all__ = ["BrokerQuality"]
