"""A small metrics registry: counters, gauges, latency histograms and snapshot-time sections.

Why our own: clients must report throughput/latency (``producer.metrics()``, ``stats_callback``)
without pulling in a metrics dependency, and without costing anything measurable per message.
Hence two kinds of counters: :meth:`Metrics.inc` (locked, for rare events from any thread) and
:meth:`Metrics.register_counter` (a plain ``int`` attribute that the hot path bumps on the event-loop
thread, read only when a snapshot is taken). Histograms use log-linear buckets (16 sub-buckets per
power of two, about 6 % relative error) in a fixed-size list, so recording is O(1), allocation-free
and memory is bounded whatever the traffic; :meth:`Histogram.record` is the lock-free variant for a
single writer thread. Sections (:meth:`Metrics.add_section`) are whole sub-dicts such as per-broker
health, computed only at snapshot time.

The snapshot layout (documented in docs/guide/metrics.md)::

    {"time": epoch s, "uptime_s": s, "counters": {name: int}, "gauges": {name: float},
     "latency": {name: {"count", "mean_ms", "p50_ms", "p99_ms", "p999_ms", "max_ms"}},
     <section name>: <whatever the section returns>, ...}
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("tubemq.metrics")

_SUB_BITS = 4
_SUB = 1 << _SUB_BITS
#: Latencies are clamped to 2**40 µs (~12.7 days): keeps the bucket list fixed-size.
_MAX_US = (1 << 40) - 1


def _bucket(us: int) -> int:
    if us < _SUB:
        return max(us, 0)
    e = us.bit_length() - _SUB_BITS  # >= 1
    return e * _SUB + ((us >> (e - 1)) & (_SUB - 1))


def _bucket_upper(idx: int) -> int:
    """Largest value (µs) that lands in bucket ``idx``."""
    if idx < _SUB:
        return idx
    e, sub = divmod(idx, _SUB)
    return ((_SUB + sub + 1) << (e - 1)) - 1


_NBUCKETS = _bucket(_MAX_US) + 1


def bucket_upper_s(idx: int) -> float:
    """The upper bound (s) of bucket ``idx`` of :meth:`Histogram.buckets`."""
    return _bucket_upper(idx) / 1e6


class Histogram:
    """Latency histogram in microsecond buckets; ``observe``/``record`` take seconds.

    ``observe`` is thread-safe; ``record`` skips the lock for the common case of one writer thread
    (a client's event loop): a snapshot taken from another thread may then miss a sample being
    recorded at that instant, never more.
    """

    __slots__ = ("_b", "_sum", "_max", "_lock")

    def __init__(self) -> None:
        self._b = [0] * _NBUCKETS
        self._sum = 0.0
        self._max = 0.0
        self._lock = threading.Lock()

    def record(self, seconds: float) -> None:
        """Lock-free recording (single writer thread)."""
        us = int(seconds * 1e6)
        if us < _SUB:  # _bucket() inlined: this runs on hot paths
            idx = us if us > 0 else 0
        else:
            if us > _MAX_US:
                us = _MAX_US
            e = us.bit_length() - _SUB_BITS
            idx = e * _SUB + ((us >> (e - 1)) & (_SUB - 1))
        self._b[idx] += 1
        self._sum += seconds
        if seconds > self._max:
            self._max = seconds

    def observe(self, seconds: float) -> None:
        """Thread-safe recording."""
        with self._lock:
            self.record(seconds)

    @property
    def count(self) -> int:
        return sum(self._b)

    def buckets(self) -> tuple[list[int], float]:
        """A copy of the per-bucket counts (index ``i`` holds values up to :func:`bucket_upper_s` ``(i)``)
        and the sum of the values (s), for exporters that keep the same boundaries."""
        with self._lock:
            return list(self._b), self._sum

    def snapshot(self, reset: bool = False) -> dict[str, float]:
        """count, mean, p50, p99, p999, max (milliseconds, rounded to the microsecond).

        Percentiles are bucket upper bounds (about 6 % above the true value at most), capped by the max.
        """
        with self._lock:
            buckets = list(self._b)  # one C-level copy: consistent enough under the GIL
            total, mx = self._sum, self._max
            if reset:
                self._b = [0] * _NBUCKETS
                self._sum = 0.0
                self._max = 0.0
        count = sum(buckets)
        out: dict[str, float] = {"count": count, "mean_ms": round(total / count * 1e3, 3) if count else 0.0}
        for label, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)):
            out[label] = round(self._quantile(buckets, count, q, mx), 3)
        out["max_ms"] = round(mx * 1e3, 3)
        return out

    @staticmethod
    def _quantile(buckets: list[int], count: int, q: float, mx: float) -> float:
        if not count:
            return 0.0
        rank = q * count
        seen = 0
        for idx, n in enumerate(buckets):
            if not n:
                continue
            seen += n
            if seen >= rank:
                return min(_bucket_upper(idx) / 1e3, mx * 1e3)
        return mx * 1e3


class Metrics:
    """Named counters, gauges (values or callables), histograms and sections; see the module docstring.

    Every method is thread-safe. Callables (registered counters, gauges, sections) run in the thread
    that takes the snapshot: the clients take it on their event-loop thread, where the state they read
    lives.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._gauges: dict[str, float | Callable[[], float]] = {}
        self._counter_fns: dict[str, Callable[[], int]] = {}
        self._hists: dict[str, Histogram] = {}
        self._sections: dict[str, Callable[[], Any]] = {}
        self.started = time.time()

    def inc(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + n

    def counter(self, name: str) -> int:
        fn = self._counter_fns.get(name)
        return int(fn()) if fn is not None else self._counters.get(name, 0)

    def register_counter(self, name: str, fn: Callable[[], int]) -> None:
        """A counter kept elsewhere (e.g. a plain int on a hot path), read at snapshot time."""
        with self._lock:
            self._counter_fns[name] = fn

    def set_gauge(self, name: str, value: float | Callable[[], float]) -> None:
        with self._lock:
            self._gauges[name] = value

    def histogram(self, name: str) -> Histogram:
        h = self._hists.get(name)
        if h is None:
            with self._lock:
                h = self._hists.setdefault(name, Histogram())
        return h

    def observe(self, name: str, seconds: float) -> None:
        self.histogram(name).observe(seconds)

    def add_section(self, name: str, fn: Callable[[], Any]) -> None:
        """``snapshot()[name] = fn()`` (e.g. per-broker health), computed only when a snapshot is taken."""
        with self._lock:
            self._sections[name] = fn

    def snapshot(self, reset_histograms: bool = False) -> dict[str, Any]:
        """A plain dict (copy): see the module docstring for the layout."""
        with self._lock:
            counters = dict(self._counters)
            counter_fns = dict(self._counter_fns)
            gauges = dict(self._gauges)
            hists = dict(self._hists)
            sections = dict(self._sections)
        for k, fn in counter_fns.items():
            try:
                counters[k] = int(fn())
            except Exception:  # a broken source must not break reporting
                log.debug("metrics counter %s failed", k, exc_info=True)
                counters[k] = -1
        gv: dict[str, float] = {}
        for k, v in gauges.items():
            try:
                gv[k] = float(v()) if callable(v) else float(v)
            except Exception:  # a broken gauge must not break reporting
                log.debug("metrics gauge %s failed", k, exc_info=True)
                gv[k] = float("nan")
        now = time.time()
        out: dict[str, Any] = {
            "time": now,
            "uptime_s": now - self.started,
            "counters": dict(sorted(counters.items())),
            "gauges": dict(sorted(gv.items())),
            "latency": {k: h.snapshot(reset_histograms) for k, h in sorted(hists.items())},
        }
        for k, fn in sections.items():
            try:
                out[k] = fn()
            except Exception as exc:  # a broken section must not break reporting
                log.debug("metrics section %s failed", k, exc_info=True)
                out[k] = {"error": f"{type(exc).__name__}: {exc}"}
        return out


__all__ = ["Histogram", "Metrics", "bucket_upper_s"]
