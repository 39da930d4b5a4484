"""A small thread-safe metrics registry: counters, gauges and latency histograms.

Why our own: clients must report throughput/latency (``producer.metrics()``, ``stats_callback``)
without pulling in a metrics dependency. Histograms use log-linear buckets (16 sub-buckets per power
of two, about 6 % relative error), so recording is O(1) and memory is bounded whatever the traffic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

_SUB_BITS = 4
_SUB = 1 << _SUB_BITS


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


class Histogram:
    """Latency histogram in microseconds; ``observe`` takes seconds."""

    __slots__ = ("_buckets", "_count", "_sum", "_max", "_lock")

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self._count = 0
        self._sum = 0.0
        self._max = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        us = int(seconds * 1e6)
        b = _bucket(us)
        with self._lock:
            self._buckets[b] = self._buckets.get(b, 0) + 1
            self._count += 1
            self._sum += seconds
            if seconds > self._max:
                self._max = seconds

    def snapshot(self, reset: bool = False) -> dict[str, float]:
        """count, mean, p50, p99, p999, max (latencies in milliseconds)."""
        with self._lock:
            buckets = sorted(self._buckets.items())
            count, total, mx = self._count, self._sum, self._max
            if reset:
                self._buckets = {}
                self._count = 0
                self._sum = 0.0
                self._max = 0.0
        out: dict[str, float] = {"count": count, "mean_ms": (total / count * 1e3) if count else 0.0}
        for label, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)):
            out[label] = self._quantile(buckets, count, q, mx)
        out["max_ms"] = mx * 1e3
        return out

    @staticmethod
    def _quantile(buckets: list[tuple[int, int]], count: int, q: float, mx: float) -> float:
        if not count:
            return 0.0
        rank = q * count
        seen = 0
        for idx, n in buckets:
            seen += n
            if seen >= rank:
                return min(_bucket_upper(idx) / 1e3, mx * 1e3)
        return mx * 1e3


class Metrics:
    """Named counters, gauges (values or callables) and histograms; all methods are thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._gauges: dict[str, float | Callable[[], float]] = {}
        self._counter_fns: dict[str, Callable[[], int]] = {}
        self._hists: dict[str, Histogram] = {}
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

    def snapshot(self, reset_histograms: bool = False) -> dict[str, Any]:
        """``{"counters": {...}, "gauges": {...}, "latency": {name: {count, mean_ms, p50_ms...}}}``."""
        with self._lock:
            counters = dict(self._counters)
            counter_fns = dict(self._counter_fns)
            gauges = dict(self._gauges)
            hists = dict(self._hists)
        for k, fn in counter_fns.items():
            try:
                counters[k] = int(fn())
            except Exception:  # a broken source must not break reporting
                counters[k] = -1
        gv: dict[str, float] = {}
        for k, v in gauges.items():
            try:
                gv[k] = float(v()) if callable(v) else float(v)
            except Exception:  # a broken gauge must not break reporting
                gv[k] = float("nan")
        return {
            "time": time.time(),
            "uptime_s": time.time() - self.started,
            "counters": counters,
            "gauges": gv,
            "latency": {k: h.snapshot(reset_histograms) for k, h in hists.items()},
        }


__all__ = ["Histogram", "Metrics"]
