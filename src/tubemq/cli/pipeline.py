"""Pipelined sending with a bounded in-flight window, exact accounting and graceful Ctrl-C.

Used by ``produce``, ``bench produce`` and ``demo``. The caller's thread submits through
``Producer.send_async`` and settles the returned futures itself. Every submitted message ends in
exactly one bucket: acknowledged, failed (the broker or the client refused it: not stored), or unknown
(timed out, connection lost after sending, or still in flight after an abandoned drain: it may or may
not be stored) — that is what the Ctrl-C summary reports.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any

from .progress import ProgressBar

__all__ = ["SendPipeline", "StopFlag", "ReadGuard", "ReadInterrupted", "sigint_stops", "percentiles"]


class ReadInterrupted(Exception):
    """Raised out of a blocking input read by the first Ctrl-C (nothing was half-submitted)."""


class ReadGuard:
    """Marks when the main thread is only reading input, so Ctrl-C may break the read itself.

    Python retries a read interrupted by a signal after running the handler (PEP 475), so a producer
    waiting on an idle stdin would never see the stop flag; the handler raises ReadInterrupted instead,
    but only while ``reading`` is set, never in the middle of handing a message to the client.
    """

    def __init__(self) -> None:
        self.reading = False


class StopFlag:
    """Set by the first Ctrl-C (or an error); polled by producing loops."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def set(self, reason: str = "") -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()

    def __bool__(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


@contextlib.contextmanager
def sigint_stops(
    flag: StopFlag, message: Callable[[], None] | None = None, guard: ReadGuard | None = None
) -> Iterator[StopFlag]:
    """First SIGINT/SIGTERM sets ``flag`` (work settles, then a report); a second one aborts hard."""
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        if flag:
            for sig, old in previous.items():
                signal.signal(sig, old)
            raise KeyboardInterrupt
        flag.set("interrupted")
        if message is not None:
            message()
        if guard is not None and guard.reading:
            raise ReadInterrupted

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # pragma: no cover - exotic platforms
            pass
    try:
        yield flag
    finally:
        for signum, old in previous.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, old)


def percentiles(samples: array | list[float], points: tuple[float, ...] = (50, 99, 99.9)) -> dict[float, float]:
    """Nearest-rank percentiles of latency samples (seconds); empty input gives NaN."""
    if not samples:
        return {p: float("nan") for p in points}
    ordered = sorted(samples)
    n = len(ordered)
    out = {}
    for p in points:
        rank = max(1, min(n, int(-(-p * n // 100))))  # ceil(p/100*n)
        out[p] = ordered[rank - 1]
    return out


def _outcome_unknown(exc: BaseException) -> bool:
    """A timeout or a connection lost after the request went out: the broker may have stored it."""
    from tubemq.errors import ConnectionLostError

    return isinstance(exc, TimeoutError | FutureTimeoutError | ConnectionLostError)


class SendPipeline:
    """Submit messages to ``producer.send_async`` keeping at most ``inflight`` outstanding.

    Single-threaded by design: the submitting thread keeps the futures of in-flight messages in a
    FIFO and settles finished ones from its head after every submit. No callbacks run on the
    client's I/O thread and no lock is taken per message, which costs much less CPU per message
    than done-callbacks. Completions arrive nearly in order, so
    the head is almost always the next one to finish; a finished message behind an unfinished head
    just counts as in flight a little longer. Latency samples are "send_async call -> seen
    acknowledged by the sender", which is what an application observes.
    """

    def __init__(
        self,
        producer: Any,
        topic: str,
        *,
        inflight: int = 1000,
        bar: ProgressBar | None = None,
        stop: StopFlag | None = None,
        stop_on_error: bool = True,
        record_latency: bool = False,
        max_latency_samples: int = 2_000_000,
    ) -> None:
        if inflight < 1:
            raise ValueError("inflight must be >= 1")
        self.producer = producer
        self.topic = topic
        self.inflight = inflight
        self.bar = bar
        self.stop = stop if stop is not None else StopFlag()
        self.stop_on_error = stop_on_error
        self._queue: deque[tuple[Any, float, int]] = deque()
        self.submitted = 0
        self.acked = 0
        self.failed = 0
        self.timed_out = 0  # settled with an error that leaves the outcome unknown
        self.bytes_submitted = 0
        self.bytes_acked = 0
        self.first_error: BaseException | None = None
        self.error_counts: dict[str, int] = {}
        self.record_latency = record_latency
        self.latencies: array = array("d")
        self._max_samples = max_latency_samples
        self.started = time.monotonic()
        self.last_ack = self.started

    # ---- submitting

    def submit(
        self,
        data: bytes,
        attributes: Mapping[str, str] | None = None,
        stream_id: str | None = None,
        key: str | None = None,
    ) -> bool:
        """Send one message; blocks while the window is full. False once stopping (not sent)."""
        queue = self._queue
        while len(queue) >= self.inflight:
            if self.stop:
                return False
            self._wait_head(0.1)
        if self.stop:
            return False
        size = len(data)
        t0 = time.perf_counter() if self.record_latency else 0.0
        try:
            if attributes or stream_id or key is not None:
                kwargs: dict[str, Any] = {}
                if attributes:
                    kwargs["attributes"] = attributes
                if stream_id:
                    kwargs["stream_id"] = stream_id
                if key is not None:
                    kwargs["key"] = key
                fut = self.producer.send_async(self.topic, data, **kwargs)
            else:
                fut = self.producer.send_async(self.topic, data)
        except BaseException as exc:
            # Refused before it was in flight (bad argument, closed client): never counts as sent.
            self._record_error(exc)
            raise
        queue.append((fut, t0, size))
        self.submitted += 1
        self.bytes_submitted += size
        if queue[0][0].done():
            self._harvest()
        return True

    def _record_error(self, exc: BaseException) -> None:
        name = type(exc).__name__
        self.error_counts[name] = self.error_counts.get(name, 0) + 1
        if self.first_error is None:
            self.first_error = exc
        if self.stop_on_error:
            self.stop.set("error")

    def _harvest(self) -> None:
        """Settle the finished futures at the head of the FIFO."""
        queue = self._queue
        now = time.perf_counter() if self.record_latency else 0.0
        ok = 0
        while queue and queue[0][0].done():
            fut, t0, size = queue.popleft()
            try:
                exc = fut.exception(0)
            except Exception as cancelled:  # CancelledError
                exc = cancelled
            if exc is None:
                ok += 1
                self.bytes_acked += size
                if self.record_latency and len(self.latencies) < self._max_samples:
                    self.latencies.append(now - t0)
            else:
                if _outcome_unknown(exc):
                    self.timed_out += 1
                else:
                    self.failed += 1
                self._record_error(exc)
        if ok:
            self.acked += ok
            self.last_ack = time.monotonic()
            if self.bar is not None:
                self.bar.update(ok)

    def _wait_head(self, timeout: float) -> None:
        """Block until the oldest in-flight message settles (or ``timeout``), then harvest."""
        queue = self._queue
        if not queue:
            return
        try:
            queue[0][0].exception(timeout)
        except (TimeoutError, FutureTimeoutError):
            return
        except Exception:  # noqa: BLE001 - cancelled: settled by _harvest (KeyboardInterrupt goes through)
            pass
        self._harvest()

    # ---- settling

    @property
    def pending(self) -> int:
        self._harvest()
        return len(self._queue)

    def drain(self, timeout: float) -> int:
        """Wait until every submitted message is acknowledged or failed; returns how many are not."""
        deadline = time.monotonic() + timeout
        while self._queue:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._wait_head(min(left, 0.2))
        return len(self._queue)

    def abandon(self) -> int:
        """Stop waiting: what is still in flight stays unknown whatever happens to it later.

        Closing the producer afterwards fails those futures locally ("closed before the broker
        answered"), which says nothing about whether the broker stored them; they are not harvested.
        """
        self._harvest()
        left = len(self._queue)
        self._queue.clear()
        return left

    def summary(self) -> dict[str, Any]:
        self._harvest()
        elapsed = max(self.last_ack - self.started, 1e-9)
        return {
            "submitted": self.submitted,
            "acknowledged": self.acked,
            "failed": self.failed,
            "unknown": self.submitted - self.acked - self.failed,
            "bytes": self.bytes_acked,
            "seconds": elapsed,
            "msg_per_s": self.acked / elapsed,
            "mb_per_s": self.bytes_acked / elapsed / 1e6,
            "errors": dict(self.error_counts),
        }
